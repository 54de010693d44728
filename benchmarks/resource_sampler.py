"""Run a command and sample what it holds: host memory (the node's and the largest processes'), GPU memory,
and when each training step's metrics arrive.

    python benchmarks/resource_sampler.py --out experiments/RUN/resources.json \\
        --metrics experiments/RUN/metrics -- python launcher.py --conf exp/SEAL_3B_1gpu.yaml ...

Every `--interval` seconds it reads the node's used memory (total − available, what Ray's 95% kill line
watches), every process's resident set (pinned host memory is resident: it counts), and each GPU's used memory
(NVML, as nvidia-smi shows it: vLLM's whole share while it runs; only the GPUs CUDA_VISIBLE_DEVICES names, so
runs side by side on one node each count their own); it prints a progress line every `--every`
seconds. The command's output passes through it unchanged, and the moment each landmark of the start-up first
appears there is kept (LANDMARKS: the launcher's record, Ray, and the log lines of verl's trainer set-up).
At the end (or on SIGINT/SIGTERM, which it passes to the command) it writes the peaks, the landmarks, the
time each step's line appeared in the metrics files and the model of each GPU it sampled to `--out`, the
samples to the same name with `.csv`, and exits with the command's status. benchmarks/backbone_table.py turns
it and the metrics into the tables.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

GIB = 1 << 30
TOP_PROCESSES = 3
LANDMARKS = {
    "launcher": re.compile(rb"launch recorded in "),
    "ray": re.compile(rb"Started a local Ray instance|Connected to Ray cluster"),
    "task runner": re.compile(rb"TransferQueue starting beside "),
    "transfer queue": re.compile(rb"TransferQueue ready in "),
    "data loaders": re.compile(rb"train and validate dataloader initialized"),
    "worker group": re.compile(rb"create worker group"),
    "actor and ref": re.compile(rb"actor and ref model engine initialized"),
    "reward loop": re.compile(rb"reward loop manager initialized"),
    "rollout servers": re.compile(rb"checkpoint engine manager initialized"),
    "ready": re.compile(rb"all initialize finished, ready to fit"),
}
"""The start-up's landmarks in a launch's output: SEAL's launcher records the launch before it starts Ray;
SEAL's task runner says when it has its config and starts TransferQueue beside the trainer's set-up, and when
TransferQueue's controller and storage actors are up (seal/trainer/rl/task_runner.py; the one landmark off the
set-up's path); then verl 0.9.1's trainer set-up logs each line in turn (trainer/ppo/v1/trainer_base.py): the
tokenizer and data loaders, the worker processes, the actor and reference models, the reward loop, the vLLM
servers (the checkpoint engine is set up right after them) and the replicas put to sleep with any checkpoint
loaded."""


def visible_gpus(count: int, visible: str | None) -> list[int]:
    """The node's GPU indices a command sees: those CUDA_VISIBLE_DEVICES lists by number (NVML and nvidia-smi
    number every GPU of the node whatever it says), else all `count`."""
    if visible is None or not all(part.strip().isdigit() for part in visible.split(",")):
        return list(range(count))
    return [index for index in (int(part) for part in visible.split(",")) if index < count]


class GpuMemory:
    """Used memory of each GPU the command sees, through NVML (nvidia-ml-py, a vLLM dependency); nvidia-smi
    where NVML is missing; nothing on a machine without GPUs."""

    def __init__(self) -> None:
        self.nvml: Any = None
        self.visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            indices = visible_gpus(pynvml.nvmlDeviceGetCount(), self.visible)
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in indices]
        except Exception:  # no NVML library or no driver: fall back below
            self.nvml = None

    def names(self) -> list[str]:
        """The model of each GPU the command sees ("NVIDIA H200"): what a run's numbers were measured on."""
        if self.nvml is not None:
            return [str(self.nvml.nvmlDeviceGetName(h)) for h in self.handles]
        return self._query("name")

    def used_gib(self) -> list[float]:
        if self.nvml is not None:
            return [self.nvml.nvmlDeviceGetMemoryInfo(h).used / GIB for h in self.handles]
        return [float(used) / 1024 for used in self._query("memory.used")]

    def _query(self, field: str) -> list[str]:
        """nvidia-smi's `field` for each GPU the command sees; empty where nvidia-smi cannot answer."""
        try:
            out = subprocess.run(
                ["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader,nounits"],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            ).stdout
        except (OSError, subprocess.SubprocessError):
            return []
        rows = [line.strip() for line in out.splitlines() if line.strip()]
        return [rows[i] for i in visible_gpus(len(rows), self.visible)]


def process_rss() -> dict[int, tuple[float, str]]:
    """pid -> (RSS GiB, a short description) for every process that can be read."""
    found = {}
    for process in psutil.process_iter(["pid", "name", "cmdline", "memory_info"]):
        info = process.info
        if info["memory_info"] is None:
            continue
        label = " ".join(info["cmdline"] or [info["name"] or "?"])[:100]
        found[info["pid"]] = (info["memory_info"].rss / GIB, label)
    return found


class OutputWatch:
    """Copies the command's output to ours line by line and keeps the seconds at which each landmark first
    appeared (a thread: the output never waits for a sample)."""

    def __init__(self, stream: Any, start: float) -> None:
        self.seen: dict[str, float] = {}
        self.thread = threading.Thread(target=self._copy, args=(stream, start), daemon=True)
        self.thread.start()

    def _copy(self, stream: Any, start: float) -> None:
        out = sys.stdout.buffer
        for line in iter(stream.readline, b""):
            out.write(line)
            out.flush()
            for name, pattern in LANDMARKS.items():
                if name not in self.seen and pattern.search(line):
                    self.seen[name] = round(time.monotonic() - start, 1)

    def finish(self) -> dict[str, float]:
        """The landmarks seen, once the output has ended (or a few seconds after the command did: a process
        it left behind may hold the output open)."""
        self.thread.join(timeout=5)
        return dict(self.seen)


