"""`torch_varlen`: packed-sequence attention for training on torch's own FlashAttention-2 kernels.

torch 2.10+ ships FlashAttention-2 (forward and backward) behind `torch.nn.attention.varlen.varlen_attn`,
so a GPU node needs no flash-attn build to train on packed sequences. Importing this module registers the
implementation with transformers' `AttentionInterface` and its mask interface under `NAME`; verl's
`HFModelConfig` imports `actor_rollout_ref.model.external_lib` in every worker before it loads the model,
so `external_lib=seal.trainer.attention` with `override_config.attn_implementation=torch_varlen` selects it
(`seal.trainer.launch.kernel` writes those keys). It serves:

- packed input, `(1, T)` ids with `position_ids` restarting at 0 for each sequence (verl's
  `use_remove_padding=true`), or transformers' `cu_seq_lens_q` keyword arguments;
- padded batches with a 2-D padding mask (the padding tokens are dropped before the kernel);
- plain batches, one sequence per row.

Anything else (a KV cache, dropout, softcap, non-causal attention, 4-D masks, Ulysses sequence parallelism)
is refused with one line. torch's FA4 reroute is never activated: its backward rejects the window
argument that `varlen_attn` always passes.
"""

from __future__ import annotations

import functools
import inspect
import math
import sys
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch.nn.attention.varlen import varlen_attn
from transformers import AttentionInterface
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

from seal.trainer.launch.kernel import TORCH_VARLEN

NAME = TORCH_VARLEN
"""The implementation's name for `attn_implementation`: no "flash", "sdpa" or "/" in it, so transformers
routes it to no kernel hub and applies no other implementation's checks."""


class UnsupportedAttention(ValueError):
    """A call `torch_varlen` cannot compute; the message says what and what to use instead."""


def torch_varlen_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention signature: `query` (B, Hq, S, D), `key`/`value` (B, Hkv, S, D); returns the
    output as (B, S, Hq, D) and no attention weights."""
    _refuse_unsupported(module, query, key, attention_mask, dropout, softcap, is_causal)
    batch, heads, length, head_dim = query.shape
    tokens = batch * length
    q, k, v = (x.transpose(1, 2).reshape(tokens, x.shape[1], head_dim) for x in (query, key, value))
    if attention_mask is not None:
        kept = attention_mask.reshape(-1).bool().nonzero().squeeze(-1)
        cu_seqlens = _cu_seqlens(attention_mask.bool().sum(-1))
        cu_seqlens, longest = _with_longest(cu_seqlens)
        out = _causal_varlen(q[kept], k[kept], v[kept], cu_seqlens, longest, scaling, sliding_window)
        padded = out.new_zeros(tokens, heads, head_dim)
        padded[kept] = out
        return padded.view(batch, length, heads, head_dim), None
    cu_seqlens = _given_cu_seqlens(kwargs, tokens)
    if cu_seqlens is None:
        cu_seqlens, longest = _PACKED_ROWS.sequences(kwargs.get("position_ids"), batch, length, query.device)
    else:
        cu_seqlens, longest = _with_longest(cu_seqlens)
    out = _causal_varlen(q, k, v, cu_seqlens, longest, scaling, sliding_window)
    return out.view(batch, length, heads, head_dim), None


def _refuse_unsupported(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float,
    softcap: float | None,
    is_causal: bool | None,
) -> None:
    if key.shape[2] != query.shape[2]:
        raise UnsupportedAttention(
            f"{NAME} is for training: {query.shape[2]} queries against {key.shape[2]} keys means a KV cache "
            "(generate with sdpa, or with vLLM as training does)"
        )
    if dropout:
        raise UnsupportedAttention(
            f"{NAME} has no attention dropout (got {dropout}); set attention_dropout=0"
        )
    if softcap is not None:
        raise UnsupportedAttention(f"{NAME} has no logit softcap (got {softcap}); use sdpa or eager")
    if not (module.is_causal if is_causal is None else is_causal):
        raise UnsupportedAttention(
            f"{NAME} computes causal attention only; use sdpa for a bidirectional model"
        )
    if attention_mask is not None and attention_mask.dim() != 2:
        raise UnsupportedAttention(
            f"{NAME} takes a 2-D padding mask or packed position_ids, not a {attention_mask.dim()}-D mask"
        )
    if _ulysses_world_size() > 1:
        raise UnsupportedAttention(
            f"{NAME} has no Ulysses sequence parallelism: set ulysses_sequence_parallel_size=1 "
            "(or use flash_attention_2)"
        )


def _ulysses_world_size() -> int:
    """verl's Ulysses group size when verl set one up in this process, else 1 (verl is not needed here)."""
    ulysses = sys.modules.get("verl.utils.ulysses")
    return 1 if ulysses is None else ulysses.get_ulysses_sequence_parallel_world_size()


