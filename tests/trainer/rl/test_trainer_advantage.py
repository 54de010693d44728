"""SealPPOTrainer._compute_advantage on real TransferQueue (local Ray, one storage unit) against a live
environment service: GRPO over the healthy rows times the A-Patch weights, env_error rows at advantage 0
and out of their group's statistics, verl's padding rows out of C_t, the abort on too many env errors,
`seal/` metrics, C_t sent to the service (Evolve); with vanilla_grpo and no env error verl's advantages
bit for bit and nothing sent."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
import transfer_queue as tq
from transfer_queue import KVBatchMeta
from verl.trainer.ppo.core_algos import agg_loss
from verl.trainer.ppo.padding_utils import upsample_batch_to_divisible_size
from verl.trainer.ppo.v1 import PPOTrainerSync
from verl.utils.tensordict_utils import list_of_dict_to_tensordict

from seal.tocf.apatch import static_weight
from seal.trainer.experiment import PROJECT_ROOT, compose_experiment
from seal.trainer.rl.env_failures import EnvServiceFailure
from seal.trainer.rl.trainer import SealPPOTrainer
from tests.support.doubles import trajectory_fields
from tests.support.service_thread import served_interface, service_in_thread

N = 4  # rollouts per prompt in the fixture batch
GROUPS = [
    # (category, [(labels, reward, env_error), ...]) — one GRPO group per prompt
    (
        "multi_turn_base",
        [
            (["pass", "pass"], 1.0, ""),
            (["spurious_tool_call", "pass"], 0.0, ""),
            (["instance_mismatch", "instance_mismatch"], 0.0, ""),
            ([], 0.0, "connection refused after 3 retries"),
        ],
    ),
    (
        "multi_turn_miss_func",
        [
            (["correct_abstention", "empty_turn_model_response", "spurious_tool_call"], 0.0, ""),
            (["spurious_tool_call", "spurious_tool_call"], 0.0, ""),
            (["pass", "gt_error"], 1.0, ""),
            (["pass", "correct_abstention", "pass"], 1.0, ""),
        ],
    ),
]
HAND_WEIGHTS = [
    1.0,  # pass, pass
    (2.0 + 1.0) / 2,  # spurious 2.0, pass 1.0
    0.6,  # instance_mismatch 0.6
    1.0,  # env_error: untouched
    (1.8 + 1.5 + 2.0) / 3,  # correct_abstention 1.8, empty_turn 1.5, spurious 2.0: 1.767 in [0.5, 1.9]
    1.9,  # spurious 2.0, clipped to w_max 1.9
    1.0,  # pass (gt_error is excluded)
    (1.0 + 1.8 + 1.0) / 3,  # pass, correct_abstention, pass
]
"""Static A-Patch weights of the fixture batch, by hand from Table 6 (w_max 1.9 to show the clip)."""
ROOT3 = 3**0.5
HAND_GRPO = [
    # group 0 without its env_error row: rewards 1, 0, 0; mean 1/3, std (n-1) sqrt(1/3)
    (1 - 1 / 3) * ROOT3,
    (0 - 1 / 3) * ROOT3,
    (0 - 1 / 3) * ROOT3,
    0.0,  # the env_error row
    # group 1: rewards 0, 0, 1, 1; mean 1/2, std (n-1) sqrt(1/3)
    -0.5 * ROOT3,
    -0.5 * ROOT3,
    0.5 * ROOT3,
    0.5 * ROOT3,
]
"""The fixture batch's GRPO advantages by hand (verl's ε of 1e-6 aside). With the env_error row in its
group (rewards 1, 0, 0, 0: mean 1/4, std 1/2) group 0 would be 1.5, -0.5, -0.5, -0.5."""
ENV_ERROR_ROW = 3
UNIFORM_GROUPS = [
    ("multi_turn_base", [(["missing_tool_call"], 0.0, "")] * (N - 1) + [([], 0.0, "read timed out")]),
    ("multi_turn_miss_func", [(["pass", "pass"], 1.0, "")] * N),
]
"""A batch without a learning signal: every group's healthy rows failed alike or passed alike."""


