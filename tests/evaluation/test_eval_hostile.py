"""`seal eval` facing what it cannot trust: hostile model replies, credentials in the base URL, and a window
too small for the default `--max-tokens`."""

from __future__ import annotations

import base64
import errno
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fastapi.responses import Response

from seal.cli import main as seal_main
from seal.env.episode import Episode
from seal.evaluation.budget import tokenizer_tools
from seal.evaluation.session import NO_SPACE
from seal.evaluation.store import RunFolder
from seal.protocol.ground_truth import END_OF_TURN as DONE
from seal.view.episodes import build
from seal.view.sources import read_sources
from tests.evaluation.test_eval import lines, run, sample, summary
from tests.support.chatml import chatml_tokenizer
from tests.support.scripted_endpoint import Script, completion, scripted_tokens, serve
from tests.support.service_thread import service_in_thread

HOSTILE_REPLIES = (
    '<tool_call>\n{"name": "ls", "arguments": {"a": 99999999999999999999}}\n</tool_call>',
    '<tool_call>\n{"name": "cd\\ud800", "arguments": {}}\n</tool_call>',
    '<tool_call>\n{"name": "ls", "arguments": ' + "[" * 50_000 + "]" * 50_000 + "}\n</tool_call>",
    "All done \ud800, nothing to call.",
)
"""A big integer, a surrogate in a name, deep JSON, a raw lone surrogate (the endpoint's JSON escapes it)."""


@dataclass
class HostileModel(Script):
    """Opens every task with its hostile reply, then ends each turn; answers in ASCII JSON, as a server
    that escapes every non-ASCII character (a raw lone surrogate travels as `\\ud800`)."""

    replies: dict[str, str] = field(default_factory=dict)

    def oracle(self, task_id: str | None, turn: int, sent: bool) -> str:
        return self.replies[task_id] if task_id in self.replies and turn == 0 and not sent else DONE

    def reply(self, text: str, prompt: int, max_tokens: int) -> Response:
        usage = {"prompt_tokens": prompt, "completion_tokens": 1, "total_tokens": prompt + 1}
        return Response(json.dumps(completion(text, usage)), media_type="application/json")


def test_hostile_replies_are_scored_written_as_utf8_and_replayed_alike(tmp_path, capsys):
    tasks = sample(1)
    script = HostileModel(tasks, replies=dict(zip(tasks, HOSTILE_REPLIES, strict=True)))
    out = tmp_path / "hostile"
    with serve(script) as url:
        assert run(url, out, tasks=tasks) == 0
    episodes = lines(out / "episodes.jsonl")
    assert [(e["reward"], "error" in e) for e in episodes] == [(0.0, False)] * len(tasks)
    for path in out.iterdir():
        path.read_bytes().decode("utf-8")  # strict: every file is UTF-8
    logs = lines(out / "actions.jsonl")
    assert [log["actions"][0] for log in logs[:3]] == list(HOSTILE_REPLIES[:3])
    assert logs[3]["actions"][0] == "All done \ufffd, nothing to call."
    replayed = tmp_path / "replayed.jsonl"
    capsys.readouterr()
    assert (
        seal_main(["replay", "--input", str(out / "actions.jsonl"), "--out", str(replayed), "--labels"]) == 0
    )
    again = lines(replayed)
    assert [(e["reward"], e["labels"]) for e in again] == [(e["reward"], e["labels"]) for e in episodes]


def test_a_run_folder_writes_a_lone_surrogate_as_its_escape_and_reads_it_back(tmp_path):
    folder = RunFolder(tmp_path / "run")
    folder.start({"model": "m", "protocol": "qwen_fc", "taxonomy": "reference"})
    log = {"task_id": "multi_turn_base_0", "protocol": "qwen_fc", "actions": ["a \ud800 b", "é"]}
    with folder:
        folder.append(log, {"task_id": "multi_turn_base_0", "reward": 0.0})
    raw = (tmp_path / "run" / "actions.jsonl").read_bytes().decode("utf-8")
    assert "\\ud800" in raw and "é" in raw
    assert folder.action_logs() == [log]


