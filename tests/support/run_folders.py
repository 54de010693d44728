"""Run folders shaped exactly as a launch leaves them, for the tests of the tools that read runs.

`experiments/<name>/`: `metrics/<stamp>.jsonl` in verl's file-logger layout (`{"step", "data"}` a line; a
validation line without step time first), SEAL's step metrics from a real `ClosedLoop` and verl's own keys
beside them, `validation/{step}.jsonl` rows as verl's `_write_generations` dumps them (with SEAL's
`reward_extra_info`), `seal_steps.jsonl` as the trainer appends it; and `launcher_record/<name>/<stamp>/`
written by the launcher's own `write_record` from a composed experiment.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from seal.bfcl.tasks import CATEGORIES, category_of, split_ids
from seal.trainer.experiment import PROJECT_ROOT, compose_experiment
from seal.trainer.launch.record import write_record
from seal.trainer.rl.closed_loop import ClosedLoop
from seal.trainer.rl.trajectory import TrajectoryFields
from seal.trainer.settings import settings_from_config
from tests.support.doubles import trajectory_fields

GROUP = 4
"""Rollouts per prompt in the synthetic batches."""


def trajectory(task_id: str, reward: float, labels: list[str], mode: str = "eval") -> TrajectoryFields:
    return trajectory_fields(
        task_id,
        mode=mode,
        labels=labels,
        reward=reward,
        llm_calls=3,
        env_seconds=0.1,
        gen_seconds=0.5,
        actions=["Done."],
    )


def write_dump(path: Path, split: str, step: int, passes: Sequence[int]) -> None:
    """Rows as verl's `_write_generations` writes them: input, output, gts, score, step, reward_extra_info;
    the first `passes[i]` tasks of category i pass."""
    rows = []
    for category, n_pass in zip(CATEGORIES, passes, strict=True):
        ids = [task for task in split_ids(split) if category_of(task) == category]
        for index, task_id in enumerate(ids):
            reward = 1.0 if index < n_pass else 0.0
            fields = trajectory(task_id, reward, ["pass"] if reward else ["state_mismatch"])
            rows.append(
                {
                    "input": "system ... user ...",
                    "output": "<tool_call>...</tool_call>",
                    "gts": task_id,
                    "score": reward,
                    "step": step,
                    **fields.reward_extra_info(),
                    "uid": f"{task_id}_0_0",
                }
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def verl_metrics(step: int) -> dict[str, float]:
    """verl 0.9.1's own keys of a training step (timings, the rollout-vs-trainer agreement, the actor)."""
    return {
        "training/global_step": step,
        "timing_s/step": 20.0 + step % 3,
        "timing_s/gen": 8.0,
        "timing_s/update_actor": 4.0,
        "training/rollout_probs_diff_valid": 1,
        "training/rollout_probs_diff_mean": 0.001 + step / 10_000,
        "training/rollout_actor_probs_pearson_corr": 0.997,
        "rollout_corr/k3_kl": 0.0004,
        "actor/entropy": 0.6 - step / 100,
        "actor/grad_norm": 0.3 + step / 50,
        "actor/pg_loss": -0.01,
        "response_length/clip_ratio": 0.25,
        "perf/total_num_tokens": 300_000,
    }


def write_launch(
    root: Path, conf: str, overrides: Sequence[str], stamp: str = "20260101T000000Z"
) -> tuple[Path, Any]:
    """Compose `exp/<conf>.yaml` with `overrides`, record the launch under `root/launcher_record` as the
    launcher does, and return (the run folder under `root/experiments`, the composed config)."""
    config = compose_experiment(PROJECT_ROOT / "exp" / f"{conf}.yaml", overrides)
    name = str(config.trainer.experiment_name)
    argv = ["launcher.py", "--conf", f"exp/{conf}.yaml", "--", *overrides]
    write_record(
        root / "launcher_record" / name / stamp, config, Path(f"exp/{conf}.yaml"), overrides, argv, {}
    )
    return root / "experiments" / name, config


def write_training(
    run: Path, config: Any, rewards: Sequence[Sequence[float]], stamp: str = "20260101T000000Z"
) -> None:
    """Each step's batch (its trajectories' rewards, `GROUP` rollouts a prompt) through a real `ClosedLoop`
    with the run's settings: its metrics (plus verl's) into `metrics/<stamp>.jsonl`, its state into
    `seal_steps.jsonl`. With Evolve on, Ω's version advances by one a step, as the service's does."""
    settings = settings_from_config(config)
    loop = ClosedLoop(settings)
    lines = [{"step": 0, "data": {"val-core/seal/pass_rate_mean": 0.0}}]
    states = []
    tasks = split_ids("train")
    for step, batch in enumerate(rewards, start=1):
        trajectories = [
            trajectory(
                tasks[i // GROUP], reward, ["pass"] if reward else ["empty_turn_model_response"], mode="train"
            )
            for i, reward in enumerate(batch)
        ]
        signs = [reward - 0.5 for reward in batch]
        groups = [f"uid{i // GROUP}" for i in range(len(batch))]
        result = loop.step(trajectories, signs, step, epoch=0, groups=groups)
        data = {**verl_metrics(step), **result.metrics, "seal/update_skipped": 0.0}  # signs are never 0
        if settings.interface.adapt:
            loop.interface = {"version": step, "guidelines": []}
            loop.replace_interface_metrics(data)
        lines.append({"step": step, "data": data})
        states.append({"step": step, **loop.to_json()})
    (run / "metrics").mkdir(parents=True, exist_ok=True)
    (run / "metrics" / f"{stamp}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (run / "seal_steps.jsonl").write_text("".join(json.dumps(state) + "\n" for state in states))
