"""The project's Hydra entry point for training: what verl's `main_ppo.main` does, with SEAL's runner.

    python -m seal.trainer.main                                   # exp/SEAL.yaml
    python -m seal.trainer.main --config-name vanilla_grpo trainer.total_epochs=1

`launcher.py` is the usual way in (it also starts the environment service); this entry suits a
cluster scheduler that wants a plain Hydra application.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from seal.trainer.experiment import PROJECT_ROOT, SEARCHPATH_OVERRIDE, resolve_paths, train


@hydra.main(config_path=str(PROJECT_ROOT / "exp"), config_name="SEAL", version_base=None)
def main(config: DictConfig) -> None:
    resolve_paths(config)
    train(config)


if __name__ == "__main__":
    sys.argv.insert(1, SEARCHPATH_OVERRIDE)
    main()