SECRET = "pw-SENTINEL-93d1"
BASIC = base64.b64encode(f"user:{SECRET}".encode()).decode()


def test_credentials_in_the_base_url_reach_no_output(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    tasks = sample(1)[:2]
    script = Script(tasks, faults={tasks[0]: ("echo_auth", 0)})
    out = tmp_path / "keyed"
    with serve(script) as url:
        keyed = url.replace("http://", f"http://user:{SECRET}@")
        assert run(keyed, out, tasks=tasks) == 0
    assert {h.get("authorization") for h in script.headers} == {f"Basic {BASIC}"}
    assert "HTTP 401" in lines(out / "episodes.jsonl")[0]["error"]
    assert json.loads((out / "run.json").read_text())["base_url"] == url.replace("http://", "http://***@")
    assert run(f"http://user:{SECRET}@127.0.0.1:9/v1", tmp_path / "unreachable", tasks=tasks) == 1
    assert run(f"ftp://user:{SECRET}@host/v1", tmp_path / "bad", tasks=tasks) == 2
    printed = capsys.readouterr()
    for text in (printed.out + printed.err, *(p.read_text() for p in tmp_path.rglob("*") if p.is_file())):
        assert SECRET not in text and BASIC not in text
    assert "connection refused at http://***@127.0.0.1:9/v1/models" in printed.err


def test_credentials_in_the_env_url_are_used_and_reach_no_output(tmp_path, capsys):
    tasks = sample(1)[:2]
    with service_in_thread() as env_url, serve(Script(tasks)) as url:
        keyed_env = env_url.replace("http://", f"http://user:{SECRET}@")
        http_env = ("--env-backend", "http", "--env-url", keyed_env)
        assert run(url, tmp_path / "served", *http_env, tasks=tasks) == 0
        assert run(url, tmp_path / "other", *http_env, "--taxonomy", "paper", tasks=tasks) == 1
    assert [e["reward"] for e in lines(tmp_path / "served" / "episodes.jsonl")] == [1.0, 1.0]
    printed = capsys.readouterr()
    assert "the environment service at http://***@127.0.0.1:" in printed.err
    for text in (printed.out + printed.err, *(p.read_text() for p in tmp_path.rglob("*") if p.is_file())):
        assert SECRET not in text and BASIC not in text


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tokenizer")
    texts = [m["content"] for t in sample(1) for m in Episode(t).reset()]
    chatml_tokenizer(texts, vocab_size=600).save_pretrained(folder)
    return folder


def test_with_the_tokenizer_a_window_no_opening_fits_is_refused_before_the_run(tmp_path, tokenizer, capsys):
    tasks = sample(1)
    count, _ = tokenizer_tools(tokenizer)
    shortest = min(count(Episode(t).reset()) for t in tasks)
    script = Script(tasks, window=shortest + 4096, count=count)
    out = tmp_path / "pointless"
    with serve(script) as url:
        assert run(url, out, "--tokenizer", str(tokenizer), tasks=tasks) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        "seal eval: error: every selected task opens with a prompt"
    )
    assert "every episode would be cut before its first call" in err and "--max-tokens" in err
    assert not out.exists() and script.requests == []


def test_with_the_tokenizer_openings_past_the_window_are_named_before_the_run(tmp_path, tokenizer, capsys):
    tasks = sample(1)
    count, _ = tokenizer_tools(tokenizer)
    sizes = sorted(count(Episode(t).reset()) for t in tasks)
    script = Script(tasks, window=sizes[1] + 1 + 512, count=count)
    with serve(script) as url:
        assert (
            run(url, tmp_path / "some", "--tokenizer", str(tokenizer), "--max-tokens", "512", tasks=tasks)
            == 0
        )
    warning = next(line for line in capsys.readouterr().err.splitlines() if "warning" in line)
    assert warning.startswith("seal eval: warning: 2 of 4 selected tasks open with a prompt at or past")
    assert f"--max-tokens {sizes[1] + 1 + 512 - sizes[-1] - 1}" in warning or "needs a window" in warning
    assert summary(tmp_path / "some")["cut_before_first_call"]["count"] == 2


