"""The launch rule table (seal/trainer/launch/rules.py): every row names a function that exists, and a wrong
value is refused from the composed config alone, before verl, Ray or torch are imported (issue 58)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from seal.trainer.launch.rules import COST_ORDER, RULES

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("verl", "ray", "torch")
REFUSE_AND_LIST_IMPORTS = """
import sys
from seal.trainer.launch.command import main
status = main(sys.argv[1:])
print(status, *sorted(name for name in {heavy} if name in sys.modules))
"""


def resolved(path: str) -> object:
    """The object a dotted path names: the longest importable module, then attributes."""
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for name in parts[split:]:
            found = getattr(found, name)
        return found
    raise AssertionError(f"{path}: no module")


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: ",".join(rule.keys))
def test_every_rule_names_what_checks_it(rule):
    assert rule.cost in COST_ORDER
    assert rule.keys and rule.allowed and rule.why
    assert (rule.check is None) != (not rule.enforced_by), "a row either checks or names its checker"
    assert callable(resolved(rule.checker))


def test_only_config_rows_run_from_the_table():
    assert {rule.cost for rule in RULES if rule.check is not None} == {"config", "files"}


@pytest.mark.parametrize(
    ("override", "says"),
    [
        (
            "seal.apatch.mode=statc",
            "seal: seal.apatch.mode must be one of ['off', 'static', 'dynamic'], got 'statc'",
        ),
        ("data.train_batch_size=-3", "data.train_batch_size=-3: allowed: an integer >= 1"),
        (
            "actor_rollout_ref.actor.ppo_mini_batch_size=-3",
            "ppo_mini_batch_size=-3: allowed: an integer >= 1",
        ),
    ],
)
def test_a_wrong_value_is_refused_before_verl_ray_or_torch_import(override, says, tmp_path):
    argv = ["--conf", str(ROOT / "exp" / "SEAL.yaml"), "--dry-run", "--", override]
    done = subprocess.run(
        [sys.executable, "-c", REFUSE_AND_LIST_IMPORTS.format(heavy=HEAVY), *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    assert done.stdout.split() == ["2"]
    assert done.stderr.strip().endswith(says)
