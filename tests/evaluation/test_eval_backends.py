"""`seal eval --env-backend`: the same episodes whichever environment serves them, in this process, over HTTP
from a running service, or on environment actors of a local Ray."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from seal.env.process import running_service
from seal.evaluation.command import add_eval_arguments, run_eval_command
from tests.support.scripted_endpoint import Script, serve
from tests.support.service_thread import service_in_thread

TASKS = [
    "multi_turn_base_1",
    "multi_turn_miss_func_3",
    "multi_turn_miss_param_5",
    "multi_turn_long_context_7",
    "multi_turn_long_context_8",
]
LIMITS = ["--max-tokens", "1024", "--max-llm-calls", "6", "--max-env-tokens", "128"]


def run(url: str, out: Path, tasks: list[str], *extra: str) -> int:
    parser = argparse.ArgumentParser()
    add_eval_arguments(parser)
    argv = ["--base-url", url, "--model", "oracle", "--out", str(out), "--split", "all", "--concurrency", "4"]
    return run_eval_command(parser.parse_args([*argv, "--tasks", ",".join(tasks), *LIMITS, *extra]))


def outputs(out: Path) -> tuple[str, str]:
    return (out / "episodes.jsonl").read_text(), (out / "actions.jsonl").read_text()


def test_a_running_service_plays_the_episodes_the_in_process_store_plays(tmp_path: Path):
    """A noisy model with every cut and the clip: episodes.jsonl and actions.jsonl are byte-identical."""
    with serve(Script(TASKS, noisy=True, window=9000)) as url:
        assert run(url, tmp_path / "inprocess", TASKS) == 0
        with running_service(["--log-level", "warning"]) as service:
            assert run(url, tmp_path / "http", TASKS, "--env-backend", "http", "--env-url", service.url) == 0
    assert outputs(tmp_path / "http") == outputs(tmp_path / "inprocess")
    cuts = {json.loads(line)["cut"] for line in outputs(tmp_path / "http")[0].splitlines()}
    assert {"none", "calls"} <= cuts and cuts & {"context", "generation"}


def test_a_service_with_another_taxonomy_is_refused_before_anything_is_written(tmp_path: Path, capsys):
    with serve(Script(TASKS[:1])) as url, service_in_thread(taxonomy="paper") as env_url:
        assert run(url, tmp_path / "out", TASKS[:1], "--env-backend", "http", "--env-url", env_url) == 1
    err = capsys.readouterr().err
    assert err.startswith("seal eval: error: ") and "taxonomy 'paper'" in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_env_url_without_the_http_backend_is_a_usage_error(tmp_path: Path, capsys):
    assert run("http://127.0.0.1:9/v1", tmp_path / "out", TASKS[:1], "--env-url", "http://x") == 2
    assert "--env-url names an environment service" in capsys.readouterr().err


@pytest.mark.usefixtures("transfer_queue")  # the session's local Ray (tests/conftest.py), shared
def test_environment_actors_on_a_local_ray_play_the_same_episodes(tmp_path: Path):
    """On the Ray this process is connected to: the actors are placed for the run and removed after."""
    tasks = TASKS[:2]
    with serve(Script(tasks, noisy=True, window=9000)) as url:
        assert run(url, tmp_path / "inprocess", tasks) == 0
        assert run(url, tmp_path / "ray", tasks, "--env-backend", "ray") == 0
    assert outputs(tmp_path / "ray") == outputs(tmp_path / "inprocess")
