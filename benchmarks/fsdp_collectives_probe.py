"""How long FSDP's collectives for one micro-batch take on this node's GPUs, at a model's size.

    python benchmarks/fsdp_collectives_probe.py                     # the 7B (Qwen2.5-7B) on every GPU
    python benchmarks/fsdp_collectives_probe.py --backbone toolace-2-8b --gpus 4
    python benchmarks/fsdp_collectives_probe.py --cpu --gpus 2 --parameters 1e6   # gloo, to try the script

verl 0.9.1's FSDP (`strategy: fsdp`, full sharding, `use_no_sync_for_gradient_accumulation: false`) does, for
every micro-batch of an update: an all-gather of the bf16 weights for the forward, another for the backward,
and a reduce-scatter of the gradients in fp32 (`mixed_precision.reduce_dtype`). This times each of the three
on flat tensors of the whole model (the median of --repeats after a warm-up) and prints their sum, the
communication a micro-batch costs before any overlap with compute; `benchmarks/backbone_table.py`'s update
time against the micro-batch count says what a micro-batch costs in all. Prints a table; exits 2 without the
GPUs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

GIB = 1 << 30
OPERATIONS = (
    ("all-gather, bf16 weights (forward)", "gather", 2),
    ("all-gather, bf16 weights (backward)", "gather", 2),
    ("reduce-scatter, fp32 gradients", "reduce", 4),
)


def parameters_of(backbone: str) -> int:
    from seal.backbones.catalog import BACKBONES, parameter_count

    if backbone not in BACKBONES:
        raise SystemExit(
            f"fsdp_collectives_probe.py: no backbone {backbone!r} (one of {', '.join(BACKBONES)})"
        )
    return parameter_count(BACKBONES[backbone].config)


def time_operation(kind: str, width: int, parameters: int, repeats: int, device: str) -> float:
    """Median seconds of one collective over `parameters` elements of `width` bytes, the whole model's."""
    import torch
    import torch.distributed as dist

    ranks = dist.get_world_size()
    shard = -(-parameters // ranks)
    dtype = torch.bfloat16 if width == 2 else torch.float32
    whole = torch.empty(shard * ranks, dtype=dtype, device=device)
    part = torch.empty(shard, dtype=dtype, device=device)
    # torch 2.13 renamed both (the old names warn); the GPU nodes' torch 2.11 has only the old ones
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    reduce = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    seconds = []
    for _ in range(repeats + 1):
        dist.barrier()
        if device == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        if kind == "gather":
            gather(whole, part)
        else:
            reduce(part, whole)
        if device == "cuda":
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds[1:])


def rank_main(rank: int, ranks: int, parameters: int, repeats: int, cpu: bool, port: int) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    device = "cpu" if cpu else "cuda"
    if not cpu:
        torch.cuda.set_device(rank)
    dist.init_process_group("gloo" if cpu else "nccl", rank=rank, world_size=ranks)
    try:
        rows = [
            (name, time_operation(kind, width, parameters, repeats, device), width)
            for name, kind, width in OPERATIONS
        ]
    finally:
        dist.destroy_process_group()
    if rank:
        return
    print(f"{parameters:,} parameters over {ranks} {'CPU processes' if cpu else 'GPUs'}, median of {repeats}")
    print(f"{'collective':<38} {'GiB':>7} {'s':>8} {'GiB/s':>8}")
    for name, seconds, width in rows:
        gib = parameters * width / GIB
        print(f"{name:<38} {gib:>7.1f} {seconds:>8.3f} {gib / seconds:>8.1f}")
    print(f"{'one micro-batch, without overlap':<38} {'':>7} {sum(row[1] for row in rows):>8.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--backbone", default="qwen2.5-7b", help="the model whose size to move (seal.backbones)"
    )
    parser.add_argument("--parameters", type=float, help="a size instead of a backbone's, e.g. 7.6e9")
    parser.add_argument("--gpus", type=int, help="how many ranks (default: every GPU)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--cpu", action="store_true", help="gloo on CPU processes: tries the script, times nothing"
    )
    parser.add_argument("--port", type=int, default=29517)
    args = parser.parse_args(argv)
    import torch
    import torch.multiprocessing as mp

    parameters = int(args.parameters) if args.parameters else parameters_of(args.backbone)
    available = torch.cuda.device_count()
    ranks = args.gpus or available
    if not args.cpu and (ranks < 2 or ranks > available):
        print(
            f"fsdp_collectives_probe.py: {ranks} GPUs asked, {available} here (at least 2)", file=sys.stderr
        )
        return 2
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    mp.spawn(rank_main, args=(ranks, parameters, args.repeats, args.cpu, args.port), nprocs=ranks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
