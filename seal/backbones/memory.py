"""Per-GPU and host memory of a SEAL launch by arithmetic, as verl 0.9.1's FSDP engine places it.

What lives where (verl 0.9.1, strategy `fsdp` unless said; one process per GPU holds the actor and the
reference model):
- actor: fp32 weights (`model_dtype: fp32`), fp32 gradients and AdamW's two fp32 moments, sharded over the
  GPUs, plus FSDP's bf16 compute copy of the shard; `param_offload` / `optimizer_offload` move weights /
  moments to the host between phases only: the update loads them all back (`BaseEngineCtx`, engine/base.py);
- reference model: always on the host (FSDP's `CPUOffload(offload_params=True)` is forced for forward-only
  models), in its `model_dtype` (fp32 unless set), beside a pinned gradient buffer of the same size that
  FSDP allocates anyway; none with LoRA (the actor with its adapters disabled is the reference);
- every offloaded tensor is pinned by PyTorch's caching host allocator, which rounds each block up to the
  next power of two: a FSDP unit (one decoder layer) of 308 MB takes 512 MiB;
- start-up: vLLM takes its share while the actor's weights are still on the GPU, offloaded or not (measured on
  an H200: 114.8 GiB for the 7B LoRA run, its 84 GiB share beside the 29 GiB fp32 actor); the actor offloads
  them only after the first weight sync. On FSDP2 with `param_offload` they leave the GPU as the actor is
  built (1.9 GiB on the GPU before vLLM started), and the worker holds more on the host (measured);
- vLLM: `gpu_memory_utilization` of the GPU while it generates; asleep (level 2) it frees weights and cache,
  with a LoRA adapter (level 1) it keeps its bf16 weights on the host;
- LoRA with `rollout.load_format: dummy` (verl's default): vLLM starts with random weights, so the first
  weight sync sends the base from the actor, and `collect_lora_params` (utils/fsdp_utils.py) moves the whole
  unsharded model, adapters included, to the host in the actor's dtype on every GPU; with `safetensors` vLLM
  reads the base from disk and only the adapters are synced (engine_workers.py: `base_sync_done`).
Activations follow the micro-batch's tokens: with gradient checkpointing (verl's default) every layer's input
and one layer recomputed, without it every layer's saved tensors (autograd's saved-tensor hooks on
transformers' Qwen2 and Llama layers: 220 and 196 KiB a token in bf16 at the 7B and 8B shapes).
benchmarks/memory_plan.py prints the table; docs/guides/gpu.md sets it beside what was measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

GIB = 1 << 30
CUDA_CONTEXT_GIB = 0.5
"""A CUDA context per process on the GPU (the trainer's worker and vLLM's)."""
VLLM_ASLEEP_GIB = 1.5
"""What vLLM keeps on the GPU asleep: its CUDA graphs and context."""
WORKSPACE_GIB = 2.0
"""Log-prob chunks, the loss, allocator slack."""
HOST_BASELINE_GIB = 4.0
"""A training worker's own host memory: CUDA and torch libraries, Python, the tokenizer."""
NODE_BASELINE_GIB = 40.0
"""The rest of the node: Ray, TransferQueue, the environment service and its workers, vLLM's processes.
Measured as the node less the training worker and vLLM's weights while asleep: 25 GiB beside the 3B recipe on
an H100, 31 GiB beside the 7B LoRA run on FSDP1 and 40 GiB beside it on FSDP2 on an H200 (2026-11-25/26);
the plan takes the largest."""
FSDP2_HOST_EXTRA_BYTES = 2.7
"""Host bytes per parameter that an FSDP2 worker with `param_offload` held beyond the pinned weights:
measured, not derived (the 7B LoRA run's worker: 59.0 GiB RSS where the pinned fp32 weights and the
baseline are 40.0; about a bf16 copy of the weights and a little more). The 8B LoRA run's worker held
43.5 GiB, about 2 GiB beyond its pinned weights and the same baseline: the plan keeps the 7B's, the larger."""
RAY_MEMORY_THRESHOLD = 0.95
"""Ray kills a worker once the node's memory use passes this share (`RAY_memory_usage_threshold`)."""


