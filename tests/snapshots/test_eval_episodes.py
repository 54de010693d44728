"""`seal eval`'s episodes.jsonl and actions.jsonl on the scripted endpoint are what they were, line for line:
passes, wrong and broken calls, every cut (context, calls, generation), the clip, an endpoint error."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from seal.evaluation.command import add_eval_arguments, run_eval_command
from tests.snapshots.snapshot import check, digest
from tests.support.scripted_endpoint import Script, serve

NOISY = [
    "multi_turn_base_1",
    "multi_turn_base_2",
    "multi_turn_miss_func_3",
    "multi_turn_miss_func_4",
    "multi_turn_miss_param_5",
    "multi_turn_miss_param_6",
    "multi_turn_long_context_7",
    "multi_turn_long_context_8",
]
SCENARIOS = {
    "noisy": (Script(NOISY, noisy=True, window=9000), ["--max-tokens", "1024"]),
    "calls": (Script(NOISY[:2], window=20000), ["--max-llm-calls", "2"]),
    "generation": (Script(NOISY[:2], window=20000), ["--max-tokens", "3"]),
    "clip": (Script(NOISY[-2:], window=200000), ["--max-env-tokens", "64"]),
    "outgrown": (Script(NOISY[::3], window=8000), ["--max-tokens", "1024"]),
    "endpoint_error": (
        Script(NOISY[:3], faults={NOISY[1]: ("http500", 1)}),
        ["--retries", "0", "--backoff", "0.01"],
    ),
}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_episodes_and_action_logs_are_unchanged(scenario: str, tmp_path: Path):
    script, extra = SCENARIOS[scenario]
    parser = argparse.ArgumentParser()
    add_eval_arguments(parser)
    with serve(script) as url:
        argv = ["--base-url", url, "--model", "oracle", "--out", str(tmp_path), "--split", "all"]
        argv += ["--concurrency", "4", "--tasks", ",".join(script.task_ids), *extra]
        assert run_eval_command(parser.parse_args(argv)) == 0
    episodes = (tmp_path / "episodes.jsonl").read_text().splitlines()
    actions = (tmp_path / "actions.jsonl").read_text().splitlines()
    readable = [
        {key: record.get(key) for key in ("task_id", "reward", "cut", "truncated", "labels", "error")}
        for record in map(json.loads, episodes)
    ]
    check(
        f"eval/{scenario}",
        {"episodes": readable, "lines": [digest(line) for line in episodes], "actions": actions},
    )
