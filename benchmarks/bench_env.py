"""Load benchmark of the environment service: ground-truth replays over HTTP and in-process.

    python benchmarks/bench_env.py replay --tasks 800 --concurrency 32     # HTTP vs in-process table
    python benchmarks/bench_env.py open --episodes 256                     # service RSS with N episodes open
    python benchmarks/bench_env.py ray --actors 1 2 4 --episodes 800       # one HTTP service vs N Ray actors

Starts `python -m env_service` on a free loopback port (or uses --base-url, loopback only), replays
each task's ground truth (per GT turn: the turn's calls in one message, then "Done."), and reports
throughput, per-endpoint latency percentiles measured at the client, errors, rewards and the peak RSS
of the service process. `ray` starts a local Ray instance and replays the same episodes through
`seal.rollout.env_backend=ray`'s environment actors (seal/env/ray_actors.py), N of them on this
node, for each N of --actors; its service CPU is the actors' (Ray's own daemons are not counted). Every
run is bounded by --tasks/--episodes and --timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import statistics
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import psutil
from tqdm import tqdm

from seal.bfcl.tasks import load_tasks, split_ids
from seal.env.client import EnvClient, EnvServiceError, HttpEnvClient, InProcessEnvClient, open_episode
from seal.env.episode import EpisodeResult
from seal.env.process import ServiceStartError, running_service
from seal.env.store import EpisodeStore, StoreSettings
from seal.protocol import DEFAULT_PROTOCOL, PROTOCOLS
from seal.protocol.ground_truth import ground_truth_actions

ENDPOINTS = ("create", "step", "finish", "delete")
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
MIB = 1 << 20


def freeze_garbage_collector() -> None:
    """Exempt the loaded tasks from garbage collection here, as the service does for itself: a full
    collection over them stalls every request in flight, and that is this process's pause, not the
    service's latency."""
    gc.collect()
    gc.freeze()