def test_without_a_tokenizer_the_summary_says_every_episode_was_cut_before_its_first_call(tmp_path, capsys):
    tasks = sample(1)
    window = min(scripted_tokens(Episode(t).reset()) for t in tasks) + 2000
    with serve(Script(tasks, window=window)) as url:
        assert run(url, tmp_path / "small", tasks=tasks) == 0
    result = summary(tmp_path / "small")
    assert result["cut_before_first_call"] == {"count": 4, "task_ids": tasks}
    note = "4 of 4 scored episode(s) were cut before their first call"
    assert note in capsys.readouterr().out and note in (tmp_path / "small" / "summary.md").read_text()
    assert {e["llm_calls"] for e in lines(tmp_path / "small" / "episodes.jsonl")} == {0}


def test_max_tokens_not_below_the_window_is_refused_before_the_run(tmp_path, capsys):
    tasks = sample(1)
    with serve(Script(tasks, window=4096)) as url:
        assert run(url, tmp_path / "none", tasks=tasks) == 1
    err = capsys.readouterr().err
    assert "--max-tokens 4096 leaves no room for a prompt in the model's 4,096-token window" in err
    assert not (tmp_path / "none").exists()


POWER_REPLY = '<tool_call>\n{"name": "power", "arguments": {"base": 10, "exponent": 5000}}\n</tool_call>'
"""A result of 5,001 digits: more than Python renders (it was a ValueError that crashed the run)."""


def test_an_environment_failure_in_process_is_scored_and_its_episode_skipped_by_replay_and_marked_by_view(
    tmp_path, capsys, monkeypatch
):
    broken, math_task, plain = "multi_turn_base_1", "multi_turn_base_28", "multi_turn_base_6"
    original = Episode.step

    def failing(self, action):
        if self.task.id == broken:
            raise RuntimeError("the environment broke")
        return original(self, action)

    monkeypatch.setattr(Episode, "step", failing)
    tasks = [broken, math_task, plain]
    out = tmp_path / "failing"
    with serve(HostileModel(tasks, replies={math_task: POWER_REPLY})) as url:
        assert run(url, out, tasks=tasks) == 0
    assert "Traceback" not in capsys.readouterr().err
    episodes = {e["task_id"]: e for e in lines(out / "episodes.jsonl")}
    assert episodes[broken]["reward"] == 0.0
    assert episodes[broken]["env_error"] == "RuntimeError: the environment broke"
    assert "error" not in episodes[math_task] and "env_error" not in episodes[math_task]
    assert summary(out)["endpoint_errors"]["count"] == 0
    assert summary(out)["n"] == 3

    replayed = tmp_path / "replayed.jsonl"
    assert seal_main(["replay", "--input", str(out / "actions.jsonl"), "--out", str(replayed)]) == 0
    assert [e["task_id"] for e in lines(replayed)] == [math_task, plain]
    assert f"skipped log 1 ({broken}): cannot replay it (the environment broke)" in capsys.readouterr().err

    page = tmp_path / "view.html"
    assert seal_main(["view", str(out), "--out", str(page)]) == 0
    data = build(read_sources([out]))
    marked = [d for d in data.details if "cannot be replayed" in d.get("missing", "")]
    assert len(marked) == 1 and "the environment broke" in marked[0]["missing"]


def _disk_full(*_: object, **__: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("when", ["start", "append"])
def test_a_full_disk_ends_seal_eval_with_its_own_status_and_one_line(tmp_path, capsys, monkeypatch, when):
    monkeypatch.setattr(RunFolder, when, _disk_full)
    tasks = sample(1)[:2]
    # seal eval stops while its other episode's request is in flight: the endpoint logs that disconnect,
    # which is not seal eval's output
    with serve(HostileModel(tasks), log_level="critical") as url:
        assert run(url, tmp_path / "full", tasks=tasks) == NO_SPACE != 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"seal eval: error: no space left on the disk of {tmp_path / 'full'}" in err
