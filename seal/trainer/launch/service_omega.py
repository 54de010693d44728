"""Which Ω a launch's first step trains under, said by the plan, when the environment service was running.

A service the launcher starts, and the Ray actors the trainer places, serve the experiment's start:
version 0 of `seal.interface.preset`. A service that was already running may hold an evolved Ω (another
run's, or this run's before a crash, say v3 with three guidelines): training would start under it while
the plan said v0. A launch that finds one therefore refuses it, unless the run resumes from a checkpoint
with Evolve on (the trainer then sends the checkpoint's Ω to the service before the first step), or
`--adopt-omega` says to train from the service's Ω.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from seal.env.client import EnvServiceError, HttpEnvClient
from seal.env.omega_state import describe_omega, is_start
from seal.trainer.preflight import PreflightError
from seal.trainer.settings import SealSettings
from seal.urls import masked_url


def omega_start(config: DictConfig, settings: SealSettings, service: dict[str, Any], adopt: bool) -> str:
    """The plan's words for the Ω of the first step; PreflightError for a running service that holds
    another Ω than the experiment's start, neither replaced by a resume nor adopted."""
    start = f"v0 of preset {settings.interface.preset}"
    checkpoint = resume_checkpoint(config) if settings.interface.adapt else None
    resumed = (
        f"the checkpoint's ({checkpoint.name}), sent to the environment on resume" if checkpoint else None
    )
    if service.get("backend") == "ray" or service.get("started_by_launcher"):
        return resumed or f"{start} (a fresh environment)"
    url = service["url"]
    served = asyncio.run(_served_omega(url, settings))
    if is_start(served, settings.interface.preset):
        return resumed or f"{start} (the running service serves it)"
    held = f"Ω {describe_omega(served)}"
    if resumed:
        return f"{resumed}; the service holds {held}"
    if adopt:
        return f"the running service's {held}, adopted (--adopt-omega) instead of {start}"
    raise PreflightError(
        f"the environment service at {masked_url(url)} holds {held}, not the experiment's start ({start}): "
        "start a fresh one (--with-bfcl, or restart it), or train from its Ω with --adopt-omega"
    )


async def _served_omega(url: str, settings: SealSettings) -> dict[str, Any]:
    rollout = settings.rollout
    try:
        async with HttpEnvClient(url, timeout=rollout.env_timeout_s, retries=rollout.env_retries) as client:
            return await client.get_interface()
    except EnvServiceError as exc:
        raise PreflightError(f"environment service at {masked_url(url)}: GET /interface: {exc}") from exc


def resume_checkpoint(config: DictConfig) -> Path | None:
    """The checkpoint folder verl's trainer resumes from (`trainer.resume_mode`), or None."""
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    trainer = config.trainer
    if trainer.resume_mode == "resume_path" and trainer.resume_from_path:
        return Path(trainer.resume_from_path)
    if trainer.resume_mode != "auto":
        return None
    with contextlib.redirect_stdout(io.StringIO()):  # verl prints that a fresh run has no tracker file
        found = find_latest_ckpt_path(trainer.default_local_dir)
    return None if found is None else Path(found)
