"""The plan of a run: the composed config's key values in one table, printed before anything starts.

The rows follow the paper's Table 4 (model, GRPO, batch sizes, lengths, lr, KL, temperatures, GPUs),
then what SEAL adds; each row names the config keys it shows, so a reader knows what to override.
"""

from __future__ import annotations

import functools
import textwrap
from pathlib import Path

from omegaconf import DictConfig

from seal.trainer.launch.kernel import AttentionChoice
from seal.trainer.launch.liger import liger_uses
from seal.trainer.launch.run_length import run_length
from seal.trainer.settings import SealSettings

PLAN_WIDTH = 100
"""Columns the printed plan fits in (a path longer than its column is not broken)."""


def plan_rows(
    config: DictConfig,
    settings: SealSettings,
    attention: AttentionChoice,
    service: str,
    omega_start: str | None = None,
) -> list[tuple[str, str, str]]:
    """(what, value, config keys) for every key value of the run; `attention` is the kernel the launch
    resolved, `service` says which environment service the run uses (the launcher knows whether it started
    one), `omega_start` which Ω the first step trains under (seal/trainer/launch/service_omega.py)."""
    actor, rollout = config.actor_rollout_ref.actor, config.actor_rollout_ref.rollout
    trainer, data = config.trainer, config.data
    gpus = trainer.nnodes * trainer.n_gpus_per_node
    replica_gpus = (
        rollout.tensor_model_parallel_size * rollout.data_parallel_size * rollout.pipeline_model_parallel_size
    )
    kl = f"{actor.kl_loss_coef} ({actor.kl_loss_type})" if actor.use_kl_loss else "off"
    apatch = settings.apatch
    return [
        ("base model", str(config.actor_rollout_ref.model.path), "actor_rollout_ref.model.path"),
        trained_weights_row(config),
        ("method", f"{config.algorithm.adv_estimator}, {rollout.n} rollouts per prompt", "rollout.n"),
        ("actor learning rate", f"{actor.optim.lr:g}", "actor.optim.lr"),
        ("train batch size", str(data.train_batch_size), "data.train_batch_size"),
        ("PPO mini-batch size", str(actor.ppo_mini_batch_size), "actor.ppo_mini_batch_size"),
        micro_batch_row(actor),
        (
            "temperature",
            f"{float(rollout.temperature)} training, {float(rollout.val_kwargs.temperature)} validation",
            "rollout.temperature, rollout.val_kwargs.temperature",
        ),
        (
            "max prompt / response / model length",
            f"{data.max_prompt_length} / {data.max_response_length} / {rollout.max_model_len}",
            "data.max_prompt_length, data.max_response_length, rollout.max_model_len",
        ),
        (
            "multi-turn rollout",
            f"at most {settings.rollout.max_llm_calls} interaction steps",
            "seal.rollout.max_llm_calls",
        ),
        ("tool prompt", settings.rollout.protocol, "seal.rollout.protocol"),
        (
            "reward KL penalty",
            "on" if config.algorithm.use_kl_in_reward else "off",
            "algorithm.use_kl_in_reward",
        ),
        ("actor KL loss coefficient", kl, "actor.use_kl_loss, actor.kl_loss_coef, actor.kl_loss_type"),
        ("entropy coefficient", f"{actor.entropy_coeff:g}", "actor.entropy_coeff"),
        (
            "GPUs",
            f"{gpus} ({trainer.nnodes} node{'s' if trainer.nnodes > 1 else ''} x {trainer.n_gpus_per_node}), "
            "tensor parallel "
            f"{rollout.tensor_model_parallel_size}, vLLM {rollout.mode}, GPU memory utilisation "
            f"{rollout.gpu_memory_utilization:g}",
            "trainer.n_gpus_per_node, trainer.nnodes, rollout.tensor_model_parallel_size",
        ),
        ("rollout replicas", str(gpus // replica_gpus), "the GPUs divided by rollout TP x DP x PP"),
        placement_row(config, settings, gpus // replica_gpus),
        ("rollout engine", str(rollout.name), "rollout.name"),
        attention_row(config, attention),
        (
            "epochs",
            run_length(config).describe(),
            "trainer.total_epochs, trainer.total_training_steps, data.train_batch_size, "
            "data.train_max_samples",
        ),
        (
            "validation / checkpoints",
            f"every {trainer.test_freq} / {trainer.save_freq} steps, before training: "
            f"{trainer.val_before_train}",
            "trainer.test_freq, trainer.save_freq, trainer.val_before_train",
        ),
        ("diagnosis taxonomy", settings.taxonomy, "seal.taxonomy"),
        (
            "interface Ω",
            f"preset {settings.interface.preset}, Evolve {'on' if settings.interface.adapt else 'off'}",
            "seal.interface.preset, seal.interface.adapt",
        ),
        *(
            [
                (
                    "Ω at the first step",
                    omega_start,
                    "seal.interface.preset; a running service's Ω with launcher --adopt-omega",
                )
            ]
            if omega_start
            else []
        ),
        (
            "A-Patch",
            apatch.mode
            if not apatch.enabled
            else f"{apatch.mode}, weight clip [{apatch.w_min}, {apatch.w_max}], EMA beta "
            f"{apatch.ema_beta}, prevalence alpha {apatch.prevalence_alpha}, confidence samples "
            f"{apatch.confidence_samples}",
            "seal.apatch.*",
        ),
        ("environment service", service, "seal.rollout.env_url; launcher --env-url, --with-bfcl"),
        *([env_actors_row(config, settings)] if settings.rollout.env_backend == "ray" else []),
        ("run folder", str(Path(trainer.default_local_dir).parent), "trainer.default_local_dir/.."),
    ]


def trained_weights_row(config: DictConfig) -> tuple[str, str, str]:
    """Full fine-tuning, or verl's LoRA and how the base reaches vLLM: with `load_format: dummy` (verl's
    default) vLLM starts without it, and the first weight sync gathers the whole model on the host of every
    GPU in the actor's dtype (seal/backbones/memory.py; an H200 node ran out of RAM on the 7B that way)."""
    model, rollout = config.actor_rollout_ref.model, config.actor_rollout_ref.rollout
    keys = "actor_rollout_ref.model.lora_rank, model.lora_alpha, rollout.load_format"
    if not model.lora_rank:
        return ("trained weights", "all (full fine-tuning)", keys)
    if "dummy" in str(rollout.load_format):
        base = (
            f"vLLM starts without the base (load_format {rollout.load_format}): the first sync gathers the "
            "whole model on the host of every GPU; load_format=safetensors lets vLLM read it instead"
        )
    else:
        base = f"vLLM reads the base ({rollout.load_format}); only the adapters are synced"
    return ("trained weights", f"LoRA rank {model.lora_rank}, alpha {model.lora_alpha}; {base}", keys)


def placement_row(config: DictConfig, settings: SealSettings, replicas: int) -> tuple[str, str, str]:
    """On which node what runs. This node runs the launcher (and the HTTP service it uses or starts, if
    any); every node runs its share of the GPU workers, vLLM's replicas and (`ray` backend) environment
    actors; verl places the agent-loop workers round robin over the nodes, and Ray the driver (verl's
    task runner) on any node with a free CPU."""
    from verl.trainer.ppo.utils import need_reference_policy

    trainer, rollout = config.trainer, config.actor_rollout_ref.rollout
    nodes, per_node = trainer.nnodes, trainer.n_gpus_per_node
    backend = settings.rollout.env_backend
    here = "the launcher" + (", the environment service" if backend == "http" else "")
    reference = need_reference_policy(config) and not config.actor_rollout_ref.model.lora_rank
    workers = f"{per_node} GPU worker(s) (actor{' and reference' if reference else ''} shards)"
    replicas_text = (
        f"{replicas // nodes} vLLM replica(s)" if replicas >= nodes else "a share of a vLLM replica"
    )
    actors = f", {settings.rollout.env_actors_per_node} environment actor(s)" if backend == "ray" else ""
    if nodes == 1:
        where = f"this node: {here}, {workers}, {replicas_text}{actors}, verl's driver and agent-loop workers"
    else:
        where = (
            f"node 1 (this one, Ray's head): {here}; each of the {nodes} nodes: {workers}, {replicas_text}"
            f"{actors}; {rollout.agent.num_workers} agent-loop workers round robin over the nodes; verl's "
            "driver wherever Ray places it"
        )
    return ("where it runs", where, "trainer.nnodes, trainer.n_gpus_per_node, rollout.agent.num_workers")


def env_actors_row(config: DictConfig, settings: SealSettings) -> tuple[str, str, str]:
    """The environment actors the trainer will place: `trainer.nnodes` x `env_actors_per_node` (the nodes
    the run asks for; the trainer places them on every node alive when it starts)."""
    nodes, per_node = config.trainer.nnodes, settings.rollout.env_actors_per_node
    per_node_text = ", ".join(f"node {node}: {per_node}" for node in range(1, nodes + 1))
    return (
        "environment actors",
        f"{nodes} node(s) x {per_node} = {nodes * per_node} Ray actors ({per_node_text}), each an episode "
        "store in-process; each rollout worker plays on its own node's actors",
        "seal.rollout.env_backend, seal.rollout.env_actors_per_node, trainer.nnodes",
    )


def attention_row(config: DictConfig, choice: AttentionChoice) -> tuple[str, str, str]:
    """The kernel `seal.attention` resolved to here, why, and the verl keys it set."""
    model = config.actor_rollout_ref.model
    modules = [model.external_lib] if isinstance(model.external_lib, str) else list(model.external_lib or [])
    imported = f", imported in every worker: {', '.join(modules)}" if modules else ""
    liger = liger_uses(config)
    kernels = f", Liger's kernels: {', '.join(liger)}" if liger else ""
    return (
        "attention",
        f"{choice.kernel} ({choice.reason}), remove padding {model.use_remove_padding}, fused kernels "
        f"{model.use_fused_kernels}{imported}{kernels}",
        "seal.attention -> model.override_config.attn_implementation, use_remove_padding, use_fused_kernels, "
        "external_lib",
    )


def format_plan(rows: list[tuple[str, str, str]], width: int = PLAN_WIDTH) -> str:
    """The rows as plain text in `width` columns (logs and terminals alike): each setting and its value
    on one line, wrapped under the value, then the config keys that set it."""
    indent = max(len(row[0]) for row in rows) + 2
    wrap = functools.partial(
        textwrap.wrap,
        width=width,
        subsequent_indent=" " * indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
    lines = [f"{'setting':<{indent}}value (set by)", "-" * width]
    for what, value, keys in rows:
        lines += wrap(f"{what:<{indent}}{value}")
        lines += wrap(f"(set by {keys})", initial_indent=" " * indent)
    return "\n".join(line.rstrip() for line in lines)


def micro_batch_row(actor: DictConfig) -> tuple[str, str, str]:
    """Packed micro-batches said as such: verl 0.9.1 divides each micro-batch's loss by the mini-batch's
    tokens, so packing keeps the gradient of the configured micro-batch size (test_dynamic_micro_batches)."""
    if actor.use_dynamic_bsz:
        return (
            "PPO micro-batch size per GPU",
            f"packed up to {actor.ppo_max_token_len_per_gpu} tokens (the gradient of micro-batch "
            f"{actor.ppo_micro_batch_size_per_gpu})",
            "actor.use_dynamic_bsz, actor.ppo_max_token_len_per_gpu",
        )
    return (
        "PPO micro-batch size per GPU",
        str(actor.ppo_micro_batch_size_per_gpu),
        "actor.ppo_micro_batch_size_per_gpu",
    )
