"""EnvClient over HTTP (a real uvicorn on loopback) and in-process: same data, same typed errors, and
the HTTP client's pooling, retries, timeouts and recovery after the service dies."""

from __future__ import annotations

import asyncio
import os
import pickle
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from seal.bfcl.calls import ToolCall
from seal.bfcl.ground_truth import ground_truth_calls
from seal.bfcl.tasks import get_task
from seal.env import process
from seal.env.client import (
    EnvClient,
    EnvServiceError,
    EnvUnavailableError,
    HttpEnvClient,
    InProcessEnvClient,
    open_episode,
)
from seal.env.process import ServiceStartError, free_port, running_service
from seal.env.store import EpisodeStore, StoreSettings
from seal.protocol import get_protocol
from seal.protocol.ground_truth import ground_truth_actions
from tests.support.service_thread import service_in_thread

TASK = "multi_turn_miss_func_0"
QUIET_SERVICE = ["--log-level", "warning"]


@pytest.fixture(scope="module")
def live_url() -> Iterator[str]:
    with service_in_thread(max_episodes=8) as url:
        yield url


@pytest.fixture
async def http(live_url: str) -> AsyncIterator[HttpEnvClient]:
    async with HttpEnvClient(live_url, timeout=30) as client:
        yield client


def local(**options: Any) -> InProcessEnvClient:
    return InProcessEnvClient(EpisodeStore(StoreSettings(**{"max_episodes": 8, **options})))


async def play(client: EnvClient, task_id: str, actions: list[str], mode: str, fmt: str) -> dict[str, Any]:
    """Everything the client returned for one action log, minus the (random) episode id."""
    steps = []
    async with open_episode(client, task_id, mode, fmt) as episode:
        for action in actions:
            steps.append(await episode.step(action))
            if steps[-1]["done"]:
                break
    created = {"messages": episode.messages, "interface_version": episode.interface_version}
    return {"created": created, "steps": steps, "finished": episode.result}


def noisy_actions(task_id: str, fmt: str) -> list[str]:
    """Broken markup, an unavailable tool and a call with a wrong argument before the ground truth."""
    protocol = get_protocol(fmt)
    first = next(call for turn in ground_truth_calls(get_task(task_id)) for call in turn)
    return [
        protocol.format_calls([first])[:-2],
        protocol.format_calls([ToolCall("no_such_tool", {})]),
        protocol.format_calls([ToolCall(first.name, {"bogus": 1})]),
        *ground_truth_actions(task_id, fmt),
    ]


# -- the same behaviour through both clients -----------------------------------------------------
def test_both_clients_implement_env_client():
    assert isinstance(HttpEnvClient(), EnvClient)
    assert isinstance(local(), EnvClient)


@pytest.mark.parametrize(
    ("task_id", "mode", "fmt", "noisy"),
    [
        (TASK, "train", "qwen_fc", False),
        ("multi_turn_long_context_0", "eval", "qwen_fc", True),
        ("multi_turn_miss_param_5", "train", "python_list", True),
        ("multi_turn_miss_func_49", "eval", "llama3_json", False),
    ],
)
async def test_http_and_in_process_give_identical_results_for_one_action_log(http, task_id, mode, fmt, noisy):
    actions = noisy_actions(task_id, fmt) if noisy else ground_truth_actions(task_id, fmt)
    over_http = await play(http, task_id, actions, mode, fmt)
    in_process = await play(local(), task_id, actions, mode, fmt)
    assert over_http == in_process
    if noisy:
        assert [len(step["info"]["rejected"]) for step in over_http["steps"][:2]] == [1, 1]
        assert over_http["steps"][2]["info"]["errors"]
    else:
        assert over_http["finished"].reward == (0.0 if task_id == "multi_turn_miss_func_49" else 1.0)


async def test_errors_are_the_same_typed_errors_with_the_same_reasons():
    with service_in_thread(max_episodes=2) as small_url:
        over_http = HttpEnvClient(small_url, timeout=30)
        clients: list[EnvClient] = [over_http, local(max_episodes=2)]
        seen = []
        for client in clients:
            errors = []
            first = (await client.create_episode(TASK, "eval"))["episode_id"]
            for call in (
                client.create_episode("multi_turn_base_999", "eval"),
                client.step("0" * 32, "x"),
                client.finish("0" * 32),
                client.delete("0" * 32),
                client.list_tasks("holdout"),
                client.put_profile({"version": 7}),
            ):
                with pytest.raises(EnvServiceError) as caught:
                    await call
                errors.append((caught.value.status, caught.value.reason))
            await client.create_episode(TASK, "eval")
            with pytest.raises(EnvServiceError) as full:
                await client.create_episode(TASK, "eval")
            errors.append((full.value.status, full.value.reason))
            await client.finish(first)
            with pytest.raises(EnvServiceError) as done:
                await client.step(first, "x")
            errors.append((done.value.status, done.value.reason.replace(first, "<id>")))
            seen.append(errors)
        await over_http.aclose()
        statuses = [[status for status, _ in errors] for errors in seen]
        assert statuses[0] == statuses[1] == [404, 404, 404, 404, 422, 422, 429, 409]
        assert all("\n" not in reason for errors in seen for _, reason in errors)
        same_reason = [0, 1, 2, 3, 6, 7]
        assert [seen[0][i][1] for i in same_reason] == [seen[1][i][1] for i in same_reason]


