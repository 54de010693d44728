"""Hostile tool-call values (benchmarks/hostile_probes.py) on every backend: in-process, HTTP and Ray actors.

Whatever the model writes is a scored action: each probe gets the environment's error observation (or
runs, where the value is legitimately executable) and the episode scores 0 — never a 5xx, an env_error
or an exception — with the same answers on every backend, and the HTTP connection that carried them
keeps serving. A MathAPI call that would compute for minutes is stopped at its deadline (here
`CALL_S`, so that the module's dozen stopped calls take seconds), the same on every backend.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from seal.bfcl.tasks import load_tasks, split_ids
from seal.dataset import TRAIN_AGENT
from seal.env.action_limit import MAX_ACTION_CHARS, OVER_LONG
from seal.env.budget import ToolBudget
from seal.env.client import EnvClient, HttpEnvClient, InProcessEnvClient
from seal.env.store import EpisodeStore, StoreSettings
from seal.protocol.base import ERROR_PREFIX
from tests.support.backends import backend_client
from tests.support.rollout_helpers import TASKS, model_folder, row
from tests.support.script_module import load_script
from tests.trainer.rl.test_agent_loop import fields, generate

hostile = load_script("hostile_probes")
pytestmark = pytest.mark.local_ray  # the Ray backend's cases play on the session's Ray (env_actors below)
CALL_S = 0.3
"""The MathAPI deadline of every backend here (1 s by default)."""
SETTINGS = StoreSettings(budget=ToolBudget(max_call_s=CALL_S))
REFERENCE = InProcessEnvClient(EpisodeStore(SETTINGS))
CASES = [
    (backend, probe, mode)
    for backend in hostile.BACKENDS
    for probe in hostile.PROBES
    for mode in (hostile.MODES if backend == "inprocess" else ("train",))
]
"""Modes change only the episode (hints in train), so both run in-process; the transports run train."""
_REFERENCES: dict[tuple[int, str], Any] = {}


def case_id(case: tuple[str, Any, str]) -> str:
    backend, probe, mode = case
    return f"{backend}-{probe.protocol}-{probe.name.replace(' ', '_')}-{mode}"


async def reference(probe: Any, mode: str) -> Any:
    """The in-process answer to a probe, played once per test process."""
    key = (hostile.PROBES.index(probe), mode)
    if key not in _REFERENCES:
        _REFERENCES[key] = await hostile.play(REFERENCE, probe, mode)
    return _REFERENCES[key]


@pytest.fixture(scope="module")
def store_settings() -> StoreSettings:
    """The HTTP service's and the Ray actors' settings: the reference's."""
    return SETTINGS


@pytest.fixture
async def client(request: pytest.FixtureRequest) -> AsyncIterator[EnvClient]:
    """The client of the backend named by the test's parameter."""
    async with backend_client(request, REFERENCE.store) as env:
        yield env


@pytest.mark.parametrize(
    ("client", "probe", "mode"),
    [pytest.param(*case, id=case_id(case)) for case in CASES],
    indirect=["client"],
)
async def test_a_hostile_value_is_a_scored_action_with_the_same_answer_on_every_backend(client, probe, mode):
    outcome = await hostile.play(client, probe, mode)
    assert outcome.problem() == ""
    expected = await reference(probe, mode)
    assert (outcome.step, outcome.result) == (expected.step, expected.result)


def test_the_math_probes_play_a_training_task_with_math_api():
    assert hostile.MATH_TASK in split_ids("train")
    assert "MathAPI" in load_tasks()[hostile.MATH_TASK].involved_classes


async def test_a_stopped_call_names_the_deadline_its_backend_was_given():
    """The module's backends are given `CALL_S`; the answers the parametrized test compares name it."""
    probe = next(probe for probe in hostile.PROBES if probe.expect == "stopped")
    outcome = await reference(probe, "train")
    assert f"took longer than {CALL_S:g} s and was stopped" in outcome.step["observation"][0]["content"]


