"""`seal eval` against scripted OpenAI-compatible endpoints served on loopback."""

from __future__ import annotations

import argparse
import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from seal.bfcl.calls import ToolCall
from seal.bfcl.ground_truth import ground_truth_calls
from seal.bfcl.tasks import CATEGORIES, category_of, get_task, split_ids
from seal.env.episode import Episode
from seal.evaluation.budget import tokenizer_tools
from seal.evaluation.command import add_eval_arguments, build_request, run_eval_command
from seal.evaluation.endpoint import ChatEndpoint, EndpointError, RetryPolicy
from seal.evaluation.official import bfcl_task, replay_calls, rescore
from seal.protocol import DEFAULT_PROTOCOL, get_protocol
from seal.protocol.ground_truth import END_OF_TURN as DONE
from seal.protocol.ground_truth import ground_truth_actions
from tests.support.chatml import chatml_tokenizer
from tests.support.scripted_endpoint import SILENT, Script, scripted_tokens, serve

DEFECTS = {"multi_turn_miss_func_49"}
ABSTAIN_LABELS = {"missing_tool_call", "empty_turn_model_response", "correct_abstention"}


def sample(per_category: int) -> list[str]:
    """`per_category` test tasks of each category, from different scenarios in each category, so the
    oracle can tell them apart by their opening question."""
    test = [t for t in split_ids("test") if t not in DEFECTS]
    chosen = []
    for k, category in enumerate(CATEGORIES):
        ids = [t for t in test if t.rsplit("_", 1)[0] == category]
        chosen += ids[k * per_category : (k + 1) * per_category]
    return chosen


def run(url: str, out: Path, *extra: str, tasks: list[str] | None = None, model: str = "oracle") -> int:
    parser = argparse.ArgumentParser()
    add_eval_arguments(parser)
    argv = ["--base-url", url, "--model", model, "--out", str(out), "--split", "test", "--concurrency", "4"]
    argv += extra
    if tasks is not None:
        argv += ["--tasks", ",".join(tasks)]
    return run_eval_command(parser.parse_args(argv))


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def summary(out: Path) -> dict[str, Any]:
    return json.loads((out / "summary.json").read_text())


def test_oracle_passes_every_category_and_the_official_rescore_agrees(tmp_path, capsys):
    tasks = sample(3)
    script = Script(tasks)
    out = tmp_path / "oracle"
    with serve(script) as url:
        assert run(url, out, "--official", "--max-tokens", "512", tasks=tasks) == 0
    result = summary(out)
    assert set(result) == {
        "split",
        "n",
        "pass_rate",
        "truncated",
        "by_category",
        "endpoint_errors",
        "cut_before_first_call",
        "endings",
        "official",
    }
    assert (result["split"], result["n"], result["pass_rate"]) == ("test", 12, 1.0)
    assert (result["endings"]["loops"]["count"], result["endings"]["call_limit"]["count"]) == (0, 0)
    assert list(result["by_category"]) == list(CATEGORIES)
    for entry in result["by_category"].values():
        assert set(entry) == {"n", "pass_rate", "truncated", "labels"}
        assert (entry["n"], entry["pass_rate"], entry["truncated"]) == (3, 1.0, 0)
        assert set(entry["labels"]) <= {"pass", "correct_abstention"}
    assert result["official"] == {"checked": 12, "disagreements": []}

    episodes = lines(out / "episodes.jsonl")
    assert [e["task_id"] for e in episodes] == tasks
    for episode in episodes:
        assert {"task_id", "reward", "taxonomy", "labels", "profile", "evidence", "truncated"} <= set(episode)
        assert "error" not in episode
        assert len(episode["labels"]) == get_task(episode["task_id"]).num_turns
    logs = lines(out / "actions.jsonl")
    assert [log["task_id"] for log in logs] == tasks
    assert all(log["protocol"] == "qwen_fc" and log["actions"] for log in logs)

    for body in script.requests:
        assert body["model"] == "oracle" and body["temperature"] == 0 and body["max_tokens"] == 512
        assert "tools" not in body
        assert body["messages"][0]["role"] == "system" and "<tools>" in body["messages"][0]["content"]
    printed = capsys.readouterr().out
    assert "| **average** | 12 | 100.0% | 0 |" in printed
    assert "official re-score: 12 checked, 0 disagreement(s)" in printed
    assert f"model `oracle` · base URL `{url}` · protocol `qwen_fc`" in (out / "summary.md").read_text()