async def test_health_tasks_and_interface_agree(http):
    other = local()
    assert (await http.list_tasks("val")) == (await other.list_tasks("val"))
    assert len(await http.list_tasks()) == 800
    assert (await http.get_interface()) == (await other.get_interface())
    health = await http.health()
    assert health["status"] == "ok" and health["tasks"] == 800


async def test_in_process_results_are_copies():
    client = local()
    episode_id = (await client.create_episode(TASK, "eval"))["episode_id"]
    result = await client.finish(episode_id)
    result.labels.clear()
    result.evidence[0].clear()
    again = await client.finish(episode_id)
    assert again.reward == 0.0 and again.labels and again.evidence[0]


async def test_put_profile_through_the_client_bumps_the_version():
    with service_in_thread() as url:
        async with HttpEnvClient(url) as client:
            profile = {"version": 1, "window": {"trajectories": 1}, "total": {"trajectories": 1}}
            omega = await client.put_profile(profile)
            assert omega["version"] == 1 == (await client.get_interface())["version"]
            assert (await client.create_episode(TASK, "train"))["interface_version"] == 1


async def test_put_profile_with_a_version_restores_omega_at_that_version_on_both_clients():
    profile = {"version": 1, "window": {"trajectories": 1}, "total": {"trajectories": 1}}
    with service_in_thread() as url:
        async with HttpEnvClient(url) as over_http:
            for client in (over_http, local()):
                omega = await client.put_profile(profile, version=3)
                assert omega["version"] == 3 == (await client.get_interface())["version"]
                assert omega["profile"]["total"]["trajectories"] == 1
                assert (await client.create_episode(TASK, "train"))["interface_version"] == 3
                for bad in (-1, True, "3"):
                    with pytest.raises(EnvServiceError) as refused:
                        await client.put_profile(profile, version=bad)
                    assert refused.value.status == 422 and "version" in refused.value.reason
                assert (await client.get_interface())["version"] == 3
                assert (await client.put_profile(profile))["version"] == 4


@pytest.mark.parametrize("client_kind", ["http", "in-process"])
async def test_an_episode_session_finishes_and_closes_on_success_and_deletes_on_failure(http, client_kind):
    client = http if client_kind == "http" else local()
    before = (await client.health())["episodes_open"]
    async with open_episode(client, TASK, "eval") as played:
        for action in ground_truth_actions(TASK):
            await played.step(action)
        assert (await client.health())["episodes_open"] == before + 1
    assert played.result is not None and played.result.reward == 1.0 and played.env_seconds > 0
    with pytest.raises(RuntimeError, match="model crashed"):
        async with open_episode(client, TASK, "eval") as failed:
            await failed.step(ground_truth_actions(TASK)[0])
            raise RuntimeError("model crashed")
    assert failed.result is None

    async def hang() -> None:
        async with open_episode(client, TASK, "train"):
            await asyncio.sleep(30)

    task = asyncio.create_task(hang())
    while (await client.health())["episodes_open"] == before:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await client.health())["episodes_open"] == before
    for episode_id in (played.episode_id, failed.episode_id):
        with pytest.raises(EnvServiceError, match="unknown episode"):
            await client.finish(episode_id)


# -- the HTTP client's connection handling ---------------------------------------------------------
def test_one_client_serves_several_event_loops(live_url):
    client = HttpEnvClient(live_url, timeout=30)

    async def use() -> str:
        episode_id = (await client.create_episode(TASK, "eval"))["episode_id"]
        await client.step(episode_id, "Done.")
        await client.delete(episode_id)
        return (await client.health())["status"]

    assert asyncio.run(use()) == "ok"
    assert asyncio.run(use()) == "ok"
    results: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(asyncio.run(use()))) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == ["ok"] * 3


@pytest.mark.parametrize("client_kind", ["http", "in-process"])
async def test_finish_with_close_scores_and_deletes_in_one_request(http, client_kind):
    client = http if client_kind == "http" else local()
    before = (await client.health())["episodes_open"]
    episode_id = (await client.create_episode(TASK, "eval"))["episode_id"]
    for action in ground_truth_actions(TASK):
        await client.step(episode_id, action)
    assert (await client.finish(episode_id, close=True)).reward == 1.0
    assert (await client.health())["episodes_open"] == before
    with pytest.raises(EnvServiceError) as gone:
        await client.finish(episode_id)
    assert gone.value.status == 404


