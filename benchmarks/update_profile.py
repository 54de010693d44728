"""Where one mini-batch of the actor's update spends its GPU time, from verl's own torch profiler.

    python benchmarks/update_profile.py overrides DIR     # the verl overrides that write the trace into DIR
    python benchmarks/update_profile.py table DIR/*.json.gz
    python benchmarks/update_profile.py table TRACE --region "loss=compute_policy_loss"

`overrides` prints, one a line, what a launch adds to have verl 0.9.1's torch profiler (`global_profiler`,
`actor_rollout_ref.actor.profiler`) record rank 0 during one mini-batch of one step's update: the schedule
skips the update's first mini-batches (`--mini-batch`, default the second, so that one-off work is not in it)
and the earlier phases of the step are not kept; vLLM's profiler, which follows the actor's, is turned off.
A profiled step's timings include the profiler's own cost: profile in a launch of its own, not in a timing
run.

`table` reads such a chrome trace (`.json` or `.json.gz`) and prints two tables:
- the window, from the first GPU kernel to the end of the last: how much of it the GPU was busy, and how much
  of its communication no other kernel overlapped;
- kernel time by region and kind. A kernel's region is the CPU operation that launched it, found by the
  launch's correlation id and the region's time span on the launching thread: the LM head and log-probs
  (verl's fused kernels, Liger's or verl's Triton linear cross-entropy), the optimizer, and the `--region`s
  given; everything else (the decoder's layers, FSDP's hooks, the loss) is "decoder and the rest". Kinds come
  from the kernel's name: matmul, attention, communication (NCCL), copies, and the other kernels
  (element-wise, reductions, normalisation).
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

MICROSECONDS = 1e6
REGIONS = {
    "LM head and log-probs": r"FusedLinearForPPO|LigerFusedLinear|LinearCrossEntropy|linear_cross_entropy",
    "optimizer": r"^Optimizer\.",
}
"""The update's regions apart from the decoder, each a pattern of the CPU operations that open it."""
REST = "decoder and the rest"
KINDS = (
    ("communication", re.compile(r"nccl", re.I)),
    ("attention", re.compile(r"flash|fmha|varlen|attention", re.I)),
    ("matmul", re.compile(r"gemm|cutlass|nvjet|xmma|sm90_|sm100_|cublas|matmul", re.I)),
)
COPIES = "copies"
OTHER = "other kernels"
KERNEL_CATEGORIES = {"kernel": None, "gpu_memcpy": COPIES, "gpu_memset": COPIES}
LAUNCH_CATEGORIES = {"cuda_runtime", "cuda_driver"}
REGION_CATEGORIES = {"cpu_op", "user_annotation"}


class TraceError(ValueError):
    """A trace this script cannot read; the message is one line."""


@dataclass(frozen=True)
class Kernel:
    """One GPU activity of the trace: when it ran (microseconds), its kind and the region that launched it."""

    start: float
    end: float
    kind: str
    region: str


@dataclass
class Spans:
    """The time spans of one region's CPU operations on one thread, sorted by start."""

    starts: list[float] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)

    def holds(self, moment: float) -> bool:
        """Whether a span of this region is open at `moment` (nested spans: the latest one that began)."""
        index = bisect.bisect_right(self.starts, moment) - 1
        return index >= 0 and self.ends[index] >= moment


def profile_overrides(save_path: Path, step: int, mini_batch: int) -> list[str]:
    """verl 0.9.1's keys that make its torch profiler record rank 0's update mini-batch `mini_batch` (1 is
    the first) of step `step` into `save_path`, with CUDA activity."""
    torch_tool = "actor_rollout_ref.actor.profiler.tool_config.torch"
    return [
        "global_profiler.tool=torch",
        f"global_profiler.steps=[{step}]",
        f"global_profiler.save_path={save_path}",
        "actor_rollout_ref.actor.profiler.enable=true",
        "actor_rollout_ref.actor.profiler.ranks=[0]",
        "actor_rollout_ref.rollout.profiler.enable=false",  # it follows the actor's: vLLM would be traced too
        f"{torch_tool}.contents=[cuda]",
        f"{torch_tool}.schedule.skip_first={mini_batch - 1}",
        f"{torch_tool}.schedule.active=1",
    ]