@pytest.mark.parametrize("protocol", ["llama3_json", "python_list"])
def test_oracle_passes_in_the_other_protocols(tmp_path, protocol):
    tasks = sample(1)
    out = tmp_path / protocol
    with serve(Script(tasks, protocol)) as url:
        assert run(url, out, "--protocol", protocol, "--official", tasks=tasks) == 0
    result = summary(out)
    assert result["pass_rate"] == 1.0 and result["official"] == {"checked": 4, "disagreements": []}
    assert {log["protocol"] for log in lines(out / "actions.jsonl")} == {protocol}


@pytest.mark.parametrize(
    ("taxonomy", "no_call_label"),
    [("reference", "empty_turn_model_response"), ("paper", "missing_tool_call")],
)
def test_a_model_that_never_calls_tools_scores_zero(tmp_path, taxonomy, no_call_label):
    tasks = sample(2)
    out = tmp_path / "silent"
    with serve(Script(tasks, silent=True)) as url:
        assert run(url, out, "--official", "--taxonomy", taxonomy, tasks=tasks) == 0
    result = summary(out)
    assert result["n"] == 8 and result["pass_rate"] == 0.0
    assert all(entry["pass_rate"] == 0.0 for entry in result["by_category"].values())
    assert result["official"] == {"checked": 8, "disagreements": []}
    episodes = lines(out / "episodes.jsonl")
    assert {e["taxonomy"] for e in episodes} == {taxonomy}
    labels = [label for episode in episodes for label in episode["labels"]]
    assert set(labels) == {no_call_label, "correct_abstention"} and set(labels) <= ABSTAIN_LABELS
    for log in lines(out / "actions.jsonl"):
        assert set(log["actions"]) == {SILENT}


def test_a_resumed_run_gives_the_same_summary_as_an_uninterrupted_one(tmp_path, capsys):
    tasks = sample(2)[1:7]
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    with serve(Script(tasks)) as url:
        assert run(url, whole, tasks=tasks) == 0
        assert run(url, parts, tasks=tasks[:2]) == 0
        kept = (parts / "episodes.jsonl").read_text()
        assert len(kept.splitlines()) == 2
        # An interruption between the two appends, then one in the middle of a line.
        with (parts / "actions.jsonl").open("a") as handle:
            handle.write(json.dumps({"task_id": tasks[2], "protocol": "qwen_fc", "actions": ["half"]}) + "\n")
        with (parts / "episodes.jsonl").open("a") as handle:
            handle.write('{"task_id": "' + tasks[3] + '", "rew')
        before = {p.name: p.read_bytes() for p in parts.iterdir()}
        capsys.readouterr()

        assert run(url, parts, tasks=tasks) == 2
        assert "--resume" in capsys.readouterr().err
        assert {p.name: p.read_bytes() for p in parts.iterdir()} == before

        assert run(url, parts, "--resume", tasks=tasks) == 0
    assert summary(parts) == summary(whole)
    resumed = (parts / "episodes.jsonl").read_text()
    assert resumed.startswith(kept)
    assert [e["task_id"] for e in lines(parts / "episodes.jsonl")] == tasks
    assert [log["task_id"] for log in lines(parts / "actions.jsonl")] == tasks
    assert lines(parts / "actions.jsonl") == lines(whole / "actions.jsonl")
    assert "resume dropped 1 broken or failed line(s)" in capsys.readouterr().out


