"""Exact CPU stand-ins for torch's `varlen_attn` (a CUDA-only kernel), one per torch signature.

Each runs SDPA on every sequence of the packed batch alone, honours the window and scale it is given,
and refuses what the real kernel refuses (GQA without `enable_gqa` in 2.13+, a `max_q` shorter than a
sequence), so a test that swaps one in checks both the arguments `seal.trainer.attention` passes and
the attention it computes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def per_sequence_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    cu_seq: torch.Tensor,
    max_len: int,
    scale: float | None,
    window_size: tuple[int, int],
) -> torch.Tensor:
    """(T, Hq, D) attention of each sequence in `cu_seq` over itself; window (left, right), -1 unbounded."""
    assert cu_seq.dtype == torch.int32 and int(cu_seq[-1]) == query.shape[0]
    assert int(cu_seq.diff().max()) <= max_len
    left, right = window_size
    out = torch.empty_like(query)
    for start, end in zip(cu_seq[:-1].tolist(), cu_seq[1:].tolist(), strict=True):
        positions = torch.arange(end - start)
        offset = positions[None, :] - positions[:, None]  # key index minus query index
        allowed = torch.ones(end - start, end - start, dtype=torch.bool)
        if right >= 0:
            allowed &= offset <= right
        if left >= 0:
            allowed &= offset >= -left
        q, k, v = (x[start:end].transpose(0, 1) for x in (query, key, value))
        attended = F.scaled_dot_product_attention(
            q, k, v, attn_mask=allowed, scale=scale, enable_gqa=q.shape[0] != k.shape[0]
        )
        out[start:end] = attended.transpose(0, 1)
    return out


def varlen_attn_2_10(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, is_causal=False, return_aux=None):
    assert torch.equal(cu_seq_q, cu_seq_k) and max_q == max_k
    return per_sequence_attention(
        query, key, value, cu_seq_q, max_q, None, (-1, 0) if is_causal else (-1, -1)
    )


def varlen_attn_2_11(
    query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, return_aux=None, scale=None, window_size=(-1, -1)
):
    assert torch.equal(cu_seq_q, cu_seq_k) and max_q == max_k
    return per_sequence_attention(query, key, value, cu_seq_q, max_q, scale, tuple(window_size))


def varlen_attn_2_13(
    query,
    key,
    value,
    cu_seq_q,
    cu_seq_k,
    max_q,
    max_k,
    *,
    return_aux=None,
    scale=None,
    window_size=(-1, -1),
    enable_gqa=False,
    seqused_k=None,
    block_table=None,
    num_splits=None,
):
    if not enable_gqa and query.shape[1] != key.shape[1]:
        raise ValueError("Expect query and key/value to have the same number of heads; set enable_gqa=True")
    return varlen_attn_2_11(
        query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, scale=scale, window_size=window_size
    )


SIGNATURES = {"2.10": varlen_attn_2_10, "2.11": varlen_attn_2_11, "2.13": varlen_attn_2_13}