def read_events(path: Path) -> list[dict]:
    """The trace's events; TraceError for a file that is not a chrome trace."""
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as handle:
            trace = json.load(handle)
    except FileNotFoundError:
        raise TraceError(f"no trace {path}") from None
    except (OSError, ValueError) as error:
        raise TraceError(f"{path} is not a chrome trace ({error.__class__.__name__})") from None
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list):
        raise TraceError(f"{path} is not a chrome trace (no traceEvents)")
    return [event for event in events if isinstance(event, dict) and event.get("ph") == "X"]


def kind_of(event: dict) -> str:
    """The kind of a GPU activity, from its category and then its name."""
    kind = KERNEL_CATEGORIES[event["cat"]]
    if kind is not None:
        return kind
    name = str(event.get("name", ""))
    return next((kind for kind, pattern in KINDS if pattern.search(name)), OTHER)


def region_spans(events: Iterable[dict], regions: dict[str, str]) -> dict[tuple[str, object], Spans]:
    """Each region's spans on each thread that ran one of its CPU operations."""
    patterns = {name: re.compile(pattern) for name, pattern in regions.items()}
    found: dict[tuple[str, object], list[tuple[float, float]]] = {}
    for event in events:
        if event.get("cat") not in REGION_CATEGORIES:
            continue
        for name, pattern in patterns.items():
            if pattern.search(str(event.get("name", ""))):
                start = float(event["ts"])
                found.setdefault((name, event.get("tid")), []).append(
                    (start, start + float(event.get("dur", 0)))
                )
    spans = {}
    for key, intervals in found.items():
        intervals.sort()
        spans[key] = Spans([start for start, _ in intervals], [end for _, end in intervals])
    return spans


def kernels_of(events: list[dict], regions: dict[str, str]) -> list[Kernel]:
    """The trace's GPU activities, each with its kind and the region of the CPU operation that launched it."""
    spans = region_spans(events, regions)
    launches = {}
    for event in events:
        correlation = (event.get("args") or {}).get("correlation")
        if event.get("cat") in LAUNCH_CATEGORIES and correlation is not None:
            launches[correlation] = (float(event["ts"]), event.get("tid"))
    kernels = []
    for event in events:
        if event.get("cat") not in KERNEL_CATEGORIES:
            continue
        launch = launches.get((event.get("args") or {}).get("correlation"))
        region = REST
        if launch is not None:
            moment, thread = launch
            region = next(
                (name for name in regions if (name, thread) in spans and spans[name, thread].holds(moment)),
                REST,
            )
        start = float(event["ts"])
        kernels.append(Kernel(start, start + float(event.get("dur", 0)), kind_of(event), region))
    return kernels


