"""Liger's kernels through verl's keys: which settings ask for them, the one-line refusal where liger-kernel
(or, for the log-probs' kernel, NVIDIA's CuTe DSL) does not import (importability monkeypatched), the
launcher's refusal before anything starts, and the plan."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from types import ModuleType

import pytest

import launcher
from seal.trainer.experiment import compose_experiment
from seal.trainer.launch.kernel import configure_attention
from seal.trainer.launch.liger import liger_problem, liger_uses
from seal.trainer.launch.plan import attention_row

ROOT = Path(__file__).resolve().parents[3]
SEAL = str(ROOT / "exp" / "SEAL.yaml")
USE_LIGER = "actor_rollout_ref.model.use_liger=true"
LIGER_BACKEND = "actor_rollout_ref.model.fused_kernel_options.impl_backend=liger"


@pytest.fixture(scope="module")
def composed():
    return compose_experiment(ROOT / "exp" / "SEAL.yaml")


@pytest.fixture
def config(composed, monkeypatch):
    """SEAL.yaml resolved on a machine without flash-attn: torch_varlen with verl's fused kernels."""
    monkeypatch.setitem(sys.modules, "flash_attn", None)
    config = copy.deepcopy(composed)
    configure_attention(config)
    return config


@pytest.fixture
def no_liger(monkeypatch):
    monkeypatch.setitem(sys.modules, "liger_kernel", None)


@pytest.fixture
def liger(monkeypatch):
    monkeypatch.setitem(sys.modules, "liger_kernel", ModuleType("liger_kernel"))


@pytest.fixture
def no_cute_dsl(liger, monkeypatch):
    monkeypatch.setitem(sys.modules, "cutlass", None)


@pytest.fixture
def cute_dsl(liger, monkeypatch):
    monkeypatch.setitem(sys.modules, "cutlass", ModuleType("cutlass"))


def test_the_shipped_config_takes_no_liger_kernel_and_needs_none(config, no_liger):
    assert liger_uses(config) == ()
    assert liger_problem(config) is None
    assert "Liger" not in attention_row(config, configure_attention(config))[1]


def test_each_switch_is_named_where_liger_kernel_does_not_import(config, no_liger):
    model = config.actor_rollout_ref.model
    model.use_liger = True
    assert liger_uses(config) == (USE_LIGER,)
    problem = liger_problem(config)
    assert problem.startswith(f"{USE_LIGER} needs liger-kernel, which does not import here")
    assert "liger-kernel==0.8.5" in problem and "\n" not in problem
    model.fused_kernel_options.impl_backend = "liger"
    assert liger_uses(config) == (USE_LIGER, LIGER_BACKEND)
    assert liger_problem(config).startswith(f"{USE_LIGER} and {LIGER_BACKEND} need liger-kernel")


def test_the_log_prob_backend_counts_only_where_verls_fused_kernels_run(config, no_liger):
    model = config.actor_rollout_ref.model
    model.fused_kernel_options.impl_backend = "liger"
    assert liger_uses(config) == (LIGER_BACKEND,)
    model.use_fused_kernels = False  # flash-attn's path: verl never reads the backend
    assert liger_uses(config) == () and liger_problem(config) is None


def test_where_liger_kernel_and_the_cute_dsl_import_nothing_is_refused_and_the_plan_says_what_runs(
    config, cute_dsl
):
    model = config.actor_rollout_ref.model
    model.use_liger = True
    model.fused_kernel_options.impl_backend = "liger"
    assert liger_problem(config) is None
    row = attention_row(config, configure_attention(config))[1]
    assert row.endswith(f"Liger's kernels: {USE_LIGER}, {LIGER_BACKEND}")


def test_the_log_prob_kernel_without_the_cute_dsl_is_refused_and_the_decoders_kernels_are_not(
    config, no_cute_dsl
):
    model = config.actor_rollout_ref.model
    model.use_liger = True
    assert liger_problem(config) is None
    model.fused_kernel_options.impl_backend = "liger"
    problem = liger_problem(config)
    assert problem.startswith(f"{LIGER_BACKEND} needs NVIDIA's CUTLASS Python DSL, which does not import")
    assert "liger-kernel[cutedsl]" in problem and "\n" not in problem


def test_a_gpu_launch_without_liger_kernel_is_refused_in_one_line_before_anything_starts(
    no_liger, capsys, tmp_path, monkeypatch
):
    import torch

    monkeypatch.setitem(sys.modules, "flash_attn", None)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.chdir(tmp_path)
    assert launcher.main(["--conf", SEAL, "--", USE_LIGER]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"launcher: {USE_LIGER} needs liger-kernel")
    assert list(tmp_path.iterdir()) == []


def test_the_gpu_installs_carry_the_release_the_refusal_names():
    from seal.trainer.launch.liger import LIGER_PIN

    assert LIGER_PIN in (ROOT / "install.sh").read_text()
    assert LIGER_PIN in (ROOT / "gpu" / "gpu_wheels.txt").read_text().splitlines()