def pick_tasks(split: str, n: int) -> list[str]:
    """`n` tasks of the split, spread evenly so every category is represented."""
    ids = list(split_ids(split))
    if n >= len(ids):
        return ids
    return [ids[i * len(ids) // n] for i in range(n)]


@dataclass
class Run:
    """What one replay pass measured."""

    name: str
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: list[str] = field(default_factory=list)
    rewards: dict[str, float] = field(default_factory=dict)
    episodes: int = 0
    requests: int = 0
    seconds: float = 0.0
    timed_out: bool = False
    peak_rss: int | None = None
    client_cpu_s: float = 0.0
    service_cpu_s: float | None = None

    async def timed(self, endpoint: str, call: Any) -> Any:
        start = time.perf_counter()
        try:
            return await call
        finally:
            self.latencies[endpoint].append(time.perf_counter() - start)
            self.requests += 1


class TimedClient:
    """The calls an episode makes, each timed into the run's per-endpoint latencies."""

    def __init__(self, client: EnvClient, run: Run) -> None:
        self.client = client
        self.run = run

    async def create_episode(self, task_id: str, mode: str, protocol: str | None = None) -> dict[str, Any]:
        return await self.run.timed("create", self.client.create_episode(task_id, mode, protocol))

    async def step(self, episode_id: str, action: str) -> dict[str, Any]:
        return await self.run.timed("step", self.client.step(episode_id, action))

    async def finish(self, episode_id: str, close: bool = False, cut: str | None = None) -> EpisodeResult:
        return await self.run.timed("finish", self.client.finish(episode_id, close, cut))

    async def delete(self, episode_id: str) -> None:
        await self.run.timed("delete", self.client.delete(episode_id))


async def play(
    client: EnvClient, run: Run, task_id: str, actions: Sequence[str], mode: str, fmt: str
) -> None:
    """One episode as an agent loop plays it, through `open_episode`: create, step until done, then
    finish and close in one request; an episode that fails is deleted, so a run leaves none open."""
    try:
        async with open_episode(cast(EnvClient, TimedClient(client, run)), task_id, mode, fmt) as episode:
            for action in actions:
                if (await episode.step(action))["done"]:
                    break
        run.rewards[task_id] = cast(EpisodeResult, episode.result).reward
    except EnvServiceError as exc:
        run.errors.append(f"{task_id}: {exc}")
    run.episodes += 1


async def replay_all(
    client: EnvClient,
    run: Run,
    plan: dict[str, list[str]],
    concurrency: int,
    mode: str,
    fmt: str,
    timeout: float,
) -> Run:
    queue: asyncio.Queue[str] = asyncio.Queue()
    for task_id in plan:
        queue.put_nowait(task_id)
    bar = tqdm(total=len(plan), desc=run.name, unit="ep", leave=False, file=sys.stderr)

    async def worker() -> None:
        while not queue.empty():
            task_id = queue.get_nowait()
            await play(client, run, task_id, plan[task_id], mode, fmt)
            bar.update()

    start, cpu = time.perf_counter(), cpu_seconds(psutil.Process())
    try:
        async with asyncio.timeout(timeout):
            await asyncio.gather(*(worker() for _ in range(concurrency)))
    except TimeoutError:
        run.timed_out = True
    run.seconds = time.perf_counter() - start
    run.client_cpu_s = cpu_seconds(psutil.Process()) - cpu
    bar.close()
    return run


# -- the service process ---------------------------------------------------------------------------
def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


class ProcessProbe:
    """Polls a process's resident memory (with its children) in a thread and keeps the peak; also
    counts the CPU seconds it used while probed."""

    def __init__(self, pid: int, interval: float = 0.05) -> None:
        self.process = psutil.Process(pid)
        self.interval = interval
        self.peak = 0
        self.cpu_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def current(self) -> int:
        try:
            processes = [self.process, *self.process.children(recursive=True)]
            return sum(p.memory_info().rss for p in processes)
        except psutil.Error:
            return 0

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.current())
            self._stop.wait(self.interval)

    def __enter__(self) -> ProcessProbe:
        self.cpu_s = -cpu_seconds(self.process)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.current())
        self.cpu_s += cpu_seconds(self.process)


@dataclass
class Service:
    base_url: str
    pid: int | None


@contextlib.contextmanager
def service(base_url: str | None, max_episodes: int, log_level: str) -> Iterator[Service]:
    """The service under test: the given loopback URL, or a fresh `python -m env_service` subprocess."""
    if base_url is not None:
        host = urlsplit(base_url).hostname
        if host not in LOOPBACK:
            raise SystemExit(f"--base-url must be a loopback address, got {host!r}")
        yield Service(base_url, None)
        return
    flags = ["--max-episodes", str(max_episodes), "--log-level", log_level]
    try:
        with running_service(flags) as child:
            yield Service(child.url, child.pid)
    except ServiceStartError as exc:
        raise SystemExit(str(exc)) from exc


# -- reporting -----------------------------------------------------------------------------------
def machine() -> str:
    """Cores and load: on a shared machine the numbers mean little without them."""
    load = ", ".join(f"{x:.2f}" for x in psutil.getloadavg())
    return f"{psutil.cpu_count()} cores, load average {load}"


