"""The memory arithmetic of seal/backbones/memory.py and benchmarks/memory_plan.py: FSDP's units, the pinned
allocator's rounding, where verl 0.9.1 keeps each copy, and the scenarios' verdicts."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

from seal.backbones.catalog import BACKBONES
from seal.backbones.memory import (
    GIB,
    Placement,
    activation_gib,
    fsdp_units,
    layer_activation_bytes,
    lora_parameters,
    pinned_gib,
    plan,
)
from tests.support.script_module import load_script

memory_plan = load_script("memory_plan")
QWEN3B = BACKBONES["qwen2.5-3b"].config


def test_a_3b_decoder_layer_is_a_308_mb_unit_that_pins_into_512_mib():
    units = fsdp_units(QWEN3B)
    assert (
        units[:-1] == [77_076_992] * 36 and units[-1] == 151_936 * 2048 + 2048
    )  # tied: one vocabulary matrix
    assert sum(units) == BACKBONES["qwen2.5-3b"].parameters
    assert pinned_gib([units[0] * 4], rounding=True) == 0.5
    assert pinned_gib([n * 4 for n in units], rounding=True) == (36 * 2**29 + 2**31) / GIB == 20.0
    assert round(pinned_gib([n * 4 for n in units], rounding=False), 2) == 11.50


def test_the_killed_run_holds_five_rounded_fp32_copies_on_the_host_and_the_recipe_two_smaller():
    offload_all = plan(QWEN3B, Placement(param_offload=True, optimizer_offload=True))
    assert offload_all.host_parts["pinned actor weights"] == 20.0
    assert offload_all.host_parts["pinned AdamW moments"] == 40.0
    assert offload_all.host_parts["pinned reference + grad buffer"] == 40.0
    assert offload_all.host_node_gib > offload_all.host_limit_gib and not offload_all.fits
    recipe = plan(QWEN3B, Placement(param_offload=True, ref_bytes=2))
    assert "pinned AdamW moments" not in recipe.host_parts and recipe.fits
    assert recipe.host_parts["pinned reference + grad buffer"] == 20.0
    assert recipe.generate_gib > offload_all.generate_gib  # the moments stay on the GPU while vLLM runs
    unrounded = plan(QWEN3B, Placement(param_offload=True, optimizer_offload=True, pinned_rounding=False))
    assert unrounded.fits  # without the rounding the killed run would have fitted


def test_offload_does_not_lower_the_update_phase_and_sharding_does():
    one = plan(QWEN3B, Placement())
    assert plan(QWEN3B, Placement(param_offload=True, optimizer_offload=True)).update_gib == one.update_gib
    four = plan(QWEN3B, Placement(gpus=4))
    assert four.parts["AdamW moments"] == one.parts["AdamW moments"] / 4


def test_lora_trains_a_small_share_and_has_no_reference_model():
    config = BACKBONES["qwen2.5-7b"].config
    assert lora_parameters(config, 64) == 64 * 28 * (
        2 * (3584 + 3584) + 2 * (3584 + 512) + 3 * (3584 + 18944)
    )
    full, lora = plan(config, Placement(ref_bytes=4)), plan(config, Placement(lora_rank=64))
    assert lora.parts["AdamW moments"] < full.parts["AdamW moments"] / 40
    assert "pinned reference + grad buffer" not in lora.host_parts


def test_the_scenarios_table_and_one_scenarios_terms(capsys):
    assert memory_plan.main(["--markdown"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert len(table) == 2 + len(memory_plan.SCENARIOS)
    cells = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[-3:-1]] for line in table[2:]}
    verdicts = {name: verdict for name, (verdict, _) in cells.items()}
    assert verdicts["3b-1gpu-offload-all"] == "no: host" and verdicts["3b-1gpu"] == "yes"
    assert verdicts["8b-1h200-full"] == "no: GPU" and verdicts["7b-1h100-lora"] == "no: host"
    assert verdicts["7b-1h200-lora-dummy"] == "no: host"  # Ray killed it
    assert verdicts["7b-1h200-lora"] == verdicts["8b-1h200-lora"] == "marginal: host"  # 113.2 of Ray's 119.6
    for scenario in memory_plan.SCENARIOS:  # each measured run beside its arithmetic, the rest "not run"
        assert cells[scenario.name][1] == (scenario.measured or "not run")
    assert cells["8b-4gpu"][1] == "not run" and cells["8b-1h200-lora"][1].startswith("88.0 / 83.1")
    assert verdicts["7b-4h200"] == verdicts["8b-4h200"] == "yes"  # both ran as shipped on 4 H200
    assert verdicts["1.5b-1h200"] == verdicts["1.5b-1gpu"] == "yes"  # a sitting's arm fits one H100 too
    assert memory_plan.main(["--parts", "3b-1gpu"]) == 0
    assert "exp/SEAL_3B_1gpu.yaml" in capsys.readouterr().out
    assert memory_plan.main(["--parts", "nope"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_lora_from_a_dummy_vllm_gathers_the_whole_model_on_the_host_at_the_first_sync():
    """The H200 run Ray killed: its actor went from 39.6 to 72.1 GiB resident at the first sync."""
    config = BACKBONES["qwen2.5-7b"].config
    dummy = plan(config, Placement(lora_rank=64, param_offload=True, lora_base_from_actor=True))
    safetensors = plan(config, Placement(lora_rank=64, param_offload=True))
    whole = (BACKBONES["qwen2.5-7b"].parameters + lora_parameters(config, 64)) * 4 / GIB
    assert dummy.host_parts["first sync: the whole model"] == whole and 28 < whole < 30
    assert dummy.host_node_gib - safetensors.host_node_gib == whole
    assert "first sync: the whole model" not in safetensors.host_parts


def test_start_up_holds_vllms_share_beside_the_actors_weights_whatever_is_offloaded():
    """Measured on an H200: 114.8 GiB while vLLM started beside the 7B LoRA actor's fp32 weights."""
    config = BACKBONES["qwen2.5-7b"].config
    budget = plan(config, Placement(gpu_gib=140.4, lora_rank=64, param_offload=True))
    assert 113 < budget.startup_gib < 116 and budget.gpu_peak_gib == budget.startup_gib
    assert budget.generate_gib < budget.startup_gib - 25  # offloaded once the first sync is done


