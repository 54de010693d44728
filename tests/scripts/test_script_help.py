"""Every shell script answers -h/--help with its usage and starts nothing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted([*ROOT.glob("scripts/*.sh"), *ROOT.glob("gpu/*.sh"), ROOT / "install.sh"])


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_prints_the_usage_and_runs_nothing(script, flag, tmp_path):
    record = tmp_path / "ran.txt"
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\necho "$@" >> {record}\n')
    python.chmod(0o755)
    env = {**os.environ, "PYTHON": str(python), "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(script), flag], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert script.name in done.stdout
    assert not done.stdout.startswith("#") and not record.exists()


def test_the_sourced_node_installer_returns_from_help_and_leaves_the_shell_as_it_was():
    shell = "source gpu/gpu_node_install.sh --help > /dev/null; echo $- ${PYTHONPATH:-unset}"
    done = subprocess.run(
        ["bash", "-c", shell], cwd=ROOT, env={**os.environ, "PYTHONPATH": ""}, capture_output=True, text=True
    )
    flags, pythonpath = done.stdout.split()
    assert "e" not in flags and "u" not in flags and pythonpath == "unset"


@pytest.mark.parametrize("script", ["gpu_smoke.sh", "gpu_eval_smoke.sh"])
def test_an_option_in_place_of_the_model_folder_is_refused(script, tmp_path):
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "ran.txt"}\n')
    python.chmod(0o755)
    done = subprocess.run(
        ["bash", str(ROOT / "gpu" / script), "--model"],
        env={**os.environ, "PYTHON": str(python)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "unknown option '--model'" in done.stderr
    assert not (tmp_path / "ran.txt").exists()
