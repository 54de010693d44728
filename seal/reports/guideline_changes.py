"""What Evolve told the model, sitting by sitting: the guidelines of the training-time interface Ω at the
first step and at each step where Evolve changed them (from the run's `seal_steps.jsonl`, Ω after every
step), with each named guideline's text. Only an interface whose guidelines come from C_t (the `full` preset
with Evolve, the paper's closed loop) has any; the held-out episodes see the raw interface, without them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from seal.env.interface import GUIDELINES
from seal.reports.runs import training_steps


def guideline_history(steps: Mapping[int, Mapping[str, Any]]) -> list[tuple[int, tuple[str, ...]]]:
    """`(step, guidelines)` at the first step and at each step whose Ω's guidelines differ from the step
    before; empty where no step's Ω has any."""
    history: list[tuple[int, tuple[str, ...]]] = []
    for step in sorted(steps):
        guidelines = tuple((steps[step].get("interface") or {}).get("guidelines") or ())
        if not history or set(guidelines) != set(history[-1][1]):
            history.append((step, guidelines))
    return history if any(guidelines for _, guidelines in history) else []


def _change(before: Sequence[str], after: Sequence[str]) -> str:
    added = [f"+ {name}" for name in after if name not in before]
    dropped = [f"− {name}" for name in before if name not in after]
    return ", ".join(added + dropped)


def guideline_rows(runs: Sequence[tuple[str, int, Path]]) -> tuple[list[dict[str, str]], list[str]]:
    """One row per `(arm, seed, steps file)` whose Ω had guidelines: those of its first step, then each
    change as `step N: + added, − dropped`; and the guidelines the rows name, in Ω's order."""
    rows, named = [], set()
    for arm, seed, path in runs:
        history = guideline_history(training_steps(path))
        if not history:
            continue
        (_, opening), *changes = history
        previous, described = opening, []
        for step, guidelines in changes:
            described.append(f"step {step}: {_change(previous, guidelines)}")
            previous = guidelines
        named |= {name for _, guidelines in history for name in guidelines}
        rows.append(
            {
                "arm": arm,
                "seed": str(seed),
                "guidelines at the first step": ", ".join(opening) or "none",
                "changed": "; ".join(described) or "never",
            }
        )
    return rows, [name for name in GUIDELINES if name in named]


def guideline_legend(names: Sequence[str]) -> str:
    """Each guideline named, as the line Ω adds to the system prompt for it."""
    return "\n".join(f"- {GUIDELINES[name]}" for name in names)
