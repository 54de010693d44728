"""benchmarks/update_profile.py: the verl overrides it prints compose and pass the launcher's checks; its
tables read a chrome trace built here (kernels, their launches and the CPU operations that opened them),
attribute each kernel to its region by the launch, and say how much communication no other kernel
overlapped; a trace without GPU kernels, a missing file and a bad region are refused in one line."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from seal.trainer.launch import command as launcher
from seal.trainer.launch.override_types import check_override_types
from tests.support.script_module import load_script

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "update_profile.py"
update_profile = load_script("update_profile")
CPU, STREAM, NCCL_STREAM = 1, 7, 20


def cpu_op(name: str, start: float, end: float, thread: int = CPU) -> dict:
    return {
        "ph": "X",
        "cat": "cpu_op",
        "name": name,
        "pid": 1,
        "tid": thread,
        "ts": start,
        "dur": end - start,
    }


def launch(correlation: int, at: float, thread: int = CPU) -> dict:
    return {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": "cudaLaunchKernel",
        "pid": 1,
        "tid": thread,
        "ts": at,
        "dur": 2,
        "args": {"correlation": correlation},
    }


def kernel(name: str, correlation: int, start: float, end: float, stream: int = STREAM, cat="kernel") -> dict:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0,
        "tid": stream,
        "ts": start,
        "dur": end - start,
        "args": {"correlation": correlation},
    }


def trace(tmp_path: Path, events: list[dict], name: str = "trace.json.gz") -> Path:
    path = tmp_path / name
    with gzip.open(path, "wt") as handle:
        json.dump({"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1}, *events]}, handle)
    return path


@pytest.fixture
def mini_batch(tmp_path) -> Path:
    """Times in microseconds. The LM head's Function forward (launching a GEMM) and its backward on the
    autograd thread (launching a Triton kernel), the optimizer's step, the decoder's attention, a
    reduce-scatter overlapped by compute except for 20 us, and a copy no CPU operation of a region opened."""
    return trace(
        tmp_path,
        [
            cpu_op("mini_batch1", 0, 1_000),
            cpu_op("FusedLinearForPPOFunction", 100, 200),
            cpu_op("FusedLinearForPPOFunctionBackward", 400, 500, thread=2),
            cpu_op("Optimizer.step#AdamW.step", 290, 320),
            launch(1, 110),
            launch(2, 50),
            launch(3, 300),
            launch(4, 80),
            launch(5, 410, thread=2),
            launch(6, 600),
            kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 1, 120, 160),
            kernel("flash_fwd_kernel", 2, 60, 100),
            kernel("multi_tensor_apply_kernel", 3, 300, 310),
            kernel("ncclDevKernel_ReduceScatter_Sum_f32", 4, 90, 130, stream=NCCL_STREAM),
            kernel("triton_red_fused_log_softmax", 5, 420, 440),
            kernel("Memcpy HtoD (Pageable -> Device)", 6, 640, 660, cat="gpu_memcpy"),
        ],
    )


def test_the_overrides_profile_one_update_mini_batch_and_pass_the_launchers_checks(tmp_path):
    shown = subprocess.run(
        [sys.executable, str(SCRIPT), "overrides", "out/profile", "--mini-batch", "3"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    lines = shown.stdout.splitlines()
    assert (
        f"global_profiler.save_path={tmp_path / 'out' / 'profile'}" in lines
    )  # absolute: workers' cwd differs
    config_file = ROOT / "exp" / "SEAL.yaml"
    check_override_types(launcher.compose(config_file, []), lines)
    config = launcher.compose(config_file, lines)
    actor = config.actor_rollout_ref.actor.profiler
    assert (config.global_profiler.tool, list(config.global_profiler.steps)) == ("torch", [2])
    assert actor.enable and list(actor.ranks) == [0] and list(actor.tool_config.torch.contents) == ["cuda"]
    assert (actor.tool_config.torch.schedule.skip_first, actor.tool_config.torch.schedule.active) == (2, 1)
    assert not config.actor_rollout_ref.rollout.profiler.enable  # vLLM's follows the actor's otherwise
    refused = subprocess.run(
        [sys.executable, str(SCRIPT), "overrides", "x", "--step", "0"], capture_output=True, text=True
    )
    assert refused.returncode == 2 and "count from 1" in refused.stderr


def test_each_kernel_goes_to_the_region_whose_operation_launched_it(mini_batch):
    kernels = update_profile.kernels_of(update_profile.read_events(mini_batch), update_profile.REGIONS)
    placed = sorted((k.start, k.kind, k.region) for k in kernels)
    assert placed == [
        (60, "attention", "decoder and the rest"),
        (90, "communication", "decoder and the rest"),
        (120, "matmul", "LM head and log-probs"),
        (300, "other kernels", "optimizer"),
        (420, "other kernels", "LM head and log-probs"),  # its backward, on the autograd thread
        (640, "copies", "decoder and the rest"),
    ]
    table = update_profile.kernel_table(kernels, update_profile.REGIONS)
    assert table.loc["LM head and log-probs", "all kinds"] == pytest.approx(60e-6)
    assert table.loc["all regions", "all kinds"] == pytest.approx(170e-6)  # 40 + 40 + 40 + 10 + 20 + 20
    assert table.loc["all regions", "communication"] == pytest.approx(40e-6)


def test_the_window_says_what_the_gpu_did_and_which_communication_was_exposed(mini_batch):
    kernels = update_profile.kernels_of(update_profile.read_events(mini_batch), update_profile.REGIONS)
    rows = {label: seconds for label, seconds, _ in update_profile.window_rows(kernels)}
    assert rows["window (first kernel to last)"] == pytest.approx(600e-6)  # 60 to 660
    assert rows["GPU busy (any kernel running)"] == pytest.approx(150e-6)  # 60-160, 300-310, 420-440, 640-660
    assert rows["GPU idle"] == pytest.approx(450e-6)
    assert rows["communication no other kernel overlaps"] == pytest.approx(20e-6)  # 100 to 120


def test_the_tables_print_with_a_region_of_ones_own(mini_batch, capsys):
    assert update_profile.main(["table", str(mini_batch), "--region", "attention call=flash"]) == 0
    out = capsys.readouterr().out
    assert "6 GPU activities" in out and "communication no other kernel overlaps" in out
    assert "attention call" in out and "LM head and log-probs" in out and "all regions" in out


def test_what_is_not_a_trace_of_gpu_kernels_is_refused_in_one_line(tmp_path, capsys):
    cpu_only = trace(tmp_path, [cpu_op("aten::mm", 0, 10)], "cpu.json.gz")
    plain = tmp_path / "plain.json"
    plain.write_text("not json")
    for path, words in [
        (cpu_only, "holds no GPU kernels"),
        (plain, "is not a chrome trace"),
        (tmp_path / "gone.json", "no trace"),
    ]:
        assert update_profile.main(["table", str(path)]) == 1
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert words in line, line
    with pytest.raises(SystemExit):
        update_profile.main(["table", str(cpu_only), "--region", "bad=("])
    assert "not a regular expression" in capsys.readouterr().err


def test_a_trace_torch_writes_is_read(tmp_path):
    """A real torch profiler trace (CPU only here): read, and refused for its lack of GPU kernels."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.ones(8, 8).matmul(torch.ones(8, 8))
    path = tmp_path / "torch.json"
    prof.export_chrome_trace(str(path))
    events = update_profile.read_events(path)
    assert any(event.get("cat") == "cpu_op" for event in events)
    assert update_profile.kernels_of(events, update_profile.REGIONS) == []