def test_on_fsdp2_offloaded_weights_leave_the_gpu_before_vllm_starts_and_hold_more_host():
    """Measured on an H200 (7B LoRA on FSDP2): 1.9 GiB on the GPU before vLLM, peak 87.5; worker 59.0 GiB."""
    config = BACKBONES["qwen2.5-7b"].config
    fsdp1 = plan(config, Placement(gpu_gib=140.4, lora_rank=64, param_offload=True))
    fsdp2 = plan(config, Placement(gpu_gib=140.4, lora_rank=64, param_offload=True, fsdp2=True))
    assert fsdp1.startup_gib - fsdp2.startup_gib == fsdp1.parts["actor weights"]
    assert 84 < fsdp2.gpu_peak_gib < 88
    worker_without_vllm = fsdp2.host_worker_gib - fsdp2.host_parts["vLLM's weights while asleep"]
    assert 58 < worker_without_vllm < 60


def saved_bytes(config, layers: int, tokens: int) -> int:
    """What autograd saves for the backward of `layers` decoder layers, the weights left out."""
    config.num_hidden_layers = layers
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).train()
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def keep(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in weights:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    embeddings = model.model.embed_tokens(torch.randint(0, config.vocab_size, (1, tokens))).detach()
    with torch.autograd.graph.saved_tensors_hooks(keep, lambda tensor: tensor):
        model.model(inputs_embeds=embeddings)
    return sum(saved.values())


@pytest.mark.parametrize("config_class", [Qwen2Config, LlamaConfig])
def test_a_layers_activations_are_what_autograd_saves_for_it(config_class):
    """The bytes a token of one layer holds without gradient checkpointing, against autograd's own record."""
    config = config_class(
        hidden_size=64, intermediate_size=176, num_attention_heads=4, num_key_value_heads=2, vocab_size=128
    )
    config._attn_implementation = "sdpa"
    one_layer = (saved_bytes(config, 2, 48) - saved_bytes(config, 1, 48)) / 48
    assert one_layer == layer_activation_bytes(config.to_dict())


def test_the_update_without_checkpointing_keeps_every_layer_and_fits_an_h200_not_an_h100():
    config = BACKBONES["qwen2.5-7b"].config
    kept = activation_gib(config, 10240, backward=True, checkpointing=False)
    assert kept == 29 * 10240 * layer_activation_bytes(config) / GIB  # 28 layers and one at work
    assert kept > 5 * activation_gib(config, 10240, backward=True)  # checkpointing keeps layer inputs only
    verdicts = {
        s.name: memory_plan.verdict(plan(BACKBONES[s.backbone].config, s.placement))
        for s in memory_plan.SCENARIOS
    }
    assert verdicts["7b-4h200-tuned"] == verdicts["7b-4h200-nosync"] == "yes"
    assert (
        verdicts["7b-4h200-fast"] == verdicts["7b-4gpu-fast"] == "yes"
    )  # checkpointing on: an H100 holds it
    assert verdicts["7b-4gpu-tuned"] == "no: GPU"


def test_gradients_held_for_the_mini_batch_are_the_whole_unsharded_model_on_every_gpu():
    config = BACKBONES["qwen2.5-7b"].config
    every_micro_batch = replace(memory_plan.FOUR_H200, gradient_checkpointing=False, micro_batch_tokens=10240)
    once = plan(config, replace(every_micro_batch, sync_every_micro_batch=False))
    synced = plan(config, every_micro_batch)
    whole_fp32 = sum(fsdp_units(config)) * 4 / GIB
    assert once.update_gib - synced.update_gib == pytest.approx(whole_fp32, abs=0.01)  # 28.4 GiB at the 7B
    assert once.generate_gib == synced.generate_gib and once.host_node_gib == synced.host_node_gib
