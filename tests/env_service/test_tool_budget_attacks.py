"""Issue 43's attacks, made only of ordinary BFCL calls, on every backend: in-process, HTTP and Ray actors.

Each is a scored action answered within `BOUND_S` (generous for a loaded 2-core machine; before the tool
budget the doubling took 13 s at k=20 and 426 s at k=24, and 2,000 `ls` answered 120 MB): the call over the
budget is rejected or its output cut, the model reads why, the episode scores 0 and nothing is an
environment error. Every backend answers as in-process does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from seal.env.budget import ToolBudget
from seal.env.client import EnvClient, HttpEnvClient, InProcessEnvClient, open_episode
from seal.env.process import running_service
from seal.env.store import EpisodeStore, StoreSettings
from seal.protocol.ground_truth import ground_truth_actions
from tests.support.backends import BACKENDS, backend_client
from tests.support.budget_attacks import (
    ATTACK_TASK,
    big_file,
    doubling_calls,
    long_named_files,
    message,
    repeated,
)

pytestmark = pytest.mark.local_ray  # the Ray backend's cases play on the session's Ray (env_actors below)
BOUND_S = 10.0
"""Seconds an attack's steps and finish together may take on any backend (measured: under 0.3 s)."""
BUDGET = ToolBudget()
CAPS_DECIDE = StoreSettings(budget=replace(BUDGET, max_step_cpu_s=60.0, max_episode_cpu_s=120.0))
"""The stores these attacks play on: the default budget but for its CPU clock, so that the counted caps
(calls, paths, characters) decide what is rejected, the same on any machine. The CPU time an attack's calls
use depends on the machine's speed: with 0.02 s a message, the doubling's undone copies spend it on a slow
machine before its last calls run, on a fast one not (the CPU budget has its own tests:
tests/env/test_tool_budget.py)."""
REFERENCE = InProcessEnvClient(EpisodeStore(CAPS_DECIDE))
ATTACKS = {
    "doubling k=16": [message(doubling_calls(16)), "Done."],
    "doubling k=30": [message(doubling_calls(30)), "Done."],
    "2000 ls": [message(repeated("ls", {}, 2_000)), "Done."],
    "2000 cat": [message(repeated("cat", {"file_name": "f"}, 2_000)), "Done."],
    "1600 cat": [message(big_file() + repeated("cat", {"file_name": "f"}, 1_600)), "Done."],
    "cat 19 KB": [
        message(big_file()),
        message(repeated("cat", {"file_name": "f"}, BUDGET.max_calls_per_message)),
        message(repeated("cat", {"file_name": "f"}, BUDGET.max_calls_per_message)),
        "Done.",
    ],
    "long ls": [
        message(long_named_files(120)),
        message(long_named_files(240)[120:]),
        message(repeated("ls", {}, BUDGET.max_calls_per_message)),
        message(repeated("ls", {}, BUDGET.max_calls_per_message)),
        "Done.",
    ],
}


async def play(client: EnvClient, actions: list[str]) -> tuple[list[dict[str, Any]], dict[str, Any], float]:
    """The attack's steps and its finished result, and the seconds they took."""
    started = time.monotonic()
    async with open_episode(client, ATTACK_TASK, "train") as episode:
        steps = [await episode.step(action) for action in actions]
    assert episode.result is not None
    return steps, episode.result.to_json(), time.monotonic() - started


@pytest.fixture(scope="module")
def store_settings() -> StoreSettings:
    """The HTTP service's and the Ray actors' settings: the reference's."""
    return CAPS_DECIDE


@pytest.fixture
async def client(request: pytest.FixtureRequest) -> AsyncIterator[EnvClient]:
    """The client of the backend named by the test's parameter."""
    async with backend_client(request, EpisodeStore(CAPS_DECIDE)) as env:
        yield env


def rejections(steps: list[dict[str, Any]]) -> list[str]:
    return [rejected["reason"] for step in steps for rejected in step["info"]["rejected"]]


