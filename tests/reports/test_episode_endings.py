"""How a sitting's greedy episodes ended, before → after, from its task-scores file: the loop and call-limit
shares and the replies an episode took per split; a split whose rows lack an ending, and a file from before
the endings were kept, give no row; a file that is not one is named in one line."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from seal.reports.episode_endings import ending_rows, endings_of
from seal.reports.sitting import TASK_SCORE_COLUMNS
from seal.results.campaign import CampaignError


def scores(rows: list[tuple]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=TASK_SCORE_COLUMNS)


def episodes(split: str, when: str, endings: list[tuple[int, bool, bool]]) -> list[tuple]:
    """Rows of one (split, when): one task per (replies, used all calls, looped)."""
    return [(split, when, f"{split}_{i}", 0.0, *ending, None) for i, ending in enumerate(endings)]


def write(path: Path, frame: pd.DataFrame) -> Path:
    frame.to_csv(path, index=False)
    return path


def test_the_shares_and_the_mean_replies_come_per_split_and_moment():
    frame = scores(
        episodes("val", "before", [(5, False, False), (7, False, False)])
        + episodes(
            "val", "after", [(20, True, True), (20, True, False), (4, False, False), (8, False, False)]
        )
    )
    found = endings_of(frame)
    assert found["val", "before"] == {"n": 2.0, "looped": 0.0, "call_limit": 0.0, "llm_calls": 6.0}
    assert found["val", "after"] == {"n": 4.0, "looped": 0.25, "call_limit": 0.5, "llm_calls": 13.0}


def test_a_row_per_sitting_and_split_with_both_moments(tmp_path):
    frame = scores(
        episodes("val", "before", [(6, False, False)] * 4)
        + episodes(
            "val", "after", [(20, True, True), (6, False, False), (6, False, False), (8, False, False)]
        )
        + episodes("test", "before", [(6, False, False)])
        + [("test", "after", "test_0", 1.0, None, None, None, None)]
    )
    rows = ending_rows([("vanilla", 3, write(tmp_path / "scores.csv", frame))])
    assert rows == [
        {
            "arm": "vanilla",
            "seed": "3",
            "split": "val (4)",
            "looped": "0% → 25%",
            "used all LLM calls": "0% → 25%",
            "replies an episode": "6.0 → 10.0",
        }
    ]


def test_older_and_missing_files_give_no_row_and_a_broken_one_is_named(tmp_path):
    older = pd.DataFrame({"split": ["val", "val"], "when": ["before", "after"], "task_id": "t", "score": 1.0})
    sittings = [("SEAL", 1, write(tmp_path / "older.csv", older)), ("SEAL", 2, tmp_path / "absent.csv")]
    assert ending_rows(sittings) == []
    (tmp_path / "broken.csv").write_text("not,a\nscores,file\n")
    with pytest.raises(CampaignError, match=r"broken.csv: not a task-scores file"):
        ending_rows([("SEAL", 3, tmp_path / "broken.csv")])
