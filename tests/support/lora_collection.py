"""How many LoRA tensors verl's `collect_lora_params` hands vLLM for a tiny Qwen2 under FSDP1 and FSDP2, as
JSON on stdout: `{"adapters": N, "fsdp": n1, "fsdp2": n2}`. Run in its own process (a one-rank gloo group on
the CPU), because a process group outlives the test that starts it."""

from __future__ import annotations

import json
import os

import torch
import torch.distributed as dist
from peft import LoraConfig, TaskType, get_peft_model
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FullyShardedDataParallel
from transformers import Qwen2Config, Qwen2ForCausalLM
from verl.utils.fsdp_utils import apply_fsdp2, collect_lora_params, get_fsdp_wrap_policy

TINY = Qwen2Config(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=256,
)


def lora_model() -> torch.nn.Module:
    """The adapters verl's FSDP engine puts on the actor (`_build_lora_module`): all linear layers."""
    lora = LoraConfig(
        task_type=TaskType.CAUSAL_LM, r=8, lora_alpha=16, target_modules="all-linear", bias="none"
    )
    return get_peft_model(Qwen2ForCausalLM(TINY), lora)


def under_fsdp1() -> int:
    """Wrapped as verl's engine wraps for `strategy: fsdp` (its LoRA wrap policy: every trainable linear)."""
    model = lora_model()
    policy = get_fsdp_wrap_policy(model, config={"min_num_params": 0}, is_lora=True)
    wrapped = FullyShardedDataParallel(model, auto_wrap_policy=policy, device_id=torch.device("cpu"))
    return len(collect_lora_params(wrapped, layered_summon=False, base_sync_done=True))


def under_fsdp2() -> int:
    """Sharded as verl's engine shards for `strategy: fsdp2`."""
    model = lora_model()
    apply_fsdp2(model, {"mesh": init_device_mesh("cpu", (1,)), "reshard_after_forward": True}, {})
    return len(collect_lora_params(model, layered_summon=False, base_sync_done=True))


def main() -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", rank=0, world_size=1)
    adapters = sum("lora_" in name for name, _ in lora_model().named_parameters())
    print(json.dumps({"adapters": adapters, "fsdp": under_fsdp1(), "fsdp2": under_fsdp2()}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