async def test_many_concurrent_sessions(http):
    async def session() -> float:
        return (await play(http, TASK, ground_truth_actions(TASK), "eval", "qwen_fc"))["finished"].reward

    assert await asyncio.gather(*(session() for _ in range(8))) == [1.0] * 8


async def test_a_pickled_client_works_in_a_new_process_state(http):
    await http.health()
    copy = pickle.loads(pickle.dumps(http))
    assert (await copy.health())["status"] == "ok"
    await copy.aclose()


async def test_proxy_settings_in_the_environment_are_ignored(http, monkeypatch):
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with HttpEnvClient(http.base_url) as client:
        assert (await client.health())["status"] == "ok"


async def test_refused_connections_are_retried_then_unavailable_within_the_timeout(refused_port):
    url = f"http://127.0.0.1:{refused_port}"
    client = HttpEnvClient(url, timeout=5, retries=2, backoff=0.05)
    start = time.monotonic()
    with pytest.raises(EnvUnavailableError) as caught:
        await client.create_episode(TASK, "eval")
    assert time.monotonic() - start < 5
    assert caught.value.reason == (
        f"POST {url}/episodes: connection refused at {url}: is the environment service (`seal serve`, or the "
        "launcher's) running? (3 attempt(s))"
    )
    assert caught.value.status == 503 and isinstance(caught.value, EnvServiceError)
    await client.aclose()


class Silent:
    """A TCP server that reads the request and then hangs up (or never answers)."""

    def __init__(self, answer: bool) -> None:
        self.hang_up = answer
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        await reader.read(65536)
        if self.hang_up:
            writer.close()
            return
        await asyncio.sleep(30)

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()


async def test_a_post_that_reached_the_server_is_never_retried_but_a_get_is():
    silent = Silent(answer=True)
    async with silent as url:
        client = HttpEnvClient(url, timeout=5, retries=2, backoff=0.01)
        with pytest.raises(EnvUnavailableError, match="connection lost"):
            await client.step("0" * 32, "Done.")
        assert silent.connections == 1
        with pytest.raises(EnvUnavailableError, match="3 attempt"):
            await client.health()
        assert silent.connections >= 4  # aiohttp may itself reconnect once for an idempotent GET
        await client.aclose()


async def test_an_unanswered_request_fails_within_the_timeout():
    async with Silent(answer=False) as url:
        client = HttpEnvClient(url, timeout=0.5, retries=3)
        start = time.monotonic()
        with pytest.raises(EnvUnavailableError, match=r"no answer within 0\.5 s"):
            await client.finish("0" * 32)
        assert 0.4 < time.monotonic() - start < 1.5
        await client.aclose()


def test_a_starting_service_whose_port_another_service_answers_on_is_refused_not_adopted(
    live_url, monkeypatch
):
    """Its child never answers, while the service already at that port does (this process's, in a thread):
    `running_service` names the other one and never yields it as its own."""
    port = int(live_url.rsplit(":", 1)[1])
    never_answers = [sys.executable, "-c", "import time; time.sleep(60)"]
    monkeypatch.setattr(process, "service_command", lambda host, port, flags=(): never_answers)
    said = rf"another service \(pid {os.getpid()}\) answers at http://127\.0\.0\.1:{port}: the port was taken"
    with pytest.raises(ServiceStartError, match=said), running_service(port=port, startup_s=30):
        pytest.fail("a service that is not its child was yielded as its own")


# -- the service dies and comes back ---------------------------------------------------------------
async def test_a_killed_service_raises_unavailable_in_time_and_a_restarted_one_serves_new_episodes():
    port = free_port()
    with running_service(QUIET_SERVICE, port=port) as service:
        client = HttpEnvClient(service.url, timeout=3, retries=2, backoff=0.1)
        actions = ground_truth_actions(TASK)
        episode_id = (await client.create_episode(TASK, "eval"))["episode_id"]
        await client.step(episode_id, actions[0])
        service.process.kill()
        service.process.wait()
    for call in (client.step(episode_id, actions[1]), client.create_episode(TASK, "eval")):
        start = time.monotonic()
        with pytest.raises(EnvUnavailableError):
            await call
        assert time.monotonic() - start < 3.5
    with running_service(QUIET_SERVICE, port=port):
        assert (await play(client, TASK, actions, "eval", "qwen_fc"))["finished"].reward == 1.0
        with pytest.raises(EnvServiceError) as lost:
            await client.step(episode_id, actions[1])
        assert lost.value.status == 404
        await client.aclose()