def test_resume_refuses_a_different_model_or_a_wider_selection(tmp_path, capsys):
    tasks = sample(1)
    out = tmp_path / "run"
    with serve(Script(tasks, models=("oracle", "other"))) as url:
        assert run(url, out, tasks=tasks) == 0
        assert run(url, out, "--resume", tasks=tasks, model="other") == 2
        assert "model 'oracle'" in capsys.readouterr().err
        assert run(url, out, "--resume", tasks=tasks[:2]) == 2
        assert "outside this selection" in capsys.readouterr().err


def test_endpoint_failures_are_listed_by_task_and_left_out_of_the_pass_rate(tmp_path, capsys):
    tasks = sample(2)[:7]
    faults = {
        tasks[0]: ("http500", 1),
        tasks[1]: ("slow", 0),
        tasks[2]: ("garbage", 0),
        tasks[3]: ("no_content", 1),
        tasks[4]: ("flaky", 0),
    }
    out = tmp_path / "faults"
    script = Script(tasks, faults=faults)
    with serve(script) as url:
        argv = ("--timeout", "0.3", "--retries", "1", "--backoff", "0.01", "--concurrency", "7")
        assert run(url, out, *argv, tasks=tasks) == 0
    episodes = {e["task_id"]: e for e in lines(out / "episodes.jsonl")}
    expected = {
        tasks[0]: "HTTP 500",
        tasks[1]: "timed out",
        tasks[2]: "malformed JSON",
        tasks[3]: "content is NoneType",
    }
    for task_id, reason in expected.items():
        episode = episodes[task_id]
        assert reason in episode["error"] and episode["reward"] == 0.0 and not episode["truncated"]
        assert len(episode["labels"]) == get_task(task_id).num_turns
    assert episodes[tasks[0]]["labels"][0] == "pass"
    assert "gave up after 2 attempt(s)" in episodes[tasks[0]]["error"]
    for task_id in tasks[4:]:
        assert "error" not in episodes[task_id] and episodes[task_id]["reward"] == 1.0
    result = summary(out)
    assert result["endpoint_errors"] == {"count": 4, "task_ids": tasks[:4]}
    assert result["n"] == 3 and result["pass_rate"] == 1.0
    printed = capsys.readouterr().out
    assert "4 endpoint error(s) excluded from the pass rate" in printed
    assert "endpoint errors (" in printed and ", ".join(tasks[:4]) in printed
    markdown = (out / "summary.md").read_text()
    assert "4 endpoint error(s) excluded from the pass rate" in markdown and tasks[3] in markdown


def test_retry_failed_reruns_only_the_failed_episodes(tmp_path):
    tasks = sample(1)
    out = tmp_path / "retry"
    with serve(Script(tasks, faults={tasks[1]: ("http500", 0)})) as url:
        assert run(url, out, "--retries", "0", tasks=tasks) == 0
    first = {e["task_id"]: e for e in lines(out / "episodes.jsonl")}
    assert "error" in first[tasks[1]]
    with serve(Script(tasks)) as url:
        assert run(url, out, "--resume", "--retry-failed", tasks=tasks) == 0
    second = {e["task_id"]: e for e in lines(out / "episodes.jsonl")}
    assert second[tasks[0]] == first[tasks[0]]
    assert "error" not in second[tasks[1]] and second[tasks[1]]["reward"] == 1.0
    assert summary(out)["pass_rate"] == 1.0


def first_question(task_id: str) -> str:
    return get_task(task_id).questions[0][0]["content"]


def assert_refused_in_seconds(
    url: str, out: Path, capsys, message: str, *extra: str, model: str = "oracle"
) -> str:
    """The preflight refuses in one line that holds `message`, within seconds; returns that line."""
    started = time.monotonic()
    assert run(url, out, "--split", "val", *extra, model=model) == 1
    assert time.monotonic() - started < 10
    err = capsys.readouterr().err
    assert err.startswith("seal eval: error: ") and message in err and err.count("\n") == 1
    assert not out.exists()
    return err.strip()


