"""`seal.attention`: `auto` with and without flash-attn and torch's varlen kernels (importability
monkeypatched), with and without LoRA, explicit values, contradictions, the verl keys a resolution writes and
the plan's line."""

from __future__ import annotations

import copy
import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

from seal.trainer.experiment import compose_experiment
from seal.trainer.launch.kernel import (
    LORA_CHUNKED,
    AttentionError,
    choose_attention,
    configure_attention,
)
from seal.trainer.launch.plan import attention_row
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
    """The verl keys a resolution writes, and the actor's, which follow the model's. verl 0.9.1's reference
    has no such keys: its engine takes the model's (verl/workers/engine_workers.py:114-115, :585)."""
    model, actor = config.actor_rollout_ref.model, config.actor_rollout_ref.actor
    assert (actor.use_remove_padding, actor.use_fused_kernels) == (
        model.use_remove_padding,
        model.use_fused_kernels,
    )
    return (
        model.override_config.attn_implementation,
        model.use_remove_padding,
        model.use_fused_kernels,
        model.external_lib,
        actor.use_remove_padding,
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
LORA_MODULES = ["seal.trainer.attention", "seal.trainer.logprobs"]


def test_auto_without_flash_attn_trains_lora_packed_without_fused_kernels(no_flash_attn, config):
    """verl's fused kernels fail on FSDP2's sharded lm_head, where LoRA trains: packed sequences on
    torch_varlen all the same, verl's log-prob loop chunked by a module every worker imports."""
    config.actor_rollout_ref.model.update(LORA)
    choice = configure_attention(config)
    assert (choice.kernel, choice.problem, choice.chunked_logprobs) == ("torch_varlen", None, True)
    assert "LoRA" in choice.reason and "fused" in choice.reason and "seal.trainer.logprobs" in choice.reason
    assert keys(config) == ("torch_varlen", True, False, LORA_MODULES, True)
    for module in config.actor_rollout_ref.model.external_lib:
        importlib.import_module(module)  # what verl's HFModelConfig does in every worker


def test_lora_keeps_flash_attention_2_and_takes_an_explicit_torch_varlen_as_auto_does(flash_attn, config):
    config.actor_rollout_ref.model.update(LORA)
    assert choose_attention(config).kernel == "flash_attention_2"
    config.seal.attention = "torch_varlen"
    choice = configure_attention(config)
    assert (choice.kernel, choice.problem, choice.reason) == (
        "torch_varlen",
        None,
        f"seal.attention=torch_varlen; {LORA_CHUNKED}",
    )
    assert keys(config) == ("torch_varlen", True, False, LORA_MODULES, True)


@pytest.mark.parametrize("lora", [False, True])
def test_the_plan_says_which_kernel_why_and_whether_fused_kernels_compute_the_log_probs(
    no_flash_attn, config, lora
):
    if lora:
        config.actor_rollout_ref.model.update(LORA)
    _, value, set_by = attention_row(config, configure_attention(config))
    assert value.startswith("torch_varlen (auto: no flash-attn") and "remove padding True" in value
    assert f"fused kernels {not lora}" in value and ("LoRA" in value) is lora
    assert ("seal.trainer.logprobs" in value) is lora and "external_lib" in set_by


def test_lora_pads_for_sdpa_only_where_torch_has_no_varlen_kernels(no_flash_attn, old_torch, config):
    config.actor_rollout_ref.model.update(LORA)
    choice = configure_attention(config)
    assert (choice.kernel, choice.chunked_logprobs) == ("sdpa", False)
    assert keys(config) == ("sdpa", False, False, "seal.trainer.logprobs", False)


def test_auto_on_a_torch_without_varlen_pads_for_sdpa(no_flash_attn, old_torch, config):
    choice = configure_attention(config)
    assert (choice.kernel, choice.problem) == ("sdpa", None)
    assert "2.10" in choice.reason
    assert keys(config) == ("sdpa", False, False, "seal.trainer.logprobs", False)  # verl's loop, chunked


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
    assert keys(config) == ("sdpa", False, False, "seal.trainer.logprobs", False)


@pytest.mark.parametrize("lora", [False, True])
def test_resolving_a_resolved_config_again_changes_nothing(no_flash_attn, config, lora):
    if lora:
        config.actor_rollout_ref.model.update(LORA)
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
    ("lora", "given", "written"),
    [
        (False, "my.lib", ["my.lib", "seal.trainer.attention"]),
        (False, ["a", "seal.trainer.attention"], ["a", "seal.trainer.attention"]),
        (True, "my.lib", ["my.lib", *LORA_MODULES]),
        (True, ["seal.trainer.logprobs", "a"], ["seal.trainer.logprobs", "a", "seal.trainer.attention"]),
    ],
)
def test_torch_varlen_joins_the_external_libs_already_named(no_flash_attn, config, lora, given, written):
    if lora:
        config.actor_rollout_ref.model.update(LORA)
    config.actor_rollout_ref.model.external_lib = given
    configure_attention(config)
    assert list(config.actor_rollout_ref.model.external_lib) == written


def test_an_unknown_setting_is_refused_by_the_schema_and_the_resolution(config):
    config.seal.attention = "flash"
    with pytest.raises(ValueError, match=r"seal\.attention must be one of"):
        settings_from_config(config)
    with pytest.raises(AttentionError, match=r"seal\.attention must be one of"):
        choose_attention(config)
