"""`seal.trainer.logprobs`: the chunked log-probabilities equal verl's per-row fallback (values and gradients,
bf16 and fp32, across chunk borders); importing the module swaps them into verl's FSDP engine only where verl
has no cross-entropy kernel; and the RL actor's and reference's packed, unfused path
(`FSDPEngineWithLMHead.prepare_model_outputs`, run here on CPU) then computes its log-probs with them."""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest
import torch
from verl.utils import tensordict_utils as tu
from verl.utils import torch_functional
from verl.workers.engine.fsdp import transformer_impl

from seal.trainer import logprobs


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(logprobs, "CHUNK_ROWS", 7)  # 50 rows: six full chunks and a partial one


@pytest.fixture
def without_a_kernel(monkeypatch):
    """verl as on a GPU node without flash-attn (and off the NPU): the module swaps its function in."""
    monkeypatch.setattr(transformer_impl, "logprobs_from_logits", torch_functional.logprobs_from_logits)
    monkeypatch.setattr(torch_functional, "FLAH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE", False)
    monkeypatch.setattr(torch_functional, "NPU_CROSS_ENTROPY_LOSS_AVAILABLE", False)
    return importlib.reload(logprobs)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("shape", [(50,), (2, 25)])
def test_values_and_gradients_equal_verls_row_loop(small_chunks, dtype, shape):
    generator = torch.Generator().manual_seed(0)
    vocab = 97
    logits = (torch.randn(*shape, vocab, generator=generator) * 4).to(dtype)
    labels = torch.randint(0, vocab, shape, generator=generator)
    weights = torch.randn(shape, generator=generator)
    results = []
    for compute in (torch_functional.logprobs_from_logits_v2, logprobs.chunked_logprobs):
        leaf = logits.clone().requires_grad_(True)
        rows = leaf.reshape(-1, vocab) if compute is torch_functional.logprobs_from_logits_v2 else leaf
        values = compute(rows, labels.reshape(-1) if rows.dim() == 2 else labels).reshape(shape)
        (values.float() * weights).sum().backward()
        results.append((values.float(), leaf.grad.float()))
    (expected, expected_grad), (got, got_grad) = results
    assert got.shape == expected.shape and torch.isfinite(got).all()
    assert torch.equal(got, expected) if dtype == torch.bfloat16 else torch.allclose(got, expected, atol=1e-6)
    assert torch.allclose(got_grad, expected_grad, atol=1e-6, rtol=1e-3)


@pytest.mark.parametrize(
    ("flash", "npu", "swapped"), [(False, False, True), (True, False, False), (False, True, False)]
)
def test_import_swaps_the_engines_function_only_without_a_kernel(monkeypatch, flash, npu, swapped):
    original = torch_functional.logprobs_from_logits
    monkeypatch.setattr(transformer_impl, "logprobs_from_logits", original)
    monkeypatch.setattr(torch_functional, "FLAH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE", flash)
    monkeypatch.setattr(torch_functional, "NPU_CROSS_ENTROPY_LOSS_AVAILABLE", npu)
    module = importlib.reload(logprobs)
    assert (transformer_impl.logprobs_from_logits is module.chunked_logprobs) is swapped
    assert (transformer_impl.logprobs_from_logits is original) is not swapped
    assert torch_functional.logprobs_from_logits is original  # verl's own function is never changed


def unfused_packed_log_probs(
    logits: torch.Tensor, lengths: list[int], labels: torch.Tensor, entropy: bool
) -> dict:
    """verl's RL engine turning a packed micro-batch's logits into per-sample log-probs, as the actor and the
    reference do with `use_remove_padding=true` and `use_fused_kernels=false` (no Ulysses, temperature 1)."""
    engine = object.__new__(transformer_impl.FSDPEngineWithLMHead)
    engine.use_ulysses_sp = False
    engine.engine_config = SimpleNamespace(
        entropy_checkpointing=False, entropy_from_logits_with_chunking=False
    )
    engine.compute_entropy_from_logits = torch_functional.entropy_from_logits
    input_ids = tu.nested_tensor_from_tensor_list(
        [torch.zeros(length, dtype=torch.long) for length in lengths]
    )
    flags = {"use_remove_padding": True, "use_fused_kernels": False, "calculate_entropy": entropy}
    micro_batch = tu.get_tensordict({"input_ids": input_ids}, flags)
    output_args = {
        "input_ids_rmpad_rolled": labels,
        "temperature_rmpad": torch.ones(labels.shape[0]),
        "pad_size": 0,
        "temperature_is_one": True,
    }
    output = SimpleNamespace(logits=logits.unsqueeze(0))
    return engine.prepare_model_outputs(output, output_args, micro_batch, logits_processor_func=None)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("entropy", [False, True])
def test_the_rl_engines_unfused_packed_path_computes_its_log_probs_in_chunks(
    without_a_kernel, monkeypatch, dtype, entropy
):
    monkeypatch.setattr(without_a_kernel, "CHUNK_ROWS", 4)  # 11 tokens: two full chunks and a partial one
    assert transformer_impl.logprobs_from_logits is without_a_kernel.chunked_logprobs
    chunks = []
    naive = torch_functional.logprobs_from_logits_naive

    def counted(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        chunks.append(logits.shape[0])
        return naive(logits, labels)

    monkeypatch.setattr(torch_functional, "logprobs_from_logits_naive", counted)
    generator = torch.Generator().manual_seed(1)
    lengths, vocab = [6, 5], 53
    logits = (torch.randn(sum(lengths), vocab, generator=generator) * 4).to(dtype)
    labels = torch.randint(0, vocab, (sum(lengths),), generator=generator)
    weights = torch.randn(sum(lengths), generator=generator)
    leaf = logits.clone().requires_grad_(True)
    output = unfused_packed_log_probs(leaf, lengths, labels, entropy)
    got = output["log_probs"]
    assert ("entropy" in output) is entropy  # verl's entropy path (inplace_backward=False) beside it
    assert [len(sample) for sample in got.unbind()] == lengths
    (got.values().float() * weights).sum().backward()
    assert chunks == [4, 4, 3]  # verl's engine called the chunked function, not its row loop
    reference = logits.clone().requires_grad_(True)
    expected = torch_functional.logprobs_from_logits_v2(reference, labels)
    (expected.float() * weights).sum().backward()
    values, grads = (got.values().float(), expected.float()), (leaf.grad.float(), reference.grad.float())
    assert torch.equal(*values) if dtype == torch.bfloat16 else torch.allclose(*values, atol=1e-6)
    assert torch.allclose(*grads, atol=1e-6, rtol=1e-3)
