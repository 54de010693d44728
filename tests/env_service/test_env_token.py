"""The shared token of a service bound beyond loopback: refused start without it, 401 without it on
the wire, sent by `HttpEnvClient`, never logged; loopback stays token-free."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import httpx
import pytest

from env_service.__main__ import main as module_main
from env_service.app import ServiceSettings, create_app
from env_service.middleware import ACCESS_LOG
from seal.cli import main as seal_main
from seal.env.auth import TOKEN_ENV, TOKEN_HEADER, is_loopback
from seal.env.client import EnvServiceError, HttpEnvClient
from tests.support.service_thread import service_in_thread

TOKEN = "s3cret-token-for-tests"
EPISODE = {"task_id": "multi_turn_base_0", "mode": "eval"}


@pytest.fixture
def no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)


@pytest.fixture
def with_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_needs_no_token(no_token, host):
    assert is_loopback(host)
    assert ServiceSettings(host=host).required_token() is None


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.7", "head-node"])
def test_beyond_loopback_without_a_token_is_refused_in_one_line(no_token, monkeypatch, host):
    monkeypatch.setenv(TOKEN_ENV, "   ")
    with pytest.raises(ValueError, match=TOKEN_ENV) as refused:
        ServiceSettings(host=host)
    assert "\n" not in str(refused.value)


def test_both_commands_refuse_to_start_beyond_loopback_without_a_token(no_token, capsys):
    assert seal_main(["serve", "--host", "0.0.0.0", "--port", "0"]) != 0
    with pytest.raises(SystemExit) as stopped:
        module_main(["--host", "0.0.0.0", "--port", "0"])
    assert stopped.value.code != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert [line for line in err if TOKEN_ENV in line] and all("Traceback" not in line for line in err)


def test_beyond_loopback_with_a_token_is_accepted_and_the_token_stays_out_of_repr(with_token):
    settings = ServiceSettings(host="0.0.0.0")
    assert settings.required_token() == TOKEN
    assert TOKEN not in repr(settings)


@pytest.fixture
async def guarded(with_token) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(ServiceSettings(host="0.0.0.0"))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://env") as client:
        yield client


@pytest.mark.parametrize("headers", [{}, {TOKEN_HEADER: "wrong"}, {TOKEN_HEADER: TOKEN + "x"}])
async def test_a_request_without_the_right_token_is_a_one_line_401(guarded, headers):
    response = await guarded.post("/episodes", json=EPISODE, headers=headers)
    assert response.status_code == 401
    assert TOKEN_HEADER in response.json()["detail"] and TOKEN not in response.text
    assert (await guarded.get("/interface", headers=headers)).status_code == 401
    assert (await guarded.get("/healthz")).json()["episodes_open"] == 0


async def test_the_right_token_is_served_and_never_logged(guarded, caplog):
    with caplog.at_level(logging.INFO, logger=ACCESS_LOG.name):
        created = await guarded.post("/episodes", json=EPISODE, headers={TOKEN_HEADER: TOKEN})
        refused = await guarded.get("/interface", headers={TOKEN_HEADER: "wrong"})
    assert (created.status_code, refused.status_code) == (201, 401)
    assert len(caplog.records) == 2 and all(TOKEN not in r.getMessage() for r in caplog.records)


async def test_a_loopback_service_ignores_the_token(no_token):
    app = create_app(ServiceSettings())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://env") as client:
        assert (await client.post("/episodes", json=EPISODE)).status_code == 201


async def test_http_client_sends_the_token_from_the_environment(with_token):
    with service_in_thread(host="0.0.0.0", max_episodes=2) as url:
        async with HttpEnvClient(url, timeout=30) as client:
            assert (await client.get_interface())["version"] == 0
        async with HttpEnvClient(url, timeout=30, token="wrong") as wrong:
            with pytest.raises(EnvServiceError) as refused:
                await wrong.get_interface()
    assert refused.value.status == 401
