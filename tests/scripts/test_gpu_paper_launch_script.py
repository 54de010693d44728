"""gpu/gpu_paper_launch.sh without a GPU: each run's launch (the as-shipped ones override only run length,
validation and checkpoints), the order `next` follows, the resume's check, with a stand-in `PYTHON` that
records what it would run; and the tables it prints (benchmarks/backbone_table.py's 7B targets, the forward
phases' MFU, runs side by side; the sampler's steps of its own launch only)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from verl.utils.config import omega_conf_to_dataclass

from seal.trainer.launch import command as launcher
from seal.trainer.launch.override_types import check_override_types
from seal.trainer.launch.rules import check_launch_config
from seal.trainer.settings import settings_from_config
from tests.support.script_module import load_script

ROOT = Path(__file__).resolve().parents[2]
backbone_table = load_script("backbone_table")
sampler = load_script("resource_sampler")
update_profile = load_script("update_profile")
AS_SHIPPED = {
    "actor_rollout_ref.model.path",
    "trainer.total_training_steps",
    "trainer.val_before_train",
    "trainer.test_freq",
    "trainer.save_freq",
    "trainer.logger",  # bookkeeping: the metrics file the tables read
    "trainer.experiment_name",  # bookkeeping: the run folder
}
VLLM_INFO = "+ray_kwargs.ray_init.runtime_env.env_vars.VLLM_LOGGING_LEVEL"
STAND_IN = """#!/bin/sh
echo "$*" >> {record}
case "$1" in
  benchmarks/resource_sampler.py) out=$3; mkdir -p "$(dirname "$out")"
    echo "${{CUDA_VISIBLE_DEVICES:-all}}" > "$(dirname "$out")/gpus"
    echo '{{"returncode": 0, "step_seen_s": {{"2": 300.0}}, "peak_gpu_used_gib": 70.1,' > "$out"
    echo '"peak_node_used_gib": 90.2}}' >> "$out" ;;
  -|benchmarks/update_profile.py) exec {python} "$@" ;;