async def test_the_table_counts_failures_and_answers_unlike_in_process():
    assert {probe.protocol for probe in hostile.PROBES} == {"qwen_fc", "llama3_json", "python_list"}
    reference = await hostile.play(REFERENCE, hostile.PROBES[0], "eval")
    failed = hostile.Outcome(hostile.PROBES[0], "eval", failure="5xx", detail="500: boom")
    assert failed.problem() == "5xx: 500: boom"
    rows = hostile.table({"inprocess": [reference], "http": [failed]}).splitlines()
    assert rows[2:] == ["| inprocess | 1 | 1 | 0 | 0 | 0 | 0 |", "| http | 1 | 0 | 1 | 0 | 0 | 1 |"]


def test_the_probes_leave_the_keep_alive_connection_serving(service_url):
    """Every probe on one connection, its text sent as it is: no answer closes the connection, and only a body
    no SEAL client sends (a lone surrogate escaped in the action; they send U+FFFD) is refused, with a 422."""
    served, statuses = hostile.keep_alive_probes(service_url)
    assert served == 3 * len(hostile.PROBES)
    assert statuses == [422 if probe.raw_surrogate else 200 for probe in hostile.PROBES]
    assert statuses.count(422) == 2


async def test_a_generation_of_any_length_is_sent_in_part_and_scored_alike(service_url):
    """Four times the limit of control characters (each 6 bytes JSON-escaped: 3 MiB whole, past the service's
    body limit) reaches the service as the part the episode keeps, and answers as in-process."""
    probe = hostile.Probe("huge escaped", "qwen_fc", "\x01" * (4 * MAX_ACTION_CHARS), "rejected")
    async with HttpEnvClient(service_url) as http_client:
        outcome = await hostile.play(http_client, probe, "train")
    assert outcome.problem() == ""
    expected = await hostile.play(REFERENCE, probe, "train")
    assert (outcome.step, outcome.result) == (expected.step, expected.result)
    assert OVER_LONG in outcome.step["observation"][0]["content"]


def test_a_500_tells_the_client_to_close_the_connection(service_url, monkeypatch):
    def broken(*_: Any) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(EpisodeStore, "health", broken)
    parts = urlsplit(service_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    connection.request("GET", "/healthz")
    response = connection.getresponse()
    assert response.status == 500 and json.loads(response.read()) == {
        "detail": "internal error: RuntimeError"
    }
    assert response.getheader("connection") == "close"
    monkeypatch.undo()
    connection.request("GET", "/healthz")  # http.client opens a new connection, as told
    assert connection.getresponse().status == 200


AGENT_REPLIES = {
    TASKS[0]: '<tool_call>\n{"name": "ls", "arguments": {"a": 99999999999999999999}}\n</tool_call>',
    TASKS[1]: '<tool_call>\n{"name": "ls\\ud800", "arguments": {}}\n</tool_call>',
    TASKS[2]: '<tool_call>\n{"name": "cd", "arguments": {"folder": "\\udfff"}}\n</tool_call>',
    TASKS[3]: '<tool_call>\n{"name": "ls", "arguments": {"\\ud800": true}}\n</tool_call>',
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return model_folder(tmp_path_factory.mktemp("chatml"))


@pytest.mark.parametrize("backend", hostile.BACKENDS)
async def test_a_hostile_reply_in_the_agent_loop_is_scored_zero_not_an_env_error(
    backend, folder, request, tmp_path
):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    settings: dict[str, Any] = {"env_backend": "http" if backend == "http" else backend}
    if backend == "http":
        settings["env_url"] = request.getfixturevalue("service_url")
    elif backend == "ray":
        request.getfixturevalue("env_actors")
    plans = {(task_id, "train"): [reply, "Done."] for task_id, reply in AGENT_REPLIES.items()}
    rows = [row(task_id, TRAIN_AGENT, i) for i, task_id in enumerate(AGENT_REPLIES)]
    batch, _ = await generate(folder, tokenizer, plans, rows, trace_dir=str(tmp_path), **settings)
    for i in range(len(rows)):
        got = fields(batch, i)
        assert (got.reward, got.env_error, got.truncated) == (0.0, "", False)
        assert got.trained_tokens > 0 and got.actions[0] == AGENT_REPLIES[got.task_id]
    traces = [
        json.loads(line)
        for path in tmp_path.glob("trajectories.*.jsonl")
        for line in path.read_text().splitlines()
    ]
    assert len(traces) == len(rows)
    assert all(trace["observations"][0][0]["content"].startswith(ERROR_PREFIX) for trace in traces)
