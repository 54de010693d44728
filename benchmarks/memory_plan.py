"""What the paper backbones need per GPU and on the host, by arithmetic (seal/backbones/memory.py).

    python benchmarks/memory_plan.py                     # every scenario, one line each
    python benchmarks/memory_plan.py --parts 3b-1gpu     # one scenario, term by term
    python benchmarks/memory_plan.py --markdown          # the table of docs/guides/gpu.md

Each scenario is a launch this repository ships or measures (exp/*.yaml, gpu/gpu_backbone_runs.sh): GPU
memory in its three phases (start-up, where vLLM takes its share beside the actor's weights; the actor update,
with everything the optimizer needs on the GPU; generation, with vLLM's share next to what the actor keeps
there), the host memory per GPU (its training worker, vLLM's weights while it sleeps with a LoRA adapter, the
first weight sync's copy of the whole model where vLLM starts without the base) and of the node, and whether
that fits the GPU and the node's RAM below Ray's 95% kill line.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, replace

from seal.backbones.catalog import BACKBONES
from seal.backbones.memory import Budget, Placement, plan

H100 = Placement()
H200 = Placement(gpu_gib=140.4, host_gib=125.9)
FOUR_H100 = replace(H100, gpus=4, host_gib=1024.0)
FOUR_H200 = replace(H200, gpus=4, host_gib=503.8)
LORA = {"lora_rank": 64, "param_offload": True, "fsdp2": True}
MARGIN = 0.05
"""A peak within 5% of the GPU's memory is too close to call by arithmetic: measure it."""
HOST_MARGIN = 0.10
"""The same for the node below Ray's line: the rest of the node measured 25 to 40 GiB in three runs, and Ray
checks every 250 ms where a sampler sees a transient peak only by chance."""


@dataclass(frozen=True)
class Scenario:
    name: str
    backbone: str
    placement: Placement
    what: str
    measured: str = ""
    """What a run of this scenario showed (gpu/gpu_backbone_runs.sh; docs/results/measurements.md), or
    nothing: not run."""


SCENARIOS = [
    Scenario(
        "3b-1gpu-offload-all",
        "qwen2.5-3b",
        replace(H100, param_offload=True, optimizer_offload=True),
        "SEAL_3B on 1 H100, actor param+optimizer offload, fp32 reference (the run Ray killed)",
        "Ray killed it: worker at 100.4 GB",
    ),
    Scenario(
        "3b-1gpu",
        "qwen2.5-3b",
        replace(H100, param_offload=True, ref_bytes=2, vllm_utilization=0.4),
        "exp/SEAL_3B_1gpu.yaml",
        "75.3 / 74: 2 steps (3b-liger: 79.0 / 71.9)",
    ),
    Scenario("7b-4gpu", "qwen2.5-7b", FOUR_H100, "exp/SEAL.yaml (Table 4) on 4 H100"),
    Scenario(
        "7b-4h200",
        "qwen2.5-7b",
        FOUR_H200,
        "exp/SEAL.yaml (Table 4) on 4 H200, as shipped",
        "114.5 / 156.1: step 1 with a checkpoint, resumed to step 2",
    ),
    Scenario(
        "7b-4h200-tuned",
        "qwen2.5-7b",
        replace(FOUR_H200, ref_bytes=2, gradient_checkpointing=False, micro_batch_tokens=10240),
        "7b-tuned: no gradient checkpointing on 10,240-token micro-batches, bf16 reference",
        "115.2 / 96.6: 2 shaped steps (the update allocated 96.6 of the 98.8 GiB planned)",
    ),
    Scenario(
        "7b-4h200-fast",
        "qwen2.5-7b",
        replace(FOUR_H200, ref_bytes=2, micro_batch_tokens=49152),
        "7b-fast: checkpointing kept, the update on 49,152-token micro-batches, bf16 reference",
        "114.5 / 96.2: 2 shaped steps (the update allocated 57.0 of the 66 GiB planned; with Liger's decoder "
        "kernels, 7b-liger-decoder: 114.6 / 94.3, 51.9 allocated)",
    ),
    Scenario(
        "7b-4gpu-fast",
        "qwen2.5-7b",
        replace(FOUR_H100, ref_bytes=2, micro_batch_tokens=49152),
        "the same on 4 H100",
    ),
    Scenario(
        "7b-4h200-nosync",
        "qwen2.5-7b",
        replace(FOUR_H200, ref_bytes=2, micro_batch_tokens=49152, sync_every_micro_batch=False),
        "7b-fast with FSDP's no_sync: the gradients reduced once a mini-batch, not once a micro-batch",
    ),
    Scenario(
        "7b-4gpu-tuned",
        "qwen2.5-7b",
        replace(FOUR_H100, ref_bytes=2, gradient_checkpointing=False, micro_batch_tokens=10240),
        "the same on 4 H100",
    ),
    Scenario("8b-4gpu", "toolace-2-8b", FOUR_H100, "exp/SEAL_ToolACE.yaml (Table 4, ToolACE-2-8B) on 4 H100"),
    Scenario(
        "8b-4h200",
        "toolace-2-8b",
        FOUR_H200,
        "exp/SEAL_ToolACE.yaml (Table 4, ToolACE-2-8B) on 4 H200, as shipped",
        "117.0 / 159.3: step 1 with a checkpoint, resumed to step 2",
    ),
    Scenario(
        "7b-1h200-full",
        "qwen2.5-7b",
        replace(H200, param_offload=True, ref_bytes=2, vllm_utilization=0.4, micro_batch_tokens=10240),
        "full fine-tuning on 1 H200: param offload, bf16 reference, vLLM 0.4, 10k-token micro-batches",
        "137.9 (OOM) / 114.9: out of GPU memory in the first optimizer step",
    ),
    Scenario(
        "8b-1h200-full",
        "toolace-2-8b",
        replace(H200, param_offload=True, ref_bytes=2, vllm_utilization=0.4, micro_batch_tokens=10240),
        "the same for ToolACE-2-8B",
    ),
    Scenario(
        "7b-1h200-lora-dummy",
        "qwen2.5-7b",
        replace(H200, **{**LORA, "fsdp2": False}, lora_base_from_actor=True),
        "LoRA rank 64 on 1 H200, FSDP1, rollout.load_format=dummy: the first sync sends the base",
        "114.8 / 118.1: Ray killed 7 workers at the first sync",
    ),
    Scenario(
        "7b-1h200-lora",
        "qwen2.5-7b",
        replace(H200, **LORA),
        "LoRA rank 64 (verl's) on 1 H200, FSDP2, load_format=safetensors: only the adapters are synced",
        "87.5 / 113.2: 1 step in 582 s",
    ),
    Scenario(
        "8b-1h200-lora",
        "toolace-2-8b",
        replace(H200, **LORA),
        "LoRA rank 64 on 1 H200, ToolACE-2-8B",
        "88.0 / 83.1: 1 step in 752 s",
    ),
    Scenario(
        "1.5b-1h200",
        "qwen2.5-coder-1.5b",
        replace(H200, ref_bytes=0, vllm_utilization=0.45),
        "exp/learn_qwen_*.yaml, a sitting's arm on 1 H200 (trainer.n_gpus_per_node=1), no reference model",
        "update 38.0 reserved, 33.2 allocated (verl's actor/perf): 6 sittings of 16 steps",
    ),
    Scenario(
        "1.5b-1gpu",
        "qwen2.5-coder-1.5b",
        replace(H100, ref_bytes=0, vllm_utilization=0.45),
        "the same on 1 H100",
        "update 38.0 reserved, 33.2 allocated (verl's actor/perf), 57.9 on the card at one reading: 15 steps",
    ),
    Scenario("7b-1h100-lora", "qwen2.5-7b", replace(H100, **LORA), "LoRA rank 64 on 1 H100"),
    Scenario("8b-1h100-lora", "toolace-2-8b", replace(H100, **LORA), "LoRA rank 64 on 1 H100, ToolACE-2-8B"),
]
BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}


