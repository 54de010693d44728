"""`torch_varlen` on CPU, torch's CUDA-only kernel swapped for an exact per-sequence SDPA stand-in
(tests/varlen_reference.py, one per torch signature): packed batches through verl's model config and monkey
patch give the per-sequence log-probs and gradients; padded, plain and `cu_seq_lens` batches give the
per-sequence logits; what it cannot compute is refused in one line."""

from __future__ import annotations

import copy
import sys
from types import SimpleNamespace

import pytest
import torch
import torch.nn.attention.varlen
import transformers.integrations.flash_attention
from transformers import AttentionInterface, AutoConfig, AutoModelForCausalLM, LlamaConfig, Qwen2Config
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

import seal.trainer.attention as attention
from seal.trainer.attention import NAME, UnsupportedAttention, torch_varlen_attention
from tests.support.doubles import build_chatml_model_folder
from tests.support.varlen_reference import SIGNATURES

LENGTHS = [7, 12, 1, 9]
SMALL = {
    "vocab_size": 101,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
}


def packed(
    lengths: list[int], vocab: int, seed: int = 0
) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
    """Random sequences, and them packed as verl sends them: (1, T) ids, positions restarting at 0."""
    generator = torch.Generator().manual_seed(seed)
    sequences = [torch.randint(0, vocab, (length,), generator=generator) for length in lengths]
    positions = torch.cat([torch.arange(length) for length in lengths])
    return sequences, {"input_ids": torch.cat(sequences)[None], "position_ids": positions[None]}


def model_pair(config, seed: int = 0):
    """The same weights twice: on torch_varlen and on sdpa."""
    torch.manual_seed(seed)
    reference = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").eval()
    varlen = copy.deepcopy(reference)
    varlen.set_attn_implementation(NAME)
    return varlen, reference


def per_sequence_logits(model, sequences: list[torch.Tensor]) -> list[torch.Tensor]:
    return [model(input_ids=sequence[None]).logits[0] for sequence in sequences]


@pytest.fixture(params=sorted(SIGNATURES))
def kernel(request, monkeypatch):
    """The stand-in of one torch version's varlen_attn."""
    monkeypatch.setattr(attention, "varlen_attn", SIGNATURES[request.param])
    return request.param


# -- through verl -------------------------------------------------------------------------------------
@pytest.fixture
def verl_loads_the_module(monkeypatch):
    """A process where the module was never imported, with torch's kernel swapped before verl imports it."""
    monkeypatch.setattr(torch.nn.attention.varlen, "varlen_attn", SIGNATURES["2.13"])
    monkeypatch.delitem(sys.modules, "seal.trainer.attention")
    monkeypatch.delitem(AttentionInterface._global_mapping, NAME)
    monkeypatch.delitem(ALL_MASK_ATTENTION_FUNCTIONS._global_mapping, NAME)


def test_packed_log_probs_and_grads_through_verl_equal_per_sequence_ones(
    verl_loads_the_module, monkeypatch, tmp_path
):
    from verl.models.transformers.monkey_patch import apply_monkey_patch
    from verl.utils.model import get_hf_auto_model_class
    from verl.workers.config import HFModelConfig

    folder = build_chatml_model_folder(tmp_path / "model", ["call ls then cd into the folder"] * 4, 300)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder)).save_pretrained(folder)
    config = HFModelConfig(
        path=str(folder),
        external_lib="seal.trainer.attention",
        override_config={"attn_implementation": NAME},
        use_remove_padding=True,
        use_fused_kernels=True,
    )
    assert NAME in AttentionInterface._global_mapping and NAME in ALL_MASK_ATTENTION_FUNCTIONS._global_mapping
    model = get_hf_auto_model_class(config.hf_config).from_pretrained(
        config.local_path, dtype=torch.float32, config=config.hf_config
    )
    reference = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="sdpa")
    assert model.config._attn_implementation == NAME
    # verl patches the class and transformers' flash module: undone after the test
    monkeypatch.setattr(type(model), "forward", type(model).forward)
    flash = transformers.integrations.flash_attention
    monkeypatch.setattr(flash, "_flash_attention_forward", flash._flash_attention_forward)
    apply_monkey_patch(model, use_remove_padding=True, use_fused_kernels=True, fused_kernels_backend="torch")
    for one in (model, reference):
        one.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        one.train()

    sequences, inputs = packed(LENGTHS, model.config.vocab_size)
    out = model(**inputs, attention_mask=None, return_dict=True)
    # the last token of each sequence predicts the next sequence's first token: not compared
    kept = torch.cat([torch.arange(length) < length - 1 for length in LENGTHS])
    packed_log_probs = out.log_probs[0][kept]
    alone = [reference(input_ids=s[None], return_dict=True).log_probs[0][:-1] for s in sequences]
    torch.testing.assert_close(packed_log_probs, torch.cat(alone), rtol=1e-5, atol=1e-5)

    packed_log_probs.sum().backward()
    sum(part.sum() for part in alone).backward()
    for (name, param), twin in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(param.grad, twin.grad, rtol=1e-4, atol=1e-5, msg=name)