@pytest.fixture(scope="module")
def service() -> Iterator[str]:
    with service_in_thread() as url:
        yield url


def trajectory(category: str, labels: list[str], reward: float, env_error: str, i: int) -> dict[str, Any]:
    fields = trajectory_fields(
        f"{category}_{i}",
        labels=labels,
        reward=reward,
        llm_calls=3,
        env_error=env_error,
        env_seconds=0.25 + i,
        gen_seconds=1.5,
        actions=["hello"],
    )
    return fields.extra_fields()


def put_batch(partition: str, env_errors: bool = True, groups: list = GROUPS) -> KVBatchMeta:
    """The fixture batch in the layout AgentLoopWorkerTQ writes: keys {uid}_{session}_{index}, `loss_mask`
    the `response_mask`, which SealAgentLoop zeroes on an env_error row. `env_errors=False` plays the
    env_error row as a healthy failure (same labels-free reward 0, mask 1)."""
    keys, rows = [], []
    for g, (category, members) in enumerate(groups):
        for s, (labels, reward, env_error) in enumerate(members):
            env_error = env_error if env_errors else ""
            length = 3 + s + g
            rm_scores = torch.zeros(length)
            rm_scores[-1] = reward
            mask = torch.full((length,), 0 if env_error else 1, dtype=torch.int64)
            keys.append(f"uid{g}_{s}_0")
            rows.append(
                {
                    "uid": f"uid{g}",
                    "response_mask": mask,
                    "loss_mask": mask,
                    "rm_scores": rm_scores,
                    "extra_fields": trajectory(category, labels, reward, env_error, s),
                }
            )
    return tq.kv_batch_put(
        keys=keys, partition_id=partition, fields=list_of_dict_to_tensordict(rows), tags=[{}] * len(keys)
    )


def hand_grpo(batch: KVBatchMeta) -> list[torch.Tensor]:
    """HAND_GRPO on each row's tokens (every healthy token is a response token of the fixture)."""
    data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["response_mask"])
    return [a * mask.float() for a, mask in zip(HAND_GRPO, data["response_mask"].unbind(), strict=True)]


def advantages(batch: KVBatchMeta) -> list[torch.Tensor]:
    data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["advantages"])
    return list(data["advantages"].unbind())


def trainer_for(experiment: str, url: str, tmp_path, *overrides: str) -> SealPPOTrainer:
    config = compose_experiment(
        PROJECT_ROOT / "exp" / f"{experiment}.yaml",
        [
            f"actor_rollout_ref.rollout.n={N}",
            f"seal.rollout.env_url={url}",
            f"trainer.default_local_dir={tmp_path / 'checkpoints'}",
            *overrides,
        ],
    )
    trainer = object.__new__(SealPPOTrainer)
    trainer.config = config
    trainer.global_steps = 1
    trainer.steps_per_epoch = 12
    trainer.init_seal()
    return trainer


def verl_grpo(trainer: SealPPOTrainer, partition: str, env_errors: bool = True) -> list[torch.Tensor]:
    """verl's own `_compute_advantage` on an identical copy of the batch."""
    batch = put_batch(partition, env_errors)
    PPOTrainerSync._compute_advantage(trainer, batch, {})
    return advantages(batch)


def run_step(
    trainer: SealPPOTrainer, partition: str, env_errors: bool = True
) -> tuple[list[torch.Tensor], dict[str, float]]:
    metrics: dict[str, float] = {}
    batch = trainer._compute_advantage(put_batch(partition, env_errors), metrics)
    return advantages(batch), metrics