def merged(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of intervals, as sorted disjoint intervals."""
    union: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if union and start <= union[-1][1]:
            union[-1] = (union[-1][0], max(union[-1][1], end))
        else:
            union.append((start, end))
    return union


def length(intervals: Iterable[tuple[float, float]]) -> float:
    return sum(end - start for start, end in intervals)


def uncovered(intervals: list[tuple[float, float]], cover: list[tuple[float, float]]) -> float:
    """How much of the disjoint sorted `intervals` no interval of the disjoint sorted `cover` overlaps."""
    left, index = 0.0, 0
    for start, end in intervals:
        while index < len(cover) and cover[index][1] <= start:
            index += 1
        cursor, probe = start, index
        while probe < len(cover) and cover[probe][0] < end:
            left += max(0.0, cover[probe][0] - cursor)
            cursor = max(cursor, cover[probe][1])
            probe += 1
        left += max(0.0, end - cursor)
    return left


def window_rows(kernels: list[Kernel]) -> list[tuple[str, float, str]]:
    """The window's wall time, the GPU's busy and idle time in it, and the communication left exposed."""
    begin, finish = min(k.start for k in kernels), max(k.end for k in kernels)
    wall = finish - begin
    busy = length(merged((k.start, k.end) for k in kernels))
    talk = merged((k.start, k.end) for k in kernels if k.kind == "communication")
    work = merged((k.start, k.end) for k in kernels if k.kind != "communication")
    exposed = uncovered(talk, work)

    def share(part: float) -> str:
        return f"{part / wall:.1%}" if wall else "-"

    return [
        ("window (first kernel to last)", wall / MICROSECONDS, "100.0%"),
        ("GPU busy (any kernel running)", busy / MICROSECONDS, share(busy)),
        ("GPU idle", (wall - busy) / MICROSECONDS, share(wall - busy)),
        ("communication", length(talk) / MICROSECONDS, share(length(talk))),
        ("communication no other kernel overlaps", exposed / MICROSECONDS, share(exposed)),
    ]


def kernel_table(kernels: list[Kernel], regions: Iterable[str]):
    """Seconds of kernel time by region (rows, with their total) and kind (columns, with the total)."""
    import pandas as pd

    frame = pd.DataFrame(
        {"region": k.region, "kind": k.kind, "s": (k.end - k.start) / MICROSECONDS} for k in kernels
    )
    kinds = [kind for kind, _ in KINDS] + [COPIES, OTHER]
    table = frame.pivot_table(index="region", columns="kind", values="s", aggfunc="sum", fill_value=0.0)
    table = table.reindex(index=[*regions, REST], columns=kinds, fill_value=0.0)
    table["all kinds"] = table.sum(axis=1)
    table.loc["all regions"] = table.sum(axis=0)
    return table


def print_table(path: Path, regions: dict[str, str]) -> None:
    kernels = kernels_of(read_events(path), regions)
    if not kernels:
        raise TraceError(f"{path} holds no GPU kernels (was the profiler's contents [cuda]?)")
    print(f"{path}: {len(kernels):,} GPU activities")
    print(f"{'':40} {'s':>9} {'share':>7}")
    for label, seconds, share in window_rows(kernels):
        print(f"{label:40} {seconds:9.3f} {share:>7}")
    print()
    print(kernel_table(kernels, regions).to_string(float_format=lambda value: f"{value:.3f}"))


def parse_region(text: str) -> tuple[str, str]:
    name, sep, pattern = text.partition("=")
    if not sep or not name or not pattern:
        raise argparse.ArgumentTypeError(f"--region takes NAME=REGEX, got {text!r}")
    try:
        re.compile(pattern)
    except re.error as error:
        raise argparse.ArgumentTypeError(
            f"--region {name}: {pattern!r} is not a regular expression ({error})"
        ) from None
    return name, pattern


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    modes = parser.add_subparsers(dest="mode", required=True)
    make = modes.add_parser("overrides", help="the verl overrides that profile one update mini-batch")
    make.add_argument("save_path", type=Path, help="where verl writes the trace (made absolute)")
    make.add_argument("--step", type=int, default=2, help="the training step to profile (default 2)")
    make.add_argument(
        "--mini-batch", type=int, default=2, help="which of its update's mini-batches (1 = first)"
    )
    read = modes.add_parser("table", help="the tables of one or more traces")
    read.add_argument("traces", nargs="+", type=Path)
    read.add_argument(
        "--region", action="append", type=parse_region, default=[], help="NAME=REGEX, more regions"
    )
    args = parser.parse_args(argv)
    if args.mode == "overrides":
        if min(args.step, args.mini_batch) < 1:
            parser.error("--step and --mini-batch count from 1")
        print("\n".join(profile_overrides(args.save_path.resolve(), args.step, args.mini_batch)))
        return 0
    regions = {**REGIONS, **dict(args.region)}
    try:
        for index, path in enumerate(args.traces):
            if index:
                print()
            print_table(path, regions)
    except TraceError as error:
        print(f"update_profile.py: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