def _cu_seqlens(lengths: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.pad(lengths.cumsum(0, dtype=torch.int32), (1, 0))


def _given_cu_seqlens(kwargs: dict[str, Any], tokens: int) -> torch.Tensor | None:
    """transformers' `cu_seq_lens_q`/`_k` keyword arguments (a flattening data collator passes them)."""
    cu_q, cu_k = kwargs.get("cu_seq_lens_q"), kwargs.get("cu_seq_lens_k")
    if cu_q is None:
        return None
    if cu_k is not None and not torch.equal(cu_q, cu_k):
        raise UnsupportedAttention(
            f"{NAME} needs the same sequences for queries and keys (cu_seq_lens_q != _k)"
        )
    if int(cu_q[-1]) != tokens:
        raise UnsupportedAttention(
            f"cu_seq_lens_q ends at {int(cu_q[-1])} but the batch holds {tokens} tokens"
        )
    return cu_q.to(torch.int32)


class PackedRows:
    """The sequences of the last packed rows seen: every decoder layer of a forward pass (and its
    recomputation under gradient checkpointing) gets the same `position_ids` tensor, and finding its
    sequences costs two waits for the GPU (`nonzero` and the longest length), so they are found once per
    tensor, not once per layer. A different tensor, or the same one changed in place, is looked at again."""

    def __init__(self) -> None:
        self._tensor: weakref.ref[torch.Tensor] | None = None
        self._key: tuple[int, int, int] | None = None
        self._found: tuple[torch.Tensor, int] | None = None

    def sequences(
        self, position_ids: torch.Tensor | None, batch: int, length: int, device: torch.device
    ) -> tuple[torch.Tensor, int]:
        """Cumulative sequence lengths over the flattened batch, and the longest sequence's length."""
        if position_ids is None:  # one sequence a row: nothing to look at on the GPU
            ends = torch.arange(0, (batch + 1) * length, length, dtype=torch.int32, device=device)
            return ends, length
        if position_ids.is_inference():  # no version counter to tell an in-place change: never kept
            return _with_longest(_sequence_starts(position_ids, batch, length, device))
        key = (batch, length, position_ids._version)
        if self._tensor is not None and self._tensor() is position_ids and self._key == key:
            return self._found
        found = _with_longest(_sequence_starts(position_ids, batch, length, device))
        self._tensor, self._key, self._found = weakref.ref(position_ids), key, found
        return found


_PACKED_ROWS = PackedRows()


def _sequence_starts(
    position_ids: torch.Tensor, batch: int, length: int, device: torch.device
) -> torch.Tensor:
    """Cumulative sequence lengths over the flattened batch: every row starts a sequence, and within a row
    a sequence starts wherever a position is not its predecessor's plus one (transformers'
    `find_packed_sequence_indices` rule), as in verl's packed rows whose positions restart at 0."""
    if position_ids.dim() != 2:
        raise UnsupportedAttention(f"{NAME} takes 2-D position_ids, got {position_ids.dim()}-D")
    starts = torch.zeros(batch, length, dtype=torch.bool, device=device)
    starts[:, 0] = True
    positions = position_ids.expand(batch, length)
    starts[:, 1:] = positions[:, 1:] != positions[:, :-1] + 1
    first = starts.reshape(-1).nonzero().squeeze(-1).to(torch.int32)
    return torch.cat([first, first.new_tensor([batch * length])])


def _with_longest(cu_seqlens: torch.Tensor) -> tuple[torch.Tensor, int]:
    """The cumulative lengths and the longest sequence's length (a wait for the GPU)."""
    return cu_seqlens, int(cu_seqlens.diff().max())


def _causal_varlen(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    longest: int,
    scaling: float | None,
    sliding_window: int | None,
) -> torch.Tensor:
    """Causal `varlen_attn` over (T, H, D) tensors, called with the installed torch's arguments."""
    options = _varlen_options(varlen_attn, q.shape[1], k.shape[1], q.shape[2], scaling, sliding_window)
    return varlen_attn(q, k, v, cu_seqlens, cu_seqlens, longest, longest, **options)


def _varlen_options(
    kernel: Callable[..., Any],
    query_heads: int,
    kv_heads: int,
    head_dim: int,
    scaling: float | None,
    sliding_window: int | None,
) -> dict[str, Any]:
    """The keyword arguments for causal attention in `kernel`'s signature: torch 2.10 takes `is_causal` and
    no scale; 2.11 takes `scale` and `window_size`, where causal is (-1, 0) and the default is bidirectional;
    2.13 adds `enable_gqa`, required when key/value have fewer heads than the query."""
    parameters = _parameter_names(kernel)
    options: dict[str, Any] = {}
    if "window_size" in parameters:
        options["window_size"] = (-1 if sliding_window is None else sliding_window - 1, 0)
    elif sliding_window is not None:
        raise UnsupportedAttention(
            f"this torch's varlen_attn has no sliding window (the model asks {sliding_window})"
        )
    else:
        options["is_causal"] = True
    if "scale" in parameters:
        options["scale"] = scaling
    elif scaling is not None and not math.isclose(scaling, head_dim**-0.5):
        raise UnsupportedAttention(
            f"this torch's varlen_attn has no scale argument and the model scales by {scaling}, "
            f"not 1/sqrt({head_dim})"
        )
    if "enable_gqa" in parameters:
        options["enable_gqa"] = query_heads != kv_heads
    return options


@functools.cache
def _parameter_names(kernel: Callable[..., Any]) -> frozenset[str]:
    return frozenset(inspect.signature(kernel).parameters)


AttentionInterface.register(NAME, torch_varlen_attention)
AttentionMaskInterface.register(NAME, ALL_MASK_ATTENTION_FUNCTIONS["flash_attention_2"])
