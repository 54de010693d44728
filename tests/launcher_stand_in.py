"""The launcher with a stand-in trainer entry point, for the service-lifecycle tests.

    python tests/launcher_stand_in.py MODE REPORT.json [launcher arguments...]

The stand-in `train` writes what it saw to REPORT.json (the service URL in the config, whether it answers
/healthz, the pids of the launcher's service children), then per MODE returns, raises, raises an
`EnvServiceFailure` wrapped as Ray hands it over from the trainer's actor, or waits to be interrupted.
Its `evaluate_test` records that it ran. No GPU is needed.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import psutil
from omegaconf import DictConfig
from ray.exceptions import RayTaskError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import launcher
from env_service.process import is_healthy
from seal.trainer.env_failures import EnvServiceFailure

MODES = ("return", "raise", "env_failure", "wait")
ENV_FAILURE = "seal: 3 of 4 trajectories at step 2 failed on the environment service (stand-in)"


def service_children() -> list[int]:
    return [
        child.pid
        for child in psutil.Process().children(recursive=True)
        if "env_service" in " ".join(child.cmdline())
    ]


def main() -> int:
    mode, report_path, argv = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
    if mode not in MODES:
        raise SystemExit(f"mode must be one of {MODES}")
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
        if mode == "wait":
            time.sleep(120)

    def evaluate_test(config: DictConfig) -> dict[str, Any]:
        report["test_calls"] += 1
        report["service_pids"] = report.get("service_pids") or service_children()
        write()
        return {"test": {"best": {}, "last": {}}}

    entry = launcher.Entry(train=train, evaluate_test=evaluate_test, needs_gpus=False)
    return launcher.main(argv, entry)


if __name__ == "__main__":
    sys.exit(main())
