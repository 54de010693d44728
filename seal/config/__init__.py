"""Packaged Hydra configs: `seal_trainer.yaml` composes verl's `ppo_trainer` with the `seal:` section."""
