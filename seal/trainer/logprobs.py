"""Token log-probabilities for verl's FSDP engine without flash-attn: in chunks of rows, not one per token.

verl 0.9.1's FSDP engine (`FSDPEngineWithLMHead.prepare_model_outputs`, which the RL actor and reference
and the SFT trainer all run) computes the log-probability of each label token with
`verl.utils.torch_functional.logprobs_from_logits`: flash-attn's cross-entropy kernel where flash-attn
imports, otherwise (`logprobs_from_logits_v2`) a Python loop over the rows of the packed logits, one row per
token. With its backward that is about 0.2 ms a token: an SFT step of SmolLM2 on 100k tokens took 21 s on an
H200, almost all of it in that loop. The RL trainer avoids the loop with `use_fused_kernels`, except under
LoRA, where those kernels fail on FSDP2's sharded lm_head; verl's SFT trainer has no such switch.

Imported into every rank through `model.external_lib` (seal/config/seal_sft.yaml for SFT;
seal/trainer/launch/kernel.py for LoRA on `torch_varlen` and for padded `sdpa`, whose logits verl turns back
into one row per token), this module points the FSDP engine's
`logprobs_from_logits` at `chunked_logprobs`: verl's own log-softmax and gather over `CHUNK_ROWS` rows at a
time, the loop's values (bit-equal in bf16) in a few kernel calls. Where flash-attn's (or the NPU's) kernel
is available verl's own choice stands and nothing is replaced.
"""

from __future__ import annotations

import torch
from verl.utils import torch_functional
from verl.workers.engine.fsdp import transformer_impl

CHUNK_ROWS = 1024
"""Rows (tokens) per log-softmax call: bounds the temporary a call makes beside the logits."""


def chunked_logprobs(
    logits: torch.Tensor, labels: torch.Tensor, inplace_backward: bool = True
) -> torch.Tensor:
    """log p(label) for logits of shape (..., vocab) and labels of shape (...): verl's own log-softmax and
    gather (`logprobs_from_logits_naive`) over `CHUNK_ROWS` rows at a time; `inplace_backward` is the
    flash-attn kernel's option, meaningless here and accepted for the call."""
    rows = logits.reshape(-1, logits.shape[-1])
    targets = labels.reshape(-1)
    parts = [
        torch_functional.logprobs_from_logits_naive(
            rows[start : start + CHUNK_ROWS], targets[start : start + CHUNK_ROWS]
        )
        for start in range(0, rows.shape[0], CHUNK_ROWS)
    ]
    return torch.cat(parts).view(labels.shape)


def verl_uses_a_kernel() -> bool:
    """Whether verl computes log-probabilities with flash-attn's or the NPU's cross-entropy kernel."""
    return (
        torch_functional.FLAH_ATTN_CROSS_ENTROPY_LOSS_AVAILABLE
        or torch_functional.NPU_CROSS_ENTROPY_LOSS_AVAILABLE
    )


if not verl_uses_a_kernel():
    transformer_impl.logprobs_from_logits = chunked_logprobs
