"""`gpu/gpu_attention_runs.sh` as a command line: each named run is one `gpu_smoke.sh` launch with its own
run folder and overrides, and the pairs it compares. A stand-in `PYTHON` records the commands, in a copy of
the scripts whose project is a temporary folder; no GPU."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from seal.trainer.launch import command as launcher

ROOT = Path(__file__).resolve().parents[2]
ONE_EACH = "actor_rollout_ref.actor.use_dynamic_bsz=false"
EAGER = "actor_rollout_ref.rollout.enforce_eager=true"
MAKE_RUN_FOLDER = (  # the stand-in launcher leaves the run folder the real one would
    'case "$*" in *experiment_name=*) name=${*##*experiment_name=}; '
    'mkdir -p "experiments/${name%% *}" ;; esac\n'
)


def run_script(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    record = tmp_path / "commands.txt"
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\necho "$@" >> {record}\n' + MAKE_RUN_FOLDER)
    python.chmod(0o755)
    scripts = tmp_path / "work" / "gpu"
    scripts.mkdir(parents=True, exist_ok=True)
    for name in ("gpu_attention_runs.sh", "gpu_smoke.sh"):
        shutil.copy(ROOT / "gpu" / name, scripts / name)
    done = subprocess.run(
        ["bash", str(scripts / "gpu_attention_runs.sh"), *args],
        env={**os.environ, "PYTHON": str(python)},
        capture_output=True,
        text=True,
    )
    lines = record.read_text().splitlines() if record.exists() else []
    return done, [line.split() for line in lines]


def launches_by_run(commands: list[list[str]]) -> dict[str, list[str]]:
    launches = [c for c in commands if c[0] == "launcher.py"]
    return {next(o for o in c if "experiment_name=" in o).split("=", 1)[1]: c for c in launches}


def test_the_default_runs_launch_in_order_with_their_settings_then_compare_pairs(tmp_path):
    done, commands = run_script(tmp_path, "/models/m")
    assert done.returncode == 0, done.stderr
    runs = launches_by_run(commands)
    assert list(runs) == [
        "smoke_gpu_sdpa",
        "smoke_gpu_auto",
        "paper_batch_dynamic",
        "paper_batch_mb1_eager",
    ]
    checks = [c for c in commands if c[0] == "benchmarks/attention_check.py"]
    assert checks == [["benchmarks/attention_check.py", "/models/m"]] and commands.index(checks[0]) == 0
    sdpa = runs["smoke_gpu_sdpa"]
    assert sdpa[2] == "exp/smoke_gpu.yaml" and "seal.attention=sdpa" in sdpa
    assert not any("attention" in o for o in runs["smoke_gpu_auto"])
    timed = {"trainer.val_before_train=false", "trainer.test_freq=-1", "trainer.save_freq=-1"}
    assert set(sdpa) >= timed and set(runs["smoke_gpu_auto"]) >= timed  # no validation, no checkpoint
    assert runs["paper_batch_dynamic"][2] == "exp/smoke_gpu_paper_batch.yaml"
    assert not {ONE_EACH, EAGER} & set(runs["paper_batch_dynamic"])
    assert {ONE_EACH, EAGER} <= set(runs["paper_batch_mb1_eager"])
    assert all("actor_rollout_ref.model.path=/models/m" in command for command in runs.values())
    for command in (
        sdpa,
        runs["paper_batch_mb1_eager"],
    ):  # between them, every override the runs use composes
        launcher.compose(ROOT / command[2], command[command.index("--") + 1 :])
    tables = [c[1:] for c in commands if c[0] == "scripts/step_table.py" and len(c) == 3]
    assert tables == [
        ["experiments/smoke_gpu_sdpa", "experiments/smoke_gpu_auto"],
        ["experiments/paper_batch_mb1_eager", "experiments/paper_batch_dynamic"],
    ]
    logs = tmp_path / "work" / "experiments"
    assert (logs / "smoke_gpu_sdpa.log").is_file() and (logs / "attention_check.log").is_file()


def test_named_runs_only_and_bad_names_refused_before_any_launch(tmp_path):
    done, commands = run_script(tmp_path, "/models/m", "paper-dynamic", "paper-mb1")
    runs = launches_by_run(commands)
    assert done.returncode == 0 and list(runs) == ["paper_batch_dynamic", "paper_batch_mb1"]
    assert ONE_EACH in runs["paper_batch_mb1"] and EAGER not in runs["paper_batch_mb1"]
    tables = [c[1:] for c in commands if c[0] == "scripts/step_table.py" and len(c) == 3]
    assert tables == [["experiments/paper_batch_mb1", "experiments/paper_batch_dynamic"]]
    done, commands = run_script(tmp_path / "bad", "/models/m", "smoke-auto", "paper-huge")
    assert done.returncode == 2 and "no run 'paper-huge'" in done.stderr and commands == []
    done, commands = run_script(tmp_path / "none")
    assert done.returncode == 2 and "RUN" in done.stderr and commands == []
