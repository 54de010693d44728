"""Liger's Triton kernels, asked for through verl's own keys, and refused in one line where they cannot load.

verl 0.9.1 has two switches for them (`workers/engine/fsdp/transformer_impl.py`):
- `actor_rollout_ref.model.use_liger` patches the actor's and reference's decoder with Liger's RMSNorm,
  SwiGLU and RoPE kernels. On one H200, a forward and backward of Qwen2.5-7B's decoder on a packed micro-batch
  of 16,384 tokens took 13% less time with them, 17% at Qwen2.5-3B's (`benchmarks/bench_packed_attention.py
  --liger`), and the 7B's update on 4 H200 10% less (53.4 -> 48.1 s). Without liger-kernel, every worker fails
  on its import;
- `actor_rollout_ref.model.fused_kernel_options.impl_backend=liger` computes the log-probs and entropy with
  Liger's fused linear cross-entropy. It applies where verl's fused kernels are on (`seal.attention`'s
  `torch_varlen`). Without liger-kernel, verl silently keeps its torch backend, which loops over 512-token
  chunks. liger-kernel 0.8.5 runs it on Hopper (sm90) as a CuTe DSL kernel, which needs NVIDIA's CUTLASS
  Python DSL (`nvidia-cutlass-dsl`, liger-kernel's `cutedsl` extra): without it a 3B launch on an H200
  failed at its first log-prob, after the whole start-up. On other GPUs Liger runs the same 512-token loop as
  verl's torch backend. So without the DSL the setting either fails or gains nothing.

The launcher checks both before Ray starts, as it checks the attention kernel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from seal.trainer.launch.kernel import module_imports

if TYPE_CHECKING:
    from omegaconf import DictConfig

LIGER_MODULE = "liger_kernel"
CUTE_DSL_MODULE = "cutlass"
"""What liger-kernel's CuTe DSL kernels import (its `ops/cutedsl/ops/__init__.py` refuses without it)."""
LIGER_BACKEND = "liger"
BACKEND_SETTING = f"actor_rollout_ref.model.fused_kernel_options.impl_backend={LIGER_BACKEND}"
"""The key=value that takes Liger's fused linear cross-entropy for the log-probs."""
LIGER_PIN = "liger-kernel==0.8.5"
"""The release `install.sh --gpu` and the offline GPU kit install (gpu/gpu_wheels.txt)."""


def liger_uses(config: DictConfig) -> tuple[str, ...]:
    """The verl settings of `config` that take Liger's kernels, as `key=value`; empty when none does."""
    model = config.actor_rollout_ref.model
    uses = []
    if model.get("use_liger"):
        uses.append("actor_rollout_ref.model.use_liger=true")
    options = model.get("fused_kernel_options") or {}
    if model.get("use_fused_kernels") and options.get("impl_backend") == LIGER_BACKEND:
        uses.append(BACKEND_SETTING)
    return tuple(uses)


def liger_problem(config: DictConfig) -> str | None:
    """Why this machine cannot train with the Liger kernels `config` asks for, or None."""
    uses = liger_uses(config)
    if not uses:
        return None
    if not module_imports(LIGER_MODULE):  # it needs triton, which torch's CUDA builds bring
        return (
            f"{' and '.join(uses)} need{'s' if len(uses) == 1 else ''} liger-kernel, which does not import "
            f"here: install it ({LIGER_PIN}; bash install.sh --gpu does) or drop the setting"
        )
    if BACKEND_SETTING in uses and not module_imports(CUTE_DSL_MODULE):
        return (
            f"{BACKEND_SETTING} needs NVIDIA's CUTLASS Python DSL, which does not import here: "
            "liger-kernel runs it on Hopper GPUs as a CuTe DSL kernel (elsewhere as verl's own 512-token "
            "loop); install 'liger-kernel[cutedsl]' or drop the setting (use_liger alone speeds the decoder)"
        )
    return None
