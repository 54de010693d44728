"""A-Patch's factors, ρ and the saved `seal_state.json` are bit for bit what they were, in every mode."""

from __future__ import annotations

import random
from itertools import product
from pathlib import Path

import pytest

from seal.bfcl.tasks import CATEGORIES
from seal.tocf.labels import CHECKER_ERROR, PAPER_LABELS
from seal.trainer.rl.closed_loop import ClosedLoop
from seal.trainer.rl.trainer import save_seal_state
from seal.trainer.settings import settings_from_config
from tests.snapshots.snapshot import check, digest
from tests.support.doubles import trajectory_fields

STEPS = 3
BATCH = 24
CASES = [
    {"mode": mode, "apply_to": apply_to, "warmup_steps": warmup, "normalize_mean": normalize}
    for mode, apply_to, warmup, normalize in product(
        ("static", "dynamic"),
        ("all", "positive_advantage", "negative_advantage"),
        (0, 2),
        (False, True),
    )
]


def batch(step: int):
    """A fixed pseudo-random batch: labels of the paper taxonomy (judge failures too), env errors, and
    advantage signs of both kinds and zero."""
    draw = random.Random(1000 + step)
    labels = [*PAPER_LABELS, CHECKER_ERROR]
    rows, signs, groups = [], [], []
    for i in range(BATCH):
        error = "service down" if draw.random() < 0.1 else ""
        turns = [] if error else [draw.choice(labels) for _ in range(draw.randint(1, 4))]
        reward = 1.0 if turns and set(turns) <= {"pass", "correct_abstention"} else 0.0
        category = CATEGORIES[i % len(CATEGORIES)]
        rows.append(trajectory_fields(f"{category}_{i}", labels=turns, reward=reward, env_error=error))
        signs.append(0.0 if error else draw.choice((-1.5, -0.25, 0.0, 0.5, 2.0)))
        groups.append(f"uid{i // 4}")
    return rows, signs, groups


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(v) for v in c.values()))
def test_factors_rho_and_saved_state_are_unchanged(case: dict, tmp_path: Path):
    settings = settings_from_config({"seal": {"taxonomy": "paper", "apatch": case}})
    loop = ClosedLoop(settings)
    steps = []
    for step in range(1, STEPS + 1):
        rows, signs, groups = batch(step)
        result = loop.step(rows, signs, step, epoch=0, groups=groups)
        apatch = {k: v.hex() for k, v in sorted(result.metrics.items()) if k.startswith("seal/apatch/")}
        rho = {k: v.hex() for k, v in sorted(result.metrics.items()) if k.startswith("seal/rho/")}
        steps.append({"factors": [f.hex() for f in result.factors], "metrics": digest(apatch), "rho": rho})
    state = save_seal_state(loop, tmp_path).read_bytes()
    name = "-".join(str(v) for v in case.values())
    check(f"apatch/{name}", {"steps": steps, "seal_state.json": digest(state)})