@dataclass(frozen=True)
class Placement:
    """One launch's settings that decide memory."""

    gpus: int = 1
    gpu_gib: float = 79.6
    """An 80 GB H100 as nvidia-smi reports it (81,559 MiB); an H200 has 140.4."""
    host_gib: float = 116.4
    """The node's RAM (125 GB = 116.4 GiB on the H100 node that ran the 3B shape)."""
    model_bytes: int = 4
    """The actor's `fsdp_config.model_dtype`: 4 (fp32, verl's default) or 2 (bf16)."""
    ref_bytes: int = 4
    """The reference model's `model_dtype` (0: no reference model, as with LoRA)."""
    param_offload: bool = False
    optimizer_offload: bool = False
    lora_rank: int = 0
    fsdp2: bool = False
    """`fsdp_config.strategy: fsdp2` (where verl's LoRA must train: seal/trainer/launch/engine_limits.py)."""
    lora_base_from_actor: bool = False
    """LoRA with `rollout.load_format: dummy`: the first weight sync gathers the whole base on the host."""
    vllm_utilization: float = 0.6
    micro_batch_tokens: int = 16384
    gradient_checkpointing: bool = True
    """`model.enable_gradient_checkpointing` (verl's default); off, the update keeps every layer's
    activations."""
    sync_every_micro_batch: bool = True
    """`fsdp_config.use_no_sync_for_gradient_accumulation: false` (verl's yaml): every micro-batch's backward
    reduces its gradients into the shards; true, FSDP's `no_sync` accumulates the whole model's unsharded
    gradients until the mini-batch's last micro-batch."""
    pinned_rounding: bool = True
    """PyTorch's pinned host allocator rounds each block up to a power of two (the default)."""


@dataclass
class Budget:
    """GiB per GPU (the GPU phases) and on the host (per GPU: its training worker and vLLM; the node)."""

    parts: dict[str, float] = field(default_factory=dict)
    host_parts: dict[str, float] = field(default_factory=dict)
    update_gib: float = 0.0
    generate_gib: float = 0.0
    startup_gib: float = 0.0
    host_worker_gib: float = 0.0
    host_node_gib: float = 0.0
    gpu_limit_gib: float = 0.0
    host_limit_gib: float = 0.0

    @property
    def gpu_peak_gib(self) -> float:
        return max(self.update_gib, self.generate_gib, self.startup_gib)

    @property
    def fits(self) -> bool:
        return self.gpu_peak_gib <= self.gpu_limit_gib and self.host_node_gib <= self.host_limit_gib