# -- the other layouts --------------------------------------------------------------------------------
@pytest.mark.parametrize("config_class", [Qwen2Config, LlamaConfig])
def test_a_packed_row_gives_each_sequence_its_own_logits(kernel, config_class):
    varlen, reference = model_pair(config_class(**SMALL))
    sequences, inputs = packed(LENGTHS, SMALL["vocab_size"])
    with torch.no_grad():
        logits = varlen(**inputs).logits[0]
        alone = per_sequence_logits(reference, sequences)
    torch.testing.assert_close(logits, torch.cat(alone), rtol=1e-5, atol=1e-5)


def test_a_padded_batch_with_a_2d_mask_drops_the_padding(kernel):
    varlen, reference = model_pair(Qwen2Config(**SMALL))
    sequences, _ = packed([5, 9, 3], SMALL["vocab_size"])
    width = 11
    ids = torch.zeros(3, width, dtype=torch.long)
    mask = torch.zeros(3, width, dtype=torch.long)
    spans = [(0, 5), (2, 11), (4, 7)]  # right-, left- and both-side padding
    for row, ((start, end), sequence) in enumerate(zip(spans, sequences, strict=True)):
        ids[row, start:end], mask[row, start:end] = sequence, 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        logits = varlen(input_ids=ids, attention_mask=mask, position_ids=positions).logits
        alone = per_sequence_logits(reference, sequences)
    for row, (start, end) in enumerate(spans):
        torch.testing.assert_close(logits[row, start:end], alone[row], rtol=1e-5, atol=1e-5)


def test_a_plain_batch_is_one_sequence_per_row(kernel):
    varlen, reference = model_pair(Qwen2Config(**SMALL))
    ids = torch.randint(0, SMALL["vocab_size"], (3, 8), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(varlen(input_ids=ids).logits, reference(input_ids=ids).logits)


def test_cu_seq_lens_keyword_arguments_mark_the_sequences(kernel):
    varlen, reference = model_pair(Qwen2Config(**SMALL))
    sequences, inputs = packed(LENGTHS, SMALL["vocab_size"])
    cu = torch.tensor([0, *torch.tensor(LENGTHS).cumsum(0).tolist()], dtype=torch.int32)
    longest = max(LENGTHS)
    with torch.no_grad():
        logits = varlen(
            input_ids=inputs["input_ids"],
            cu_seq_lens_q=cu,
            cu_seq_lens_k=cu,
            max_length_q=longest,
            max_length_k=longest,
        ).logits[0]
        alone = per_sequence_logits(reference, sequences)
    torch.testing.assert_close(logits, torch.cat(alone), rtol=1e-4, atol=1e-5)  # positions run on: RoPE shift


@pytest.mark.parametrize("version", ["2.11", "2.13"])
def test_a_sliding_window_is_the_window_sdpa_masks(monkeypatch, version):
    monkeypatch.setattr(attention, "varlen_attn", SIGNATURES[version])
    config = Qwen2Config(**SMALL, use_sliding_window=True, sliding_window=3, max_window_layers=0)
    varlen, reference = model_pair(config)
    sequences, inputs = packed(LENGTHS, SMALL["vocab_size"])
    with torch.no_grad():
        logits = varlen(**inputs).logits[0]
        alone = per_sequence_logits(reference, sequences)
        full = per_sequence_logits(model_pair(Qwen2Config(**SMALL))[1], sequences)
    torch.testing.assert_close(logits, torch.cat(alone), rtol=1e-5, atol=1e-5)
    assert not torch.allclose(torch.cat(alone), torch.cat(full), atol=1e-3)  # the window did cut something


# -- refusals -----------------------------------------------------------------------------------------
CAUSAL = SimpleNamespace(is_causal=True)


def qkv(query_length: int = 6, key_length: int = 6) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (
        torch.randn(1, 4, query_length, 8),
        torch.randn(1, 2, key_length, 8),
        torch.randn(1, 2, key_length, 8),
    )


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"kv": (1, 7)}, "KV cache"),
        ({"dropout": 0.1}, "dropout"),
        ({"softcap": 50.0}, "softcap"),
        ({"is_causal": False}, "causal attention only"),
        ({"attention_mask": torch.ones(1, 1, 6, 6, dtype=torch.bool)}, "not a 4-D mask"),
        ({"position_ids": torch.zeros(3, 1, 6, dtype=torch.long)}, "2-D position_ids"),
    ],
)
def test_what_it_cannot_compute_is_refused_in_one_line(kernel, change, words):
    change = dict(change)
    query, key, value = qkv(*change.pop("kv", (6, 6)))
    arguments = {"attention_mask": None, **change}
    with pytest.raises(UnsupportedAttention) as refused:
        torch_varlen_attention(CAUSAL, query, key, value, **arguments)
    assert words in str(refused.value) and "\n" not in str(refused.value)


