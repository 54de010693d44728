"""Time SEAL's own work in one training step's `_compute_advantage`, on real TransferQueue.

A GRPO step of the paper's configuration has 32 prompts x 8 rollouts = 256 trajectories. This puts such
a batch into TransferQueue (local Ray, one storage unit; responses of 256 to 4096 tokens; labels as the
environment computed them), then per repeat runs `SealPPOTrainer._compute_advantage` (verl's GRPO, then
SEAL: fetch extra_fields and advantages, C_t and ρ update, A-Patch, write back, Evolve over HTTP to a
live environment service) and verl's own `_compute_advantage` on an identical batch. SEAL's work is
reported twice: as the trainer measures it (`timing_s/seal_apatch` + `timing_s/seal_evolve`) and as the
difference of the two wall times. Diagnosis itself runs in the environment: `benchmarks/bench_diagnosis.py`.

    python benchmarks/bench_seal_step.py [--trajectories 256] [--repeats 5] [--experiment SEAL]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

from omegaconf import OmegaConf
from tqdm import tqdm

from seal.bfcl.tasks import CATEGORIES
from seal.env.process import running_service
from seal.tocf.labels import REFERENCE_LABELS
from seal.trainer.experiment import PROJECT_ROOT, compose_experiment

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the suite's doubles, shared with it
# Ray, torch, verl and the suite's doubles are imported where used: --help answers without their seconds.

ROLLOUTS = 8


def batch_rows(n: int, rng: random.Random) -> tuple[list[str], list[dict]]:
    import torch

    from tests.support.doubles import trajectory_fields

    keys, rows = [], []
    for i in range(n):
        group, session = divmod(i, ROLLOUTS)
        length = rng.randint(256, 4096)
        reward = float(rng.random() < 0.3)
        rm_scores = torch.zeros(length)
        rm_scores[-1] = reward
        category = CATEGORIES[group % len(CATEGORIES)]
        fields = trajectory_fields(
            f"{category}_{group}",
            labels=[rng.choice(REFERENCE_LABELS[:7]) for _ in range(rng.randint(2, 8))],
            reward=reward,
            llm_calls=rng.randint(2, 20),
            env_error="" if rng.random() > 0.01 else "unreachable",
            env_seconds=rng.random(),
            gen_seconds=rng.random() * 10,
            actions=["<tool_call>{}</tool_call>"] * 4,
        )
        keys.append(f"uid{group}_{session}_0")
        rows.append(
            {
                "uid": f"uid{group}",
                "response_mask": torch.ones(length, dtype=torch.int64),
                "rm_scores": rm_scores,
                "extra_fields": fields.extra_fields(),
            }
        )
    return keys, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--experiment", default="SEAL", help="an exp/*.yaml name")
    args = parser.parse_args()
    import ray
    import transfer_queue as tq
    from verl.trainer.ppo.v1 import PPOTrainerSync
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    from seal.trainer.rl.trainer import SealPPOTrainer

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
    rng = random.Random(0)
    seal_own, seal_diff, verl_only = [], [], []
    try:
        with running_service() as service:
            config = compose_experiment(
                PROJECT_ROOT / "exp" / f"{args.experiment}.yaml",
                [
                    f"seal.rollout.env_url={service.url}",
                    "trainer.default_local_dir=/tmp/bench_seal_step/ckpt",
                ],
            )
            trainer = object.__new__(SealPPOTrainer)
            trainer.config = config
            trainer.steps_per_epoch = 12
            trainer.init_seal()
            for repeat in tqdm(range(args.repeats), desc="steps", unit="step"):
                trainer.global_steps = repeat + 1
                keys, rows = batch_rows(args.trajectories, rng)
                verl_batch = tq.kv_batch_put(
                    keys=keys, partition_id=f"verl{repeat}", fields=list_of_dict_to_tensordict(rows)
                )
                seal_batch = tq.kv_batch_put(
                    keys=keys, partition_id=f"seal{repeat}", fields=list_of_dict_to_tensordict(rows)
                )
                started = time.perf_counter()
                PPOTrainerSync._compute_advantage(trainer, verl_batch, {})
                verl_s = time.perf_counter() - started
                metrics: dict[str, float] = {}
                started = time.perf_counter()
                trainer._compute_advantage(seal_batch, metrics)
                total_s = time.perf_counter() - started
                verl_only.append(verl_s)
                seal_own.append(metrics["timing_s/seal_apatch"] + metrics.get("timing_s/seal_evolve", 0.0))
                seal_diff.append(total_s - verl_s)
                for batch in (verl_batch, seal_batch):
                    tq.kv_clear(keys=batch.keys, partition_id=batch.partition_id)
    finally:
        tq.close()
        ray.shutdown()

    def show(name: str, values: list[float]) -> None:
        print(f"{name:44s} median {statistics.median(values):.3f} s  max {max(values):.3f} s")

    print(f"{args.trajectories} trajectories, {args.repeats} steps, exp/{args.experiment}.yaml")
    show("verl _compute_advantage (GRPO)", verl_only)
    show("SEAL's own work (trainer's timers)", seal_own)
    show("SEAL's own work (wall time difference)", seal_diff)


if __name__ == "__main__":
    main()