def test_static_apatch_is_healthy_grpo_times_the_hand_computed_weights(transfer_queue, service, tmp_path):
    trainer = trainer_for("ablation_static_weights", service, tmp_path, "seal.apatch.w_max=1.9")
    reference = hand_grpo(put_batch("static_ref"))
    scaled, metrics = run_step(trainer, "static")
    for row, ref, weight in zip(scaled, reference, HAND_WEIGHTS, strict=True):
        torch.testing.assert_close(row, ref * weight)
    assert not scaled[ENV_ERROR_ROW].any()
    assert metrics["seal/apatch/scale_max"] == pytest.approx(1.9)
    assert metrics["seal/apatch/scale_min"] == pytest.approx(0.6)
    assert metrics["seal/apatch/scale_mean"] == pytest.approx(sum(HAND_WEIGHTS) / len(HAND_WEIGHTS))
    assert_push_metrics(metrics, reference, HAND_WEIGHTS)


def assert_push_metrics(metrics: dict[str, float], verl: list[torch.Tensor], factors: list[float]) -> None:
    """`seal/advantage/*` as their definition reads on the rows: each row's advantage summed over its
    tokens, times its factor."""
    summed = [float(row.sum()) for row in verl]
    scaled = [a * f for a, f in zip(summed, factors, strict=True) if a]
    assert metrics["seal/advantage/net_share"] == pytest.approx(sum(scaled) / sum(map(abs, scaled)))
    for name, side in (("positive", 1), ("negative", -1)):
        mine = [f for a, f in zip(summed, factors, strict=True) if a * side > 0]
        assert metrics[f"seal/advantage/scale_{name}"] == pytest.approx(sum(mine) / len(mine))


def test_seal_dynamic_step_scales_sends_c_t_and_logs_seal_metrics(transfer_queue, service, tmp_path):
    before = served_interface(service)["version"]
    trainer = trainer_for("SEAL", service, tmp_path)
    reference = hand_grpo(put_batch("seal_ref"))
    scaled, metrics = run_step(trainer, "seal")

    rho = trainer.closed_loop.apatch.rho
    assert rho != dict(trainer.closed_loop.apatch_config.rho)  # the closed-loop update moved ρ
    members = [member for _, group in GROUPS for member in group]
    for row, ref, (labels, _, env_error) in zip(scaled, reference, members, strict=True):
        weight = 1.0 if env_error else static_weight(labels, rho, 0.5, 2.0)
        torch.testing.assert_close(row, ref * weight)
    assert not scaled[ENV_ERROR_ROW].any()

    profile = trainer.closed_loop.profile
    assert profile.trajectories("total") == 7  # the env_error trajectory is left out of C_t
    assert profile.count("instance_mismatch") == 2
    served = served_interface(service)
    assert served["version"] == before + 1
    assert served["profile"] == profile.to_json()

    assert metrics["seal/interface/version"] == before + 1
    assert "seal/interface/active_cues" in metrics
    assert metrics["seal/pass_rate/multi_turn_base"] == pytest.approx(1 / 4)
    assert metrics["seal/pass_rate/multi_turn_miss_func"] == pytest.approx(2 / 4)
    assert metrics["seal/pass_rate/mean"] == pytest.approx(3 / 8)
    # 16 label occurrences outside the env_error row; gt_error (the judge's failure) is not a share
    assert metrics["seal/label_share/spurious_tool_call"] == pytest.approx(4 / 15)
    assert metrics["seal/label_share/gt_error"] == 0.0
    assert metrics["seal/rho/spurious_tool_call"] == pytest.approx(rho["spurious_tool_call"])
    assert metrics["seal/env_error_count"] == 1.0
    assert metrics["seal/reward/mean"] == pytest.approx(3 / 7)  # the 7 healthy rows
    assert metrics["seal/groups/mixed_share"] == 1.0  # both groups have a pass and a fail
    assert metrics["seal/env_seconds/mean"] == pytest.approx((0.25 * 8 + 2 * (0 + 1 + 2 + 3)) / 8)
    assert metrics["seal/gen_seconds/mean"] == pytest.approx(1.5)
    for key in ("scale_mean", "scale_min", "scale_max"):
        assert f"seal/apatch/{key}" in metrics
    steps = (tmp_path / "seal_steps.jsonl").read_text().splitlines()
    assert len(steps) == 1


