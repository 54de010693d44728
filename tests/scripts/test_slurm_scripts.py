"""examples/slurm/: each sbatch script rendered under fake SLURM variables (every command printed, none run),
the launch it prints for two nodes checked by the launcher's own dry run, and the sittings' array: task i's
arm and seed, its refusals and limits. Two real nodes have not run these scripts (docs/guides/slurm.md says
so)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from seal.trainer.launch import command as launcher
from tests.trainer.launch.test_launcher import plan_values

ROOT = Path(__file__).resolve().parents[2]
SLURM = ROOT / "examples" / "slurm"
SCRIPTS = {1: SLURM / "seal_1node.sbatch", 2: SLURM / "seal_2nodes.sbatch"}
SITTINGS = SLURM / "qwen_sittings.sbatch"
MODEL = "Qwen/Qwen2.5-7B-Instruct"  # a Hub id: the dry run checks a folder exists


def render(nodes: int, tmp_path: Path, *overrides: str) -> list[list[str]]:
    """The script's commands, as words, run with a fake `scontrol` that names `nodes` nodes."""
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "scontrol").write_text(
        '#!/usr/bin/env bash\nfor i in $(seq "$SLURM_NNODES"); do echo gpu$i; done\n'
    )
    (fake / "scontrol").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}",
        "SLURM_JOB_ID": "4242",
        "SLURM_NNODES": str(nodes),
        "SLURM_JOB_NODELIST": f"gpu[1-{nodes}]",
        "SLURM_GPUS_ON_NODE": "4",
        "SLURM_SUBMIT_DIR": str(ROOT),
        "SEAL_SLURM_RENDER": "1",
        "MODEL": MODEL,
        "CKPT_DIR": "/nfs/seal/checkpoints",
    }
    done = subprocess.run(
        ["bash", str(SCRIPTS[nodes]), *overrides], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines and all(line.startswith("+ ") for line in lines)
    return [shlex.split(line[2:]) for line in lines]


def headers(script: Path) -> dict[str, str]:
    found = re.findall(r"^#SBATCH --([\w-]+)(?:=(\S+))?", script.read_text(), re.MULTILINE)
    return dict(found)


@pytest.mark.parametrize("nodes", [1, 2])
def test_a_script_starts_a_ray_head_then_a_worker_per_other_node_then_the_launch(nodes, tmp_path):
    commands = render(nodes, tmp_path, "trainer.save_freq=5")
    starts = [c for c in commands if "ray" in c and "start" in c]
    assert starts[0][:5] == ["srun", "--nodes=1", "--ntasks=1", "-w", "gpu1"] and "--head" in starts[0]
    assert [c[4] for c in starts[1:]] == [f"gpu{n}" for n in range(2, nodes + 1)]
    assert all("--address=gpu1:6379" in c and c[-1] == "&" for c in starts[1:])
    launch = commands[-1]
    assert launch[:4] == ["python", "launcher.py", "--conf", "exp/SEAL.yaml"] and launch[-1] == "&"
    overrides = launch[launch.index("--") + 1 : -1]
    assert f"trainer.nnodes={nodes}" in overrides and "seal.rollout.env_backend=ray" in overrides
    assert f"actor_rollout_ref.model.path={MODEL}" in overrides and overrides[-1] == "trainer.save_freq=5"
    assert "trainer.default_local_dir=/nfs/seal/checkpoints" in overrides
    sbatch = headers(SCRIPTS[nodes])
    assert sbatch["nodes"] == str(nodes) and "requeue" in sbatch and sbatch["signal"].startswith("B:USR1@")
    assert sbatch["time"]


def test_a_script_refuses_to_run_outside_slurm_or_without_a_model(tmp_path):
    for unset in ("SLURM_JOB_ID", "MODEL"):
        env = {k: v for k, v in os.environ.items() if k != unset}
        env.update({"SEAL_SLURM_RENDER": "1", "SLURM_JOB_ID": "1", "MODEL": MODEL})
        env.pop(unset)
        done = subprocess.run(
            ["bash", str(SCRIPTS[2])], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode != 0 and unset in done.stderr and done.stdout == ""


def test_the_two_node_launch_it_prints_plans_eight_gpus_on_two_nodes(tmp_path, monkeypatch, capsys):
    launch = render(2, tmp_path)[-1]
    argv = launch[2:-1]
    argv[argv.index("exp/SEAL.yaml")] = str(ROOT / "exp" / "SEAL.yaml")
    argv.insert(argv.index("--"), "--dry-run")
    monkeypatch.chdir(tmp_path)
    assert launcher.main(argv) == 0
    plan = plan_values(capsys.readouterr().out)
    assert plan["GPUs"].startswith("8 (2 nodes x 4)")
    assert plan["environment actors"].startswith("2 node(s) x 1 = 2 Ray actors")
    assert plan["where it runs"].startswith(
        "node 1 (this one, Ray's head): the launcher; each of the 2 nodes"
    )


@pytest.mark.parametrize("script", sorted(SLURM.glob("*.sbatch")), ids=lambda path: path.name)
def test_a_script_answers_help_without_slurm(script):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    done = subprocess.run(
        ["bash", str(script), "--help"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and f"#SBATCH --nodes={headers(script)['nodes']}" in done.stdout
    assert "MODEL" in done.stdout and script.name in done.stdout


def sitting(tmp_path: Path, task: str, **settings: str) -> subprocess.CompletedProcess[str]:
    """The array's script rendered as task `task` of a job submitted from the repository root."""
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text("{}")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("SLURM_") and k not in ("ARMS", "KIT", "PER_TASK")
    }
    env |= {"SLURM_JOB_ID": "4242", "SLURM_ARRAY_TASK_ID": task, "SLURM_SUBMIT_DIR": str(ROOT)}
    env |= {"SEAL_SLURM_RENDER": "1", "MODEL": str(model), **settings}
    return subprocess.run(
        ["bash", str(SITTINGS)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("arms", "campaign"),
    [
        ({}, [("vanilla", 1), ("vanilla", 2), ("vanilla", 3), ("seal", 1), ("seal", 2), ("seal", 3)]),
        ({"ARMS": "full_loop"}, [("full_loop", 1), ("full_loop", 2), ("full_loop", 3)]),
        ({"PER_TASK": "seed"}, [("vanilla,seal", 1), ("vanilla,seal", 2), ("vanilla,seal", 3)]),
    ],
    ids=["default", "full_loop", "a seed a task"],
)
def test_array_task_i_runs_the_sitting_of_its_arm_and_seed_from_the_submit_folder(tmp_path, arms, campaign):
    for task, (arm, seed) in enumerate(campaign):
        done = sitting(tmp_path, str(task), **arms)
        assert done.returncode == 0, done.stderr
        (line,) = done.stdout.splitlines()
        assert line.startswith("+ ") and done.stderr == ""
        command = shlex.split(line[2:])
        assert command == [
            "bash",
            "gpu/gpu_qwen_compare.sh",
            "sitting",
            str(tmp_path / "model"),
            arm,
            str(seed),
        ]
        assert (ROOT / command[1]).is_file()
        assert all((ROOT / "exp" / f"learn_qwen_{name}.yaml").is_file() for name in arm.split(","))


@pytest.mark.parametrize(
    ("task", "settings", "named"),
    [
        ("6", {}, "tasks 0-5"),
        ("3", {"ARMS": "seal"}, "tasks 0-2"),
        ("-1", {}, "tasks 0-5"),
        ("x", {}, "tasks 0-5"),
        ("", {}, "SLURM_ARRAY_TASK_ID"),
        ("0", {"MODEL": ""}, "MODEL"),
        ("0", {"MODEL": "/nonexistent/model"}, "not a model folder"),
        ("0", {"KIT": "/nonexistent/kit"}, "KIT"),
        ("0", {"ARMS": " "}, "ARMS"),
        ("3", {"PER_TASK": "seed"}, "tasks 0-2"),
        ("0", {"PER_TASK": "pair"}, "PER_TASK=pair"),
    ],
)
def test_a_bad_task_or_setting_is_refused_in_one_line(tmp_path, task, settings, named):
    done = sitting(tmp_path, task, **settings)
    assert done.returncode == 2 and done.stdout == "" and named in done.stderr
    assert done.stderr.startswith("qwen_sittings.sbatch: ") and done.stderr.count("\n") == 1


def with_squeue(tmp_path: Path, says: str) -> dict[str, str]:
    """Settings whose PATH finds a `squeue` that prints the job's end as `says` where asked for it in
    seconds (SLURM_TIME_FORMAT=%s, squeue's strftime format), and a date otherwise."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    squeue = folder / "squeue"
    squeue.write_text(
        f"#!/bin/sh\n[ \"$SLURM_TIME_FORMAT\" = %s ] && echo '{says}' || echo 2026-12-07T04:30:00\n"
    )
    squeue.chmod(0o755)
    return {"PATH": f"{folder}:{os.environ['PATH']}"}


JOB_END = 1_796_617_800


@pytest.mark.parametrize(
    ("settings", "finish_by"),
    [
        ({}, JOB_END - 120),
        ({"FINISH_MARGIN": "400"}, JOB_END - 400),
        ({"FINISH_BY": "1900000000"}, 1900000000),
    ],
    ids=["the job's end less two minutes", "less the margin asked", "as given"],
)
def test_the_sitting_makes_room_for_its_last_step_before_the_job_s_end(tmp_path, settings, finish_by):
    done = sitting(tmp_path, "4", **with_squeue(tmp_path, str(JOB_END)), **settings)
    assert done.returncode == 0, done.stderr
    command = shlex.split(done.stdout.strip()[2:])
    assert command[:2] == ["env", f"FINISH_BY={finish_by}"]
    assert command[2:] == ["bash", "gpu/gpu_qwen_compare.sh", "sitting", str(tmp_path / "model"), "seal", "2"]


@pytest.mark.parametrize("says", ["N/A", "", "Unknown", "2026-12-07T04:30:00"])
def test_where_squeue_cannot_say_the_job_s_end_the_steps_run_as_planned_and_it_says_so(tmp_path, says):
    done = sitting(tmp_path, "0", **with_squeue(tmp_path, says))
    assert done.returncode == 0, done.stderr
    assert shlex.split(done.stdout.strip()[2:])[:2] == ["bash", "gpu/gpu_qwen_compare.sh"]
    assert "squeue gave no end for job 4242" in done.stderr and done.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"FINISH_BY": "soon"}, "FINISH_BY=soon"),
        ({"FINISH_MARGIN": "2m"}, "FINISH_MARGIN=2m"),
        ({"FINISH_MARGIN": "08"}, "FINISH_MARGIN=08"),
    ],
)
def test_a_finish_by_or_margin_that_is_not_seconds_is_refused_in_one_line(tmp_path, settings, named):
    done = sitting(tmp_path, "0", **settings)
    assert done.returncode == 2 and done.stdout == "" and named in done.stderr
    assert done.stderr.count("\n") == 1


def test_with_a_kit_the_model_folder_is_the_one_the_install_builds(tmp_path):
    kit = tmp_path / "kit"
    kit.mkdir()
    done = sitting(tmp_path, "0", MODEL="/root/models/qwen2.5-coder-1.5b", KIT=str(kit))
    assert done.returncode == 0 and "/root/models/qwen2.5-coder-1.5b vanilla 1" in done.stdout


def test_the_array_asks_for_one_whole_node_for_thirty_minutes():
    sbatch = headers(SITTINGS)
    assert (sbatch["nodes"], sbatch["time"], sbatch["gpus-per-node"]) == ("1", "00:30:00", "4")
    assert "exclusive" in sbatch and "array" not in sbatch  # the array is named at submission