def test_an_unreachable_endpoint_fails_the_preflight_in_seconds(tmp_path, capsys, refused_port):
    url = f"http://127.0.0.1:{refused_port}/v1"
    said = f"connection refused at {url}/models: is the endpoint (--base-url) running?"
    line = assert_refused_in_seconds(url, tmp_path / "down", capsys, said, "--retries", "5")
    assert "ConnectError" not in line and "ConnectTimeout" not in line


async def test_a_refused_completion_is_named_as_refused(refused_port):
    url = f"http://127.0.0.1:{refused_port}/v1"
    async with ChatEndpoint(url, "m", max_tokens=8, policy=RetryPolicy(retries=1, backoff=0.01)) as endpoint:
        with pytest.raises(EndpointError) as caught:
            await endpoint.complete([{"role": "user", "content": "hi"}])
    assert str(caught.value) == (
        f"gave up after 2 attempt(s): connection refused at {url}/chat/completions: "
        "is the endpoint (--base-url) running?"
    )


def test_an_unknown_model_fails_the_preflight(tmp_path, capsys):
    script = Script(sample(1), models=("oracle", "judge"))
    with serve(script) as url:
        message = "does not serve model 'nope' (it serves: oracle, judge)"
        assert_refused_in_seconds(url, tmp_path / "unknown", capsys, message, model="nope")
    assert script.requests == []


def test_a_refused_key_fails_the_preflight_without_showing_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-WRONG-SENTINEL")
    script = Script(sample(1), api_key="sk-right")
    with serve(script) as url:
        assert_refused_in_seconds(url, tmp_path / "key", capsys, "refused the API key: HTTP 401")
        monkeypatch.delenv("OPENAI_API_KEY")
        assert_refused_in_seconds(url, tmp_path / "nokey", capsys, "refused no API key")
    assert script.requests == []


def test_a_base_url_that_is_not_the_api_root_says_what_answered_and_what_to_check(tmp_path, capsys):
    script = Script(sample(1))
    with serve(script) as url:
        root = url.removesuffix("/v1")
        message = (
            f"no OpenAI API at {root}: {root}/models answered HTTP 404: "
            f'{{"detail":"Not Found"}}, {root}/chat/completions answered HTTP 404'
        )
        line = assert_refused_in_seconds(root, tmp_path / "root", capsys, message)
        assert line.endswith("is --base-url the API root (it usually ends in /v1)?")
    assert script.requests == []


def test_a_server_that_never_answers_is_told_apart_from_one_that_is_down(tmp_path, capsys):
    with socket.create_server(("127.0.0.1", 0)) as silent:  # listens, never accepts or answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        message = f"{url}/models accepted the connection but sent no answer within 1 s (ReadTimeout)"
        assert_refused_in_seconds(url, tmp_path / "silent", capsys, message, "--timeout", "1")


def test_without_a_model_list_the_preflight_asks_for_one_token(tmp_path, capsys):
    tasks = sample(1)[:1]
    script = Script(tasks, list_models=False, window=8000)
    with serve(script) as url:
        refusal = f"model 'nope' refused: {url}/chat/completions answered HTTP 404"
        assert_refused_in_seconds(url, tmp_path / "nope", capsys, refusal, model="nope")
        assert run(url, tmp_path / "ok", "--max-tokens", "512", tasks=tasks) == 0
    assert script.requests[1]["max_tokens"] == 1 and summary(tmp_path / "ok")["pass_rate"] == 1.0


def test_an_empty_model_list_makes_the_preflight_ask_for_one_token(tmp_path, capsys):
    """`transformers serve MODEL_DIR` lists no model at /v1/models but serves the one it was started with."""
    tasks = sample(1)[:1]
    script = Script(tasks, listed=False)
    with serve(script) as url:
        refusal = f"model 'nope' refused: {url}/chat/completions answered HTTP 404"
        assert_refused_in_seconds(url, tmp_path / "nope", capsys, refusal, model="nope")
        assert run(url, tmp_path / "ok", "--max-model-len", "8000", "--max-tokens", "512", tasks=tasks) == 0
    assert script.requests[1]["max_tokens"] == 1 and summary(tmp_path / "ok")["pass_rate"] == 1.0


