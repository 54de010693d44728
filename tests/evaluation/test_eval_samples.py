"""`seal eval --samples N --temperature T --seed S`: pass@1, pass@N and the mixed share against a scripted
endpoint whose verdict on an episode depends on the seed its opening request carries."""

from __future__ import annotations

import json
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from seal.bfcl.tasks import category_of
from seal.evaluation.endpoint import request_seed
from tests.evaluation.test_eval import lines, run, sample, summary
from tests.support.scripted_endpoint import Script, serve


def fails(task_id: str, seed: int | None) -> bool:
    """A sampling model: some tasks always pass, some always fail, the rest depend on the seed."""
    kind = zlib.crc32(task_id.encode()) % 3
    return kind == 1 or (kind == 2 and (seed or 0) % 2 == 1)


def openings(script: Script) -> dict[str, list[dict[str, Any]]]:
    """Task id -> the opening requests of its episodes (no reply in them yet), as the endpoint got them."""
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for request in script.requests:
        task_id = script.locate(request["messages"])[0]
        if task_id is not None and not any(m["role"] == "assistant" for m in request["messages"]):
            found[task_id].append(request)
    return found


def expected(opened: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, float]]:
    """Per category: pass@1, pass@N and the mixed share, worked out from `fails` and the seeds the
    endpoint got."""
    rows: dict[str, dict[str, list[float]]] = {}
    for task_id, requests in opened.items():
        passes = [not fails(task_id, request["seed"]) for request in requests]
        row = rows.setdefault(category_of(task_id), {"pass_at_1": [], "pass_at_n": [], "mixed_share": []})
        row["pass_at_1"].append(sum(passes) / len(passes))
        row["pass_at_n"].append(float(any(passes)))
        row["mixed_share"].append(float(any(passes) and not all(passes)))
    return {c: {k: sum(v) / len(v) for k, v in row.items()} for c, row in rows.items()}


def test_samples_report_pass_at_1_pass_at_n_and_the_mixed_share(tmp_path, capsys):
    tasks = sample(2)
    script = Script(tasks, fails_under_seed=fails)
    out = tmp_path / "sampled"
    with serve(script) as url:
        assert run(url, out, "--samples", "3", "--temperature", "1", "--seed", "10", tasks=tasks) == 0
    result = summary(out)
    opened = openings(script)
    assert sorted(opened) == sorted(tasks) and all(len(r) == 3 for r in opened.values())
    want = expected(opened)
    assert (result["samples"], result["n"], result["temperature"], result["seed"]) == (3, 8, 1.0, 10)
    for category, row in want.items():
        got = result["by_category"][category]
        assert got["n"] == 2
        for key, value in row.items():
            assert got[key] == pytest.approx(value), (category, key)
    for key in ("pass_at_1", "pass_at_n", "mixed_share"):
        assert result[key] == pytest.approx(sum(row[key] for row in want.values()) / len(want))
    assert 0 < result["mixed_share"] < 1 and result["pass_at_1"] < result["pass_at_n"]
    for k, seed in enumerate([10, 11, 12], start=1):  # sample K: each opening's seed drawn from SEED+K-1
        episodes = lines(out / f"sample_{k}" / "episodes.jsonl")
        assert [e["task_id"] for e in episodes] == tasks
        for episode in episodes:
            drawn = request_seed(seed, opened[episode["task_id"]][0]["messages"])
            assert drawn in {r["seed"] for r in opened[episode["task_id"]]}
            assert episode["reward"] == (0.0 if fails(episode["task_id"], drawn) else 1.0)
        assert json.loads((out / f"sample_{k}" / "run.json").read_text())["seed"] == seed
    assert {r["temperature"] for r in script.requests} == {1.0}
    printed = capsys.readouterr().out
    assert "| category | tasks | pass@1 | pass@3 | mixed |" in printed
    assert f"{result['mixed_share']:.1%}" in printed
    assert (out / "summary.md").read_text().count("| **Avg** |") == 1