class StepWatch:
    """The time each training step's record first appears in `metrics/*.jsonl` (verl's `file` logger).
    What the files hold when the watch starts is an earlier launch's (a resumed run's): not this command's."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        earlier = sorted(folder.glob("*.jsonl")) if folder is not None and folder.is_dir() else []
        self.offsets: dict[Path, int] = {path: path.stat().st_size for path in earlier}
        self.seen: dict[int, float] = {}

    def poll(self, elapsed: float) -> None:
        if self.folder is None or not self.folder.is_dir():
            return
        for path in sorted(self.folder.glob("*.jsonl")):
            with path.open("rb") as handle:
                handle.seek(self.offsets.get(path, 0))
                data = handle.read()
            complete = data[: data.rfind(b"\n") + 1]
            self.offsets[path] = self.offsets.get(path, 0) + len(complete)
            for line in complete.splitlines():
                record = json.loads(line)
                if "timing_s/step" in record.get("data", {}):
                    self.seen.setdefault(int(record["step"]), elapsed)


def sample_loop(child: subprocess.Popen, args: argparse.Namespace, start: float) -> dict[str, Any]:
    gpus, steps = GpuMemory(), StepWatch(args.metrics)
    output = OutputWatch(child.stdout, start)
    peaks: dict[str, Any] = {"node_used_gib": 0.0, "gpu_used_gib": 0.0, "processes": {}}
    rows: list[list[float]] = []
    last_report = 0.0
    while True:
        elapsed = time.monotonic() - start
        memory = psutil.virtual_memory()
        node_used = (memory.total - memory.available) / GIB
        processes = process_rss()
        top_pid, (top_rss, _) = max(processes.items(), key=lambda item: item[1][0], default=(0, (0.0, "")))
        gpu = gpus.used_gib()
        steps.poll(elapsed)
        peaks["node_used_gib"] = max(peaks["node_used_gib"], node_used)
        peaks["gpu_used_gib"] = max([peaks["gpu_used_gib"], *gpu])
        for pid, (rss, label) in processes.items():
            held = peaks["processes"].get(pid)
            if held is None or rss > held[0]:
                peaks["processes"][pid] = (rss, label)
        rows.append(
            [round(elapsed, 1), round(node_used, 2), round(top_rss, 2), top_pid, *(round(g, 2) for g in gpu)]
        )
        if elapsed - last_report >= args.every:
            last_report = elapsed
            gpu_text = ", ".join(f"{g:.1f}" for g in gpu) or "none"
            print(
                f"[sampler] {elapsed:5.0f} s: node {node_used:.1f} GiB, largest process {top_rss:.1f} GiB, "
                f"GPU {gpu_text} GiB, steps done {len(steps.seen)}",
                file=sys.stderr,
                flush=True,
            )
        if child.poll() is not None:
            break
        time.sleep(args.interval)
    steps.poll(time.monotonic() - start)
    top = sorted(peaks["processes"].items(), key=lambda item: item[1][0], reverse=True)[:TOP_PROCESSES]
    return {
        "command": args.command,
        "returncode": child.returncode,
        "wall_s": round(time.monotonic() - start, 1),
        "peak_node_used_gib": round(peaks["node_used_gib"], 2),
        "node_total_gib": round(psutil.virtual_memory().total / GIB, 2),
        "peak_gpu_used_gib": round(peaks["gpu_used_gib"], 2),
        "gpu_names": gpus.names(),
        "peak_processes": [
            {"pid": pid, "rss_gib": round(rss, 2), "command": label} for pid, (rss, label) in top
        ],
        "step_seen_s": {str(step): round(t, 1) for step, t in sorted(steps.seen.items())},
        "landmarks_s": output.finish(),
        "samples": rows,
    }


def write(summary: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = summary.pop("samples")
    with out.with_suffix(".csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        gpus = max((len(row) - 4 for row in rows), default=0)
        writer.writerow(
            ["s", "node_used_gib", "largest_rss_gib", "largest_pid", *(f"gpu{i}_gib" for i in range(gpus))]
        )
        writer.writerows(rows)
    out.write_text(json.dumps(summary, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True, help="the summary JSON to write")
    parser.add_argument("--metrics", type=Path, help="the run's metrics folder (experiments/RUN/metrics)")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between samples (default 2)")
    parser.add_argument(
        "--every", type=float, default=30.0, help="seconds between progress lines (default 30)"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    args.command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not args.command:
        parser.error("give the command to run after --")
    start = time.monotonic()
    try:
        child = subprocess.Popen(
            args.command, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
    except OSError as error:
        print(f"resource_sampler: cannot run {args.command[0]}: {error}", file=sys.stderr)
        return 127

    def forward(signum: int, _frame: Any) -> None:
        if child.poll() is None:
            os.killpg(child.pid, signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, forward)
    summary = sample_loop(child, args, start)
    write(summary, args.out)
    print(
        f"[sampler] done in {summary['wall_s']} s (exit {summary['returncode']}): node peak "
        f"{summary['peak_node_used_gib']} GiB, GPU peak {summary['peak_gpu_used_gib']} GiB -> {args.out}",
        file=sys.stderr,
    )
    return summary["returncode"]


if __name__ == "__main__":
    sys.exit(main())
