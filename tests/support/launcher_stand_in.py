"""The launcher's entry point with a stand-in trainer, for the service-lifecycle tests (in-process).

The stand-in `train` writes what it saw to a report file (the service URL in the config, whether it answers
/healthz, the pids of the launcher's service children), then per mode returns, raises, raises an
`EnvServiceFailure` wrapped as Ray hands it over from the trainer's actor, or is interrupted by SIGINT
(Ctrl-C) or SIGTERM (a scheduler cancelling the job). Its `evaluate_test` records that it ran. No GPU is
needed.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import psutil
from omegaconf import DictConfig
from ray.exceptions import RayTaskError

from seal.env.process import is_healthy
from seal.trainer.launch import command as launcher
from seal.trainer.rl.env_failures import EnvServiceFailure

SIGNALS = {"sigint": signal.SIGINT, "sigterm": signal.SIGTERM}
MODES = ("return", "raise", "env_failure", *SIGNALS)
ENV_FAILURE = "seal: 3 of 4 trajectories at step 2 failed on the environment service (stand-in)"


def service_children() -> list[int]:
    return [
        child.pid
        for child in psutil.Process().children(recursive=True)
        if "env_service" in " ".join(child.cmdline())
    ]


def stand_in_entry(mode: str, report_path: Path) -> launcher.Entry:
    """The launcher's entry point with a `train` that behaves as MODE says and reports to `report_path`."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    report: dict[str, Any] = {"train_calls": 0, "test_calls": 0}

    def write() -> None:
        partial = report_path.with_suffix(".partial")
        partial.write_text(json.dumps(report))
        partial.replace(report_path)

    def train(config: DictConfig) -> None:
        url = config.seal.rollout.env_url
        report.update(train_calls=report["train_calls"] + 1, url=url, healthy=is_healthy(url))
        report["service_pids"] = service_children()
        write()
        if mode == "raise":
            raise RuntimeError("stand-in trainer failed")
        if mode == "env_failure":
            cause = EnvServiceFailure(ENV_FAILURE)
            raise RayTaskError(
                "SealTaskRunner.run", "Traceback (most recent call last): ...", cause
            ).as_instanceof_cause()
        if mode in SIGNALS:
            signal.raise_signal(SIGNALS[mode])  # the handler runs before this returns

    def evaluate_test(config: DictConfig) -> dict[str, Any]:
        report["test_calls"] += 1
        report["service_pids"] = report.get("service_pids") or service_children()
        write()
        return {"test": {"best": {}, "last": {}}}

    return launcher.Entry(train=train, evaluate_test=evaluate_test, needs_gpus=False)