def answered(script: Script) -> list[dict[str, Any]]:
    refused = {(r["prompt"], r["max_tokens"]) for r in script.refusals}
    return [b for b in script.requests if (scripted_tokens(b["messages"]), b["max_tokens"]) not in refused]


@pytest.mark.parametrize("window_from", ["models", "flag", "refusal"])
def test_no_call_starts_past_the_window_minus_max_tokens_as_in_training(tmp_path, window_from):
    """Training's context stop: a prompt past `window − max_tokens` (6,288 > 7,000 − 1,024 here) ends
    the episode as cut by its context; every call made leaves room for a whole reply."""
    tasks = sample(1)[:3]
    window = 7000
    script = Script(tasks, window=window, advertise_window=window_from == "models")
    extra = ("--max-model-len", str(window)) if window_from == "flag" else ()
    out = tmp_path / window_from
    with serve(script) as url:
        assert run(url, out, "--max-tokens", "1024", *extra, tasks=tasks) == 0
    result = summary(out)
    assert (result["truncated"], result["endpoint_errors"]["count"]) == (1, 0)
    rates = {category: entry["pass_rate"] for category, entry in result["by_category"].items()}
    assert rates == {"multi_turn_base": 1.0, "multi_turn_miss_func": 1.0, "multi_turn_miss_param": 0.0}
    cut = {e["task_id"]: e["cut"] for e in lines(out / "episodes.jsonl")}
    assert cut == {tasks[0]: "none", tasks[1]: "none", tasks[2]: "context"}
    for body in answered(script):
        assert scripted_tokens(body["messages"]) < window - 1024 and body["max_tokens"] == 1024
    assert len(script.refusals) <= 1


def test_with_the_tokenizer_every_call_fits_the_window_at_once(tmp_path):
    tasks = sample(1)[:2]
    openings = [Episode(t).reset() for t in tasks]
    folder = tmp_path / "tokenizer"
    chatml_tokenizer([m["content"] for o in openings for m in o], vocab_size=600).save_pretrained(folder)
    count, _ = tokenizer_tools(folder)
    window = max(count(o) for o in openings) + 5000
    script = Script(tasks, window=window, count=count)
    out = tmp_path / "exact"
    with serve(script) as url:
        assert run(url, out, "--max-tokens", "1024", "--tokenizer", str(folder), tasks=tasks) == 0
    assert summary(out)["pass_rate"] == 1.0 and script.refusals == []
    assert all(count(b["messages"]) < window - 1024 for b in script.requests)
    assert json.loads((out / "run.json").read_text())["tokenizer"] == str(folder)


def test_the_call_limit_and_a_reply_cut_by_max_tokens_end_the_episode_as_in_training(tmp_path):
    task_id = "multi_turn_base_1"
    script = Script([task_id], window=20000)
    with serve(script) as url:
        assert run(url, tmp_path / "calls", "--max-llm-calls", "2", tasks=[task_id]) == 0
        assert run(url, tmp_path / "cut", "--max-tokens", "3", tasks=[task_id]) == 0
    (calls,) = lines(tmp_path / "calls" / "episodes.jsonl")
    assert calls["cut"] == "calls" and calls["truncated"] and calls["reward"] == 0.0
    assert len(lines(tmp_path / "calls" / "actions.jsonl")[0]["actions"]) == 2
    (cut,) = lines(tmp_path / "cut" / "episodes.jsonl")
    assert cut["cut"] == "generation" and cut["truncated"]
    assert lines(tmp_path / "cut" / "actions.jsonl")[0]["actions"] == []  # never sent to the environment


