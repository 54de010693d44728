"""`seal.attention`: the attention kernel the actor and reference model train with, as verl's keys.

`auto` (the default) takes, on the machine that launches:
- `flash_attention_2` where flash-attn imports (packed sequences, verl's default);
- otherwise `torch_varlen` (`seal.trainer.attention`: torch's own FlashAttention-2 kernels, torch 2.10+) with
  packed sequences and verl's fused log-prob kernels: without flash-attn, verl's log-prob code loops in Python
  over the tokens of a packed micro-batch, which the fused kernels avoid. Under LoRA, whose FSDP2 engine the
  fused kernels fail on, the same packed sequences without them, and `seal.trainer.logprobs` replaces the
  loop with the same computation in chunks;
- otherwise `sdpa` with every micro-batch padded to its longest sample (correct, much slower); verl turns its
  logits back into one row per token and would loop over them too, so `seal.trainer.logprobs` chunks them.
An explicit value takes that kernel, `torch_varlen` under LoRA as `auto` does. An SFT experiment's
`sft.attention` resolves the same way into its `model` section, `torch_varlen` with the log-probs chunked:
verl's SFT trainer has no fused kernels. The launcher (and
`seal.trainer.experiment.train`) resolves the setting before Ray starts and writes
`actor_rollout_ref.model.override_config.attn_implementation`, `use_remove_padding`, `use_fused_kernels` and
`external_lib` (the actor's and reference's settings follow the model's), so a kernel this machine lacks is
refused in one line instead of failing in a worker. Nothing here imports torch or omegaconf at import time:
`seal.trainer.attention` and its GPU check run on torch and transformers alone.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from omegaconf import DictConfig

FLASH_ATTENTION = "flash_attention_2"
TORCH_VARLEN = "torch_varlen"
SDPA = "sdpa"
AUTO = "auto"
ATTENTION_CHOICES = (AUTO, FLASH_ATTENTION, TORCH_VARLEN, SDPA)
VARLEN_MODULE = "seal.trainer.attention"
"""Imported by verl in every worker (`external_lib`); registers `torch_varlen` with transformers."""
LOGPROBS_MODULE = "seal.trainer.logprobs"
"""Imported by verl in every worker (`external_lib`) for LoRA and sdpa: chunks its per-token log-prob loop."""
LORA_CHUNKED = (
    "LoRA: verl's fused log-prob kernels fail on FSDP2's sharded lm_head, so packed without them, the "
    f"log-probs computed in chunks ({LOGPROBS_MODULE})"
)
"""Seen on an H200 (2026-11-26): `aten.mm got mixed torch.Tensor and DTensor` in the first old_log_prob."""
SFT_CHUNKED = (
    f"SFT: verl's SFT trainer has no fused log-prob kernels, so packed without them, the log-probs computed "
    f"in chunks ({LOGPROBS_MODULE})"
)
SETTING = "seal.attention"
SFT_SETTING = "sft.attention"
SEQUENCE_PARALLEL_KEYS = ("actor", "ref")
"""The `actor_rollout_ref` sections whose `ulysses_sequence_parallel_size` (and `fsdp_config`'s) count."""


class AttentionError(ValueError):
    """A config whose attention cannot be resolved; the message is one line."""


@dataclass(frozen=True)
class AttentionChoice:
    """The kernel a run trains with, why, and why this machine cannot train with it (None when it can)."""

    kernel: str
    reason: str
    problem: str | None = None
    chunked_logprobs: bool = False
    """`torch_varlen` without verl's fused kernels, its log-prob loop chunked by `LOGPROBS_MODULE` (LoRA)."""

    @property
    def remove_padding(self) -> bool:
        """Packed sequences (`use_remove_padding`) for the flash kernels; padded micro-batches for sdpa."""
        return self.kernel != SDPA

    @property
    def fused_kernels(self) -> bool:
        """verl's fused log-prob kernels (`use_fused_kernels`): for `torch_varlen`, unless under LoRA."""
        return self.kernel == TORCH_VARLEN and not self.chunked_logprobs

    @property
    def worker_modules(self) -> tuple[str, ...]:
        """The modules verl imports in every worker (`external_lib`) for this choice: `torch_varlen`'s
        registration, and the chunked log-probs wherever verl's per-token loop would run (sdpa, LoRA)."""
        if self.kernel == TORCH_VARLEN:
            return (VARLEN_MODULE, LOGPROBS_MODULE) if self.chunked_logprobs else (VARLEN_MODULE,)
        return (LOGPROBS_MODULE,) if self.kernel == SDPA else ()


def module_imports(name: str) -> bool:
    """Whether module `name` imports here: a kernel package built for another torch, or missing one of its
    own dependencies, fails to."""
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def flash_attn_imports() -> bool:
    """Whether the flash-attn package imports here."""
    return module_imports("flash_attn")


def torch_varlen_available() -> bool:
    """Whether this torch has `torch.nn.attention.varlen` (torch 2.10 and later)."""
    return module_imports("torch.nn.attention.varlen")


def choose_attention(config: DictConfig) -> AttentionChoice:
    """The kernel `config`'s `seal.attention` asks for on this machine; AttentionError when the config
    contradicts it (another `attn_implementation`, Ulysses sequence parallelism with `torch_varlen`)."""
    model = config.actor_rollout_ref.model
    choice = _resolve(model, "actor_rollout_ref.model", SETTING, config.seal.attention)
    from seal.trainer.launch.engine_limits import uses_lora

    if choice.kernel == TORCH_VARLEN and uses_lora(config):
        choice = replace(choice, reason=f"{choice.reason}; {LORA_CHUNKED}", chunked_logprobs=True)
    if choice.kernel == TORCH_VARLEN and _sequence_parallel(config) > 1:
        raise AttentionError(
            f"{TORCH_VARLEN} ({choice.reason}) has no Ulysses sequence parallelism: set "
            "actor_rollout_ref.actor.ulysses_sequence_parallel_size=1, or install flash-attn"
        )
    return choice


def choose_sft_attention(config: DictConfig) -> AttentionChoice:
    """The kernel an SFT config's `sft.attention` asks for on this machine, as `choose_attention` resolves
    `seal.attention`; `torch_varlen` with verl's log-prob loop chunked (`SFT_CHUNKED`)."""
    choice = _resolve(config.model, "model", SFT_SETTING, config.sft.attention)
    if choice.kernel != TORCH_VARLEN:
        return choice
    if int(config.engine.get("ulysses_sequence_parallel_size") or 1) > 1:
        raise AttentionError(
            f"{TORCH_VARLEN} ({choice.reason}) has no Ulysses sequence parallelism: set "
            "engine.ulysses_sequence_parallel_size=1, or install flash-attn"
        )
    return replace(choice, reason=f"{choice.reason}; {SFT_CHUNKED}", chunked_logprobs=True)


def _resolve(model: DictConfig, where: str, key: str, value: object) -> AttentionChoice:
    """The kernel `key`=`value` asks for on this machine; AttentionError for an unknown value or a model
    section (at `where`) that names another `attn_implementation`."""
    setting = str(value)
    if setting not in ATTENTION_CHOICES:
        raise AttentionError(f"{key} must be one of {list(ATTENTION_CHOICES)}, got {setting!r}")
    choice = _auto() if setting == AUTO else _explicit(setting, key)
    named = (model.get("override_config") or {}).get("attn_implementation")
    if named is not None and named != choice.kernel:
        raise AttentionError(
            f"{where}.override_config.attn_implementation={named} contradicts {key}={setting} "
            f"({choice.kernel}): choose the kernel with {key}, one of {list(ATTENTION_CHOICES)}"
        )
    return choice


def apply_attention(config: DictConfig, choice: AttentionChoice) -> None:
    """Write `choice` into the verl keys that load the actor and reference model, in place."""
    write_attention(config.actor_rollout_ref.model, choice)


def write_attention(model: DictConfig, choice: AttentionChoice) -> None:
    """Write `choice` into a model section's verl keys (an RL config's `actor_rollout_ref.model`, an SFT
    config's `model`), in place."""
    from omegaconf import open_dict

    with open_dict(model):
        if model.get("override_config") is None:
            model.override_config = {}
        model.override_config.attn_implementation = choice.kernel
        model.use_remove_padding = choice.remove_padding
        if choice.kernel == TORCH_VARLEN:
            model.use_fused_kernels = choice.fused_kernels
        if choice.worker_modules:
            model.external_lib = _with_modules(model.get("external_lib"), choice.worker_modules)


def configure_attention(config: DictConfig) -> AttentionChoice:
    """Resolve `seal.attention` and write it into `config`; resolving a written config again is a no-op."""
    choice = choose_attention(config)
    apply_attention(config, choice)
    return choice


def configure_sft_attention(config: DictConfig) -> AttentionChoice:
    """Resolve an SFT config's `sft.attention` and write it into its `model`; again, a no-op."""
    choice = choose_sft_attention(config)
    write_attention(config.model, choice)
    return choice


def _auto() -> AttentionChoice:
    if flash_attn_imports():
        return AttentionChoice(FLASH_ATTENTION, "auto: flash-attn imports")
    torch_version = _torch_version()
    if torch_varlen_available():
        return AttentionChoice(TORCH_VARLEN, f"auto: no flash-attn, torch {torch_version} has varlen_attn")
    return AttentionChoice(
        SDPA, f"auto: no flash-attn, torch {torch_version} has no varlen_attn (2.10+): padded micro-batches"
    )


def _explicit(kernel: str, key: str) -> AttentionChoice:
    reason = f"{key}={kernel}"
    if kernel == FLASH_ATTENTION and not flash_attn_imports():
        return AttentionChoice(
            kernel,
            reason,
            f"{key}=flash_attention_2 but flash-attn does not import: install it (pip install "
            f"flash-attn==2.8.3 --no-build-isolation) or leave {key}=auto (torch's varlen kernels)",
        )
    if kernel == TORCH_VARLEN and not torch_varlen_available():
        return AttentionChoice(
            kernel,
            reason,
            f"{key}=torch_varlen needs torch 2.10 or later (torch.nn.attention.varlen), this is "
            f"torch {_torch_version()}: set {key}=auto",
        )
    return AttentionChoice(kernel, reason)


def _torch_version() -> str:
    import torch

    return str(torch.__version__)


def _sequence_parallel(config: DictConfig) -> int:
    sections = [config.actor_rollout_ref.get(key) for key in SEQUENCE_PARALLEL_KEYS]
    sizes = [
        int(place.get("ulysses_sequence_parallel_size") or 1)
        for section in sections
        if section is not None
        for place in (section, section.get("fsdp_config") or {})
    ]
    return max(sizes, default=1)


def _with_modules(external_lib: str | list[str] | None, modules: tuple[str, ...]) -> str | list[str]:
    """verl's `external_lib` (one module name or a list) with `modules` among them: one name stays a name."""
    if external_lib is None:
        named = []
    else:
        named = [external_lib] if isinstance(external_lib, str) else list(external_lib)
    merged = [*named, *(module for module in modules if module not in named)]
    return merged[0] if len(merged) == 1 else merged
