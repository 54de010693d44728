"""`scripts/gpu_learning_run.sh` as a command line: the launches of each phase, in order, and that every one
composes (its overrides exist and fit their types). A stand-in `PYTHON` records the commands; no GPU."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import launcher

ROOT = Path(__file__).resolve().parents[1]
SFT_MODEL = "/runs/learn_sft/huggingface"


def run_script(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    record = tmp_path / "commands.txt"
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nif [ "$1" = -c ]; then echo {SFT_MODEL}; else echo "$@" >> {record}; fi\n')
    python.chmod(0o755)
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_learning_run.sh"), *args],
        env={**os.environ, "PYTHON": str(python)},
        capture_output=True,
        text=True,
    )
    lines = record.read_text().splitlines() if record.exists() else []
    return done, [line.split() for line in lines]


def overrides(command: list[str]) -> list[str]:
    return command[command.index("--") + 1 :]


def test_all_phases_evaluate_clone_evaluate_train_both_and_report(tmp_path):
    done, commands = run_script(tmp_path, "/models/m", "all", "12")
    assert done.returncode == 0, done.stderr
    launches = [c for c in commands if c[0] == "launcher.py"]
    assert [(c[2], next(o for o in overrides(c) if "experiment_name" in o)) for c in launches] == [
        ("exp/smoke_gpu.yaml", "trainer.experiment_name=learn_base_eval"),
        ("exp/sft_warmstart.yaml", "trainer.experiment_name=learn_sft"),
        ("exp/smoke_gpu.yaml", "trainer.experiment_name=learn_sft_eval"),
        ("exp/smoke_gpu.yaml", "trainer.experiment_name=learn_seal"),
        ("exp/smoke_gpu_vanilla.yaml", "trainer.experiment_name=learn_vanilla"),
    ]
    base_eval, sft, sft_eval, seal, vanilla = launches
    assert "actor_rollout_ref.model.path=/models/m" in base_eval and "model.path=/models/m" in sft
    for command in (sft_eval, seal, vanilla):
        assert f"actor_rollout_ref.model.path={SFT_MODEL}" in command
    assert set(overrides(seal)) - {"trainer.experiment_name=learn_seal"} == set(overrides(vanilla)) - {
        "trainer.experiment_name=learn_vanilla"
    }
    assert "trainer.total_training_steps=12" in seal and "trainer.val_only=true" in sft_eval
    for command in launches:  # every launch composes: its keys exist and its values fit
        launcher.compose(ROOT / command[2], overrides(command))
    reports = [c[0] for c in commands if c[0] != "launcher.py"]
    assert reports == ["scripts/step_table.py", *["scripts/stats_validation_bfcl.py"] * 2]


def test_help_and_an_unknown_phase(tmp_path):
    done, commands = run_script(tmp_path, "--help")
    assert done.returncode == 0 and "PHASE" in done.stdout and commands == []
    done, commands = run_script(tmp_path, "/models/m", "ppo")
    assert done.returncode == 2 and "no phase 'ppo'" in done.stderr and commands == []
