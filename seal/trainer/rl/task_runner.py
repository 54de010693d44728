"""SealTaskRunner: verl's V1 task runner, building `SealPPOTrainer` instead of the registered "sync" trainer.

`TaskRunnerV1` is a Ray actor class, which cannot be subclassed, and verl's trainer registry refuses a
second "sync" entry; so this subclasses the plain class behind it and repeats the few lines of its
`run` with the SEAL trainer. The agent loops come from `actor_rollout_ref.rollout.agent.
agent_loop_config_path` (filled by `seal.trainer.experiment.resolve_paths`), the data from
`data/bfcl_*.parquet` (`scripts/prepare_data.py`).
"""

from __future__ import annotations

import time
from pprint import pprint

import ray
from omegaconf import DictConfig, OmegaConf
from verl.trainer.main_ppo import TaskRunnerV1
from verl.utils.logging_utils import configure_verl_logging

from seal.urls import masked_values

TRANSFER_QUEUE_READY = "TransferQueue ready in {seconds:.1f} s"
"""A start-up landmark (scripts/resource_sampler.py): TransferQueue's controller and storage actors are up."""


@ray.remote
class SealTaskRunner(TaskRunnerV1.__ray_actor_class__):
    """Runs one SEAL training (or val_only) job inside the Ray cluster, with TransferQueue on."""

    def run(self, config: DictConfig) -> None:
        import transfer_queue as tq

        from seal.trainer.rl.trainer import SealPPOTrainer

        configure_verl_logging()
        mode = config.trainer.v1.trainer_mode
        if mode != "sync":
            raise ValueError(f"SEAL trains with trainer.v1.trainer_mode=sync only, got {mode!r}")
        config.transfer_queue.enable = True
        OmegaConf.resolve(config)
        pprint(masked_values(OmegaConf.to_container(config)))
        self.config = config
        started = time.monotonic()
        tq.init(config.transfer_queue)
        print(TRANSFER_QUEUE_READY.format(seconds=time.monotonic() - started), flush=True)
        succeeded = False
        try:
            self.trainer = SealPPOTrainer(config=config)
            self.trainer.init()
            self.init_agent_loop_manager()
            self.trainer.fit(self.agent_loop_manager)
            succeeded = True
        finally:
            try:
                tracking = getattr(self.trainer, "logger", None)
                if tracking is not None:
                    tracking.finish(exit_code=0 if succeeded else 1)
            finally:
                tq.close()