def test_vanilla_grpo_is_bit_identical_to_verl_and_sends_nothing(transfer_queue, service, tmp_path):
    before = served_interface(service)
    trainer = trainer_for("vanilla_grpo", service, tmp_path)
    reference = verl_grpo(trainer, "vanilla_ref", env_errors=False)
    plain, metrics = run_step(trainer, "vanilla", env_errors=False)
    for row, ref in zip(plain, reference, strict=True):
        assert torch.equal(row, ref)
    assert served_interface(service) == before
    assert "seal/interface/version" not in metrics
    assert metrics["seal/apatch/scale_mean"] == 1.0
    assert trainer.closed_loop.profile.trajectories("total") == 8  # C_t is still kept, for the curves
    assert_push_metrics(metrics, reference, [1.0] * len(reference))  # read, never written back
    assert metrics["seal/advantage/scale_positive"] == metrics["seal/advantage/scale_negative"] == 1.0


def test_vanilla_env_error_rows_get_zero_advantage_and_leave_their_group_to_the_healthy_rows(
    transfer_queue, service, tmp_path
):
    trainer = trainer_for("vanilla_grpo", service, tmp_path)
    verl = verl_grpo(trainer, "vanilla_env_ref")
    batch = put_batch("vanilla_env")
    trainer._compute_advantage(batch, {})
    rows = advantages(batch)
    for row, hand in zip(rows, hand_grpo(batch), strict=True):
        torch.testing.assert_close(row, hand)
    healthy = torch.tensor([row[0].item() for row in rows[:ENV_ERROR_ROW]])
    rewards = torch.tensor([1.0, 0.0, 0.0])  # group 0's healthy rows: their z-scores
    torch.testing.assert_close(healthy, (rewards - rewards.mean()) / rewards.std())
    torch.testing.assert_close(verl[0][0], torch.tensor(1.5))  # verl alone counts the env_error's 0
    for row, ref in zip(rows[ENV_ERROR_ROW + 1 :], verl[ENV_ERROR_ROW + 1 :], strict=True):
        assert torch.equal(row, ref)  # group 1 has no env error: verl's, bit for bit

    # verl's actor loss reads the agent loop's masks from TransferQueue: token-mean over `response_mask`
    # divided by the `loss_mask` total. The env_error row's zero mask keeps it out of both.
    data = tq.kv_batch_get(
        keys=batch.keys,
        partition_id=batch.partition_id,
        select_fields=["response_mask", "loss_mask", "advantages"],
    ).to_padded_tensor()
    assert not data["response_mask"][ENV_ERROR_ROW].any() and not data["loss_mask"][ENV_ERROR_ROW].any()

    def token_mean(rows: list[int]) -> torch.Tensor:
        return agg_loss(
            -data["advantages"][rows],
            data["response_mask"][rows],
            "token-mean",
            batch_num_tokens=int(data["loss_mask"][rows].sum()),
        )

    everything, without = (
        token_mean(list(range(len(rows)))),
        token_mean([i for i in range(len(rows)) if i != 3]),
    )
    torch.testing.assert_close(everything, without)


def test_padding_rows_stay_out_of_c_t_and_the_metrics_and_keep_verl_s_advantage(
    transfer_queue, service, tmp_path
):
    trainer = trainer_for("SEAL", service, tmp_path)
    batch = upsample_batch_to_divisible_size(put_batch("padded"), 12, eos_token_id=0)
    assert sum(tag.get("is_padding", False) for tag in batch.tags) == 4  # copies of row 0 (pass, pass)
    metrics: dict[str, float] = {}
    rows = advantages(trainer._compute_advantage(batch, metrics))
    assert trainer.closed_loop.profile.trajectories("total") == 7
    assert trainer.closed_loop.profile.count("pass") == 6  # occurrences 2 + 1 + 1 + 2, no copy of row 0
    assert metrics["seal/pass_rate/multi_turn_base"] == pytest.approx(1 / 4)
    assert metrics["seal/reward/mean"] == pytest.approx(3 / 7)
    assert all(not row.any() for row in rows[8:])  # verl's GRPO gives a zero-mask row 0; left so