def test_ulysses_sequence_parallelism_is_refused(kernel, monkeypatch):
    import verl.utils.ulysses

    monkeypatch.setattr(verl.utils.ulysses, "get_ulysses_sequence_parallel_world_size", lambda: 2)
    with pytest.raises(UnsupportedAttention, match="no Ulysses sequence parallelism"):
        torch_varlen_attention(CAUSAL, *qkv(), None)


@pytest.mark.parametrize(
    ("change", "words"),
    [({"sliding_window": 3}, "no sliding window"), ({"scaling": 0.5}, "no scale argument")],
)
def test_torch_2_10_refuses_what_its_varlen_attn_cannot_take(monkeypatch, change, words):
    monkeypatch.setattr(attention, "varlen_attn", SIGNATURES["2.10"])
    with pytest.raises(UnsupportedAttention, match=words):
        torch_varlen_attention(CAUSAL, *qkv(), None, **change)


# -- the packed rows' sequences, found once per tensor ------------------------------------------------
@pytest.fixture
def lookups(monkeypatch) -> list[torch.Tensor]:
    """The position tensors whose sequences were looked for on the device, in order."""
    seen: list[torch.Tensor] = []
    original = attention._sequence_starts

    def counted(position_ids, batch, length, device):
        seen.append(position_ids)
        return original(position_ids, batch, length, device)

    monkeypatch.setattr(attention, "_sequence_starts", counted)
    monkeypatch.setattr(attention, "_PACKED_ROWS", attention.PackedRows())
    return seen


def test_a_forward_pass_finds_its_sequences_once_for_all_its_layers(kernel, lookups):
    varlen, reference = model_pair(Qwen2Config(**{**SMALL, "num_hidden_layers": 3}))
    sequences, inputs = packed(LENGTHS, SMALL["vocab_size"])
    other_sequences, other = packed([4, 10, 6, 9], SMALL["vocab_size"], seed=2)  # the same shape, (1, 29)
    with torch.no_grad():
        logits = varlen(**inputs).logits[0]
        other_logits = varlen(**other).logits[0]  # a new tensor of the same shape is looked at again
        alone = per_sequence_logits(reference, sequences)
        other_alone = per_sequence_logits(reference, other_sequences)
    assert [id(found) for found in lookups] == [id(inputs["position_ids"]), id(other["position_ids"])]
    torch.testing.assert_close(logits, torch.cat(alone), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(other_logits, torch.cat(other_alone), rtol=1e-5, atol=1e-5)


def test_positions_changed_in_place_or_made_in_inference_mode_are_looked_at_again(kernel, lookups):
    varlen, reference = model_pair(Qwen2Config(**SMALL))
    _, inputs = packed(LENGTHS, SMALL["vocab_size"])
    with torch.no_grad():
        varlen(**inputs)
        inputs["position_ids"].copy_(torch.arange(sum(LENGTHS))[None])  # now one sequence of them all
        logits = varlen(**inputs).logits[0]
        whole = reference(input_ids=inputs["input_ids"]).logits[0]
    assert len(lookups) == 2
    torch.testing.assert_close(logits, whole, rtol=1e-5, atol=1e-5)
    with torch.inference_mode():
        positions = torch.cat([torch.arange(length) for length in LENGTHS])[None]
        varlen(input_ids=inputs["input_ids"], position_ids=positions)
    assert len(lookups) == 2 + SMALL["num_hidden_layers"]  # an inference tensor keeps no version: every layer


def test_the_recomputed_forward_of_gradient_checkpointing_reuses_them(kernel, lookups):
    varlen, _ = model_pair(Qwen2Config(**SMALL))
    varlen.train()
    varlen.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    _, inputs = packed(LENGTHS, SMALL["vocab_size"])
    varlen(**inputs).logits.sum().backward()  # every layer runs its forward twice
    assert len(lookups) == 1