def percentiles(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    pick = [ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 for q in (0.5, 0.95, 0.99)]
    return "/".join(f"{v:.1f}" for v in pick)


def summary(run: Run) -> dict[str, Any]:
    failed = sorted(task for task, reward in run.rewards.items() if reward < 1)
    return {
        "episodes": run.episodes,
        "wall_s": round(run.seconds, 2),
        "episodes_per_s": round(run.episodes / run.seconds, 1) if run.seconds else 0.0,
        "requests_per_s": round(run.requests / run.seconds, 1) if run.seconds else 0.0,
        **{f"{e}_ms_p50_p95_p99": percentiles(run.latencies[e]) for e in ENDPOINTS},
        **{
            f"{e}_ms_mean": round(statistics.fmean(run.latencies[e]) * 1000, 2) if run.latencies[e] else None
            for e in ENDPOINTS
        },
        "errors": len(run.errors),
        "reward_1": sum(1 for r in run.rewards.values() if r == 1),
        "reward_below_1": failed,
        "timed_out": run.timed_out,
        "peak_service_rss_mib": round(run.peak_rss / MIB, 1) if run.peak_rss else None,
        "client_cpu_ms_per_episode": round(run.client_cpu_s * 1000 / run.episodes, 1)
        if run.episodes
        else None,
        "service_cpu_ms_per_episode": (
            round(run.service_cpu_s * 1000 / run.episodes, 1) if run.service_cpu_s and run.episodes else None
        ),
    }


def print_table(columns: dict[str, dict[str, Any]], extra: dict[str, Any] | None = None) -> None:
    names = list(columns)
    keys = list(next(iter(columns.values())))
    width = max(len(k) for k in [*keys, *(extra or {})]) + 2
    print("".ljust(width) + "".join(n.rjust(24) for n in names))
    for key in keys:
        cells = [columns[n][key] for n in names]
        if all(isinstance(c, list) for c in cells):
            print(key.ljust(width) + "".join(str(len(c)).rjust(24) for c in cells))
            for name, cell in zip(names, cells, strict=True):
                if cell:
                    print(f"  {name}: {', '.join(cell)}")
            continue
        print(key.ljust(width) + "".join(str(c).rjust(24) for c in cells))
    for key, value in (extra or {}).items():
        print(key.ljust(width) + str(value).rjust(24))


# -- modes ---------------------------------------------------------------------------------------
async def http_run(args: argparse.Namespace, plan: dict[str, list[str]]) -> Run:
    """The replay through one HTTP service, with the service's peak RSS and CPU."""
    with service(args.base_url, max(args.concurrency, 512), args.log_level) as svc:
        client = HttpEnvClient(svc.base_url, timeout=args.request_timeout, max_connections=args.concurrency)
        run = Run("http")
        probe = ProcessProbe(svc.pid) if svc.pid else None
        with probe or contextlib.nullcontext():
            await replay_all(client, run, plan, args.concurrency, args.mode, args.protocol, args.timeout)
        if probe is not None:
            run.peak_rss, run.service_cpu_s = probe.peak, probe.cpu_s
        await client.aclose()
    return run


def report(runs: dict[str, Run], columns: dict[str, dict[str, Any]], extra: dict[str, Any]) -> dict[str, Any]:
    """The table, each run's first errors, and the JSON both modes return."""
    print_table(columns, extra)
    for run in runs.values():
        for error in run.errors[:10]:
            print(f"  {run.name} error: {error}")
    return {"columns": columns, **extra}


def replay_plan(args: argparse.Namespace, count: int) -> tuple[list[str], dict[str, list[str]]]:
    """`count` tasks of the split and their ground-truth actions; the loaded tasks leave the collector."""
    tasks = pick_tasks(args.split, count)
    plan = {task_id: ground_truth_actions(task_id, args.protocol) for task_id in tasks}
    freeze_garbage_collector()
    return tasks, plan


async def bench_replay(args: argparse.Namespace) -> dict[str, Any]:
    tasks, plan = replay_plan(args, args.tasks)
    runs: dict[str, Run] = {"http": await http_run(args, plan)}
    if not args.skip_inprocess:
        client_local = InProcessEnvClient(
            EpisodeStore(StoreSettings(max_episodes=max(args.concurrency, 512)))
        )
        runs["in-process"] = await replay_all(
            client_local, Run("in-process"), plan, args.concurrency, args.mode, args.protocol, args.timeout
        )
    columns = {name: summary(run) for name, run in runs.items()}
    extra = {}
    if "in-process" in columns and columns["in-process"]["episodes_per_s"]:
        extra["http/in-process episodes/s"] = round(
            columns["http"]["episodes_per_s"] / columns["in-process"]["episodes_per_s"], 2
        )
    print(
        f"\nreplay: {len(tasks)} tasks of split {args.split!r}, concurrency {args.concurrency}, "
        f"mode {args.mode}, protocol {args.protocol}; latencies measured at the client; {machine()}"
    )
    return report(runs, columns, extra)


async def ray_run(args: argparse.Namespace, plan: dict[str, list[str]], actors: int) -> Run:
    """The replay through `actors` environment actors on this node; service CPU and RSS are theirs."""
    import ray

    from seal.env.ray_actors import FLEET_NAME, NAMESPACE, RayEnvClient, start_env_actors

    placement = start_env_actors(StoreSettings(max_episodes=max(args.concurrency, 512)), per_node=actors)
    names = [name for names in placement.actors.values() for name in names]
    handles = [ray.get_actor(name, namespace=NAMESPACE) for name in names]
    pids = ray.get([handle.__ray_call__.remote(lambda actor: os.getpid()) for handle in handles])
    probes = [ProcessProbe(pid) for pid in pids]
    run = Run(f"ray x{actors}")
    with contextlib.ExitStack() as stack:
        for probe in probes:
            stack.enter_context(probe)
        client = RayEnvClient(timeout=args.request_timeout)
        await replay_all(client, run, plan, args.concurrency, args.mode, args.protocol, args.timeout)
    run.peak_rss = sum(probe.peak for probe in probes)
    run.service_cpu_s = sum(probe.cpu_s for probe in probes)
    for handle in [*handles, placement.fleet]:
        ray.kill(handle, no_restart=True)
    for name in [*names, FLEET_NAME]:
        while _named_actor_exists(name):
            await asyncio.sleep(0.1)
    return run


def _named_actor_exists(name: str) -> bool:
    import ray

    from seal.env.ray_actors import NAMESPACE

    try:
        ray.get_actor(name, namespace=NAMESPACE)
    except ValueError:
        return False
    return True


async def bench_ray(args: argparse.Namespace) -> dict[str, Any]:
    """One HTTP service, then N environment actors for each N of --actors, on the same episodes."""
    import ray

    tasks, plan = replay_plan(args, args.episodes)
    runs: dict[str, Run] = {"http": await http_run(args, plan)}
    ray.init(num_cpus=psutil.cpu_count(), include_dashboard=False, logging_level="warning")
    try:
        for actors in args.actors:
            runs[f"ray x{actors}"] = await ray_run(args, plan, actors)
    finally:
        ray.shutdown()
    columns = {name: summary(run) for name, run in runs.items()}
    http_rate = columns["http"]["episodes_per_s"]
    extra = {
        f"{name} / http episodes/s": round(column["episodes_per_s"] / http_rate, 2)
        for name, column in columns.items()
        if name != "http" and http_rate
    }
    one = columns.get("ray x1", {}).get("episodes_per_s")
    for actors in args.actors:
        if one and actors > 1:
            rate = columns[f"ray x{actors}"]["episodes_per_s"]
            extra[f"ray x{actors} scaling efficiency"] = round(rate / (one * actors), 2)
    print(
        f"\nray: {len(tasks)} ground-truth episodes of split {args.split!r}, concurrency {args.concurrency}, "
        f"mode {args.mode}, protocol {args.protocol}; one HTTP service, then N actors on this node; "
        f"{machine()}"
    )
    return report(runs, columns, extra)


async def hold_open(
    client: EnvClient, run: Run, plan: dict[str, list[str]], probe: ProcessProbe, args: argparse.Namespace
) -> dict[str, Any]:
    """Create every episode at once, replay them all in lockstep while all stay open, then release."""
    tasks = list(plan)
    created = await asyncio.gather(
        *(run.timed("create", client.create_episode(t, args.mode, args.protocol)) for t in tasks)
    )
    ids = dict(zip(tasks, (c["episode_id"] for c in created), strict=True))
    open_now = (await client.health())["episodes_open"]
    after_create = probe.current()
    live = set(tasks)
    for turn in tqdm(range(max(map(len, plan.values()))), desc="steps", leave=False, file=sys.stderr):
        stepping = [t for t in tasks if t in live and turn < len(plan[t])]
        results = await asyncio.gather(
            *(run.timed("step", client.step(ids[t], plan[t][turn])) for t in stepping)
        )
        live -= {t for t, result in zip(stepping, results, strict=True) if result["done"]}
    finished = await asyncio.gather(*(run.timed("finish", client.finish(ids[t])) for t in tasks))
    after_finish = probe.current()
    await asyncio.gather(*(run.timed("delete", client.delete(ids[t])) for t in tasks))
    return {
        "episodes_open_at_once": open_now,
        "rss_after_create_mib": round(after_create / MIB, 1),
        "rss_after_finish_mib": round(after_finish / MIB, 1),
        "reward_1": sum(1 for r in finished if r.reward == 1),
        "reward_below_1": [t for t, r in zip(tasks, finished, strict=True) if r.reward < 1],
        "create_ms_p50_p95_p99": percentiles(run.latencies["create"]),
        "step_ms_p50_p95_p99": percentiles(run.latencies["step"]),
    }


async def bench_open(args: argparse.Namespace) -> dict[str, Any]:
    """Open N episodes at once and keep them open through their replays; report the service's RSS."""
    plan = {
        task_id: ground_truth_actions(task_id, args.protocol) for task_id in pick_tasks("all", args.episodes)
    }
    freeze_garbage_collector()
    if args.base_url is not None:
        raise SystemExit(
            "open mode measures the service's memory: let it start the service (omit --base-url)"
        )
    with service(None, max(args.episodes, 512), args.log_level) as svc:
        assert svc.pid is not None
        client = HttpEnvClient(svc.base_url, timeout=args.request_timeout, max_connections=args.episodes)
        with ProcessProbe(svc.pid) as probe:
            baseline = probe.current()
            try:
                async with asyncio.timeout(args.timeout):
                    held = await hold_open(client, Run("open"), plan, probe, args)
            except TimeoutError:
                raise SystemExit(f"open: not done within --timeout {args.timeout:g} s") from None
        await client.aclose()
    values = {
        "rss_baseline_mib": round(baseline / MIB, 1),
        **held,
        "rss_peak_mib": round(probe.peak / MIB, 1),
    }
    print(f"\nopen: {len(plan)} episodes created at once, all replayed while open; {machine()}")
    print_table({"service": values})
    return values


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("bench", choices=["replay", "open", "ray"], nargs="?", default="replay")
    parser.add_argument(
        "--tasks", type=int, default=800, help="replay: how many tasks (spread over the split)"
    )
    parser.add_argument("--split", choices=["train", "val", "test", "all"], default="all")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument(
        "--episodes", type=int, default=256, help="open: episodes held at once; ray: episodes per pass"
    )
    parser.add_argument(
        "--actors", type=int, nargs="+", default=[1, 2], help="ray: environment actor counts to compare"
    )
    parser.add_argument("--mode", choices=["train", "eval"], default="eval")
    parser.add_argument("--protocol", choices=sorted(PROTOCOLS), default=DEFAULT_PROTOCOL)
    parser.add_argument("--base-url", default=None, help="a running service on loopback (default: start one)")
    parser.add_argument("--timeout", type=float, default=600.0, help="bound on each pass, seconds")
    parser.add_argument("--request-timeout", type=float, default=60.0)
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="the started service's log level (info writes the JSON access log)",
    )
    parser.add_argument("--skip-inprocess", action="store_true", help="replay: HTTP only")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args(argv)
    if min(args.tasks, args.concurrency, args.episodes, *args.actors) < 1 or args.timeout <= 0:
        parser.error("--tasks, --concurrency, --episodes, --actors and --timeout must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    load_tasks()
    benches = {"replay": bench_replay, "open": bench_open, "ray": bench_ray}
    result = asyncio.run(benches[args.bench](args))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