def test_too_many_env_errors_stop_the_run_in_one_line_before_anything_changes(
    transfer_queue, service, tmp_path
):
    trainer = trainer_for("SEAL", service, tmp_path, "seal.rollout.max_env_error_share=0.1")
    with pytest.raises(EnvServiceFailure) as raised:
        trainer._compute_advantage(put_batch("abort"), {})
    assert str(raised.value).startswith(
        f"seal: 1 of 8 trajectories at step 1 failed on the environment service {service} "
        "(share 0.12 > seal.rollout.max_env_error_share 0.1); "
    )
    assert "\n" not in str(raised.value)
    assert trainer.closed_loop.profile.trajectories("total") == 0
    assert not (tmp_path / "seal_steps.jsonl").exists()


def test_a_dead_service_does_not_abort_the_step(transfer_queue, tmp_path):
    with service_in_thread() as url:
        pass  # the port is closed again: nothing answers there
    trainer = trainer_for("SEAL", url, tmp_path, "seal.rollout.env_retries=0", "seal.rollout.env_timeout_s=2")
    scaled, metrics = run_step(trainer, "dead")
    assert metrics["seal/interface/evolve_failed"] == 1.0
    assert len(scaled) == 8


class RecordingActorGroup:
    """The actor's worker group: records each batch sent to `update_actor` and answers with its metrics."""

    def __init__(self) -> None:
        self.updates: list[KVBatchMeta] = []

    def update_actor(self, batch: KVBatchMeta) -> dict[str, Any]:
        self.updates.append(batch)
        return {"metrics": {"mfu": [0.4], "pg_loss": [0.25], "grad_norm": [1.5]}}


def advantage_then_update(
    trainer: SealPPOTrainer, partition: str, groups: list
) -> tuple[RecordingActorGroup, dict[str, float]]:
    """One step's advantage and update phases, as verl's `_step_once` runs them, against a recording actor."""
    trainer.actor_rollout_wg = RecordingActorGroup()
    metrics: dict[str, float] = {}
    batch = trainer._compute_advantage(put_batch(partition, groups=groups), metrics)
    trainer._update_actor(batch, metrics)
    return trainer.actor_rollout_wg, metrics


@pytest.mark.parametrize("experiment", ["SEAL", "vanilla_grpo"])
def test_a_step_whose_advantages_are_all_zero_leaves_the_actor_alone(
    transfer_queue, service, tmp_path, experiment
):
    trainer = trainer_for(experiment, service, tmp_path)
    actor, metrics = advantage_then_update(trainer, f"silent_{experiment}", UNIFORM_GROUPS)
    assert actor.updates == []
    assert metrics["seal/update_skipped"] == 1.0
    assert not any(key.startswith("actor/") for key in metrics)
    assert metrics["seal/groups/mixed_share"] == 0.0
    assert trainer.closed_loop.profile.trajectories("total") == 7  # C_t still learns from the step


def test_a_step_with_one_nonzero_advantage_updates_the_actor(transfer_queue, service, tmp_path):
    trainer = trainer_for("SEAL", service, tmp_path)
    actor, metrics = advantage_then_update(trainer, "signal", GROUPS)
    assert len(actor.updates) == 1
    assert metrics["seal/update_skipped"] == 0.0
    assert metrics["actor/pg_loss"] == pytest.approx(0.25)
    assert metrics["perf/mfu/actor"] == pytest.approx(0.4)


def test_without_the_skip_verl_updates_the_actor_on_an_all_zero_step(transfer_queue, service, tmp_path):
    trainer = trainer_for("SEAL", service, tmp_path, "seal.skip_update_without_signal=false")
    actor, metrics = advantage_then_update(trainer, "silent_kept", UNIFORM_GROUPS)
    assert len(actor.updates) == 1
    assert metrics["seal/update_skipped"] == 0.0
    assert metrics["actor/grad_norm"] == pytest.approx(1.5)
