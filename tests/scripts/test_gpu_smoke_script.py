"""`gpu/gpu_smoke.sh` as a command line: which experiment it launches and which run folder it reads.

A stand-in `PYTHON` records each command the script runs, so no launcher or GPU is involved.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_smoke(tmp_path: Path, *args: str, **variables: str) -> tuple[int, list[list[str]]]:
    record = tmp_path / "commands.txt"
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\necho "$@" >> {record}\n')
    python.chmod(0o755)
    env = {**os.environ, "PYTHON": str(python), **variables}
    done = subprocess.run(
        ["bash", str(ROOT / "gpu" / "gpu_smoke.sh"), *args], env=env, capture_output=True, text=True
    )
    lines = record.read_text().splitlines() if record.exists() else []
    return done.returncode, [line.split() for line in lines]


def test_one_gpu_runs_the_smoke_experiment_and_tables_its_folder(tmp_path):
    code, (launch, table) = run_smoke(tmp_path, "/models/m", "seal", "1", "trainer.total_training_steps=4")
    assert code == 0
    assert launch[:3] == ["launcher.py", "--conf", "exp/smoke_gpu.yaml"]
    assert {"actor_rollout_ref.model.path=/models/m", "trainer.n_gpus_per_node=1"} <= set(launch)
    assert "trainer.experiment_name=smoke_gpu" in launch and launch[-1] == "trainer.total_training_steps=4"
    assert table == ["scripts/step_table.py", "experiments/smoke_gpu"]


def test_two_gpus_get_their_own_run_so_no_one_gpu_checkpoint_is_resumed(tmp_path):
    code, (launch, table) = run_smoke(tmp_path, "/models/m", "vanilla", "2")
    assert code == 0
    assert "exp/smoke_gpu_vanilla.yaml" in launch and "trainer.n_gpus_per_node=2" in launch
    assert "trainer.experiment_name=smoke_gpu_vanilla_2gpu" in launch
    assert table == ["scripts/step_table.py", "experiments/smoke_gpu_vanilla_2gpu"]


def test_run_name_names_the_run_and_its_table(tmp_path):
    code, (launch, table) = run_smoke(
        tmp_path, "/models/m", "seal", "1", "seal.attention=sdpa", RUN_NAME="padded"
    )
    assert code == 0 and "trainer.experiment_name=padded" in launch and launch[-1] == "seal.attention=sdpa"
    assert table == ["scripts/step_table.py", "experiments/padded"]


@pytest.mark.parametrize(
    ("kind", "conf"),
    [("seal", "smoke_gpu"), ("vanilla", "smoke_gpu_vanilla"), ("paper-batch", "smoke_gpu_paper_batch")],
)
def test_each_run_kind_launches_its_experiment_file(tmp_path, kind, conf):
    code, (launch, table) = run_smoke(tmp_path, "/models/m", kind)
    assert code == 0 and launch[2] == f"exp/{conf}.yaml" and (ROOT / launch[2]).is_file()
    assert table == ["scripts/step_table.py", f"experiments/{conf}"]


def test_an_unknown_run_kind_is_refused_before_anything_starts(tmp_path):
    code, commands = run_smoke(tmp_path, "/models/m", "ppo")
    assert code == 2 and commands == []
