"""benchmarks/fsdp_collectives_probe.py: FSDP's per-micro-batch collectives, tried on CPU processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from seal.env.process import free_port

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "benchmarks" / "fsdp_collectives_probe.py"


def probe(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": ""}
    command = [sys.executable, str(PROBE), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)


def test_the_probe_times_the_three_collectives_and_their_sum():
    done = probe("--cpu", "--gpus", "2", "--parameters", "4e5", "--repeats", "2", "--port", str(free_port()))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "400,000 parameters over 2 CPU processes, median of 2"
    rows = {line[:38].strip(): line[38:].split() for line in lines[2:]}
    gathers = [name for name in rows if name.startswith("all-gather")]
    assert len(gathers) == 2 and "reduce-scatter, fp32 gradients" in rows
    assert rows["reduce-scatter, fp32 gradients"][0] == f"{4e5 * 4 / (1 << 30):.1f}"
    parts = sum(
        float(values[1]) for name, values in rows.items() if name != "one micro-batch, without overlap"
    )
    assert abs(float(rows["one micro-batch, without overlap"][0]) - parts) < 0.002


def test_without_the_gpus_or_with_an_unknown_model_it_says_so_in_one_line():
    no_gpus = probe("--gpus", "4")
    assert no_gpus.returncode == 2 and no_gpus.stderr.strip().count("\n") == 0
    assert "4 GPUs asked, 0 here" in no_gpus.stderr
    unknown = probe("--backbone", "llama-9")
    assert unknown.returncode == 1 and "no backbone 'llama-9'" in unknown.stderr
    assert "Traceback" not in no_gpus.stderr + unknown.stderr
