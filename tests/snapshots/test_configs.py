"""Every exp/*.yaml composes to the config it composed to before the package was regrouped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from seal.trainer.experiment import PROJECT_ROOT, compose_experiment
from tests.snapshots.snapshot import check

EXPERIMENTS = sorted((PROJECT_ROOT / "exp").glob("*.yaml"))


def portable(value: Any) -> Any:
    """The config with this checkout's and this directory's absolute paths written as <root> and <cwd>."""
    if isinstance(value, dict):
        return {key: portable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [portable(item) for item in value]
    if isinstance(value, str):
        return value.replace(str(Path.cwd()), "<cwd>").replace(str(PROJECT_ROOT), "<root>")
    return value


@pytest.mark.parametrize("experiment", EXPERIMENTS, ids=[p.stem for p in EXPERIMENTS])
def test_the_experiment_composes_to_its_snapshot(experiment: Path):
    config = OmegaConf.to_container(compose_experiment(experiment), resolve=True)
    check(f"configs/{experiment.stem}", portable(config))
