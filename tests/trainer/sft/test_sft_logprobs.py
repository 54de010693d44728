"""`seal.trainer.sft.logprobs`: the chunked log-probabilities equal verl's per-row fallback (values and
gradients, bf16 and fp32, across chunk borders), and importing the module swaps them into verl's FSDP engine
only where verl has no cross-entropy kernel."""

from __future__ import annotations

import importlib

import pytest
import torch
from verl.utils import torch_functional
from verl.workers.engine.fsdp import transformer_impl

from seal.trainer.sft import logprobs as sft_logprobs


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(sft_logprobs, "CHUNK_ROWS", 7)  # 50 rows: six full chunks and a partial one


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("shape", [(50,), (2, 25)])
def test_values_and_gradients_equal_verls_row_loop(small_chunks, dtype, shape):
    generator = torch.Generator().manual_seed(0)
    vocab = 97
    logits = (torch.randn(*shape, vocab, generator=generator) * 4).to(dtype)
    labels = torch.randint(0, vocab, shape, generator=generator)
    weights = torch.randn(shape, generator=generator)
    results = []
    for compute in (torch_functional.logprobs_from_logits_v2, sft_logprobs.chunked_logprobs):
        leaf = logits.clone().requires_grad_(True)
        rows = leaf.reshape(-1, vocab) if compute is torch_functional.logprobs_from_logits_v2 else leaf
        values = compute(rows, labels.reshape(-1) if rows.dim() == 2 else labels).reshape(shape)
        (values.float() * weights).sum().backward()
        results.append((values.float(), leaf.grad.float()))
    (expected, expected_grad), (got, got_grad) = results
    assert got.shape == expected.shape and torch.isfinite(got).all()
    assert torch.equal(got, expected) if dtype == torch.bfloat16 else torch.allclose(got, expected, atol=1e-6)
    assert torch.allclose(got_grad, expected_grad, atol=1e-6, rtol=1e-3)


@pytest.mark.parametrize(("flash", "swapped"), [(False, True), (True, False)])
def test_import_swaps_the_engines_function_only_without_a_kernel(monkeypatch, flash, swapped):
    original = torch_functional.logprobs_from_logits
    monkeypatch.setattr(transformer_impl, "logprobs_from_logits", original)
    monkeypatch.setattr(torch_functional, "FLAH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE", flash)
    monkeypatch.setattr(torch_functional, "NPU_CROSS_ENTROPY_LOSS_AVAILABLE", False)
    module = importlib.reload(sft_logprobs)
    assert (transformer_impl.logprobs_from_logits is module.chunked_logprobs) is swapped
    assert (transformer_impl.logprobs_from_logits is original) is not swapped
