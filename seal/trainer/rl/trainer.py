"""SealPPOTrainer: verl 0.9.1's synchronous V1 trainer with A-Patch, the failure profile and Evolve.

After verl's GRPO (`_compute_advantage`), each sample's `extra_fields` (written by `SealAgentLoop`) are
read from TransferQueue, C_t and ρ are updated, the advantages are scaled by the A-Patch factors and
written back, and C_t goes to the environment service, whose Evolve(Ω, C_t) makes the next Ω. With
`seal.apatch.mode=off` nothing is written back: the advantages stay verl's, bit for bit. SEAL's state
(C_t, ρ, Ω) is saved as `global_step_N/seal_state.json` beside verl's checkpoint and restored with it (Ω
exactly, its whole state: seal/trainer/rl/resume_omega.py);
every step's profile, ρ and Ω are also appended to `<run>/seal_steps.jsonl`. With `seal.test_after` the
last step's validation is followed by a greedy pass over the test split in the same launch (`_validate`), and
with `seal.test_before` the validation before the first step is too. With `seal.finish_by` the steps end
early enough for the last one's validation and test pass to be over by then (seal/trainer/rl/finish_by.py).
A step whose advantages are all zero leaves the actor untouched (`seal.skip_update_without_signal`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import torch
import transfer_queue as tq
from omegaconf import DictConfig, open_dict
from tensordict import TensorDict
from torchdata.stateful_dataloader import StatefulDataLoader
from transfer_queue import KVBatchMeta
from verl.protocol import DataProto
from verl.trainer.ppo.utils import create_rl_dataset
from verl.trainer.ppo.v1 import PPOTrainerSync
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories
from verl.utils.dataset.rl_dataset import collate_fn
from verl.workers.utils.padding import response_to_nested

from seal.dataset import TEST_FILE
from seal.env.client import EnvServiceError
from seal.env.connect import put_profile
from seal.env.ray_actors import RayEnvClient, keep_fleet, start_env_actors
from seal.reports.runs import CHECKPOINT_PREFIX, STEPS_FILE, Selection, read_dump, split_of, write_test_report
from seal.results.pass_rate import MISSING, missing_rows, score_rows
from seal.trainer.preflight import PreflightError, check_environment, preflight_tasks
from seal.trainer.rl.closed_loop import ClosedLoop
from seal.trainer.rl.env_failures import check_env_error_share
from seal.trainer.rl.finish_by import FinishBy, finish_by_of, write_ended_early
from seal.trainer.rl.resume_omega import restore_omega
from seal.trainer.rl.state_record import read_state
from seal.trainer.rl.trajectory import TrajectoryFields
from seal.trainer.settings import episode_capacity, settings_from_config
from seal.urls import masked_url

logger = logging.getLogger(__name__)

STATE_FILE = "seal_state.json"
TEST_AFTER_RULE = "the last step, tested in its training launch (seal.test_after)"
REPLAY_POLL_S = 0.1  # how often the trainer asks TransferQueue whether the step's episodes are all in
METRICS = {
    "seal/interface/evolve_failed": "1 when sending C_t to the environment service (Evolve) failed this step",
    "timing_s/seal_apatch": "seconds the step spent on the closed loop (C_t, ρ, A-Patch factors) and "
    "rewriting the advantages",
    "timing_s/seal_evolve": "seconds the step spent on Evolve",
    "seal/update_skipped": "1 when the step's advantages were all zero and the actor was left as it was "
    "(seal.skip_update_without_signal), else 0",
    "val-core/seal/pass_rate_mean": "validation pass rate, the mean of the four categories (the paper's "
    "Avg); a task without a row counts as failed",
    "val-aux/seal/pass_rate/{category}": "validation pass rate of the category",
    "val-aux/seal/missing_rows": "validation tasks that came back without a row (counted as failed)",
    "test/{metric}": "with seal.test_after at the last step, with seal.test_before at step 0: each "
    "validation metric (`val-core/{metric}`, `val-aux/{metric}`) of the test split's greedy pass",
    "timing_s/test": "with seal.test_after at the last step, with seal.test_before at step 0: seconds of the "
    "test pass (also inside verl's timing_s/testing)",
}
"""Every metric the trainer logs itself, beside `ClosedLoop`'s, with its meaning: the source of
docs/reference/metrics.md."""


class SealPPOTrainer(PPOTrainerSync):
    """PPOTrainerSync whose advantage step, checkpoint save and checkpoint load also carry SEAL."""

    def __init__(self, config: DictConfig) -> None:
        super().__init__(config)
        self.init_seal()

    def init_seal(self) -> None:
        """Build SEAL's part from `config.seal` (separate from verl's `__init__`, which needs a model).

        With `seal.rollout.env_backend=ray` the environment actors are placed here, before `init()`
        (which restores Ω on resume) and before any rollout worker starts, and the preflight's
        ground-truth episodes are played through every node's actors."""
        self.seal_settings = settings_from_config(self.config)
        self.closed_loop = ClosedLoop(self.seal_settings)
        self.finish_by = finish_by_of(self.config, self.seal_settings.finish_by)
        self.step_has_signal = True
        if self.seal_settings.rollout.env_backend == "ray":
            self._start_env_actors()

    def fit(self, agent_loop_manager: Any) -> None:
        """verl's fit, its config first cleared of the environment URL's credentials: verl hands that config
        to the trackers it starts (wandb, mlflow, ...). Nothing reads the URL from it after this: the rollout
        workers hold their own copy, and SEAL's calls (Evolve, the fleet, resume) use `seal_settings`."""
        url = self.config.seal.rollout.env_url
        with open_dict(self.config):
            self.config.seal.rollout.env_url = masked_url(url)
        super().fit(agent_loop_manager)

    def _build_replay_buffer(self) -> ReplayBuffer:
        """verl's replay buffer, polled every REPLAY_POLL_S instead of its fixed 2 s: at 2 s each step's `gen`
        phase ended on the next multiple of 2 s after its last episode (about 1 s lost a step on average)."""
        buffer = super()._build_replay_buffer()
        buffer.poll_interval = REPLAY_POLL_S
        return buffer

    def _start_env_actors(self) -> None:
        rollout = self.seal_settings.rollout
        self.env_actors = start_env_actors(
            self.seal_settings.store(episode_capacity(self.config)), rollout.env_actors_per_node
        )
        logger.info("environment actors placed: %s", self.env_actors.describe())
        for node in self.env_actors.actors:
            client = RayEnvClient(timeout=rollout.env_timeout_s, node_id=node)
            where = f"the environment actors on node {node}"
            try:
                asyncio.run(check_environment(client, where, self.seal_settings, preflight_tasks()))
            except PreflightError as exc:
                raise RuntimeError(str(exc)) from exc

    def on_step_begin(self) -> None:
        super().on_step_begin()
        self._keep_env_fleet()

    def on_validate_begin(self) -> None:
        super().on_validate_begin()
        self._keep_env_fleet()

    def on_train_begin(self) -> None:
        super().on_train_begin()
        if self.finish_by is not None and self.finish_by.first_step_is_last(time.time()):
            self._make_last(self.global_steps, self.finish_by)

    def on_step_end(self) -> None:
        """verl's weight update, then, with `seal.finish_by`, whether the next step must be the last: verl
        reads `total_training_steps` when a step begins, so the decision is one step ahead."""
        super().on_step_end()
        if self.finish_by is not None and self.finish_by.next_step_is_last(time.time(), self.global_steps):
            self._make_last(self.global_steps + 1, self.finish_by)

    def _make_last(self, step: int, finish_by: FinishBy) -> None:
        """`step` becomes the run's last, and the run folder says so (`ended_early.json`)."""
        if step >= self.total_training_steps:
            return
        logger.warning(
            "seal.finish_by: step %d is the last of %d planned (%.0f s left; the longest step %.0f s, what "
            "follows the last step about %.0f s)",
            step,
            self.total_training_steps,
            finish_by.deadline - time.time(),
            finish_by.longest_step_s,
            finish_by.closing_s(),
        )
        run_dir = Path(self.config.trainer.default_local_dir).parent
        write_ended_early(run_dir, step, self.total_training_steps, finish_by.deadline)
        self.total_training_steps = step

    def _keep_env_fleet(self) -> None:
        """With `ray`, before episodes are played: dead actors are replaced, and a dead fleet (its actors
        died with it) is started again serving the last Ω every actor agreed on."""
        if self.seal_settings.rollout.env_backend == "ray":
            self.env_actors = keep_fleet(self.env_actors, self.closed_loop.interface)

    # -- the advantage step -----------------------------------------------------------------------
    def _compute_advantage(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        """verl's advantages over the healthy rows, then SEAL's step over the real (non-padding) rows.

        verl's padding rows (tag `is_padding`, zero mask, advantage 0) are left as verl made them and
        never reach C_t, ρ or the metrics. `env_error` rows get advantage 0 and their GRPO groups'
        statistics come from the healthy rows only; without env errors the advantages are verl's, bit
        for bit, before A-Patch.
        """
        real = [key for key, tag in zip(batch.keys, batch.tags, strict=True) if not tag.get("is_padding")]
        data = tq.kv_batch_get(
            keys=real, partition_id=batch.partition_id, select_fields=["extra_fields", "uid"]
        )
        trajectories = [
            TrajectoryFields.from_extra_fields(extra) for extra in data.pop("extra_fields").tolist()
        ]
        groups = [str(uid) for uid in data.pop("uid").tolist()]
        failed = [key for key, t in zip(real, trajectories, strict=True) if t.env_error]
        check_env_error_share(len(failed), len(real), self.global_steps, self.seal_settings.rollout)
        batch = super()._compute_advantage(batch, metrics)
        if failed:
            healthy = [key for key, t in zip(real, trajectories, strict=True) if not t.env_error]
            self._advantages_without_env_errors(batch.partition_id, healthy, failed)
        started = time.perf_counter()
        rows = advantage_rows(real, batch.partition_id) if real else []
        summed = [float(row.sum()) for row in rows]  # verl masks the untrained tokens' advantages to 0
        self.step_has_signal = any(bool(row.any()) for row in rows)  # A-Patch's factors are all positive
        epoch = (self.global_steps - 1) // self.steps_per_epoch
        result = self.closed_loop.step(trajectories, summed, self.global_steps, epoch, groups=groups)
        if self.seal_settings.apatch.enabled:
            put_advantage_rows(
                real, batch.partition_id, [row * f for row, f in zip(rows, result.factors, strict=True)]
            )
        metrics.update(result.metrics)
        metrics["timing_s/seal_apatch"] = time.perf_counter() - started
        if self.seal_settings.interface.adapt:
            self._evolve(self.closed_loop.profile.to_json(), metrics)
        self._append_step_record()
        return batch

    def _update_actor(self, batch: KVBatchMeta, metrics: dict) -> KVBatchMeta:
        """verl's actor update, unless `_compute_advantage` found no nonzero advantage: a zero gradient still
        moves AdamW's weights by its moments, so such a step would train the policy on no signal."""
        skip = self.seal_settings.skip_update_without_signal and not self.step_has_signal
        metrics["seal/update_skipped"] = float(skip)
        if not skip:
            return super()._update_actor(batch, metrics)
        logger.info("step %d: every advantage is zero; the actor is left as it was", self.global_steps)
        return batch

    def _advantages_without_env_errors(self, partition: str, healthy: list[str], failed: list[str]) -> None:
        """verl's estimator once more, over the healthy rows alone (so an env error moves no group's mean
        or std), as verl's `_compute_advantage` calls it; the `failed` rows get advantage and return 0.
        The rewards are verl's token-level rewards of this step (KL-penalised when use_kl_in_reward)."""
        algorithm = self.config.algorithm
        rewards = "token_level_rewards" if algorithm.use_kl_in_reward else "rm_scores"
        if healthy:
            fields = ["uid", "response_mask", rewards]
            data = tq.kv_batch_get(keys=healthy, partition_id=partition, select_fields=fields)
            response_mask = data["response_mask"]
            proto = DataProto(batch=data.to_padded_tensor())
            proto.non_tensor_batch["uid"] = np.array(proto.batch.pop("uid").tolist(), dtype=object)
            proto.batch["token_level_rewards"] = proto.batch[rewards]
            proto = compute_advantage_for_multi_trajectories(
                proto,
                batch_keys=healthy,
                adv_estimator=algorithm.adv_estimator,
                gamma=algorithm.gamma,
                lam=algorithm.lam,
                num_repeat=self.config.actor_rollout_ref.rollout.n,
                norm_adv_by_std_in_grpo=algorithm.get("norm_adv_by_std_in_grpo", True),
                config=algorithm,
            )
            output = {
                name: response_to_nested(proto.batch[name], response_mask)
                for name in ("advantages", "returns")
            }
            tq.kv_batch_put(
                keys=healthy, partition_id=partition, fields=TensorDict(output, batch_size=len(healthy))
            )
        zeros = [torch.zeros_like(row) for row in advantage_rows(failed, partition)]
        put_advantage_rows(failed, partition, zeros, also_returns=True)

    def _evolve(self, profile: dict[str, Any], metrics: dict) -> None:
        """PUT C_t to the service; a failing service is logged and counted, never fatal to the step."""
        started = time.perf_counter()
        try:
            self.closed_loop.interface = put_profile(self.seal_settings.rollout.env(), profile)
            metrics["seal/interface/evolve_failed"] = 0.0
        except EnvServiceError as exc:
            logger.warning("Evolve failed at step %s: %s", self.global_steps, exc)
            metrics["seal/interface/evolve_failed"] = 1.0
        self.closed_loop.replace_interface_metrics(metrics)
        metrics["timing_s/seal_evolve"] = time.perf_counter() - started

    def _append_step_record(self) -> None:
        run_dir = Path(self.config.trainer.default_local_dir).parent
        run_dir.mkdir(parents=True, exist_ok=True)
        record = {"step": self.global_steps, **self.closed_loop.to_json()}
        with (run_dir / STEPS_FILE).open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")

    # -- validation -------------------------------------------------------------------------------
    def _validate(self) -> dict[str, float]:
        """verl's validation; with `seal.test_after` the last step's is followed by the test pass, with
        `seal.test_before` the one before the first step of a fresh launch (step 0)."""
        started = time.perf_counter()
        metrics = super()._validate()
        val_s, test_s = time.perf_counter() - started, None
        if self.seal_settings.test_before and self.global_steps == 0:
            tested = self._test_pass(None)
            metrics.update(tested)
            test_s = tested["timing_s/test"]
        if self.seal_settings.test_after and self.global_steps >= self.total_training_steps:
            metrics.update(self._test_pass(metrics["val-core/seal/pass_rate_mean"]))
        if self.finish_by is not None and self.finish_by.val_s is None:
            test_tasks = pq.read_metadata(TEST_FILE).num_rows if self.finish_by.tests else 0
            self.finish_by.timed_first_validation(val_s, test_s, len(self.val_dataset), test_tasks)
        return metrics

    def _test_pass(self, reported_val_mean: float | None) -> dict[str, float]:
        """verl's validation pass again, over the test split: the same agent loop and rollout servers, the
        greedy sampling of validation. Its dump is the file `--test` writes for a checkpoint of this step, and
        with `reported_val_mean` (the step's val) so is its report; its metrics are the validation's, renamed
        `test/...`."""
        started = time.perf_counter()
        step = self.global_steps
        run_dir = Path(self.config.trainer.default_local_dir).parent
        folder = run_dir / "test" / f"{CHECKPOINT_PREFIX}{step}"
        val = self.val_dataset, self.val_dataloader, self.config.trainer.validation_data_dir
        self.val_dataset, self.val_dataloader = self._test_data()
        with open_dict(self.config):
            self.config.trainer.validation_data_dir = str(folder)
        try:
            metrics = super()._validate()
        finally:
            self.val_dataset, self.val_dataloader = val[:2]
            with open_dict(self.config):
                self.config.trainer.validation_data_dir = val[2]
        self._shutdown_dump_executor()  # the dump is written before the report reads it
        self._init_dump_executor()
        if reported_val_mean is not None:
            write_test_report(
                run_dir,
                Selection(step, step, {step: reported_val_mean}),
                {step: read_dump(folder / f"{step}.jsonl")},
                TEST_AFTER_RULE,
            )
        tested = {
            f"test/{key.split('/', 1)[1]}": value for key, value in metrics.items() if key.startswith("val-")
        }
        return tested | {"timing_s/test": time.perf_counter() - started}

    def _test_data(self) -> tuple[Any, StatefulDataLoader]:
        """The test split as verl's validation set and loader, every task in one batch per val batch."""
        dataset = create_rl_dataset(
            [str(TEST_FILE)], self.config.data, self.tokenizer, self.processor, is_train=False
        )
        loader = StatefulDataLoader(
            dataset=dataset,
            batch_size=self.config.data.val_batch_size or len(dataset),
            num_workers=self.config.data["dataloader_num_workers"],
            shuffle=False,
            drop_last=False,
            collate_fn=collate_fn,
        )
        return dataset, loader

    def _val_metrics_update(
        self, data_sources, sample_uids, reward_extra_infos_dict, sample_turns, expected_acc_counts=None
    ) -> dict[str, float]:
        """verl's per-data-source metrics plus the paper's numbers: pass rate per category and their mean,
        a task without a row counted as failed (`val-aux/seal/missing_rows` says how many)."""
        metrics = super()._val_metrics_update(
            data_sources,
            sample_uids,
            reward_extra_infos_dict,
            sample_turns,
            expected_acc_counts=expected_acc_counts,
        )
        scores = reward_extra_infos_dict["reward"]
        if len(scores) != len(data_sources):
            raise ValueError(
                f"{len(scores)} validation rewards for {len(data_sources)} samples: verl lists the scores "
                "under 'reward', so an agent loop's reward_extra_info must not have a 'reward' key"
            )
        task_ids = reward_extra_infos_dict.get("task_id", [])
        if len(task_ids) != len(scores):
            raise ValueError(
                f"{len(task_ids)} task ids for {len(scores)} validation rows: SealAgentLoop's "
                "reward_extra_info names every row's task_id"
            )
        rows = [
            {"task_id": task_id, "category": str(source), "score": float(score)}
            for task_id, source, score in zip(task_ids, data_sources, scores, strict=True)
        ]
        rows += missing_rows(self.val_task_ids(), task_ids)
        score = score_rows(rows, self.global_steps)
        metrics.update({f"val-aux/seal/pass_rate/{c}": rate for c, rate in score.by_category.items()})
        metrics["val-core/seal/pass_rate_mean"] = score.mean
        metrics["val-aux/seal/missing_rows"] = float(len(score.missing_task_ids))
        return metrics

    def _dump_generations(self, inputs, outputs, gts, scores, reward_extra_infos_dict, dump_path) -> None:
        """verl's per-step validation JSONL, with each row's split beside the agent loop's fields, and a
        `missing` row (score 0) for each validation task that came back without one."""
        filler = [row["task_id"] for row in missing_rows(self.val_task_ids(), gts)]
        n, k = len(gts), len(filler)
        gts = [*gts, *filler]
        extra = {
            key: [*values, *[None] * k] for key, values in reward_extra_infos_dict.items() if len(values) == n
        }
        extra["split"] = [split_of(task_id) for task_id in gts]
        extra[MISSING] = [False] * n + [True] * k
        super()._dump_generations(
            [*inputs, *[""] * k], [*outputs, *[""] * k], gts, [*scores, *[0.0] * k], extra, dump_path
        )

    def val_task_ids(self) -> list[str]:
        """The task ids verl's validation set holds (its rows' ground truth), in order."""
        return [str(reward["ground_truth"]) for reward in self.val_dataset.dataframe["reward_model"]]

    # -- checkpoints --------------------------------------------------------------------------------
    def _save_checkpoint(self) -> None:
        """seal_state.json first: verl's tracker file, written last, never names a folder without it."""
        folder = Path(self.config.trainer.default_local_dir) / f"global_step_{self.global_steps}"
        save_seal_state(self.closed_loop, folder)
        started = time.perf_counter()
        super()._save_checkpoint()
        if self.finish_by is not None:
            self.finish_by.saved(time.perf_counter() - started)

    def _load_checkpoint(self) -> None:
        super()._load_checkpoint()
        if self.global_steps == 0:
            return
        load_seal_state(self.closed_loop, self._resumed_folder())
        if self.seal_settings.interface.adapt:
            restore_omega(self.seal_settings.rollout.env(), self.closed_loop.interface)

    def _resumed_folder(self) -> Path:
        trainer = self.config.trainer
        if trainer.resume_mode == "resume_path":
            return Path(os.path.abspath(trainer.resume_from_path))
        return Path(os.path.abspath(trainer.default_local_dir)) / f"global_step_{self.global_steps}"


def save_seal_state(loop: ClosedLoop, folder: Path) -> Path:
    """Write `folder/seal_state.json` atomically (a crash leaves the old file or none, never half of one)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / STATE_FILE
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(loop.to_json(), indent=1) + "\n", encoding="utf-8")
    partial.replace(path)
    return path


def load_seal_state(loop: ClosedLoop, folder: Path) -> None:
    """Restore from `folder/seal_state.json`; a missing or malformed file is a one-line error."""
    path = folder / STATE_FILE
    if not path.is_file():
        raise RuntimeError(f"{path} is missing: this checkpoint was not written by SealPPOTrainer")
    try:
        loop.load_json(read_state(path))
    except ValueError as exc:
        raise RuntimeError(f"{path}: {exc}") from None


def advantage_rows(keys: list[str], partition: str) -> list[torch.Tensor]:
    """The `advantages` of `keys` in TransferQueue, one tensor per row (its response length)."""
    data = tq.kv_batch_get(keys=keys, partition_id=partition, select_fields=["advantages"])
    return list(data["advantages"].unbind())


def put_advantage_rows(
    keys: list[str], partition: str, rows: list[torch.Tensor], also_returns: bool = False
) -> None:
    """Write `rows` as the `advantages` (and, if asked, `returns`) of `keys`, nested as verl stores them."""
    if not keys:
        return
    names = ("advantages", "returns") if also_returns else ("advantages",)
    fields = {name: torch.nested.as_nested_tensor(rows, layout=torch.jagged) for name in names}
    tq.kv_batch_put(keys=keys, partition_id=partition, fields=TensorDict(fields, batch_size=len(keys)))