@pytest.mark.parametrize("client", BACKENDS, indirect=True)
@pytest.mark.parametrize("attack", list(ATTACKS))
async def test_an_attack_is_a_scored_action_answered_in_bounded_time_alike_everywhere(client, attack):
    steps, result, seconds = await play(client, ATTACKS[attack])
    assert seconds < BOUND_S
    assert result["reward"] == 0.0 and result["steps"] == len(ATTACKS[attack])
    expected_steps, expected_result, _ = await play(REFERENCE, ATTACKS[attack])
    assert (steps, result) == (expected_steps, expected_result)


async def test_the_doubling_is_undone_at_the_file_system_cap_and_the_model_reads_why():
    steps, result, _ = await play(REFERENCE, ATTACKS["doubling k=30"])
    undone = [reason for reason in rejections(steps) if "the call was undone" in reason]
    assert undone and all(f"more than {BUDGET.max_state_nodes:,} paths" in reason for reason in undone)
    assert "the call was undone" in steps[0]["observation"][0]["content"]
    rejected_calls = [call for turn in result["evidence"] for call in turn["calls"] if not call["accepted"]]
    assert {call["name"] for call in rejected_calls} == {"cp"}
    assert all(len(turn["check"]["detail"]) <= 320 for turn in result["evidence"])


@pytest.mark.parametrize(("attack", "calls"), [("2000 ls", "2,000"), ("1600 cat", "1,602")])
async def test_thousands_of_calls_in_one_message_are_rejected_whole(attack, calls):
    steps, result, _ = await play(REFERENCE, ATTACKS[attack])
    observation = steps[0]["observation"][0]["content"]
    assert f"the message makes {calls} tool calls" in observation and len(observation) < 2_000
    assert steps[0]["info"]["accepted"] == []
    assert all(not turn["calls"] for turn in result["evidence"])


@pytest.mark.parametrize("attack", ["long ls", "cat 19 KB"])
async def test_long_outputs_are_cut_and_an_episode_output_is_capped(attack):
    steps, _, _ = await play(REFERENCE, ATTACKS[attack])
    shown = [sum(len(m["content"]) for m in step["observation"]) for step in steps]
    assert max(shown) < BUDGET.max_step_chars + 200 * BUDGET.max_calls_per_message
    assert "[... output cut:" in "".join(m["content"] for m in steps[-3]["observation"])
    spent = [reason for reason in rejections(steps) if "characters of output" in reason]
    assert spent and len(steps[-2]["info"]["accepted"]) < BUDGET.max_calls_per_message


async def test_a_healthy_episode_is_answered_as_fast_while_another_attacks():
    """A real service process: a healthy episode is stepped alone (the baseline), then while another client
    plays the attacks again and again; each healthy step is timed at the client. Before the tool budget a
    step waited seconds behind an attack. Compared with the baseline of the same run, so a loaded machine
    slows both alike."""
    healthy = ground_truth_actions("multi_turn_base_0")

    async def latencies(player: EnvClient) -> list[float]:
        timed = []
        for _ in range(3):
            async with open_episode(player, "multi_turn_base_0", "train") as episode:
                for action in healthy:
                    started = time.monotonic()
                    await episode.step(action)
                    timed.append(time.monotonic() - started)
        return sorted(timed)

    with running_service(["--log-level", "error"]) as service:
        async with HttpEnvClient(service.url) as attacker, HttpEnvClient(service.url) as player:
            alone = await latencies(player)
            stop = asyncio.Event()

            async def attack() -> int:
                played = 0
                while not stop.is_set():
                    for actions in ATTACKS.values():
                        await play(attacker, actions)
                        played += 1
                return played

            attacking = asyncio.create_task(attack())
            await asyncio.sleep(0.2)
            attacked = await latencies(player)
            stop.set()
            assert await attacking >= 1
    median = len(alone) // 2
    # a healthy step may wait behind one attack step, whose calls the budget bounds
    assert attacked[median] < 10 * alone[median] + 2 * BUDGET.max_step_cpu_s, (alone, attacked)
