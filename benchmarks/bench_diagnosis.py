"""Time one training step's worth of diagnosis and A-Patch on real episodes.

A GRPO step of the paper's configuration finishes 32 prompts x 8 rollouts = 256 trajectories. This
plays 256 episodes of training tasks (ground truth with seeded mistakes: wrong values, dropped calls,
text-only turns, early stops), then times, per repeat: the per-turn re-execution and labelling of every
trajectory (`turn_checks` + `diagnose`), the failure-profile update, the dynamic rho update and A-Patch
over the batch's advantages. Playing the episodes and the official reward are not part of the timing.

    python benchmarks/bench_diagnosis.py [--trajectories 256] [--repeats 5] [--taxonomy reference]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from tqdm import tqdm

from seal.bfcl.calls import ToolCall
from seal.bfcl.ground_truth import ground_truth_calls
from seal.bfcl.tasks import get_task, split_ids
from seal.env.episode import Episode
from seal.protocol.ground_truth import actions_for_calls
from seal.tocf.apatch import APatchConfig, APatchState, apatch_factors
from seal.tocf.diagnosis import diagnose
from seal.tocf.labels import DEFAULT_TAXONOMY, TAXONOMIES
from seal.tocf.profile import FailureProfile


def seeded_actions(task_id: str, rng: random.Random) -> list[str]:
    turns = ground_truth_calls(get_task(task_id))
    stop = len(turns) if rng.random() > 0.15 else rng.randrange(len(turns))
    chosen = []
    for calls in turns[:stop]:
        roll = rng.random()
        if calls and roll < 0.15:
            calls = [
                ToolCall(c.name, {k: f"{v}x" if isinstance(v, str) else v for k, v in c.arguments.items()})
                for c in calls
            ]
        elif calls and roll < 0.25:
            calls = calls[:-1]
        elif calls and roll < 0.3:
            calls = []
        chosen.append(calls)
    return actions_for_calls(chosen)


def played(n: int, seed: int) -> list[Episode]:
    rng = random.Random(seed)
    tasks = rng.sample(split_ids("train"), max(1, n // 8))
    episodes = []
    for i in tqdm(range(n), desc="playing episodes", unit="episode"):
        episode = Episode(tasks[i // 8 % len(tasks)], mode="train")
        episode.reset()
        for action in seeded_actions(episode.task.id, rng):
            if not episode.done:
                episode.step(action)
        episodes.append(episode)
    return episodes


def diagnosed(episode: Episode, taxonomy: str) -> list[str]:
    """What `Episode.finish` does for the labels, without the official reward."""
    return [label.label for label in diagnose(episode.turn_evidence(), taxonomy)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--taxonomy", choices=TAXONOMIES, default=DEFAULT_TAXONOMY)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    episodes = played(args.trajectories, args.seed)
    rewards = [episode.finish().reward for episode in episodes]
    categories = [episode.task.category for episode in episodes]
    advantages = [random.Random(args.seed + i).gauss(0.0, 1.0) for i in range(len(episodes))]
    cfg = APatchConfig()
    timings: dict[str, list[float]] = {"diagnosis (re-execution + labels)": [], "profile + rho + A-Patch": []}
    for _ in range(args.repeats):
        start = time.perf_counter()
        labels = [diagnosed(episode, args.taxonomy) for episode in episodes]
        middle = time.perf_counter()
        profile = FailureProfile()
        profile.observe_batch(labels, rewards, categories)
        state = APatchState.initial(cfg)
        state.update(profile, cfg)
        apatch_factors(advantages, labels, state.rho, cfg, step=1)
        end = time.perf_counter()
        timings["diagnosis (re-execution + labels)"].append(middle - start)
        timings["profile + rho + A-Patch"].append(end - middle)
    totals = [a + b for a, b in zip(*timings.values(), strict=True)]
    turns = sum(len(episode.turns) for episode in episodes)
    print(
        f"\n{len(episodes)} trajectories, {turns} ground-truth turns, {sum(rewards):.0f} with reward 1, "
        f"taxonomy {args.taxonomy}, {args.repeats} repeats"
    )
    print(f"| {'stage':<36} | {'median s':>9} | {'max s':>7} |")
    print(f"|{'-' * 38}|{'-' * 11}|{'-' * 9}|")
    for name, samples in [*timings.items(), ("whole step", totals)]:
        print(f"| {name:<36} | {statistics.median(samples):>9.3f} | {max(samples):>7.3f} |")


if __name__ == "__main__":
    main()