def verdict(budget: Budget) -> str:
    if budget.host_node_gib > budget.host_limit_gib:
        return "no: host"
    if budget.gpu_peak_gib > budget.gpu_limit_gib:
        return "no: GPU"
    if budget.gpu_peak_gib > (1 - MARGIN) * budget.gpu_limit_gib:
        return "marginal"
    if budget.host_node_gib > (1 - HOST_MARGIN) * budget.host_limit_gib:
        return "marginal: host"
    return "yes"


def rows() -> list[tuple[Scenario, Budget]]:
    return [(s, plan(BACKBONES[s.backbone].config, s.placement)) for s in SCENARIOS]


def table(markdown: bool) -> str:
    header = [
        "scenario",
        "GPUs",
        "start-up GiB/GPU",
        "update GiB/GPU",
        "generate GiB/GPU",
        "host GiB per GPU / node",
        "fits",
        "measured GPU / node GiB",
    ]
    lines = []
    for scenario, budget in rows():
        gpu = f"{scenario.placement.gpus} x {scenario.placement.gpu_gib:.0f}"
        host = (
            f"{budget.host_worker_gib:.0f} / {budget.host_node_gib:.0f} of {scenario.placement.host_gib:.0f}"
        )
        lines.append(
            [
                scenario.name,
                gpu,
                f"{budget.startup_gib:.1f}",
                f"{budget.update_gib:.1f}",
                f"{budget.generate_gib:.1f}",
                host,
                verdict(budget),
                scenario.measured or "not run",
            ]
        )
    if markdown:
        out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        out += ["| " + " | ".join(line) + " |" for line in lines]
        return "\n".join(out)
    widths = [max(len(str(row[i])) for row in [header, *lines]) for i in range(len(header))]
    return "\n".join(
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in [header, *lines]
    )


def parts(scenario: Scenario) -> str:
    budget = plan(BACKBONES[scenario.backbone].config, scenario.placement)
    lines = [f"{scenario.name}: {scenario.what} ({BACKBONES[scenario.backbone].released})"]
    lines += [f"  {name:<30} {gib:7.1f} GiB/GPU" for name, gib in budget.parts.items()]
    lines += [f"  {name:<30} {gib:7.1f} GiB host" for name, gib in budget.host_parts.items()]
    lines += [
        f"  {'start-up (vLLM beside the actor)':<30} {budget.startup_gib:7.1f} GiB/GPU",
        f"  {'update phase':<30} {budget.update_gib:7.1f} GiB/GPU of {budget.gpu_limit_gib:.1f}",
        f"  {'generation phase':<30} {budget.generate_gib:7.1f} GiB/GPU",
        f"  {'host, per GPU':<30} {budget.host_worker_gib:7.1f} GiB",
        f"  {'host, node':<30} {budget.host_node_gib:7.1f} GiB of {budget.host_limit_gib:.1f} (Ray's 95%)",
        f"  fits: {verdict(budget)}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--parts", metavar="SCENARIO", help=f"one of: {', '.join(BY_NAME)}")
    parser.add_argument("--markdown", action="store_true", help="the table as Markdown")
    args = parser.parse_args(argv)
    if args.parts:
        if args.parts not in BY_NAME:
            print(
                f"memory_plan.py: no scenario {args.parts!r} (one of: {', '.join(BY_NAME)})", file=sys.stderr
            )
            return 2
        print(parts(BY_NAME[args.parts]))
        return 0
    print(table(args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
