"""`gpu/gpu_learning_run.sh` as a command line: the launches of each phase, in order (side by side where
they may be), and that every one composes (its overrides exist and fit their types). A stand-in `PYTHON`
records the commands, in a copy of the script whose project is a temporary folder; no GPU."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from seal.trainer.launch import command as launcher

ROOT = Path(__file__).resolve().parents[2]
SFT_MODEL = "/runs/learn_sft/huggingface"


def run_script(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    record = tmp_path / "commands.txt"
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nif [ "$1" = -c ]; then echo {SFT_MODEL}; else echo "$@" >> {record}; fi\n')
    python.chmod(0o755)
    script = tmp_path / "work" / "gpu" / "gpu_learning_run.sh"  # it works in its project: the copy's
    script.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "gpu" / "gpu_learning_run.sh", script)
    done = subprocess.run(
        ["bash", str(script), *args],
        env={**os.environ, "PYTHON": str(python)},
        capture_output=True,
        text=True,
    )
    lines = record.read_text().splitlines() if record.exists() else []
    return done, [line.split() for line in lines]


def overrides(command: list[str]) -> list[str]:
    return command[command.index("--") + 1 :]


def experiment_name(command: list[str]) -> str:
    return next(o for o in overrides(command) if "experiment_name" in o).split("=", 1)[1]


def test_all_phases_evaluate_clone_evaluate_train_both_and_report(tmp_path):
    done, commands = run_script(tmp_path, "/models/m", "all", "12", "data.seed=3")
    assert done.returncode == 0, done.stderr
    launches = {experiment_name(c): c for c in commands if c[0] == "launcher.py"}
    confs = {name: command[2] for name, command in launches.items()}
    assert confs == {
        "learn_base_eval": "exp/smoke_gpu.yaml",
        "learn_sft": "exp/sft_warmstart.yaml",
        "learn_sft_eval": "exp/smoke_gpu.yaml",
        "learn_seal": "exp/smoke_gpu.yaml",
        "learn_vanilla": "exp/smoke_gpu_vanilla.yaml",
    }
    base_eval, sft, sft_eval, seal, vanilla = (
        launches[f"learn_{name}"] for name in ("base_eval", "sft", "sft_eval", "seal", "vanilla")
    )
    assert "actor_rollout_ref.model.path=/models/m" in base_eval and "model.path=/models/m" in sft
    for command in (sft_eval, seal, vanilla):
        assert f"actor_rollout_ref.model.path={SFT_MODEL}" in command
    assert set(overrides(seal)) - {"trainer.experiment_name=learn_seal"} == set(overrides(vanilla)) - {
        "trainer.experiment_name=learn_vanilla"
    }
    assert "trainer.total_training_steps=12" in seal and "trainer.val_only=true" in sft_eval
    assert "trainer.val_before_train=false" in seal  # sft-eval is the RL runs' "before"
    shared = {"data.seed=3", "actor_rollout_ref.rollout.gpu_memory_utilization=0.2"}
    for command in (base_eval, sft_eval, seal, vanilla):  # the launches that share the GPU with others
        assert shared <= set(overrides(command))
    assert not shared & set(overrides(sft))
    for command in launches.values():  # every launch composes: its keys exist and its values fit
        launcher.compose(ROOT / command[2], overrides(command))
    names = [experiment_name(c) if c[0] == "launcher.py" else c[0] for c in commands]
    # the RL runs and the SFT's evaluation start once the SFT has ended; the base model's evaluation runs
    # beside all of them (its launch may be recorded after theirs on a loaded machine); the report comes last
    assert set(names[:5]) == {"learn_base_eval", "learn_sft", "learn_sft_eval", "learn_seal", "learn_vanilla"}
    assert all(names.index("learn_sft") < names.index(f"learn_{n}") for n in ("sft_eval", "seal", "vanilla"))
    assert names[5:] == ["scripts/step_table.py", *["scripts/stats_validation_bfcl.py"] * 2]
    assert {"phase sft done", "phase seal done"} <= set(done.stdout.splitlines())
    for phase in ("base_eval", "sft", "sft_eval", "seal", "vanilla"):
        assert (tmp_path / "work" / "experiments" / f"learn_{phase}.log").is_file()


def test_one_phase_runs_alone_with_the_configs_memory_share(tmp_path):
    done, commands = run_script(tmp_path, "/models/m", "seal", "5")
    assert done.returncode == 0, done.stderr
    (seal,) = commands
    assert experiment_name(seal) == "learn_seal" and "trainer.total_training_steps=5" in seal
    assert not any("gpu_memory_utilization" in o for o in overrides(seal))


def test_help_and_an_unknown_phase(tmp_path):
    done, commands = run_script(tmp_path, "--help")
    assert done.returncode == 0 and "PHASE" in done.stdout and commands == []
    done, commands = run_script(tmp_path, "/models/m", "ppo")
    assert done.returncode == 2 and "no phase 'ppo'" in done.stderr and commands == []
