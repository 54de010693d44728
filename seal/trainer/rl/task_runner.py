"""SealTaskRunner: verl's V1 task runner, building `SealPPOTrainer` instead of the registered "sync" trainer.

`TaskRunnerV1` is a Ray actor class, which cannot be subclassed, and verl's trainer registry refuses a
second "sync" entry; so this subclasses the plain class behind it and repeats the few lines of its
`run` with the SEAL trainer, and starts TransferQueue beside the trainer's set-up rather than before it
(25 s of a 7B launch's start-up on four GPUs). The agent loops come from `actor_rollout_ref.rollout.agent.
agent_loop_config_path` (filled by `seal.trainer.experiment.resolve_paths`), the data from
`data/bfcl_*.parquet` (`scripts/prepare_data.py`).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, wait
from pprint import pprint

import ray
from omegaconf import DictConfig, OmegaConf
from verl.trainer.main_ppo import TaskRunnerV1
from verl.utils.logging_utils import configure_verl_logging

from seal.urls import masked_values

TRANSFER_QUEUE_STARTING = "TransferQueue starting beside the trainer's set-up"
"""A start-up landmark (benchmarks/resource_sampler.py): the task runner has its config and starts work."""
TRANSFER_QUEUE_READY = "TransferQueue ready in {seconds:.1f} s"
"""When TransferQueue's controller and storage actors were up (printed as they come, beside the set-up)."""


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
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="transfer-queue") as beside:
            print(TRANSFER_QUEUE_STARTING, flush=True)
            own_copy = OmegaConf.create(OmegaConf.to_container(config.transfer_queue))  # set-up edits config
            transfer_queue = beside.submit(start_transfer_queue, own_copy)
            succeeded = False
            try:
                self.trainer = SealPPOTrainer(config=config)
                self.trainer.init()
                transfer_queue.result()
                self.init_agent_loop_manager()
                self.trainer.fit(self.agent_loop_manager)
                succeeded = True
            finally:
                try:
                    tracking = getattr(self.trainer, "logger", None)
                    if tracking is not None:
                        tracking.finish(exit_code=0 if succeeded else 1)
                finally:
                    wait((transfer_queue,))
                    tq.close()


def start_transfer_queue(config: DictConfig) -> None:
    """TransferQueue's controller and storage actors (about 25 s on a 4-GPU node: two waves of Ray actors,
    each importing torch), started beside the trainer's set-up: in sync mode verl first touches TransferQueue
    when the agent loop workers start, after the rollout servers (verl's `_load_checkpoint` restores
    TransferQueue only in the async modes)."""
    import transfer_queue as tq

    started = time.monotonic()
    tq.init(config)
    print(TRANSFER_QUEUE_READY.format(seconds=time.monotonic() - started), flush=True)
