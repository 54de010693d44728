"""How much host memory this node's torch pins for one offloaded FSDP unit: one Qwen2.5-3B decoder layer in
fp32 (308 MB), copied to the host the way verl 0.9.1 offloads it (`.to("cpu", non_blocking=True)`).

    python benchmarks/pinned_probe.py    # the default allocator, then pinned rounding off if torch knows it

PyTorch's caching host allocator rounds every pinned block up to a power of two (512 MiB here); torch builds
that know `pinned_max_round_threshold_mb` stop rounding above that size. Prints one line per setting; exits 2
on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

UNIT = 77_076_992
"""Parameters of one Qwen2.5-3B decoder layer (seal.backbones.memory.fsdp_units)."""
NO_ROUNDING = "pinned_max_round_threshold_mb:0"


def measure() -> str:
    import psutil
    import torch

    if not torch.cuda.is_available():
        raise SystemExit(2)
    device = torch.empty(UNIT, dtype=torch.float32, device="cuda")
    process = psutil.Process()
    before = process.memory_info().rss
    host = device.to("cpu", non_blocking=True)
    torch.cuda.synchronize()
    grown = (process.memory_info().rss - before) / (1 << 20)
    stats = torch.cuda.host_memory_stats() if hasattr(torch.cuda, "host_memory_stats") else {}
    pinned = stats.get("allocated_bytes.current")
    pinned_text = f"{pinned / (1 << 20):.0f} MiB" if pinned is not None else "not reported"
    return (
        f"torch {torch.__version__}, {os.environ.get('PYTORCH_CUDA_ALLOC_CONF') or 'default allocator'}: "
        f"{host.nbytes / (1 << 20):.0f} MiB copied, resident set +{grown:.0f} MiB, "
        f"pinned allocator {pinned_text}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--one", action="store_true", help="measure once with this environment (used internally)"
    )
    args = parser.parse_args(argv)
    if args.one:
        try:
            print(measure())
        except SystemExit:
            print("pinned_probe: no GPU on this machine: nothing to probe", file=sys.stderr)
            return 2
        return 0
    status = 0
    for conf in ("", NO_ROUNDING):
        env = {**os.environ, "PYTORCH_CUDA_ALLOC_CONF": conf}
        done = subprocess.run([sys.executable, __file__, "--one"], env=env, capture_output=True, text=True)
        if done.returncode == 2:
            print(done.stderr.strip(), file=sys.stderr)
            return 2
        if done.returncode:
            last = (done.stderr.strip().splitlines() or ["failed"])[-1]
            print(f"{conf or 'default allocator'}: not usable with this torch ({last[:160]})")
            status = status if conf else 1
        else:
            print(done.stdout.strip())
    return status


if __name__ == "__main__":
    sys.exit(main())