def test_a_resumed_sampled_run_plays_nothing_again_and_gives_the_same_summary(tmp_path):
    tasks = sample(1)
    script = Script(tasks, fails_under_seed=fails)
    out = tmp_path / "sampled"
    argv = ("--samples", "2", "--temperature", "0.7", "--seed", "3")
    with serve(script) as url:
        assert run(url, out, *argv, tasks=tasks) == 0
        first, sent = summary(out), len(script.requests)
        assert run(url, out, *argv, "--resume", tasks=tasks) == 0
    assert len(script.requests) == sent  # no episode played again
    assert summary(out) == first


def seeds_sent(script: Script) -> list[tuple[str, int]]:
    """(the conversation, its seed) of every episode request the endpoint got, in a stable order."""
    sent = [(json.dumps(r["messages"]), r["seed"]) for r in script.requests if r["max_tokens"] > 1]
    return sorted(sent)


def test_each_request_draws_its_own_seed_and_a_rerun_draws_the_same(tmp_path):
    """One seed sent with every request would give every reply of a run the same noise at each position
    (vLLM seeds a generator per request), so tasks and turns would not sample independently."""
    tasks = sample(1)
    script = Script(tasks)
    runs = {}
    with serve(script) as url:
        for name, seed in (("first", "5"), ("again", "5"), ("other", "6")):
            script.requests.clear()
            assert run(url, tmp_path / name, "--temperature", "1", "--seed", seed, tasks=tasks) == 0
            runs[name] = seeds_sent(script)
    seeds = [seed for _, seed in runs["first"]]
    assert len(seeds) > 2 * len(tasks)  # several turns an episode
    assert len(set(seeds)) == len(seeds)  # no two tasks or turns share one
    assert runs["again"] == runs["first"]
    assert [c for c, _ in runs["other"]] == [c for c, _ in runs["first"]]
    assert not {seed for _, seed in runs["other"]} & set(seeds)


def test_greedy_stays_the_default_and_sends_no_seed(tmp_path):
    tasks = sample(1)
    script = Script(tasks)
    with serve(script) as url:
        assert run(url, tmp_path / "greedy", tasks=tasks) == 0
    episodes = [r for r in script.requests if r["max_tokens"] > 1]
    assert episodes and all(r["temperature"] == 0.0 and "seed" not in r for r in episodes)
    assert "samples" not in summary(tmp_path / "greedy")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--samples", "4"],
            "--samples above 1 needs --temperature above 0: greedy samples are all the same",
        ),
        (["--samples", "0", "--temperature", "1"], "--samples must be at least 1, got 0"),
        (["--temperature", "-1"], "--temperature must be between 0 and 2, got -1.0"),
    ],
)
def test_bad_sampling_arguments_exit_2_with_one_line_and_write_nothing(tmp_path, capsys, argv, message):
    out = tmp_path / "never"
    assert run("http://127.0.0.1:9/v1", out, *argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"seal eval: error: {message}"
    assert not out.exists()


def test_the_summary_of_samples_leaves_out_a_task_an_endpoint_failed(tmp_path: Path):
    from seal.evaluation.samples import sampled_summary

    ok = {"task_id": "multi_turn_base_1", "reward": 1.0}
    samples = [
        [ok, {"task_id": "multi_turn_base_2", "reward": 0.0}],
        [dict(ok, reward=0.0), {"task_id": "multi_turn_base_2", "error": "endpoint: HTTP 500"}],
    ]
    result = sampled_summary(samples, "test")
    assert result["n"] == 1 and result["endpoint_errors"] == {"count": 1, "task_ids": ["multi_turn_base_2"]}
    assert (result["pass_at_1"], result["pass_at_n"], result["mixed_share"]) == (0.5, 1.0, 1.0)
    assert result["sample_pass_rates"] == [1.0, 0.0]
