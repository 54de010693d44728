"""The loop and call-limit shares: one definition of an identical-call loop, counted over episode lines."""

from __future__ import annotations

import json

from seal.protocol.ground_truth import END_OF_TURN as DONE
from seal.results.endings import (
    LOOP_CALLS,
    REPEATED_CHARS,
    dump_row_ending,
    endings,
    endings_line,
    ends_in_loop,
    repeated_call,
)

TASK = "multi_turn_base_0"
CALL = '<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call>'


def test_a_loop_is_the_last_five_replies_the_same_call():
    assert LOOP_CALLS == 5
    assert ends_in_loop(["DONE", *[CALL] * 5], "qwen_fc")
    assert ends_in_loop([CALL] * 4 + [CALL + "\n"], "qwen_fc")  # up to surrounding whitespace
    assert not ends_in_loop([CALL] * 4, "qwen_fc")
    assert not ends_in_loop([CALL] * 5 + ["DONE"], "qwen_fc")  # a loop the model left is not how it ended
    assert not ends_in_loop([CALL, CALL.replace("ls", "pwd")] * 3, "qwen_fc")
    assert not ends_in_loop([DONE] * 6, "qwen_fc")  # quiet turns ended one after another: no call
    assert ends_in_loop(["[ls()]"] * 5, "python_list") and not ends_in_loop([CALL] * 5, "python_list")


def test_the_shares_count_looped_lines_and_lines_cut_at_the_call_limit():
    records = [
        {"task_id": "a", "looped": True, "cut": "calls"},
        {"task_id": "b", "looped": False, "cut": "calls"},
        {"task_id": "c", "looped": False, "cut": "none"},
        {"task_id": "d", "cut": "context", "truncated": True},  # a line written before `looped` existed
        {"task_id": "e", "looped": True, "cut": "none", "truncated": True},  # the environment's step limit
    ]
    summary = endings(records)
    assert summary["loops"] == {"count": 2, "share": 0.4, "task_ids": ["a", "e"]}
    assert summary["call_limit"] == {"count": 3, "share": 0.6, "task_ids": ["a", "b", "e"]}
    assert endings_line("pass rate 20.0%", summary) == (
        "pass rate 20.0% · loops 40.0% (2 of 5 scored episode(s) end in 5 identical calls) · "
        "call limit 60.0% (3 of 5 used all their LLM calls)"
    )
    assert endings([])["loops"]["share"] == 0.0


def test_a_loop_keeps_the_call_it_repeats_cut_to_a_bounded_length():
    assert repeated_call(["DONE", *[CALL + "\n"] * 5], "qwen_fc") == CALL
    assert repeated_call([DONE] * 6, "qwen_fc") is None
    long = '<tool_call>\n{"name": "echo", "arguments": {"content": "' + "x" * 5000 + '"}}\n</tool_call>'
    row = {
        "llm_calls": 5,
        "action_log": json.dumps({"task_id": TASK, "protocol": "qwen_fc", "actions": [long] * 5}),
    }
    ending = dump_row_ending(row, "dump.jsonl")
    assert ending["looped"] and ending["repeated"] == long[:REPEATED_CHARS]
    quiet = {"action_log": json.dumps({"task_id": TASK, "protocol": "qwen_fc", "actions": [CALL, DONE]})}
    assert dump_row_ending(quiet, "dump.jsonl")["repeated"] is None
    assert dump_row_ending({}, "dump.jsonl")["repeated"] is None
