"""The measured backbone runs without a GPU: `benchmarks/resource_sampler.py` on a real child process,
`benchmarks/backbone_table.py` on a run folder, and `gpu/gpu_backbone_runs.sh` as a command line with a
stand-in `PYTHON` that records what it would run (each run's overrides compose as the launcher's do)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
from verl.utils.config import omega_conf_to_dataclass

from seal.trainer.launch import command as launcher
from seal.trainer.launch.kernel import configure_attention
from seal.trainer.launch.liger import liger_uses
from seal.trainer.launch.rules import check_launch_config
from seal.trainer.rl.task_runner import TRANSFER_QUEUE_READY, TRANSFER_QUEUE_STARTING
from seal.trainer.settings import settings_from_config
from tests.support.script_module import load_script

ROOT = Path(__file__).resolve().parents[2]
sampler = load_script("resource_sampler")
backbone_table = load_script("backbone_table")
RUNS = (
    "3b",
    "3b-shaped",
    "3b-liger",
    "3b-liger-profile",
    "3b-offload-all",
    "7b-lora",
    "7b-lora-sdpa",
    "8b-lora",
    "7b-full",
)
COMPOSED = {
    "3b-shaped",
    "3b-liger",
    "3b-liger-profile",
    "3b-offload-all",
    "7b-lora-sdpa",
    "8b-lora",
    "7b-full",
}
"""Between them every override the runs use (3b-shaped adds one to 3b's, 3b-liger two to 3b-shaped's,
7b-lora-sdpa one and 8b-lora two to 7b-lora's); composing takes seconds each."""

CHILD = """
import json, sys, time
from pathlib import Path
metrics = Path(sys.argv[1]); metrics.mkdir(parents=True)
held = bytearray(300 << 20)
print("launch recorded in launcher_record/x/20261127T000000Z", flush=True)
time.sleep(0.5)
print("(SealTaskRunner pid=7) " + sys.argv[2], flush=True)
print("(SealTaskRunner pid=7) INFO:2026-11-27 01:49:53,399:train and validate dataloader initialized, ...",
      file=sys.stderr, flush=True)
print("launch recorded in launcher_record/x/again", flush=True)  # a landmark counts where it first appears
for step in (1, 2):
    time.sleep(0.6)
    with (metrics / "launch.jsonl").open("a") as out:
        out.write(json.dumps({"step": step, "data": {"timing_s/step": 0.5}}) + "\\n")
sys.exit(3)
"""


def test_the_sampler_records_the_child_s_memory_its_steps_and_its_exit(tmp_path, capfdbinary):
    out = tmp_path / "run" / "resources.json"
    metrics = tmp_path / "run" / "metrics"
    argv = ["--out", str(out), "--metrics", str(metrics), "--interval", "0.2", "--every", "0.5", "--"]
    task_runner = f"{TRANSFER_QUEUE_STARTING}\n{TRANSFER_QUEUE_READY.format(seconds=3.2)}"  # its own lines
    status = sampler.main([*argv, sys.executable, "-c", CHILD, str(metrics), task_runner])
    assert status == 3
    passed, progress = capfdbinary.readouterr()
    assert passed.count(b"launch recorded in") == 2 and b"dataloader initialized" in passed  # stderr too
    assert b"[sampler]" in progress
    found = json.loads(out.read_text())
    assert found["returncode"] == 3 and set(found["step_seen_s"]) == {"1", "2"}
    assert found["gpu_names"] == sampler.GpuMemory().names()  # the cards the numbers are from
    assert found["step_seen_s"]["1"] < found["step_seen_s"]["2"] <= found["wall_s"]
    landmarks = found["landmarks_s"]
    assert set(landmarks) == {"launcher", "task runner", "transfer queue", "data loaders"}
    assert (
        0
        <= landmarks["launcher"]
        <= landmarks["task runner"]
        <= landmarks["transfer queue"]
        <= landmarks["data loaders"]
        <= found["wall_s"]
    )
    largest = max(process["rss_gib"] for process in found["peak_processes"])
    assert largest >= 0.29 and found["peak_node_used_gib"] > 0
    assert out.with_suffix(".csv").read_text().startswith("s,node_used_gib,largest_rss_gib,largest_pid")


def test_the_table_gives_start_up_phases_peaks_and_the_targets(tmp_path, capsys):
    run = tmp_path / "backbone_3b"
    (run / "metrics").mkdir(parents=True)
    steps = {
        1: {
            "timing_s/step": 150.0,
            "timing_s/gen": 60.0,
            "perf/throughput": 7000.0,
            "perf/total_num_tokens": 1.1e6,
        },
        2: {
            "timing_s/step": 110.0,
            "timing_s/gen": 50.0,
            "perf/throughput": 9000.0,
            "perf/total_num_tokens": 1.0e6,
        },
    }
    lines = [json.dumps({"step": step, "data": data}) + "\n" for step, data in steps.items()]
    (run / "metrics" / "launch.jsonl").write_text("".join(lines))
    resources = {
        "step_seen_s": {"1": 320.0, "2": 430.0},
        "peak_gpu_used_gib": 71.5,
        "peak_node_used_gib": 60.2,
        "node_total_gib": 116.4,
        "peak_processes": [{"pid": 7, "rss_gib": 44.1, "command": "ray::WorkerDict"}],
    }
    (run / "resources.json").write_text(json.dumps(resources))
    assert backbone_table.main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "start-up s 170.0" in out and "peak GPU GiB 71.5" in out and "peak process RSS GiB 44.1" in out
    assert "3B targets at step 2: step s ok, tokens/s/GPU ok, start-up s ok" in out
    assert "start-up parts" not in out  # a sampler without landmarks
    landmarks = {"launcher": 20.0, "ray": 29.0, "data loaders": 80.0, "reward loop": 100.0}
    (run / "resources.json").write_text(
        json.dumps({**resources, "landmarks_s": {**landmarks, "ready": 160.0}})
    )
    assert backbone_table.main([str(run)]) == 0
    parts = capsys.readouterr().out.split("start-up parts s: ")[1].splitlines()[0]
    # the parts between landmarks seen, those whose end is missing joined to the next: the whole start-up
    assert parts == (
        "launcher 20.0  Ray 9.0  task runner + tokenizer and data 51.0"
        "  workers + actor and ref + reward loop 20.0  rollout servers + sleep and load 60.0  to step 1 10.0"
    )
    beside = {"task runner": 49.0, "transfer queue": 74.0}  # TransferQueue up 25 s after, data loaders first
    (run / "resources.json").write_text(
        json.dumps({**resources, "landmarks_s": {**landmarks, **beside, "ready": 160.0}})
    )
    assert backbone_table.main([str(run)]) == 0
    parts = capsys.readouterr().out.split("start-up parts s: ")[1].splitlines()[0]
    assert parts.startswith("launcher 20.0  Ray 9.0  task runner 20.0  tokenizer and data 31.0  workers")
    assert parts.endswith("to step 1 10.0  TransferQueue beside 25.0")  # off the path: not in the sum
    seven = tmp_path / "backbone_7b_lora"
    shutil.copytree(run, seven)
    assert backbone_table.main([str(seven)]) == 0
    assert "targets" not in capsys.readouterr().out  # the 3B shape's targets are not the 7B's
    assert backbone_table.main([str(tmp_path / "missing")]) == 1


STAND_IN = """#!/bin/sh
echo "$*" >> {record}
if [ "$1" = benchmarks/resource_sampler.py ]; then
  out=$3; mkdir -p "$(dirname "$out")"; echo '{{"returncode": 0}}' > "$out"
fi
[ "$1" = benchmarks/update_profile.py ] && [ "$2" = overrides ] && exec {python} "$@"
exit 0
"""


def run_script(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess, list]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    record = tmp_path / "commands.txt"
    python = tmp_path / "python"
    python.write_text(STAND_IN.format(record=record, python=sys.executable))
    python.chmod(0o755)
    work = tmp_path / "work"
    for folder, name in (
        ("gpu", "gpu_backbone_runs.sh"),
        ("gpu", "gpu_mode_cli.sh"),
        ("benchmarks", "update_profile.py"),
    ):
        (work / folder).mkdir(parents=True, exist_ok=True)  # the script and what it runs
        shutil.copy(ROOT / folder / name, work / folder / name)
    done = subprocess.run(
        ["bash", str(work / "gpu" / "gpu_backbone_runs.sh"), *args],
        env={**os.environ, "PYTHON": str(python), "MODELS": str(tmp_path / "models"), **(env or {})},
        capture_output=True,
        text=True,
    )
    lines = record.read_text().splitlines() if record.exists() else []
    return done, [line.split() for line in lines]


def launch_of(commands: list[list[str]]) -> list[str]:
    [command] = [c for c in commands if c[0] == "benchmarks/resource_sampler.py"]
    return command[command.index("launcher.py") :]


def test_every_run_launches_under_the_sampler_with_overrides_that_compose(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "flash_attn", None)  # a GPU node without flash-attn, as measured
    timed = {"trainer.val_before_train=false", "trainer.save_freq=-1", "trainer.logger=[console,file]"}
    for run in RUNS:
        done, commands = run_script(tmp_path / run, "run", run)
        assert done.returncode == 0, done.stderr
        folder = f"experiments/backbone_{run.replace('-', '_')}"
        sampled = next(c for c in commands if c[0] == "benchmarks/resource_sampler.py")
        assert sampled[1:5] == ["--out", f"{folder}/resources.json", "--metrics", f"{folder}/metrics"]
        launch = launch_of(commands)
        overrides = launch[launch.index("--", 1) + 1 :]
        assert "--with-bfcl" in launch and f"trainer.experiment_name={Path(folder).name}" in overrides
        assert timed <= set(overrides)
        tables = [c for c in commands if c[0] == "benchmarks/backbone_table.py"]
        assert tables == [["benchmarks/backbone_table.py", folder]]
        if run not in COMPOSED:
            continue
        config = launcher.compose(ROOT / launch[2], overrides)
        assert config.trainer.n_gpus_per_node == 1 and config.trainer.total_training_steps in (1, 2)
        check_launch_config(config, settings_from_config(config))  # what the launcher refuses, this never is
        if run == "3b-shaped":  # the recipe: moments on the GPU, a bf16 reference, the paper's batch
            actor, ref = config.actor_rollout_ref.actor, config.actor_rollout_ref.ref
            assert actor.fsdp_config.param_offload and not actor.fsdp_config.optimizer_offload
            assert ref.fsdp_config.model_dtype == "bf16" and config.data.train_batch_size == 16
            assert config.actor_rollout_ref.rollout.n == 8 and config.data.max_response_length == 1152
        profiler = config.actor_rollout_ref.actor.profiler
        assert profiler.enable is run.endswith("-profile")  # verl's torch profiler on the update
        if profiler.enable:
            assert str(profiler.save_path) == str(tmp_path / run / "work" / folder / "profile")
            assert [c[:2] for c in commands if c[0] == "benchmarks/update_profile.py"] == [
                ["benchmarks/update_profile.py", "overrides"],
                ["benchmarks/update_profile.py", "table"],  # after the backbone table
            ]
        if run.startswith("3b-liger"):  # 3b-shaped with Liger's decoder kernels and vLLM uncompiled
            configure_attention(config)
            assert liger_uses(config) == ("actor_rollout_ref.model.use_liger=true",)
            rollout = omega_conf_to_dataclass(config.actor_rollout_ref.rollout)
            assert rollout.engine_kwargs["vllm"]["compilation_config"] == {
                "mode": 0,
                "cudagraph_mode": "FULL_DECODE_ONLY",
            }
            assert config.data.max_response_length == 1152 and config.data.train_batch_size == 16
        if run == "8b-lora":
            assert config.actor_rollout_ref.model.lora_rank == 64 and config.data.max_response_length == 1152
            rollout = config.actor_rollout_ref.rollout  # vLLM reads the base; only adapters are synced
            assert rollout.load_format == "safetensors" and not rollout.layered_summon  # fails on one GPU
            assert config.actor_rollout_ref.actor.fsdp_config.strategy == "fsdp2"  # engine_limits.py says why
            assert config.seal.rollout.protocol == "python_list" and config.data.max_prompt_length == 9216
        if run in ("8b-lora", "7b-lora-sdpa"):  # what the launcher resolves the attention to
            choice = configure_attention(config)
            model = config.actor_rollout_ref.model
            resolved = (choice.kernel, model.use_remove_padding, model.use_fused_kernels, model.external_lib)
            if run == "8b-lora":  # packed, verl's fused kernels off (they fail on FSDP2), log-probs chunked
                assert resolved == (
                    "torch_varlen",
                    True,
                    False,
                    ["seal.trainer.attention", "seal.trainer.logprobs"],
                )
            else:  # every micro-batch padded, as measured before; verl's log-prob loop now chunked
                assert resolved == ("sdpa", False, False, "seal.trainer.logprobs")


def test_build_copies_the_weightless_folder_then_adds_random_weights(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    (source / "config.json").write_text("{}")
    done, commands = run_script(tmp_path, "build", str(source), "qwen2.5-3b")
    assert done.returncode == 0, done.stderr
    target = tmp_path / "models" / "qwen2.5-3b"
    assert (target / "config.json").is_file()
    assert commands == [["scripts/make_smoke_model.py", "qwen2.5-3b", str(target), "--weights", "random"]]
    done, commands = run_script(tmp_path / "bad", "build", str(tmp_path / "nothing"), "qwen2.5-3b")
    assert done.returncode == 2 and "has no config.json" in done.stderr and commands == []


def test_bad_modes_and_runs_are_refused_before_anything_runs(tmp_path):
    done, commands = run_script(tmp_path / "a", "start", "13b")
    assert done.returncode == 2 and "no run '13b'" in done.stderr and commands == []
    done, commands = run_script(tmp_path / "b", "fly")
    assert done.returncode == 2 and "unknown mode 'fly'" in done.stderr
    done, _ = run_script(tmp_path / "c", "wait")
    assert done.returncode == 2 and "nothing was started" in done.stderr
    done, _ = run_script(tmp_path / "d", "--help")
    assert done.returncode == 0 and "3b-shaped" in done.stdout


def test_wait_says_a_run_still_going_and_gives_back_control(tmp_path):
    work = tmp_path / "work"
    (work / "experiments").mkdir(parents=True)
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        (work / "experiments" / ".backbone_run.pid").write_text(str(sleeper.pid))
        (work / "experiments" / ".backbone_run.name").write_text("3b")
        (work / "experiments" / "backbone_3b.log").write_text("[sampler]    30 s: node 1.0 GiB\n")
        started = time.monotonic()
        done, _ = run_script(tmp_path, "wait", "1")
        assert done.returncode == 3 and "3b still running after 1 s" in done.stdout
        assert time.monotonic() - started < 25
    finally:
        sleeper.kill()


@pytest.mark.parametrize(
    ("visible", "expected"),
    [(None, [0, 1, 2, 3]), ("1,2", [1, 2]), ("3,7", [3]), ("GPU-5d1c", [0, 1, 2, 3])],
)
def test_the_sampler_counts_only_the_gpus_its_command_sees(visible, expected):
    # runs side by side on one node each sample their own GPUs; names it cannot number leave the node's
    assert sampler.visible_gpus(4, visible) == expected


class FakeNvml:
    """NVML on a node of two H100s and two H200s: names and used memory by index."""

    MODELS = ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA H200")

    @staticmethod
    def nvmlInit() -> None:
        return None

    @classmethod
    def nvmlDeviceGetCount(cls) -> int:
        return len(cls.MODELS)

    @staticmethod
    def nvmlDeviceGetHandleByIndex(index: int) -> int:
        return index

    @classmethod
    def nvmlDeviceGetName(cls, handle: int) -> str:
        return cls.MODELS[handle]

    @staticmethod
    def nvmlDeviceGetMemoryInfo(handle: int):
        return types.SimpleNamespace(used=(handle + 1) * sampler.GIB)


def test_the_sampler_names_the_gpus_its_command_sees(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,2")
    gpus = sampler.GpuMemory()
    assert gpus.names() == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"] and gpus.used_gib() == [2.0, 3.0]
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVML: nvidia-smi's answer, or none without it
    monkeypatch.setattr(sampler.subprocess, "run", lambda *a, **k: types.SimpleNamespace(stdout="A\nB\nC\n"))
    assert sampler.GpuMemory().names() == ["B", "C"]


@pytest.mark.parametrize(
    ("folder", "cards", "line"),
    [
        ("backbone_3b_shaped", ["NVIDIA H200"], "(the targets are for the H100; this ran on NVIDIA H200)"),
        ("backbone_3b_shaped", ["NVIDIA H100 80GB HBM3"], "start-up s ok\n"),
        ("backbone_3b_shaped", None, "start-up s ok\n"),  # a record from before the sampler named cards
        ("backbone_3b_liger_profile", ["NVIDIA H100 80GB HBM3"], None),  # profiled: no verdict
        ("paper_7b_liger_decoder", ["NVIDIA H200"] * 4, "7B targets at step 2:"),  # the 7B's name no card
    ],
)
def test_the_table_names_the_cards_and_reads_a_verdict_against_its_card(
    folder, cards, line, tmp_path, capsys
):
    run = tmp_path / folder
    (run / "metrics").mkdir(parents=True)
    data = {"timing_s/step": 100.0, "perf/throughput": 9000.0, "perf/mfu/actor": 0.41}
    (run / "metrics" / "launch.jsonl").write_text(
        "".join(json.dumps({"step": step, "data": data}) + "\n" for step in (1, 2))
    )
    resources = {
        "step_seen_s": {"1": 200.0, "2": 300.0},
        "peak_gpu_used_gib": 70.0,
        "peak_node_used_gib": 60.0,
        "node_total_gib": 116.0,
        "peak_processes": [],
    }
    if cards is not None:
        resources["gpu_names"] = cards
    (run / "resources.json").write_text(json.dumps(resources))
    assert backbone_table.main([str(run)]) == 0
    out = capsys.readouterr().out
    assert ("GPUs: " in out) is (cards is not None)
    if cards:
        assert f"GPUs: {len(cards)} x {cards[0]}" in out
    if line is None:
        assert "targets" not in out
    else:
        assert line in out and out.count("targets at step 2") == 1
