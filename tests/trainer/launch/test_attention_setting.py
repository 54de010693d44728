"""`seal.attention`: `auto` with and without flash-attn and torch's varlen kernels (importability
monkeypatched), explicit values, contradictions, and the verl keys a resolution writes."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from types import ModuleType

import pytest

from seal.trainer.experiment import compose_experiment
from seal.trainer.launch.kernel import (
    AttentionError,
    choose_attention,
    configure_attention,
)
from seal.trainer.settings import settings_from_config

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def composed():
    return compose_experiment(ROOT / "exp" / "SEAL.yaml")


@pytest.fixture
def config(composed):
    return copy.deepcopy(composed)


@pytest.fixture
def flash_attn(monkeypatch):
    monkeypatch.setitem(sys.modules, "flash_attn", ModuleType("flash_attn"))


@pytest.fixture
def no_flash_attn(monkeypatch):
    monkeypatch.setitem(sys.modules, "flash_attn", None)


@pytest.fixture
def old_torch(monkeypatch):
    """A torch before 2.10: no torch.nn.attention.varlen."""
    monkeypatch.setitem(sys.modules, "torch.nn.attention.varlen", None)


def keys(config) -> tuple:
    model = config.actor_rollout_ref.model
    return (
        model.override_config.attn_implementation,
        model.use_remove_padding,
        model.use_fused_kernels,
        model.external_lib,
        config.actor_rollout_ref.actor.use_remove_padding,
    )


def test_auto_takes_flash_attention_2_where_flash_attn_imports(flash_attn, config):
    choice = configure_attention(config)
    assert (choice.kernel, choice.problem) == ("flash_attention_2", None)
    assert keys(config) == ("flash_attention_2", True, False, None, True)


def test_auto_without_flash_attn_takes_torch_varlen_packed_with_fused_kernels(no_flash_attn, config):
    choice = configure_attention(config)
    assert (choice.kernel, choice.problem) == ("torch_varlen", None)
    assert "no flash-attn" in choice.reason and "varlen_attn" in choice.reason
    assert keys(config) == ("torch_varlen", True, True, "seal.trainer.attention", True)
    assert config.actor_rollout_ref.actor.use_fused_kernels  # the actor follows the model


LORA = {"lora_rank": 64, "lora_alpha": 128}


def test_auto_without_flash_attn_pads_for_sdpa_under_lora(no_flash_attn, config):
    """torch_varlen needs verl's fused kernels, which fail on FSDP2's sharded lm_head, where LoRA trains."""
    config.actor_rollout_ref.model.update(LORA)
    choice = configure_attention(config)
    assert (choice.kernel, choice.problem) == ("sdpa", None)
    assert "LoRA" in choice.reason and "fused" in choice.reason
    assert keys(config) == ("sdpa", False, False, None, False)


def test_lora_keeps_flash_attention_2_and_refuses_an_explicit_torch_varlen(flash_attn, config):
    config.actor_rollout_ref.model.update(LORA)
    assert choose_attention(config).kernel == "flash_attention_2"
    config.seal.attention = "torch_varlen"
    with pytest.raises(
        AttentionError, match=r"torch_varlen with actor_rollout_ref.model.lora_rank: .*allowed: sdpa"
    ):
        choose_attention(config)


def test_auto_on_a_torch_without_varlen_pads_for_sdpa(no_flash_attn, old_torch, config):
    choice = configure_attention(config)
    assert (choice.kernel, choice.problem) == ("sdpa", None)
    assert "2.10" in choice.reason
    assert keys(config) == ("sdpa", False, False, None, False)


@pytest.mark.parametrize(
    ("value", "words"),
    [("flash_attention_2", "flash-attn does not import"), ("torch_varlen", "needs torch 2.10 or later")],
)
def test_an_explicit_kernel_this_machine_lacks_is_a_problem_for_a_gpu_launch(
    no_flash_attn, old_torch, config, value, words
):
    config.seal.attention = value
    choice = configure_attention(config)
    assert choice.kernel == value and words in choice.problem and "\n" not in choice.problem


def test_explicit_sdpa_pads_even_where_faster_kernels_exist(flash_attn, config):
    config.seal.attention = "sdpa"
    assert configure_attention(config).reason == "seal.attention=sdpa"
    assert keys(config) == ("sdpa", False, False, None, False)


def test_resolving_a_resolved_config_again_changes_nothing(no_flash_attn, config):
    first = configure_attention(config)
    written = copy.deepcopy(config)
    assert configure_attention(config) == first and config == written


def test_an_attn_implementation_that_contradicts_the_setting_is_refused(no_flash_attn, config):
    config.actor_rollout_ref.model.override_config = {"attn_implementation": "sdpa"}
    with pytest.raises(AttentionError, match=r"contradicts seal\.attention=auto"):
        choose_attention(config)
    config.seal.attention = "sdpa"
    assert choose_attention(config).kernel == "sdpa"


def test_ulysses_sequence_parallelism_needs_flash_attn(no_flash_attn, config):
    config.actor_rollout_ref.actor.ulysses_sequence_parallel_size = 2
    with pytest.raises(AttentionError, match="no Ulysses sequence parallelism"):
        choose_attention(config)


@pytest.mark.parametrize(
    ("given", "written"),
    [("my.lib", ["my.lib", "seal.trainer.attention"]), (["a", "seal.trainer.attention"], None)],
)
def test_torch_varlen_joins_the_external_libs_already_named(no_flash_attn, config, given, written):
    config.actor_rollout_ref.model.external_lib = given
    configure_attention(config)
    assert list(config.actor_rollout_ref.model.external_lib) == (written or given)


def test_an_unknown_setting_is_refused_by_the_schema_and_the_resolution(config):
    config.seal.attention = "flash"
    with pytest.raises(ValueError, match=r"seal\.attention must be one of"):
        settings_from_config(config)
    with pytest.raises(AttentionError, match=r"seal\.attention must be one of"):
        choose_attention(config)
