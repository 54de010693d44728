"""The public commands answer `--help` with the flags, defaults and texts they had."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from seal.cli import build_parser
from seal.trainer.experiment import PROJECT_ROOT
from tests.snapshots.snapshot import check

SCRIPTS = {"launcher": ["launcher.py"], "env_service": ["-m", "env_service"]}
SEAL_COMMANDS = ("serve", "eval", "replay", "diagnose", "data", "view")


@pytest.mark.parametrize("name", SCRIPTS)
def test_script_help_is_unchanged(name: str):
    done = subprocess.run(
        [sys.executable, *SCRIPTS[name], "--help"],
        cwd=PROJECT_ROOT,
        env={**os.environ, "COLUMNS": "100"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    check(f"help/{name}", done.stdout.splitlines())


def test_seal_help_is_unchanged(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COLUMNS", "100")
    check("help/seal", build_parser().format_help().splitlines())
    for name in SEAL_COMMANDS:
        parser = build_parser([name])
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
        check(f"help/seal_{name}", commands[name].format_help().splitlines())
