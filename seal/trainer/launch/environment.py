"""The environment a launch brings up and checks: the HTTP service it uses or starts, or (with the `ray`
backend) none, the trainer placing environment actors instead; then the preflight of that environment with
the run's settings. Over several nodes (`trainer.nnodes > 1`) rollout workers run on every node, so an HTTP
service must be one they all reach (`multi_node_problem`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from omegaconf import DictConfig

from seal.env.auth import TOKEN_ENV, is_loopback
from seal.env.client import InProcessEnvClient
from seal.env.process import is_healthy, running_service
from seal.env.store import EpisodeStore
from seal.flags import to_flags
from seal.trainer.preflight import check_environment, check_service, preflight_tasks
from seal.trainer.settings import SealSettings, episode_capacity
from seal.urls import masked_url

MULTI_NODE_FIX = (
    "allowed: seal.rollout.env_backend=ray (environment actors on every node), or --env-url of a running "
    f"service every node reaches (seal serve --host 0.0.0.0, with {TOKEN_ENV} set on every node)"
)


def multi_node_problem(nodes: int, backend: str, url: str, fresh: bool) -> str | None:
    """Why the HTTP environment of a launch over `nodes` nodes cannot serve every rollout worker, or None.
    The service the launcher starts (`fresh`, or none answering at `url`) listens on this node's loopback;
    a loopback or unspecified address in `url` names each node itself: the workers on the other nodes
    would reach nothing, or a service of their own that the trainer's Evolve never updates."""
    if nodes <= 1 or backend != "http":
        return None
    if fresh:
        return (
            f"trainer.nnodes={nodes} with --with-bfcl: the service the launcher starts listens on this "
            f"node's loopback, which the rollout workers on the other nodes cannot reach; {MULTI_NODE_FIX}"
        )
    if not reaches_other_nodes(url):
        return (
            f"trainer.nnodes={nodes} with the environment service at {masked_url(url)}, an address the "
            f"rollout workers on the other nodes cannot reach; {MULTI_NODE_FIX}"
        )
    if not is_healthy(url):
        return (
            f"trainer.nnodes={nodes}: no environment service answers at {masked_url(url)}, and the one the "
            f"launcher would start listens on this node's loopback; {MULTI_NODE_FIX}"
        )
    return None


def reaches_other_nodes(url: str) -> bool:
    """Whether `url` can name a service on another node: not a loopback or unspecified address (a
    host name is taken as it is: each node resolves it)."""
    host = urlsplit(url).hostname or ""
    if is_loopback(host):
        return False
    try:
        return not ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return bool(host)


@contextlib.contextmanager
def environment(
    fresh: bool, url: str, settings: SealSettings, config: DictConfig, log: Path | None
) -> Iterator[dict[str, Any]]:
    """The service the run uses: `url` when it answers and no fresh one is asked for, else a child
    process that lives exactly as long as this block. What is yielded goes into the launch record."""
    if settings.rollout.env_backend == "ray":
        print("environment  Ray actors on every node, placed when training starts: no service to start")
        yield {"backend": "ray", "started_by_launcher": False}
        return
    if not fresh and is_healthy(url):
        print(f"environment  using the running service at {masked_url(url)}")
        yield {"url": url, "started_by_launcher": False}
        return
    if not fresh:
        print(f"environment  no service answers at {masked_url(url)}: starting one")
    flags = service_flags(settings, config)
    with running_service(flags, log_path=log) as service:
        where = f", log {log}" if log else ""
        print(f"environment  started pid {service.pid} at {service.url}{where}")
        yield {"url": service.url, "started_by_launcher": True, "pid": service.pid, "flags": flags}


def service_flags(settings: SealSettings, config: DictConfig) -> list[str]:
    """The service's options for the run: its store as the run's settings make it (taxonomy, priority,
    interface, room for the run's episodes), and a quiet log."""
    return [*to_flags(settings.store(episode_capacity(config))), "--log-level", "warning"]


def preflight(config: DictConfig, settings: SealSettings, service: dict[str, Any]) -> None:
    """Point the run at its service (the config the trainer reads, and `settings`) and check that service
    with the run's settings. With the `ray` backend no actor exists yet: the episodes run on an in-process
    store built as each actor's is (the trainer plays them again through every node's actors once it has
    placed them). PreflightError when a check fails."""
    ray_backend = service.get("backend") == "ray"
    if ray_backend:
        store = EpisodeStore(settings.store(episode_capacity(config)))
        where = "an in-process store as each environment actor holds"
        check = check_environment(InProcessEnvClient(store), where, settings, preflight_tasks())
    else:
        config.seal.rollout.env_url = settings.rollout.env_url = service["url"]
        check = check_service(service["url"], settings, preflight_tasks())
    report = asyncio.run(check)
    through = "an in-process store" if ray_backend else "the service"
    print(f"preflight: ground-truth episodes through {through}, then A-Patch and Evolve on a synthetic batch")
    for episode in report.episodes:
        print(f"episode  {episode.task_id} ({episode.mode}): reward {episode.reward:g}, {episode.labels}")
    print(f"A-Patch  {report.apatch}\nEvolve   {report.evolve}\n")


def service_row(service: dict[str, Any], asked: str, args: argparse.Namespace) -> str:
    """The plan's environment row: the service the run uses, and whether it outlives this command."""
    if service.get("backend") == "ray":
        return "none (seal.rollout.env_backend=ray: environment actors instead)"
    if not service["started_by_launcher"]:
        return f"{masked_url(service['url'])} (already running: used as it is)"
    why = "--with-bfcl" if args.with_bfcl else f"none answers at {masked_url(asked)}"
    if args.dry_run:
        return f"one the launch starts ({why}); the one this dry run checked is stopped"
    return f"{service['url']}, started for this launch ({why}), pid {service['pid']}; stopped with it"
