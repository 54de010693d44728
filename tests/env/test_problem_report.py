"""A rejection's text is bounded whatever the message holds, and reads as the released code words it
when the message has few, short problems."""

from __future__ import annotations

import json

import pytest

from seal.bfcl.tasks import get_task
from seal.env.action_limit import MAX_ACTION_CHARS
from seal.env.episode import Episode
from seal.env.problem_report import MAX_PROBLEM_CHARS, MAX_REPORTED_PROBLEMS, reported_problems
from seal.protocol.base import ERROR_PREFIX

TASK = "multi_turn_base_0"
LS_QWEN = '<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call>\n'
NAMELESS_QWEN = '<tool_call>\n{"x": 1}\n</tool_call>\n'
NAMELESS_ERROR = "Tool call JSON must contain 'name' and 'arguments'"


def _first_step(protocol: str, text: str) -> tuple[dict, Episode]:
    episode = Episode(get_task(TASK), protocol=protocol)
    episode.reset()
    step = episode.step(text)
    return {"observation": step.observation, "info": step.info}, episode


def test_few_problems_are_all_named_in_the_released_codes_wording():
    step, _ = _first_step("qwen_fc", LS_QWEN + NAMELESS_QWEN * 3)
    assert step["observation"] == [
        {"role": "user", "content": ERROR_PREFIX + "; ".join([NAMELESS_ERROR] * 3)}
    ]


@pytest.mark.parametrize(
    ("protocol", "text"),
    [
        (
            "qwen_fc",
            LS_QWEN * 120 + NAMELESS_QWEN * ((MAX_ACTION_CHARS - 120 * len(LS_QWEN)) // len(NAMELESS_QWEN)),
        ),
        ("llama3_json", '{"name": "ls", "parameters": {}}\n' * 120 + "{}\n" * 40_000),
        ("llama3_json", "{}," * 40_000),
    ],
    ids=["qwen_fc blocks", "llama3_json lines", "llama3_json Python tuple"],
)
def test_a_message_of_thousands_of_malformed_calls_is_answered_in_a_bounded_text(protocol, text):
    """A 131,072-character message once made a 2 MB observation and a 490 MB episode result."""
    step, episode = _first_step(protocol, text)
    (observation,) = step["observation"]
    problems = observation["content"].removeprefix(ERROR_PREFIX).split("; ")
    assert len(problems) == MAX_REPORTED_PROBLEMS + 1
    assert problems[-1].startswith("... (+") and problems[-1].endswith(" more)")
    assert step["info"]["accepted"] == []
    result = json.dumps(episode.finish().to_json())
    assert len(result) < 4 * MAX_ACTION_CHARS


def test_a_problem_quoting_a_long_key_the_model_wrote_is_cut():
    key = "k" * 5_000
    step, _ = _first_step("llama3_json", f"{{'name': 'cd', 'parameters': {{'{key}': {{1, 2}}}}}}")
    (observation,) = step["observation"]
    assert len(observation["content"]) <= len(ERROR_PREFIX) + MAX_PROBLEM_CHARS + 3
    assert observation["content"].endswith("...")
    assert all(len(rejected["reason"]) <= MAX_PROBLEM_CHARS + 3 for rejected in step["info"]["rejected"])


@pytest.mark.parametrize("count", [0, 1, MAX_REPORTED_PROBLEMS, MAX_REPORTED_PROBLEMS + 1, 5_000])
def test_reported_problems_keeps_the_first_ones_and_counts_the_rest(count):
    problems = [f"problem {i}" for i in range(count)]
    reported = reported_problems(problems)
    assert reported[:MAX_REPORTED_PROBLEMS] == problems[:MAX_REPORTED_PROBLEMS]
    hidden = count - MAX_REPORTED_PROBLEMS
    assert reported[MAX_REPORTED_PROBLEMS:] == ([f"... (+{hidden} more)"] if hidden > 0 else [])
