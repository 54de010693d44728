"""Settings of verl's training engine that pass every config check but fail minutes into the first step,
refused before anything starts by two rows of seal/trainer/launch/rules.py (each seen on a GPU, 2026-11-26,
one H200, Qwen2.5-7B shape):

- LoRA on FSDP1 (`actor.fsdp_config.strategy: fsdp`, verl's default). peft 0.21 picks an adapter's tensors
  by the module names of the model it is given; under FSDP1 those carry the nested `_fsdp_wrapped_module`
  wrappers while the state dict's keys do not, so verl's `collect_lora_params` hands vLLM no adapter
  tensor and vLLM fails the first weight sync (`StopIteration` in `_create_merged_loras_inplace`); the
  run then waits for ever. FSDP2 keeps the names: every adapter tensor arrives
  (tests/trainer/launch/test_lora_collection.py shows both on CPU).
- A packed micro-batch budget (`*max_token_len_per_gpu` under `use_dynamic_bsz`) below the longest
  trajectory, `data.max_prompt_length + data.max_response_length`: verl asserts when the first long
  trajectory comes, after start-up and generation.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

FSDP2_KEYS = (
    "actor_rollout_ref.actor.strategy",
    "actor_rollout_ref.actor.fsdp_config.strategy",
    "actor_rollout_ref.ref.fsdp_config.strategy",
)
"""The keys that put the actor (and the reference, which LoRA takes from the actor) on FSDP2."""
TOKEN_BUDGET_KEYS = (
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
    "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu",
    "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu",
)
"""The packed micro-batch budgets of the update, old log-probs and the reference under `use_dynamic_bsz`."""


def uses_lora(config: DictConfig) -> bool:
    """Whether the actor trains verl's LoRA adapters rather than all its weights."""
    return bool(OmegaConf.select(config, "actor_rollout_ref.model.lora_rank", default=0))


def lora_on_fsdp1_problem(config: DictConfig) -> str | None:
    """The one-line refusal of LoRA on FSDP1, or None."""
    strategy = OmegaConf.select(config, "actor_rollout_ref.actor.fsdp_config.strategy", default="fsdp")
    if not (uses_lora(config) and strategy == "fsdp"):
        return None
    return (
        "actor_rollout_ref.model.lora_rank with actor_rollout_ref.actor.fsdp_config.strategy=fsdp: "
        "under FSDP1 verl hands vLLM no adapter tensor (peft 0.21 names them by FSDP1's wrapped "
        "modules) and the first weight sync fails; allowed: fsdp2, set "
        + " ".join(f"{key}=fsdp2" for key in FSDP2_KEYS)
    )


def token_budget_problem(config: DictConfig) -> str | None:
    """The one-line refusal of a packed micro-batch budget below the longest trajectory, or None."""
    if not config.actor_rollout_ref.actor.get("use_dynamic_bsz", False):
        return None
    longest = config.data.max_prompt_length + config.data.max_response_length
    for key in TOKEN_BUDGET_KEYS:
        budget = OmegaConf.select(config, key)
        if budget is not None and budget < longest:
            return (
                f"{key}={budget}: allowed: at least a whole trajectory, data.max_prompt_length "
                f"({config.data.max_prompt_length}) + data.max_response_length "
                f"({config.data.max_response_length}) = {longest} tokens"
            )
    return None
