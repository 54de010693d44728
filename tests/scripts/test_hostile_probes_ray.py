"""`benchmarks/hostile_probes.py` starts a Ray of its own for its Ray backend: another cluster on the machine,
or one that RAY_ADDRESS names, is never joined (the script once joined it and failed on `num_cpus`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.script_module import load_script

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.local_ray  # a Ray of its own, in the script's process
hostile = load_script("hostile_probes")
RUNNER = (
    "import sys\n"
    "from tests.support.script_module import load_script\n"
    "hostile = load_script('hostile_probes')\n"
    "stopped = [probe for probe in hostile.PROBES if probe.expect == 'stopped']\n"
    "hostile.PROBES = tuple(probe for probe in hostile.PROBES if probe not in stopped[1:])\n"
    "sys.exit(hostile.main(sys.argv[1:]))\n"
)
"""The script's `main` in a process of its own (as `python benchmarks/hostile_probes.py` runs it), on every
probe but three of the four MathAPI calls stopped at their deadline, each of which waits it out (1 s) in both
modes on both backends: one stands for them here, beside every other kind of answer; all four play on Ray
actors in tests/trainer/rl/test_hostile_calls.py."""


def test_the_ray_backend_runs_on_a_ray_of_its_own_whatever_ray_address_names(tmp_path):
    report = tmp_path / "probes.json"
    # what this checks is the Ray of its own and the answers; the 3 s bound is the benchmark's, on an idle
    # machine (CI's loaded cores made a stopped call's step take 3.5 s)
    argv = ["--backends", "ray", "--max-seconds", "60", "--json", str(report)]
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, *argv],
        cwd=ROOT,
        env={**os.environ, "RAY_ADDRESS": "127.0.0.1:1", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    outcomes = json.loads(report.read_text())
    stopped = [probe.name for probe in hostile.PROBES if probe.expect == "stopped"]
    assert len(outcomes["ray"]) == len(outcomes["inprocess"]) == 2 * (len(hostile.PROBES) - 3)
    assert {outcome["probe"] for outcome in outcomes["ray"]} & set(stopped) == {stopped[0]}
    assert [outcome["problem"] for outcome in outcomes["ray"]] == [""] * len(outcomes["ray"])