def fsdp_units(config: dict[str, Any]) -> list[int]:
    """Parameters of each FSDP unit (verl wraps every decoder layer): the layers, then the root with the
    embeddings, the untied output head and the final norm."""
    from seal.backbones.catalog import parameter_count

    heads = 1 if config["tie_word_embeddings"] else 2
    root = heads * config["vocab_size"] * config["hidden_size"] + config["hidden_size"]
    layers = config["num_hidden_layers"]
    return [(parameter_count(config) - root) // layers] * layers + [root]


def lora_parameters(config: dict[str, Any], rank: int) -> int:
    """LoRA's A and B on every linear layer of the decoder (verl's `target_modules: all-linear`)."""
    hidden, ffn = config["hidden_size"], config["intermediate_size"]
    kv = config["num_key_value_heads"] * (config.get("head_dim") or hidden // config["num_attention_heads"])
    linears = [(hidden, hidden), (hidden, kv), (hidden, kv), (hidden, hidden), (hidden, ffn), (hidden, ffn)]
    linears.append((ffn, hidden))
    return rank * sum(a + b for a, b in linears) * config["num_hidden_layers"]


def pinned_gib(unit_bytes: list[int], rounding: bool) -> float:
    """Host memory of one pinned copy made of these blocks."""
    return sum(1 << (size - 1).bit_length() if rounding else size for size in unit_bytes) / GIB


def layer_activation_bytes(config: dict[str, Any]) -> int:
    """Bytes autograd keeps a token for one decoder layer's backward (transformers' Qwen2 and Llama layers):
    each RMSNorm's fp32 input and inverse RMS, its bf16 output and the flattened copy the projections save;
    q and k after rotary, v, the attention's output and its fp32 log-sum-exp; the MLP's gate, up, activation
    and product."""
    hidden, ffn, heads = config["hidden_size"], config["intermediate_size"], config["num_attention_heads"]
    kv = config["num_key_value_heads"] * (config.get("head_dim") or hidden // heads)
    return 2 * (4 * hidden + 4 + 2 * hidden + 2 * hidden) + 4 * hidden + 4 * kv + 4 * heads + 8 * ffn


def activation_gib(config: dict[str, Any], tokens: int, backward: bool, checkpointing: bool = True) -> float:
    """A micro-batch of `tokens` in bf16: with backward and gradient checkpointing, every layer's input and
    one layer recomputed with its gradients; without checkpointing, every layer's saved tensors; forward
    only, one layer's intermediates."""
    layers = config["num_hidden_layers"]
    layer = tokens * layer_activation_bytes(config)
    if not backward:
        return layer / GIB
    if not checkpointing:
        return (layers * layer + layer) / GIB
    return (layers * tokens * config["hidden_size"] * 2 + 2 * layer) / GIB


def plan(config: dict[str, Any], placement: Placement) -> Budget:
    """The budget of one launch of the backbone `config` under `placement`."""
    p = placement
    units = [math.ceil(n / p.gpus) for n in fsdp_units(config)]
    weights = sum(units)
    trainable = math.ceil(lora_parameters(config, p.lora_rank) / p.gpus) if p.lora_rank else weights
    train_bytes = p.model_bytes  # LoRA adapters take the base's dtype (verl casts them)
    budget = Budget(gpu_limit_gib=p.gpu_gib, host_limit_gib=RAY_MEMORY_THRESHOLD * p.host_gib)
    parts = budget.parts
    parts["actor weights"] = (weights + (trainable if p.lora_rank else 0)) * p.model_bytes / GIB
    parts["gradients"] = trainable * train_bytes / GIB
    parts["AdamW moments"] = 2 * trainable * train_bytes / GIB
    parts["bf16 compute copy"] = weights * 2 / GIB if p.model_bytes > 2 else 0.0
    if not p.sync_every_micro_batch:
        parts["unsharded gradients (no_sync)"] = p.gpus * trainable * train_bytes / GIB
    parts["activations"] = (
        activation_gib(config, p.micro_batch_tokens, backward=True, checkpointing=p.gradient_checkpointing)
        + WORKSPACE_GIB
    )
    parts["vLLM share"] = p.vllm_utilization * p.gpu_gib
    contexts = 2 * CUDA_CONTEXT_GIB
    budget.update_gib = (
        parts["actor weights"]
        + parts["gradients"]
        + parts.get("unsharded gradients (no_sync)", 0.0)
        + parts["AdamW moments"]
        + parts["bf16 compute copy"]
        + parts["activations"]
        + VLLM_ASLEEP_GIB
        + contexts
    )
    resident = (0.0 if p.param_offload else parts["actor weights"]) + (
        0.0 if p.optimizer_offload else parts["AdamW moments"]
    )
    budget.generate_gib = parts["vLLM share"] + resident + contexts
    on_gpu_at_start = 0.0 if p.fsdp2 and p.param_offload else parts["actor weights"]
    budget.startup_gib = parts["vLLM share"] + on_gpu_at_start + contexts
    moments = [trainable] if p.lora_rank else units
    host = budget.host_parts
    host["worker baseline"] = HOST_BASELINE_GIB
    if p.param_offload:
        host["pinned actor weights"] = pinned_gib([n * p.model_bytes for n in units], p.pinned_rounding)
    if p.param_offload and p.fsdp2:
        host["FSDP2 offload's extra (measured)"] = weights * FSDP2_HOST_EXTRA_BYTES / GIB
    if p.optimizer_offload:
        host["pinned AdamW moments"] = 2 * pinned_gib([n * train_bytes for n in moments], p.pinned_rounding)
    if p.ref_bytes and not p.lora_rank:  # the weights and the gradient buffer FSDP pins beside them
        host["pinned reference + grad buffer"] = 2 * pinned_gib(
            [n * p.ref_bytes for n in units], p.pinned_rounding
        )
    if p.lora_rank:  # vLLM sleeps at level 1 with an adapter: its bf16 weights wait on the host
        host["vLLM's weights while asleep"] = weights * 2 / GIB
    if p.lora_rank and p.lora_base_from_actor:
        whole = sum(fsdp_units(config)) + lora_parameters(config, p.lora_rank)
        host["first sync: the whole model"] = whole * p.model_bytes / GIB
    budget.host_worker_gib = sum(host.values())
    budget.host_node_gib = p.gpus * budget.host_worker_gib + NODE_BASELINE_GIB
    return budget
