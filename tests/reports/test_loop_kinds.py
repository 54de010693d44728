"""Sorting a sitting's looping episodes by what they resend: the parsing rule's stray tags, malformed calls,
calls of a function the task does not offer, and calls of offered ones; a message the task-scores file cut
short is read by its whole blocks and the name it was cut in."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from seal.bfcl.tasks import get_task
from seal.reports.loop_kinds import KINDS, loop_kind, loop_kind_rows
from seal.results.campaign import CampaignError
from seal.results.endings import REPEATED_CHARS

TASK = "multi_turn_miss_func_0"  # offers `ls`; withholds `sort` until its fourth turn


def block(name: str, arguments: str = "{}") -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'


def cut(message: str) -> str:
    """`message` as the task-scores file keeps a longer one: its first REPEATED_CHARS characters."""
    assert len(message) > REPEATED_CHARS
    return message[:REPEATED_CHARS]


def test_the_task_offers_ls_and_withholds_sort():
    offered = {doc["name"] for doc in get_task(TASK).functions}
    withheld = {doc["name"] for docs in get_task(TASK).missed_functions.values() for doc in docs}
    assert "ls" in offered and withheld == {"sort"} and "sort" not in offered


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        (block("ls"), "offered functions"),
        (block("ls") + "\n" + block("cd", '{"folder": "docs"}'), "offered functions"),
        (block("ls") + "</tool_call>", "stray tags"),
        ("<tool_call><tool_call>" + block("ls"), "stray tags"),
        ('<tool_call>\n{"name": "ls", "arguments": {}\n</tool_call>', "malformed"),
        (
            block("ls") + "\n" + '<tool_call>\n{"name": "cd", "arguments": {"folder": 1}\n</tool_call>',
            "malformed",
        ),
        ('<tool_call>\n{"name": ["ls"], "arguments": {}}\n</tool_call>', "malformed"),
        (block("sort", '{"file_name": "a.txt"}'), "unavailable function"),
        (block("ls") + "\n" + block("list_files_sorted"), "unavailable function"),
    ],
    ids=[
        "one",
        "two",
        "closing-tag",
        "opening-tags",
        "json",
        "one-of-two-json",
        "name-list",
        "withheld",
        "made-up",
    ],
)
def test_each_message_has_its_kind(message, kind):
    assert loop_kind(message, TASK) == kind


def test_a_message_cut_short_is_read_by_its_whole_blocks_and_the_name_it_was_cut_in():
    tail = '{"file_name": "' + "x" * REPEATED_CHARS + '"}'
    offered = cut(block("ls") + "\n" + block("cat", tail))
    withheld = cut(block("ls") + "\n" + block("sort", tail))
    assert loop_kind(offered, TASK) == "offered functions"  # the cut tail is no stray tag
    assert loop_kind(withheld, TASK) == "unavailable function"  # only its name survived the cut
    one_long_call = cut(block("sort", tail))
    assert "</tool_call>" not in one_long_call and loop_kind(one_long_call, TASK) == "unavailable function"
    nameless = cut(block("ls") + "\n" + "<tool_call>\n" + " " * REPEATED_CHARS)
    assert loop_kind(nameless, TASK) == "offered functions"


def write_scores(path: Path, rows: list[dict[str, str]], columns: list[str]) -> Path:
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, columns)
        writer.writeheader()
        writer.writerows({c: row.get(c, "") for c in columns} for row in rows)
    return path


COLUMNS = ["split", "when", "task_id", "score", "llm_calls", "call_limit", "looped", "repeated"]


def loop(split: str, message: str, when: str = "after") -> dict[str, str]:
    return {
        "split": split,
        "when": when,
        "task_id": TASK,
        "score": "0.0",
        "looped": "True",
        "repeated": message,
    }


def test_the_rows_count_each_sitting_s_loops_after_training_by_kind(tmp_path):
    rows = [
        loop("val", block("ls") + "</tool_call>"),
        loop("val", block("sort")),
        loop("test", block("sort")),
        loop("test", block("ls")),
        loop("test", block("ls") + "</tool_call>", when="before"),  # before training: not counted
        {"split": "test", "when": "after", "task_id": TASK, "score": "1.0", "looped": "False"},
    ]
    scores = write_scores(tmp_path / "a.csv", rows, COLUMNS)
    quiet = write_scores(tmp_path / "b.csv", [{"split": "val", "when": "after", "looped": "False"}], COLUMNS)
    (row,) = loop_kind_rows([("SEAL", 2, scores), ("vanilla", 2, quiet), ("full loop", 1, tmp_path / "none")])
    assert row == {
        "arm": "SEAL",
        "seed": "2",
        "loops after training": "2 val + 2 test",
        "stray tags": "1",
        "malformed": "0",
        "unavailable function": "2",
        "offered functions": "1",
    }
    assert set(KINDS) <= set(row)


def test_a_file_without_the_repeated_messages_gives_no_row(tmp_path):
    old = write_scores(tmp_path / "old.csv", [loop("val", "")], COLUMNS[:-1])
    assert loop_kind_rows([("SEAL", 1, old)]) == []


@pytest.mark.parametrize(
    ("rows", "columns"),
    [
        ([{"task_id": TASK}], ["task_id", "looped", "repeated"]),
        ([loop("val", block("ls")) | {"task_id": "x_1"}], COLUMNS),
    ],
    ids=["no-when-column", "unknown-task"],
)
def test_a_file_that_is_no_task_scores_file_is_one_error_naming_it(tmp_path, rows, columns):
    bad = write_scores(tmp_path / "bad.csv", rows, columns)
    with pytest.raises(CampaignError, match=r"bad\.csv: not a task-scores file"):
        loop_kind_rows([("SEAL", 1, bad)])
