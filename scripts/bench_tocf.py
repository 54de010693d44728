"""Time the pure seal.tocf step on one synthetic GRPO batch.

The trainer runs diagnosis → profile update → dynamic ρ → A-Patch once per step; this measures that path
on a batch of synthetic trajectories (default 256, i.e. 32 prompts × 8 rollouts) to show it is negligible
next to generation.

    python scripts/bench_tocf.py [--trajectories 256] [--repeats 50] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from seal.tocf.apatch import APatchConfig, APatchState, apply_apatch
from seal.tocf.diagnosis import diagnose
from seal.tocf.evidence import CallEvidence, TurnCheck, TurnEvidence
from seal.tocf.profile import FailureProfile

CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
TOOLS = ("cd", "ls", "mv", "place_order", "get_stock_info", "book_flight", "startEngine")


def synthetic_turn(rng: random.Random, index: int, first_message: int, reached: bool) -> TurnEvidence:
    """A plausible turn: mostly clean calls, some rejections, errors, schema violations and check failures."""
    gt_empty = rng.random() < 0.1
    if not reached:
        return TurnEvidence(index, gt_empty, False, (), (), 0, TurnCheck(0, state_ok=gt_empty))
    n_messages = rng.randint(1, 4)
    messages = tuple(range(first_message, first_message + n_messages))
    calls = []
    for message in messages[:-1]:
        for _ in range(rng.randint(1, 3)):
            accepted = rng.random() > 0.1
            calls.append(
                CallEvidence(
                    message=message,
                    name=rng.choice(TOOLS),
                    accepted=accepted,
                    reject_reason=None if accepted else "tool not available",
                    error="Error during execution: boom" if accepted and rng.random() < 0.15 else None,
                    schema_violations=("missing required parameter 'x'",)
                    if accepted and rng.random() < 0.1
                    else (),
                )
            )
    executed = sum(c.accepted for c in calls)
    check = TurnCheck(
        model_calls=executed,
        instance_match=rng.random() > 0.02,
        state_ok=rng.random() > 0.25,
        response_ok=rng.random() > 0.15,
        checker_error="KeyError" if rng.random() < 0.01 else None,
    )
    rejected = int(rng.random() < 0.05)
    return TurnEvidence(index, gt_empty, True, messages, tuple(calls), rejected, check)


def synthetic_batch(n: int, seed: int) -> list[tuple[list[TurnEvidence], float, str]]:
    rng = random.Random(seed)
    batch = []
    for _ in range(n):
        n_turns = rng.randint(2, 8)
        stop = n_turns if rng.random() > 0.1 else rng.randint(1, n_turns)
        turns, message = [], 0
        for i in range(n_turns):
            turns.append(synthetic_turn(rng, i, message, reached=i < stop))
            message += len(turns[-1].messages)
        batch.append((turns, float(rng.random() < 0.3), rng.choice(CATEGORIES)))
    return batch


def timed(fn: Callable[[], object], repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    batch = synthetic_batch(args.trajectories, args.seed)
    turns = sum(len(t) for t, _, _ in batch)
    cfg = APatchConfig()
    advantages = [random.Random(args.seed).gauss(0.0, 1.0) for _ in batch]
    labels = {
        tax: [[x.label for x in diagnose(t, tax)] for t, _, _ in batch] for tax in ("reference", "paper")
    }
    profile = FailureProfile()
    profile.observe_batch(labels["reference"], [r for _, r, _ in batch], [c for _, _, c in batch])
    state = APatchState.initial(cfg)

    def full_step() -> None:
        step_labels = [[x.label for x in diagnose(t, "reference")] for t, _, _ in batch]
        step_profile = FailureProfile()
        step_profile.observe_batch(step_labels, [r for _, r, _ in batch], [c for _, _, c in batch])
        step_state = APatchState.initial(cfg)
        step_state.update(step_profile, cfg)
        apply_apatch(advantages, step_labels, step_state.rho, cfg, step=1)

    stages: list[tuple[str, Callable[[], object]]] = [
        ("diagnose (reference)", lambda: [diagnose(t, "reference") for t, _, _ in batch]),
        ("diagnose (paper)", lambda: [diagnose(t, "paper") for t, _, _ in batch]),
        (
            "profile.observe_batch",
            lambda: FailureProfile().observe_batch(
                labels["reference"], [r for _, r, _ in batch], [c for _, _, c in batch]
            ),
        ),
        ("dynamic update of rho", lambda: APatchState(dict(state.rho)).update(profile, cfg)),
        ("apply_apatch", lambda: apply_apatch(advantages, labels["reference"], state.rho, cfg, step=1)),
        ("profile to_json+from_json", lambda: FailureProfile.from_json(profile.to_json())),
        ("full step (diag+profile+rho+apatch)", full_step),
    ]
    print(
        f"seal.tocf benchmark: {args.trajectories} trajectories, {turns} GT turns, "
        f"{args.repeats} repeats (median / p90)"
    )
    print(f"{'stage':<38}{'median ms':>11}{'p90 ms':>10}{'us / traj':>11}")
    for name, fn in stages:
        fn()
        samples = sorted(timed(fn, args.repeats))
        median = statistics.median(samples)
        p90 = samples[min(len(samples) - 1, int(0.9 * len(samples)))]
        print(f"{name:<38}{median * 1e3:>11.3f}{p90 * 1e3:>10.3f}{median * 1e6 / args.trajectories:>11.2f}")


if __name__ == "__main__":
    main()
