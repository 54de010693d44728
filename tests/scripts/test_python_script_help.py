"""Every Python script, `launcher.py` and each `seal` command answer --help with their usage, and do so
without loading torch, transformers, verl or Ray (seconds of imports each): those come after the arguments."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted([*ROOT.glob("scripts/*.py"), *ROOT.glob("benchmarks/*.py"), ROOT / "launcher.py"])
SEAL_COMMANDS = ("serve", "eval", "replay", "diagnose", "data", "report", "train")
HEAVY = ("torch", "transformers", "verl", "ray", "tensordict", "vllm")
ANSWER = (
    "import json, runpy, sys\n"
    "code = None\n"
    "try:\n"
    "    {run}\n"
    "except SystemExit as exit:\n"
    "    code = exit.code\n"
    f"print(json.dumps([code, [m for m in {HEAVY!r} if m in sys.modules]]))\n"
)


def answer(run: str) -> tuple[subprocess.CompletedProcess[str], int | None, list[str]]:
    """`run` (a statement) in a fresh interpreter: its output, exit code and the heavy modules it loaded."""
    done = subprocess.run(
        [sys.executable, "-c", ANSWER.format(run=run)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    code, loaded = json.loads(done.stdout.splitlines()[-1])
    return done, code, loaded


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_a_script_answers_help_without_loading_the_training_stack(script):
    done, code, loaded = answer(
        f"sys.argv = [{str(script)!r}, '--help']; runpy.run_path({str(script)!r}, run_name='__main__')"
    )
    assert code in (0, None), done.stderr[-2000:]
    assert done.stdout.startswith("usage:") and "--help" in done.stdout
    assert loaded == []


@pytest.mark.parametrize("command", ["", *SEAL_COMMANDS])
def test_a_seal_command_answers_help_without_loading_the_training_stack(command):
    argv = [command, "--help"] if command else ["--help"]
    done, code, loaded = answer(f"from seal.cli import main; main({argv!r})")
    assert code == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"usage: seal {command}".rstrip())
    assert loaded == []