esac
exit 0
"""


class Node:
    """The script copied into a work folder, run with a stand-in PYTHON and model folders that exist."""

    def __init__(self, tmp_path: Path) -> None:
        self.work, self.models = tmp_path / "work", tmp_path / "models"
        for folder, name in (
            ("gpu", "gpu_paper_launch.sh"),
            ("gpu", "gpu_mode_cli.sh"),
            ("benchmarks", "update_profile.py"),
        ):
            (self.work / folder).mkdir(parents=True, exist_ok=True)  # the script and what it runs
            shutil.copy(ROOT / folder / name, self.work / folder)
        for name in ("qwen2.5-7b", "toolace-2-8b", "qwen2.5-coder-1.5b"):
            (self.models / name).mkdir(parents=True)
            (self.models / name / "config.json").write_text("{}")
        self.record = tmp_path / "commands.txt"
        self.python = tmp_path / "python"
        self.python.write_text(STAND_IN.format(record=self.record, python=sys.executable))
        self.python.chmod(0o755)

    def run(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHON": str(self.python), "MODELS": str(self.models), **extra}
        script = self.work / "gpu" / "gpu_paper_launch.sh"
        return subprocess.run(["bash", str(script), *args], env=env, capture_output=True, text=True)

    def launches(self) -> list[list[str]]:
        lines = self.record.read_text().splitlines() if self.record.exists() else []
        return [line.split() for line in lines if line.startswith("benchmarks/resource_sampler.py")]

    def folder(self, name: str) -> Path:
        return self.work / "experiments" / name


def launch_of(node: Node, run: str) -> tuple[str, dict[str, str]]:
    """The experiment a run launches, and its overrides."""
    shown = node.run("show", run)
    assert shown.returncode == 0, shown.stderr
    line = shown.stdout.splitlines()
    assert line[:4] == ["launcher.py", "--conf", line[2], "--with-bfcl"] and line[4] == "--"
    return line[2], dict(item.split("=", 1) for item in line[5:])


def overrides_of(node: Node, run: str) -> dict[str, str]:
    return launch_of(node, run)[1]


def test_the_paper_s_launches_override_only_run_length_validation_and_checkpoints(tmp_path):
    node = Node(tmp_path)
    for run in ("7b", "7b-ckpt", "7b-resume", "8b", "8b-ckpt", "8b-resume", "7b-shaped", "8b-shaped"):
        conf, overrides = launch_of(node, run)
        assert conf == ("exp/SEAL_ToolACE.yaml" if run.startswith("8b") else "exp/SEAL.yaml"), run
        extra = {key: value for key, value in overrides.items() if key not in AS_SHIPPED}
        shaped = {"data.max_response_length": "1152", VLLM_INFO: "INFO"}  # the cap, and vLLM's start-up lines
        assert extra == (shaped if "shaped" in run else {}), run
        assert overrides["trainer.val_before_train"] == "false" and overrides["trainer.test_freq"] == "-1"
        steps, save = ("1", "1") if run.endswith("ckpt") else ("2", "-1")
        assert (overrides["trainer.total_training_steps"], overrides["trainer.save_freq"]) == (steps, save)
    tuned = {key: value for key, value in overrides_of(node, "7b-tuned").items() if key not in AS_SHIPPED}
    assert tuned == {  # the timing run's cap, then only speed settings that leave the algorithm as it is
        "data.max_response_length": "1152",
        VLLM_INFO: "INFO",
        "actor_rollout_ref.model.enable_gradient_checkpointing": "false",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": "10240",
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu": "32768",
        "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu": "32768",
        "actor_rollout_ref.ref.fsdp_config.model_dtype": "bf16",
    }
    no_compile = {
        key: value for key, value in overrides_of(node, "7b-nocompile").items() if key not in AS_SHIPPED
    }
    vllm_compile = "+actor_rollout_ref.rollout.engine_kwargs.vllm.compilation_config"
    assert no_compile == {**tuned, vllm_compile: "{mode:0,cudagraph_mode:FULL_DECODE_ONLY}"}  # and no compile
    fast = {key: value for key, value in overrides_of(node, "7b-fast").items() if key not in AS_SHIPPED}
    recompute = {"actor_rollout_ref.model.enable_gradient_checkpointing": "false"}
    fewer = {"actor_rollout_ref.actor.ppo_max_token_len_per_gpu": "49152"}  # 2-3 micro-batches a mini-batch
    assert fast == {
        **{k: v for k, v in no_compile.items() if k not in recompute},
        **fewer,
    }  # checkpointing on
    liger = {k: v for k, v in overrides_of(node, "7b-liger-decoder").items() if k not in AS_SHIPPED}
    assert liger == {**fast, "actor_rollout_ref.model.use_liger": "true"}  # RMSNorm, SwiGLU and RoPE only
    profiled = overrides_of(node, "7b-liger-decoder-profile")
    folder = node.folder("paper_7b_liger_decoder_profile")
    added = dict(line.split("=", 1) for line in update_profile.profile_overrides(folder / "profile", 2, 2))
    assert {k: v for k, v in profiled.items() if k not in AS_SHIPPED} == {**liger, **added}
    assert profiled["trainer.experiment_name"] == folder.name
    for unprofiled in ("7b-ckpt-profile", "7b-resume-profile", "7b-profile-profile", "13b-profile"):
        assert node.run("show", unprofiled).returncode == 2, unprofiled
    assert overrides_of(node, "8b-resume")["trainer.experiment_name"] == "paper_8b_ckpt"  # resumes its folder
    assert overrides_of(node, "8b")["actor_rollout_ref.model.path"] == str(node.models / "toolace-2-8b")
    for gpus in ("1", "2", "4"):
        scale = overrides_of(node, f"scale-{gpus}")
        assert scale["trainer.n_gpus_per_node"] == gpus and scale["trainer.total_training_steps"] == "3"
    lora = overrides_of(node, "lora")
    assert lora["actor_rollout_ref.model.lora_rank"] == "64" and lora["trainer.total_training_steps"] == "4"
    assert lora["trainer.n_gpus_per_node"] == "1"  # beside scale-1, full fine-tuning on one GPU
    assert lora["actor_rollout_ref.actor.entropy_coeff"] == "1"  # moves the adapters when no reward does
    assert lora["actor_rollout_ref.rollout.load_format"] == "safetensors"
    assert lora["actor_rollout_ref.actor.strategy"] == "fsdp2"
    assert node.run("show", "13b").returncode == 2


@pytest.mark.parametrize(
    "run",
    [
        "7b",
        "7b-ckpt",
        "8b-shaped",
        "7b-tuned",
        "7b-nocompile",
        "7b-fast",
        "7b-liger-decoder",
        "7b-liger-decoder-profile",
    ],
)
def test_the_paper_s_launches_compose_and_pass_the_launch_checks(run, tmp_path):
    conf, overrides = launch_of(Node(tmp_path), run)
    lines = [f"{key}={value}" for key, value in overrides.items()]
    check_override_types(launcher.compose(ROOT / conf, []), lines)
    config = launcher.compose(ROOT / conf, lines)
    check_launch_config(config, settings_from_config(config))
    assert (config.data.train_batch_size, config.actor_rollout_ref.rollout.n) == (32, 8)  # Table 4's batch
    assert config.trainer.n_gpus_per_node == 4 and config.trainer.total_training_steps in (1, 2)
    toolace = run.startswith("8b")  # the 8B's shipped config: its protocol and a prompt its tokenizer fits
    assert config.seal.rollout.protocol == ("python_list" if toolace else "qwen_fc")
    assert config.data.max_prompt_length == (9216 if toolace else 8192)
    tuned = run in ("7b-tuned", "7b-nocompile")  # the runs that keep every layer's activations
    assert config.actor_rollout_ref.model.enable_gradient_checkpointing is not tuned
    longest = config.data.max_prompt_length + config.data.max_response_length  # one micro-batch holds it
    assert config.actor_rollout_ref.actor.ppo_max_token_len_per_gpu >= longest
    assert config.actor_rollout_ref.model.use_liger is run.startswith("7b-liger")
    assert config.actor_rollout_ref.model.fused_kernel_options.impl_backend != "liger"  # needs the CuTe DSL
    profiler = config.actor_rollout_ref.actor.profiler  # rank 0's second update mini-batch of step 2 only
    assert profiler.enable is run.endswith("-profile")
    if profiler.enable:
        assert (profiler.tool, list(profiler.ranks), list(config.global_profiler.steps)) == (
            "torch",
            [0],
            [2],
        )
        assert not config.actor_rollout_ref.rollout.profiler.enable
    uncompiled = ("7b-nocompile", "7b-fast", "7b-liger-decoder", "7b-liger-decoder-profile")
    if run in uncompiled:  # what verl hands vLLM: a dict it writes as JSON
        rollout = omega_conf_to_dataclass(config.actor_rollout_ref.rollout)
        assert rollout.engine_kwargs["vllm"]["compilation_config"] == {
            "mode": 0,
            "cudagraph_mode": "FULL_DECODE_ONLY",
        }


@pytest.mark.parametrize("run", ["lora", "scale-1", "scale-4"])
def test_the_1_5b_launches_pass_the_launcher_s_checks(run, tmp_path):
    conf, overrides = launch_of(Node(tmp_path), run)
    lines = [f"{key}={value}" for key, value in overrides.items()]
    check_override_types(launcher.compose(ROOT / conf, []), lines)  # what refused entropy_coeff=0.01 once
    config = launcher.compose(ROOT / conf, lines)
    check_launch_config(config, settings_from_config(config))
    assert config.trainer.n_gpus_per_node == (1 if run == "lora" else int(run[-1]))


def test_next_follows_the_order_and_a_resume_waits_for_its_checkpoint(tmp_path):
    node = Node(tmp_path)
    refused = node.run("start", "7b-resume")
    assert refused.returncode == 2 and "run 7b-ckpt first" in refused.stderr and node.launches() == []
    assert node.run("next", CHECKPOINT_GIB="0").returncode == 0 and node.run("wait", "30").returncode == 0
    (launch,) = node.launches()
    assert launch[1:5] == [
        "--out",
        "experiments/paper_7b_ckpt/resources.json",
        "--metrics",
        "experiments/paper_7b_ckpt/metrics",
    ]
    assert "trainer.experiment_name=paper_7b_ckpt" in launch and "trainer.save_freq=1" in launch
    (node.work / "experiments" / ".paper_launch" / "7b-ckpt.done").unlink()
    (node.work / "experiments" / ".paper_launch" / "7b-ckpt.failed").touch()  # its resume waits for it
    assert node.run("next").returncode == 0 and node.run("wait", "30").returncode == 0
    assert "trainer.experiment_name=paper_7b_shaped" in node.launches()[-1]
    status = node.run("status").stdout
    assert "7b-ckpt    failed" in status and "7b-resume  to do" in status and "7b-shaped  done" in status


def test_runs_started_together_share_the_node_on_disjoint_gpus(tmp_path):
    node = Node(tmp_path)
    too_many = node.run("start", "scale-2", "scale-4", GPUS="4")
    assert too_many.returncode == 2 and "need 6 GPUs side by side; the node has 4" in too_many.stderr
    assert node.launches() == []
    assert node.run("start", "scale-1", "scale-2", "lora", GPUS="4").returncode == 0
    assert node.run("wait", "30").returncode == 0
    gpus = {
        name: (node.folder(f"paper_{name}") / "gpus").read_text().strip()
        for name in ("scale_1", "scale_2", "lora")
    }
    assert gpus == {"scale_1": "0", "scale_2": "1,2", "lora": "3"}
    status = node.run("status").stdout
    assert all(f"{run:<10} done" in status for run in ("scale-1", "scale-2", "lora"))
    assert node.run("start", "scale-4").returncode == 0 and node.run("wait", "30").returncode == 0
    assert (node.folder("paper_scale_4") / "gpus").read_text().strip() == "all"  # alone: the whole node


def test_a_queue_runs_one_launch_after_another_and_wait_follows_it(tmp_path):
    node = Node(tmp_path)
    refused = node.run("queue", "scale-1", "13b")
    assert refused.returncode == 2 and "no run '13b'" in refused.stderr and node.launches() == []
    queued = node.run("queue", "scale-1", "lora", "scale-4")
    assert queued.returncode == 0, queued.stderr
    followed = node.run("wait", "60")
    assert followed.returncode == 0, followed.stdout + followed.stderr
    names = [launch[launch.index("--") + 1 :] for launch in node.launches()]
    assert [line[-1] for line in names] == [  # in the queue's order, each alone on the node
        "trainer.experiment_name=paper_scale_1",
        "trainer.experiment_name=paper_lora",
        "trainer.experiment_name=paper_scale_4",
    ]
    assert all((node.folder(f"paper_{n}") / "gpus").read_text().strip() == "all" for n in ("scale_1", "lora"))
    assert "scale-4 finished" in followed.stdout
    status = node.run("status").stdout
    assert all(f"{run:<10} done" in status for run in ("scale-1", "lora", "scale-4"))
    alone = node.run("queue", "7b-resume")
    assert alone.returncode == 2 and "run 7b-ckpt first" in alone.stderr
    assert node.run("queue", "7b-ckpt", "7b-resume", CHECKPOINT_GIB="0").returncode == 0  # checked in turn
    assert node.run("wait", "60").returncode == 1  # the stand-in saved no checkpoint to resume
    status = node.run("status").stdout
    assert "7b-ckpt    done" in status and "7b-resume  to do" in status


def write_launch(metrics: Path, name: str, steps: list[int]) -> None:
    lines = [json.dumps({"step": step, "data": {"timing_s/step": 150.0}}) for step in steps]
    metrics.mkdir(parents=True, exist_ok=True)
    (metrics / f"{name}.jsonl").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(("resumed_steps", "status"), [([2], 0), ([1, 2], 1)])
def test_a_resume_must_log_step_2_only_after_the_checkpoint_of_step_1(resumed_steps, status, tmp_path):
    node = Node(tmp_path)
    folder = node.folder("paper_7b_ckpt")
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("1")
    write_launch(folder / "metrics", "20261126T100000Z", [1])
    (node.work / "experiments" / ".paper_launch").mkdir()
    (node.work / "experiments" / ".paper_launch" / "7b-ckpt.done").touch()
    assert node.run("start", "7b-resume").returncode == 0
    write_launch(folder / "metrics", "20261126T101000Z", resumed_steps)  # what the resume launch logged
    done = node.run("wait", "30")
    assert done.returncode == status, done.stderr
    (launch,) = node.launches()
    assert launch[2] == "experiments/paper_7b_ckpt/resume/resources.json"
    assert f"the steps each launch logged: [[1], {sorted(resumed_steps)}]" in done.stdout
    if status == 0:
        assert "resume launch: start-up 150.0 s (the checkpoint's load included)" in done.stdout
        assert not (folder / "checkpoints").exists()  # the node's disk holds one checkpoint
    else:
        assert (folder / "checkpoints").is_dir() and "7b-resume failed" in done.stderr


def test_a_run_without_its_model_folder_says_how_to_build_it(tmp_path):
    node = Node(tmp_path)
    shutil.rmtree(node.models / "toolace-2-8b")
    refused = node.run("start", "8b")
    assert refused.returncode == 2 and "gpu_paper_launch.sh build 8b" in refused.stderr
    assert node.run("build", "9b").returncode == 2
    assert node.run("--help").stdout.count("7b-resume") >= 1


def test_a_checkpoint_run_starts_only_where_the_disk_holds_its_checkpoint(tmp_path):
    node = Node(tmp_path)
    refused = node.run("start", "7b-ckpt", CHECKPOINT_GIB="100000000")
    assert refused.returncode == 2 and "saves ~100 GB" in refused.stderr and node.launches() == []
    assert node.run("start", "7b-ckpt", CHECKPOINT_GIB="0").returncode == 0
    assert node.run("wait", "30").returncode == 0
    assert "trainer.save_freq=1" in node.launches()[-1]


def test_the_runs_an_h100_cannot_hold_start_only_on_gpus_that_hold_them(tmp_path):
    node = Node(tmp_path)
    h100, h200 = "81559", "143771"  # MiB, as nvidia-smi reports them
    refused = node.run("queue", "7b-shaped", "7b-tuned", GPU_MIB=h100)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "79 GiB" in refused.stderr
    assert node.launches() == []  # nothing of the queue started
    assert node.run("start", "7b-shaped", GPU_MIB=h100).returncode == 0  # checkpointing on: fits
    assert node.run("wait", "30").returncode == 0
    assert node.run("start", "7b-fast", GPU_MIB=h100).returncode == 0  # checkpointing on: fits
    assert node.run("wait", "30").returncode == 0
    assert node.run("start", "7b-tuned", GPU_MIB=h200).returncode == 0
    assert node.run("wait", "30").returncode == 0
    assert "actor_rollout_ref.model.enable_gradient_checkpointing=false" in node.launches()[-1]


def paper_run(folder: Path, steps: dict[int, dict[str, float]], seen: dict[str, float]) -> Path:
    (folder / "metrics").mkdir(parents=True)
    lines = [json.dumps({"step": step, "data": data}) + "\n" for step, data in steps.items()]
    (folder / "metrics" / "launch.jsonl").write_text("".join(lines))
    resources = {
        "step_seen_s": seen,
        "peak_gpu_used_gib": 72.5,
        "peak_node_used_gib": 140.0,
        "node_total_gib": 503.0,
        "peak_processes": [{"pid": 7, "rss_gib": 30.0, "command": "ray::WorkerDict"}],
    }
    (folder / "resources.json").write_text(json.dumps(resources))
    return folder


def step(seconds: float, gpus: int, mfu: float) -> dict[str, float]:
    tokens = 800_000.0
    return {
        "timing_s/step": seconds,
        "timing_s/old_log_prob": 10.0,
        "timing_s/ref": 20.0,
        "timing_s/update_actor": 60.0,
        "perf/total_num_tokens": tokens,
        "perf/throughput": tokens / (seconds * gpus),
        "perf/mfu/actor": mfu,
    }


def test_the_7b_runs_are_checked_against_their_targets_and_runs_are_set_side_by_side(tmp_path, capsys):
    shipped = paper_run(tmp_path / "paper_7b", {1: step(300, 4, 0.3), 2: step(170, 4, 0.42)}, {"1": 500.0})
    one = paper_run(tmp_path / "paper_scale_1", {1: step(200, 1, 0.3)}, {"1": 350.0})
    assert backbone_table.main([str(shipped), str(one)]) == 0
    out = capsys.readouterr().out
    # step 2: 170 s, 800k / (170 x 4) = 1,176 tokens/s/GPU, MFU 42%, start-up 500 - 300 = 200 s
    assert "7B targets at step 2: step s ok, tokens/s/GPU MISSED, MFU ok, start-up s ok" in out
    table, _ = backbone_table.run_table(shipped)
    assert table.loc[2, "MFU old_log_prob"] == pytest.approx(
        0.42 * 60 / 30
    )  # a forward: a third of the FLOPs
    assert table.loc[2, "MFU ref"] == pytest.approx(0.42 * 60 / 60)
    side = out[out.index("side by side") :].splitlines()
    assert side[3].split()[:3] == [str(shipped), "4", "170.0"] and side[4].split()[:3] == [
        str(one),
        "1",
        "200.0",
    ]
    assert out.count("targets at step") == 1  # the scaling runs have none


def test_the_sampler_counts_only_the_steps_its_own_launch_logs(tmp_path):
    metrics = tmp_path / "metrics"
    write_launch(metrics, "earlier", [1])
    watch = sampler.StepWatch(metrics)
    watch.poll(5.0)
    assert watch.seen == {}
    write_launch(metrics, "this", [2])
    with (metrics / "earlier.jsonl").open("a") as earlier:  # a line added now is this command's too
        earlier.write(json.dumps({"step": 3, "data": {"timing_s/step": 1.0}}) + "\n")
    watch.poll(9.0)
    assert watch.seen == {2: 9.0, 3: 9.0}