def test_the_summary_gives_the_loop_and_call_limit_shares_beside_the_pass_rate(tmp_path, capsys):
    """A model that repeats one call until its calls run out ends in a loop and at the call limit (with 20
    calls, BFCL's 20 steps per turn end it first; with 12, the driver's limit); the oracle's episodes, whose
    last replies are several ends of turn in a row, in neither."""
    stuck, *oracle = sample(1)[:3]
    call = get_protocol(DEFAULT_PROTOCOL).format_calls([ToolCall("ls", {})])
    script = Script([stuck, *oracle], repeats={stuck: call})
    with serve(script) as url:
        for calls in ("20", "12"):
            assert run(url, tmp_path / calls, "--max-llm-calls", calls, tasks=[stuck, *oracle]) == 0
    for calls, cut in (("20", "none"), ("12", "calls")):
        records = {r["task_id"]: r for r in lines(tmp_path / calls / "episodes.jsonl")}
        assert [r["reward"] for r in records.values()] == [0.0, 1.0, 1.0]
        assert records[stuck]["looped"] and not any(records[t]["looped"] for t in oracle)
        assert (records[stuck]["llm_calls"], records[stuck]["cut"]) == (int(calls), cut)
        endings = summary(tmp_path / calls)["endings"]
        assert endings["loops"] == {"count": 1, "share": 1 / 3, "task_ids": [stuck]}
        assert endings["call_limit"] == {"count": 1, "share": 1 / 3, "task_ids": [stuck]}
    line = (
        "pass rate 66.7% · loops 33.3% (1 of 3 scored episode(s) end in 5 identical calls) · "
        "call limit 33.3% (1 of 3 used all their LLM calls)"
    )
    assert line in capsys.readouterr().out.splitlines()
    assert f"- {line}" in (tmp_path / "12" / "summary.md").read_text().splitlines()


def test_environment_messages_are_clipped_before_the_model_reads_them(tmp_path):
    task_id = "multi_turn_long_context_8"
    opening = Episode(task_id).reset()
    folder = tmp_path / "tokenizer"
    actions = ground_truth_actions(task_id)
    chatml_tokenizer([m["content"] for m in opening] + actions, vocab_size=600).save_pretrained(folder)
    script = Script([task_id], window=200000)
    with serve(script) as url:
        argv = ("--max-env-tokens", "64", "--tokenizer", str(folder))
        assert run(url, tmp_path / "clip", *argv, tasks=[task_id]) == 0
    _, (encode, _) = tokenizer_tools(folder)
    observations = [
        m["content"] for b in script.requests for m in b["messages"][2:] if m["role"] != "assistant"
    ]
    assert any("message cut:" in text for text in observations)
    assert all(len(encode(text)) <= 64 for text in observations)
    (episode,) = lines(tmp_path / "clip" / "episodes.jsonl")
    assert episode["reward"] == 1.0  # the clip changes what the model reads, not what the tools did


def test_a_conversation_that_outgrows_the_window_is_truncated_and_scored(tmp_path, capsys):
    short, long = "multi_turn_base_1", "multi_turn_long_context_8"
    script = Script([short, long], window=8000)
    out = tmp_path / "outgrown"
    with serve(script) as url:
        assert run(url, out, "--max-tokens", "1024", tasks=[short, long]) == 0
    episodes = {e["task_id"]: e for e in lines(out / "episodes.jsonl")}
    assert episodes[short]["reward"] == 1.0 and not episodes[short]["truncated"]
    assert episodes[long]["truncated"] and episodes[long]["reward"] == 0.0 and "error" not in episodes[long]
    assert len(episodes[long]["labels"]) == get_task(long).num_turns
    assert "pass" in episodes[long]["labels"]
    result = summary(out)
    assert (result["n"], result["truncated"], result["pass_rate"]) == (2, 1, 0.5)
    assert result["by_category"]["multi_turn_long_context"] == {
        "n": 1,
        "pass_rate": 0.0,
        "truncated": 1,
        "labels": result["by_category"]["multi_turn_long_context"]["labels"],
    }
    assert result["endpoint_errors"] == {"count": 0, "task_ids": []}
    header = (out / "summary.md").read_text().splitlines()[4]
    assert header.startswith("| category | n | pass rate | truncated |")
    assert "| **average** | 2 | 50.0% | 1 |" in capsys.readouterr().out


