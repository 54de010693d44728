"""The environment service over HTTP (ASGI transport): routes, status codes, limits, Ω, metrics, logs."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from env_service.app import JsonLines, ServiceSettings, create_app
from env_service.middleware import ACCESS_LOG
from seal.bfcl.isolation import leftover_instances
from seal.cli import build_parser
from seal.env.interface import GUIDELINE_HEADER
from seal.env.store import EpisodeStore, StoreSettings
from seal.flags import settings_from_flags, to_flags
from seal.protocol.ground_truth import ground_truth_actions
from seal.tocf.labels import DEFAULT_PRIORITY
from seal.tocf.profile import FailureProfile

TASK = "multi_turn_base_0"
HEX_ID = re.compile(r"[0-9a-f]{32}")


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def build_app(clock: Callable[[], float] | None = None, **options: Any):
    settings_ = ServiceSettings.from_options(**options)
    store = EpisodeStore(settings_.store, clock=clock) if clock else None
    return create_app(settings_, store=store)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def api(clock: Clock) -> AsyncIterator[httpx.AsyncClient]:
    app = build_app(clock, max_episodes=4, ttl_s=60.0, max_body_bytes=4096)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://env") as client:
        client.app = app  # type: ignore[attr-defined]
        yield client


async def create(api: httpx.AsyncClient, task_id: str = TASK, mode: str = "eval", **extra: Any) -> dict:
    response = await api.post("/episodes", json={"task_id": task_id, "mode": mode, **extra})
    assert response.status_code == 201, response.text
    return response.json()


async def step(api: httpx.AsyncClient, episode_id: str, action: str) -> dict:
    response = await api.post(f"/episodes/{episode_id}/step", json={"action": action})
    assert response.status_code == 200, response.text
    return response.json()


def assert_refused(response: httpx.Response, status: int, *needles: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"detail"} and isinstance(body["detail"], str)
    assert "\n" not in body["detail"] and body["detail"]
    for needle in needles:
        assert needle in body["detail"], body["detail"]


# -- happy paths --------------------------------------------------------------------------------
async def test_healthz_counts_tasks_open_episodes_and_interface_version(api):
    assert (await api.get("/healthz")).json() == {
        "status": "ok",
        "tasks": 800,
        "episodes_open": 0,
        "interface_version": 0,
        "taxonomy": "reference",
        "pid": os.getpid(),  # the test serves the app in its own process
    }
    await create(api)
    assert (await api.get("/healthz")).json()["episodes_open"] == 1


@pytest.mark.parametrize(("split", "count"), [("train", 400), ("val", 100), ("test", 300), ("all", 800)])
async def test_tasks_lists_the_split(api, split, count):
    body = (await api.get("/tasks", params={"split": split})).json()
    assert body["split"] == split and body["count"] == count == len(set(body["task_ids"]))


async def test_tasks_defaults_to_all_and_refuses_an_unknown_split(api):
    assert (await api.get("/tasks")).json()["count"] == 800
    assert_refused(await api.get("/tasks", params={"split": "holdout"}), 422, "split")


async def test_create_returns_201_with_id_messages_version_and_location(api):
    response = await api.post("/episodes", json={"task_id": TASK, "mode": "train", "protocol": "python_list"})
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"episode_id", "messages", "interface_version"}
    assert HEX_ID.fullmatch(body["episode_id"])
    assert response.headers["location"] == f"/episodes/{body['episode_id']}"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["interface_version"] == 0


async def test_the_protocol_field_also_answers_to_its_old_name_format(api):
    for key in ("protocol", "format"):
        body = {"task_id": TASK, "mode": "eval", key: "python_list"}
        created = (await api.post("/episodes", json=body)).json()
        finished = (await api.post(f"/episodes/{created['episode_id']}/finish?close=true")).json()
        assert finished["protocol"] == "python_list"
    assert "<tool_call>" not in created["messages"][0]["content"]


@pytest.mark.parametrize(
    "task_id", ["multi_turn_base_0", "multi_turn_miss_func_0", "multi_turn_long_context_3"]
)
async def test_ground_truth_replay_scores_1_and_leaves_no_instances(api, task_id):
    before = set(leftover_instances())
    episode = await create(api, task_id)
    result: dict = {}
    for action in ground_truth_actions(task_id):
        result = await step(api, episode["episode_id"], action)
    assert result["done"] is True
    finished = (await api.post(f"/episodes/{episode['episode_id']}/finish")).json()
    assert finished["reward"] == 1.0 and finished["verifier"]["valid"] is True
    assert set(finished) >= {"reward", "verifier", "labels", "profile", "evidence"}
    assert (await api.delete(f"/episodes/{episode['episode_id']}")).status_code == 204
    assert set(leftover_instances()) == before


async def test_finish_on_an_unfinished_episode_scores_0_then_steps_get_409(api):
    episode_id = (await create(api))["episode_id"]
    first = (await api.post(f"/episodes/{episode_id}/finish")).json()
    assert first["reward"] == 0.0 and first["verifier"]["error_type"] == "multi_turn:force_terminated"
    assert (await api.post(f"/episodes/{episode_id}/finish")).json() == first
    assert_refused(await api.post(f"/episodes/{episode_id}/step", json={"action": "hi"}), 409, episode_id)


async def test_step_after_done_is_409_and_changes_nothing(api):
    episode_id = (await create(api))["episode_id"]
    for action in ground_truth_actions(TASK):
        last = await step(api, episode_id, action)
    assert last["done"]
    assert_refused(await api.post(f"/episodes/{episode_id}/step", json={"action": "Done."}), 409, "has ended")
    assert (await api.post(f"/episodes/{episode_id}/finish")).json()["reward"] == 1.0


# -- bad input: the documented code, one line, and nothing else changes -----------------------------
BAD_REQUESTS: list[tuple[str, str, str, dict[str, Any], int, str]] = [
    (
        "unknown task",
        "POST",
        "/episodes",
        {"json": {"task_id": "multi_turn_base_999", "mode": "eval"}},
        404,
        "unknown task id",
    ),
    ("unknown mode", "POST", "/episodes", {"json": {"task_id": TASK, "mode": "test"}}, 422, "mode"),
    ("task id not a string", "POST", "/episodes", {"json": {"task_id": 7, "mode": "eval"}}, 422, "task_id"),
    ("extra field", "POST", "/episodes", {"json": {"task_id": TASK, "mode": "eval", "seed": 1}}, 422, "seed"),
    (
        "unknown protocol",
        "POST",
        "/episodes",
        {"json": {"task_id": TASK, "mode": "eval", "protocol": "xml"}},
        422,
        "protocol",
    ),
    ("malformed JSON", "POST", "/episodes", {"content": b'{"task_id": '}, 422, "malformed JSON"),
    ("body not an object", "POST", "/episodes", {"content": b"[1, 2]"}, 422, "object"),
    ("empty body", "POST", "/episodes", {"content": b""}, 422, "malformed JSON"),
    (
        "unknown episode step",
        "POST",
        "/episodes/{unknown}/step",
        {"json": {"action": "x"}},
        404,
        "unknown episode",
    ),
    ("action not a string", "POST", "/episodes/{A}/step", {"json": {"action": ["x"]}}, 422, "action"),
    ("action missing", "POST", "/episodes/{A}/step", {"json": {}}, 422, "action"),
    (
        "invalid UTF-8",
        "POST",
        "/episodes/{A}/step",
        {"content": b'{"action": "\xff\xfe"}'},
        422,
        "malformed JSON",
    ),
    ("nested too deeply", "POST", "/episodes/{A}/step", {"content": b"[" * 3000}, 422, "malformed JSON"),
    (
        "oversized by Content-Length",
        "POST",
        "/episodes/{A}/step",
        {"json": {"action": "x" * 5000}},
        413,
        "4096-byte limit",
    ),
    ("unknown episode finish", "POST", "/episodes/{unknown}/finish", {}, 404, "unknown episode"),
    ("unknown episode delete", "DELETE", "/episodes/{unknown}", {}, 404, "unknown episode"),
    ("malformed profile", "PUT", "/interface/profile", {"json": {"profile": {"version": 2}}}, 422, "version"),
    (
        "profile with a negative count",
        "PUT",
        "/interface/profile",
        {"json": {"profile": {"version": 1, "window": {"trajectories": -1}, "total": {}}}},
        422,
        "trajectories",
    ),
    ("unknown route", "GET", "/episodes/{A}/state", {}, 404, "Not Found"),
    ("wrong method", "GET", "/episodes/{A}/step", {}, 405, "Method Not Allowed"),
]


@pytest.mark.parametrize(
    ("name", "method", "path", "kwargs", "status", "needle"),
    BAD_REQUESTS,
    ids=[case[0] for case in BAD_REQUESTS],
)
async def test_bad_input_is_refused_with_one_line_and_leaves_open_episodes_untouched(
    api, name, method, path, kwargs, status, needle
):
    target = await create(api)
    twin = await create(api)
    first = ground_truth_actions(TASK)[0]
    await step(api, target["episode_id"], first)
    await step(api, twin["episode_id"], first)
    interface_before = (await api.get("/interface")).json()
    url = path.format(A=target["episode_id"], unknown="0" * 32)
    assert_refused(await api.request(method, url, **kwargs), status, needle)
    assert (await api.get("/healthz")).json()["episodes_open"] == 2
    assert (await api.get("/interface")).json() == interface_before
    second = ground_truth_actions(TASK)[1]
    assert await step(api, target["episode_id"], second) == await step(api, twin["episode_id"], second)


async def test_streamed_body_over_the_limit_is_413_even_without_content_length(api):
    episode_id = (await create(api))["episode_id"]

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"action": "'
        for _ in range(10):
            yield b"x" * 1000
        yield b'"}'

    response = await api.post(f"/episodes/{episode_id}/step", content=chunks())
    assert "content-length" not in response.request.headers
    assert_refused(response, 413, "limit")
    assert (await step(api, episode_id, "Done."))["info"]["turn_ended"] is True


async def test_a_lying_content_length_is_refused_by_counting(api):
    episode_id = (await create(api))["episode_id"]
    body = json.dumps({"action": "x" * 5000}).encode()
    request = api.build_request("POST", f"/episodes/{episode_id}/step", content=body)
    request.headers["content-length"] = "10"
    assert_refused(await api.send(request), 413, "limit")


async def test_a_malformed_content_length_is_400(api):
    request = api.build_request("POST", "/episodes", content=b"{}")
    request.headers["content-length"] = "two"
    assert_refused(await api.send(request), 400, "Content-Length")


async def test_open_episode_limit_is_429_until_one_is_deleted(api):
    ids = [(await create(api))["episode_id"] for _ in range(4)]
    assert_refused(await api.post("/episodes", json={"task_id": TASK, "mode": "eval"}), 429, "limit of 4")
    assert (await api.get("/healthz")).json()["episodes_open"] == 4
    await step(api, ids[0], "Done.")
    assert (await api.delete(f"/episodes/{ids[1]}")).status_code == 204
    await create(api)
    assert (await step(api, ids[0], "Done."))["info"]["turn"] == 1


async def test_unexpected_errors_are_a_one_line_500(clock, monkeypatch):
    app = build_app(clock)
    store: EpisodeStore = app.state.store

    def broken(*_: Any) -> None:
        raise RuntimeError("boom\nwith a second line")

    monkeypatch.setattr(store, "health", broken)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://env") as client:
        assert_refused(await client.get("/healthz"), 500, "internal error: RuntimeError")


# -- idle TTL --------------------------------------------------------------------------------------
async def test_idle_episodes_are_reaped_on_access(api, clock):
    kept = (await create(api))["episode_id"]
    idle = (await create(api))["episode_id"]
    clock.now += 40
    await step(api, kept, "Done.")
    clock.now += 30
    assert_refused(await api.post(f"/episodes/{idle}/step", json={"action": "x"}), 404, "reaped")
    assert (await api.get("/healthz")).json()["episodes_open"] == 1
    await step(api, kept, "Done.")


async def test_idle_episodes_are_reaped_by_the_periodic_task(clock):
    app = build_app(clock, ttl_s=60.0, reap_interval_s=0.01)
    store: EpisodeStore = app.state.store
    async with app.router.lifespan_context(app):
        store.create(TASK, "eval")
        clock.now += 61
        for _ in range(200):
            if store.open_count == 0:
                break
            await asyncio.sleep(0.01)
    assert store.open_count == 0
    assert store.counters()["reaped"] == 1


# -- interface Ω -----------------------------------------------------------------------------------
def pressing_profile() -> dict:
    """A C_t in which missing tool calls dominate and fail: enough to switch a guideline on."""
    profile = FailureProfile()
    for _ in range(20):
        profile.observe(["missing_tool_call", "pass"], 0.0, "multi_turn_base")
    return profile.to_json()


async def test_put_profile_evolves_omega_for_new_episodes_only(clock):
    app = build_app(clock, interface_preset="full")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://env") as api:
        before = (await api.get("/interface")).json()
        assert before["version"] == 0 and before["guidelines"] == [] and before["profile"] is None
        old = await create(api, mode="train")
        evolved = await api.put("/interface/profile", json={"profile": pressing_profile()})
        assert evolved.status_code == 200
        omega = evolved.json()
        assert omega["version"] == 1 and omega["guidelines"] and omega["profile"] == pressing_profile()
        assert (await api.get("/interface")).json() == omega
        assert (await api.get("/healthz")).json()["interface_version"] == 1
        new = await create(api, mode="train")
        evaluation = await create(api, mode="eval")
        assert new["interface_version"] == 1 and old["interface_version"] == 0
        assert GUIDELINE_HEADER in new["messages"][0]["content"]
        assert GUIDELINE_HEADER not in old["messages"][0]["content"]
        assert GUIDELINE_HEADER not in evaluation["messages"][0]["content"]
        old_result = (await api.post(f"/episodes/{old['episode_id']}/finish")).json()
        new_result = (await api.post(f"/episodes/{new['episode_id']}/finish")).json()
        assert (old_result["interface_version"], new_result["interface_version"]) == (0, 1)


async def test_the_profile_body_is_named_failure_profile_and_its_old_name_is_still_read(clock):
    for name in ("failure_profile", "profile"):
        app = build_app(clock, max_episodes=4, ttl_s=60.0, max_body_bytes=1 << 16)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://env") as api:
            evolved = await api.put("/interface/profile", json={name: pressing_profile()})
            assert evolved.status_code == 200 and evolved.json()["profile"] == pressing_profile()


async def test_label_shares_sent_as_the_profile_get_every_problem_and_the_expected_body(api):
    shares = {"pass": 0.75, "state_mismatch": 0.25}  # what `finish` calls `profile`
    refused = await api.put("/interface/profile", json={"failure_profile": shares})
    assert_refused(
        refused,
        422,
        "failure_profile.version: Field required; failure_profile.window: Field required; "
        "failure_profile.total: Field required; failure_profile.pass: Extra inputs are not permitted; "
        "failure_profile.state_mismatch: Extra inputs are not permitted",
        '(expected {"failure_profile": {"version": 1, "window": S, "total": S}',
    )
    assert (await api.get("/interface")).json()["version"] == 0


async def test_malformed_profile_leaves_the_version_unchanged(api):
    await api.put("/interface/profile", json={"profile": pressing_profile()})
    for body in ({"profile": {"version": 1, "window": {}}}, {"profile": []}, {"C": {}}, {"profile": None}):
        assert_refused(await api.put("/interface/profile", json=body), 422)
    assert (await api.get("/interface")).json()["version"] == 1


async def test_put_profile_with_a_version_numbers_the_new_omega_and_the_next_evolve_continues(clock):
    app = build_app(clock, interface_preset="full")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://env") as api:
        plain = (await api.put("/interface/profile", json={"profile": pressing_profile()})).json()
        restored = await api.put("/interface/profile", json={"profile": pressing_profile(), "version": 7})
        assert restored.status_code == 200
        omega = restored.json()
        assert omega["version"] == 7 and omega["profile"] == pressing_profile()
        assert omega["guidelines"] == plain["guidelines"] and omega["guidelines"]
        assert (await api.get("/healthz")).json()["interface_version"] == 7
        assert (await create(api, mode="train"))["interface_version"] == 7
        following = await api.put("/interface/profile", json={"profile": pressing_profile()})
        assert following.json()["version"] == 8
        again = await api.put("/interface/profile", json={"profile": pressing_profile(), "version": 0})
        assert again.json()["version"] == 0


@pytest.mark.parametrize("version", [-1, "3", 2.5, True, [3]])
async def test_a_bad_version_is_a_one_line_422_that_changes_nothing(api, version):
    before = (await api.put("/interface/profile", json={"profile": pressing_profile()})).json()
    response = await api.put("/interface/profile", json={"profile": pressing_profile(), "version": version})
    assert_refused(response, 422, "version")
    assert (await api.get("/interface")).json() == before


# -- metrics, logs, OpenAPI, CLI -------------------------------------------------------------------
async def test_metrics_count_requests_by_route_and_status_and_episodes_open(api):
    episode_id = (await create(api))["episode_id"]
    await step(api, episode_id, "Done.")
    await api.post(f"/episodes/{episode_id}/step", json={"action": "x" * 5000})
    await api.post("/episodes/" + "0" * 32 + "/finish")
    response = await api.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    text = response.text
    step_route = 'route="/episodes/{episode_id}/step"'
    assert 'seal_env_requests_total{method="POST",route="/episodes",status="201"} 1.0' in text
    assert f'seal_env_requests_total{{method="POST",{step_route},status="200"}} 1.0' in text
    assert f'seal_env_requests_total{{method="POST",{step_route},status="413"}} 1.0' in text
    assert 'route="/episodes/{episode_id}/finish",status="404"} 1.0' in text
    assert f'seal_env_request_seconds_bucket{{le="0.05",method="POST",{step_route}}}' in text
    assert "seal_env_episodes_open 1.0" in text
    assert 'seal_env_episode_events_total{event="steps"} 1.0' in text
    assert "seal_env_bfcl_global_instances 0.0" in text


async def test_each_app_has_its_own_metrics_registry(api, clock):
    other = build_app(clock)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=other), base_url="http://env") as second:
        await create(api)
        text = (await second.get("/metrics")).text
    assert 'route="/episodes"' not in text and "seal_env_episodes_open 0.0" in text


async def test_access_log_is_one_json_line_per_request(api, caplog):
    caplog.set_level(logging.INFO, logger="env_service.access")
    created = await create(api)
    await api.post("/episodes/" + created["episode_id"] + "/step", json={"action": 5})
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "env_service.access"]
    assert [(line["method"], line["path"], line["status"]) for line in lines] == [
        ("POST", "/episodes", 201),
        ("POST", f"/episodes/{created['episode_id']}/step", 422),
    ]
    assert all(line["episode_id"] == created["episode_id"] for line in lines)
    assert all(isinstance(line["ms"], float) and line["ms"] >= 0 for line in lines)


def test_service_log_lines_are_json():
    formatter = JsonLines()
    access = logging.LogRecord(ACCESS_LOG.name, logging.INFO, __file__, 1, '{"status": 200}', None, None)
    assert json.loads(formatter.format(access)) == {"status": 200}
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        failure = logging.LogRecord(
            "env_service", logging.ERROR, __file__, 1, "on %s", ("/x",), sys.exc_info()
        )
    line = formatter.format(failure)
    assert "\n" not in line
    assert json.loads(line)["message"] == "on /x" and "RuntimeError: boom" in json.loads(line)["error"]


async def test_openapi_documents_every_route(api):
    spec = (await api.get("/openapi.json")).json()
    assert {path: sorted(ops) for path, ops in spec["paths"].items()} == {
        "/healthz": ["get"],
        "/tasks": ["get"],
        "/episodes": ["post"],
        "/episodes/{episode_id}/step": ["post"],
        "/episodes/{episode_id}/finish": ["post"],
        "/episodes/{episode_id}": ["delete"],
        "/interface": ["get"],
        "/interface/profile": ["put"],
        "/interface/state": ["put"],
        "/metrics": ["get"],
    }
    create_op = spec["paths"]["/episodes"]["post"]
    assert "201" in create_op["responses"] and "429" in create_op["responses"]
    assert create_op["requestBody"]["content"]["application/json"]["schema"]["required"] == [
        "task_id",
        "mode",
    ]


def parse_args(argv: list[str]):
    return build_parser(["serve"]).parse_args(["serve", *argv])


def test_cli_binds_loopback_by_default():
    args = parse_args([])
    assert (args.host, args.port, args.interface_preset, args.log_level) == (
        "127.0.0.1",
        8082,
        "reference",
        "info",
    )
    assert parse_args(["--max-episodes", "8", "--ttl", "5"]).max_episodes == 8


def test_both_service_commands_take_their_flags_and_defaults_from_the_settings_dataclass():
    from env_service.__main__ import build_parser as module_parser

    def flags(parser) -> dict[str, object]:
        return {a.option_strings[0]: a.default for a in parser._actions if a.option_strings[0] != "-h"}

    serve_parser = build_parser(["serve"])._subparsers._group_actions[0].choices["serve"]
    assert flags(serve_parser) == flags(module_parser())
    assert {"--priority", "--reap-interval", "--ttl", "--max-body-bytes"} <= set(flags(serve_parser))
    assert settings_from_flags(ServiceSettings, parse_args([])) == ServiceSettings()
    order = "argument_mismatch,invalid_tool_call," + ",".join(DEFAULT_PRIORITY[2:])
    args = module_parser().parse_args(["--priority", order, "--port", "0"])
    chosen = settings_from_flags(ServiceSettings, args)
    assert chosen.store.priority == tuple(order.split(",")) and chosen.port == 0


@pytest.mark.parametrize(
    "store",
    [
        StoreSettings(),
        StoreSettings(max_episodes=2048, ttl_s=60.0, interface_preset="full", max_steps=40),
        StoreSettings(
            taxonomy="paper", priority=("argument_mismatch", "invalid_tool_call", *DEFAULT_PRIORITY[2:])
        ),
    ],
)
def test_settings_written_as_flags_parse_back_to_the_same_settings(store: StoreSettings):
    """What a launch starts its service with (`to_flags`) is what the service then holds."""
    args = parse_args(to_flags(store))
    assert settings_from_flags(ServiceSettings, args) == ServiceSettings(store=store)


def test_a_bad_priority_is_refused_with_its_reason(capsys):
    with pytest.raises(SystemExit):
        parse_args(["--priority", "pass,state_mismatch"])
    assert "argument --priority: " in capsys.readouterr().err


def test_unknown_settings_are_refused():
    with pytest.raises(TypeError, match="colour"):
        ServiceSettings.from_options(colour="blue")
    with pytest.raises(ValueError, match="preset"):
        ServiceSettings.from_options(interface_preset="fancy")


# -- fuzzing against the OpenAPI spec --------------------------------------------------------------
REJECTED = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5xx"]
"""schemathesis's codes for refused invalid data, plus 413: an over-long field can exceed the body limit."""
schema = schemathesis.openapi.from_asgi(
    "/openapi.json",
    build_app(max_episodes=16),
    config=schemathesis.Config.from_dict(
        {"checks": {"negative_data_rejection": {"expected-statuses": REJECTED}}}
    ),
)


@schema.parametrize()
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_schema_valid_or_invalid_request_gets_a_5xx(case):
    """Every default check (no 5xx, documented status codes and schemas, invalid data refused)."""
    case.call_and_validate()
