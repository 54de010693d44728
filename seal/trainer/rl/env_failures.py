"""A training step whose environment service failed too often stops the run, with one line that says so.

An `env_error` trajectory is an infrastructure failure: it trains nothing (no loss tokens, advantage 0).
A few are tolerated; when more than `seal.rollout.max_env_error_share` of a step's trajectories are env
errors, the step would train on too little, so the trainer raises `EnvServiceFailure`. The exception
crosses the Ray actor boundary wrapped in a `RayTaskError`; `env_service_failure_in` finds it again, so
the launcher can print its message alone. Nothing here imports Ray or verl.
"""

from __future__ import annotations

from seal.trainer.rollout_settings import RolloutSettings
from seal.urls import masked_url


class EnvServiceFailure(RuntimeError):
    """Too many of a step's trajectories failed on the environment service; the message is one line."""


def check_env_error_share(failed: int, total: int, step: int, rollout: RolloutSettings) -> None:
    """Raise `EnvServiceFailure` when `failed` of `total` trajectories is more than the allowed share."""
    if total == 0 or failed / total <= rollout.max_env_error_share:
        return
    where = (
        "environment actors (seal.rollout.env_backend=ray)"
        if rollout.env_backend == "ray"
        else f"environment service {masked_url(rollout.env_url)}"
    )
    raise EnvServiceFailure(
        f"seal: {failed} of {total} trajectories at step {step} failed on the {where} "
        f"(share {failed / total:.2f} > seal.rollout.max_env_error_share {rollout.max_env_error_share:g}); "
        "see the service's log (env_service.log in the run folder when the launcher started it) or, with "
        "ray, the trainer's log"
    )


def env_service_failure_in(exc: BaseException) -> EnvServiceFailure | None:
    """The `EnvServiceFailure` that `exc` is or wraps (a `RayTaskError` keeps the actor's exception in
    `cause`), innermost first so its message is the original one line; None when there is none."""
    found: EnvServiceFailure | None = None
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, EnvServiceFailure):
            found = current
        cause = getattr(current, "cause", None)
        current = cause if isinstance(cause, BaseException) else current.__cause__
    return found