def test_a_prompt_that_alone_exceeds_the_window_is_a_truncated_episode(tmp_path):
    task_id = "multi_turn_miss_param_7"
    script = Script([task_id], window=5000, advertise_window=False)
    out = tmp_path / "too_long"
    with serve(script) as url:
        assert run(url, out, tasks=[task_id]) == 0
    (episode,) = lines(out / "episodes.jsonl")
    assert episode["truncated"] and episode["reward"] == 0.0 and "error" not in episode
    assert set(episode["labels"]) <= ABSTAIN_LABELS
    assert lines(out / "actions.jsonl")[0]["actions"] == []
    assert len(script.refusals) == 1 and script.refusals[0]["prompt"] > 5000
    result = summary(out)
    assert (result["n"], result["truncated"], result["endpoint_errors"]["count"]) == (1, 1, 0)


def test_the_api_key_reaches_the_endpoint_but_no_output(tmp_path, capsys, monkeypatch):
    secret, default_secret = "sk-SENTINEL-7f3a91c2d4", "sk-DEFAULT-SENTINEL-55aa"
    monkeypatch.setenv("SEAL_EVAL_TEST_KEY", secret)
    monkeypatch.setenv("OPENAI_API_KEY", default_secret)
    tasks = sample(1)
    script = Script(tasks, faults={tasks[0]: ("echo_auth", 0)})
    out, default_out = tmp_path / "keyed", tmp_path / "default"
    with serve(script) as url:
        assert run(url, out, "--api-key-env", "SEAL_EVAL_TEST_KEY", "--official", tasks=tasks) == 0
        assert {h["authorization"] for h in script.headers} == {f"Bearer {secret}"}
        script.headers.clear()
        assert run(url, default_out, tasks=tasks[1:]) == 0
        assert {h["authorization"] for h in script.headers} == {f"Bearer {default_secret}"}
    echoed = lines(out / "episodes.jsonl")[0]
    assert "HTTP 401" in echoed["error"] and "***" in echoed["error"]
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) == 10
    for path in files:
        data = path.read_bytes()
        assert secret.encode() not in data and default_secret.encode() not in data, path
    printed = capsys.readouterr()
    assert secret not in printed.out + printed.err and default_secret not in printed.out + printed.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--concurrency", "0"], "--concurrency must be at least 1"),
        (["--limit", "0"], "--limit must be at least 1"),
        (["--timeout", "0"], "--timeout must be positive"),
        (["--retries", "-1"], "must not be negative"),
        (["--tasks", "multi_turn_base_0"], "not in the test split"),
        (["--api-key-env", "SEAL_EVAL_UNSET_VARIABLE"], "SEAL_EVAL_UNSET_VARIABLE, which is not set"),
        (["--retry-failed"], "only applies with --resume"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(tmp_path, capsys, argv, message):
    out = tmp_path / "never"
    assert run("http://127.0.0.1:9/v1", out, *argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("seal eval: error: ") and message in err and err.count("\n") == 1
    assert not out.exists()


def test_an_out_that_is_a_file_is_refused(tmp_path, capsys):
    out = tmp_path / "file"
    out.write_text("mine")
    with serve(Script()) as url:
        assert run(url, out, "--limit", "1") == 2
    assert capsys.readouterr().err.startswith(f"seal eval: error: cannot use --out {out}")
    assert out.read_text() == "mine"


def eval_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_eval_arguments(parser)
    return parser


def test_the_default_split_is_val_and_the_help_shows_every_default():
    parser = eval_parser()
    request = build_request(parser.parse_args(["--base-url", "http://h/v1", "--model", "m"]))
    assert request.split == "val" and request.task_ids == split_ids("val")
    for action in parser._actions:
        if action.option_strings and not action.required and action.dest != "help":
            assert "(default: " in action.help % vars(action), action.option_strings


def test_limit_takes_the_first_n_tasks_of_each_category():
    args = eval_parser().parse_args(["--base-url", "http://h/v1", "--model", "m", "--limit", "2"])
    chosen = build_request(args).task_ids
    for category in CATEGORIES:
        in_split = [t for t in split_ids("val") if category_of(t) == category]
        assert [t for t in chosen if category_of(t) == category] == in_split[:2]
    assert len(chosen) == 2 * len(CATEGORIES)


def test_a_base_url_without_scheme_is_refused(tmp_path, capsys):
    assert run("localhost:8000/v1", tmp_path / "never") == 2
    assert "--base-url must be an http(s) URL" in capsys.readouterr().err


def test_official_replay_rebuilds_turns_and_flags_a_wrong_reward():
    task_id = "multi_turn_miss_func_8"
    task = bfcl_task(task_id)
    actions = ground_truth_actions(task_id)
    replayed = replay_calls(task, "qwen_fc", actions)
    assert replayed.completed
    assert [[c.name for step in turn for c in step] for turn in replayed.turns] == [
        [c.name for c in turn] for turn in ground_truth_calls(get_task(task_id))
    ]
    bogus = '<tool_call>\n{"name": "no_such_tool", "arguments": {}}\n</tool_call>'
    with_rejection = [bogus, *actions]
    assert replay_calls(task, "qwen_fc", with_rejection).turns == replayed.turns

    silent = {"task_id": task_id, "protocol": "qwen_fc", "actions": [SILENT] * len(task.ground_truth)}
    oracle = {"task_id": task_id, "protocol": "qwen_fc", "actions": actions}
    report = rescore([silent], {task_id: 1.0})
    assert report["checked"] == 1
    (wrong,) = report["disagreements"]
    assert (wrong["official_verdict"], wrong["multi_turn_checker"]) == (0.0, 0.0)
    assert rescore([oracle], {task_id: 1.0}) == {"checked": 1, "disagreements": []}


def test_official_replay_truncates_a_turn_at_twenty_messages():
    task_id = "multi_turn_base_1"
    first_call = ground_truth_actions(task_id)[0]
    replayed = replay_calls(bfcl_task(task_id), "qwen_fc", [first_call] * 20 + [DONE] * 10)
    assert not replayed.completed and len(replayed.turns[0]) == 20
    log = {"task_id": task_id, "protocol": "qwen_fc", "actions": [first_call] * 20 + [DONE] * 10}
    assert rescore([log], {task_id: 0.0}) == {"checked": 1, "disagreements": []}


def test_the_official_rescore_agrees_on_a_noisy_model(tmp_path):
    tasks = sample(3)
    out = tmp_path / "noisy"
    with serve(Script(tasks, noisy=True)) as url:
        assert run(url, out, "--official", tasks=tasks) == 0
    result = summary(out)
    assert result["official"] == {"checked": 12, "disagreements": []}
    episodes = lines(out / "episodes.jsonl")
    labels = {label for episode in episodes for label in episode["labels"]}
    assert {"pass", "empty_turn_model_response", "state_mismatch"} <= labels
    assert any(e["truncated"] for e in episodes) and not all(e["truncated"] for e in episodes)
    assert 0.0 < sum(e["reward"] for e in episodes) < len(episodes)


def test_retry_delays_double_honour_retry_after_and_are_capped():
    policy = RetryPolicy(retries=5, backoff=1.0, max_delay=10.0)
    assert [0.5 <= policy.delay(n) / 2**n <= 1.0 for n in range(3)] == [True] * 3
    assert policy.delay(0, retry_after=7.0) == 7.0
    assert policy.delay(8) == 10.0 and policy.delay(0, retry_after=600.0) == 10.0
    with pytest.raises(ValueError):
        RetryPolicy(retries=-1)
