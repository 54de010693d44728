"""How a sitting's greedy episodes ended before training and after: the share that looped (the last replies
one identical call), the share that used all their LLM calls, and the replies an episode took, per split,
from the sitting's task-scores file. A pass rate that fell says less than this: a policy that learnt to send
a rejected message again and again fails each such task at the call limit, whatever else it learnt."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from seal.results.campaign import CampaignError
from seal.results.endings import ENDING_FIELDS, ending_shares

SPLITS = ("val", "test")


def endings_of(scores: pd.DataFrame) -> dict[tuple[str, str], dict[str, float]]:
    """Per (split, when) with every ending recorded, `ending_shares`: the episodes, the shares that looped
    and that hit the call limit, and the mean replies an episode took. Empty where the file predates the
    endings; a KeyError where it is no task-scores file at all."""
    missing = [name for name in ("split", "when", "task_id", "score") if name not in scores.columns]
    if missing:
        raise KeyError(f"no {', '.join(missing)} column")
    if not set(ENDING_FIELDS) <= set(scores.columns):
        return {}
    found = {}
    for (split, when), group in scores.groupby(["split", "when"]):
        shares = ending_shares(group[list(ENDING_FIELDS)].to_dict("records"))
        if shares is not None:
            found[str(split), str(when)] = shares
    return found


def _change(before: dict[str, float], after: dict[str, float], key: str, shown: str) -> str:
    return f"{before[key]:{shown}} → {after[key]:{shown}}"


def ending_rows(sittings: Sequence[tuple[str, int, Path]]) -> list[dict[str, str]]:
    """One row per sitting (arm name, seed, its task-scores file) and split with endings before and after."""
    rows = []
    for arm, seed, path in sittings:
        if not path.is_file():
            continue
        try:
            endings = endings_of(pd.read_csv(path))
        except (ValueError, KeyError) as exc:
            raise CampaignError(f"{path}: not a task-scores file ({' '.join(str(exc).split())})") from None
        for split in SPLITS:
            before, after = endings.get((split, "before")), endings.get((split, "after"))
            if before is None or after is None:
                continue
            rows.append(
                {
                    "arm": arm,
                    "seed": str(seed),
                    "split": f"{split} ({int(after['n'])})",
                    "looped": _change(before, after, "looped", ".0%"),
                    "used all LLM calls": _change(before, after, "call_limit", ".0%"),
                    "replies an episode": _change(before, after, "llm_calls", ".1f"),
                }
            )
    return rows
