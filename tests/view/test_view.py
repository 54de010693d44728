"""`seal view`: the page built from every folder the project writes, the replayed conversations against what
the environment served, and the one-line refusals of bad input (the browser test is test_view_browser.py)."""

from __future__ import annotations

import argparse
import errno
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from seal.bfcl.tasks import CATEGORIES, category_of, split_ids
from seal.cli import build_parser, main
from seal.evaluation.command import add_eval_arguments, run_eval_command
from seal.view.episodes import build
from seal.view.page import ASSETS
from seal.view.sources import read_sources
from tests.support.scripted_endpoint import Script, serve
from tests.support.view_pages import EXAMPLES, embedded


def conversation(detail: dict[str, Any], texts: list[str]) -> list[dict[str, str]]:
    """The page's turn-by-turn episode read back as one list of chat messages."""
    messages = [{"role": "system", "content": texts[detail["system"]]}]
    for turn in detail["turns"]:
        messages += [{"role": m["role"], "content": texts[m["text"]]} for m in turn["user"]]
        for step in turn["steps"]:
            messages.append({"role": "assistant", "content": texts[step["reply"]]})
            messages += [{"role": m["role"], "content": texts[m["text"]]} for m in step["served"]]
    return messages


def test_the_examples_folder_is_one_page_of_every_episode_and_every_replay_agrees(tmp_path, capsys):
    out = tmp_path / "examples.html"
    assert main(["view", str(EXAMPLES), "--out", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    page = out.read_text(encoding="utf-8")
    assert "http://" not in page and "https://" not in page and " src=" not in page
    index, details = embedded(out)
    kinds = [source["kind"] for source in index["sources"]]
    assert kinds == ["actions", "val", "val", "val", "test", "test"]
    logs = (EXAMPLES / "actions.jsonl").read_text().splitlines()
    dumps = [
        *sorted((EXAMPLES / "run" / "validation").glob("*.jsonl")),
        *(EXAMPLES / "run" / "test").rglob("*.jsonl"),
    ]
    assert len(index["rows"]) == len(logs) + sum(len(p.read_text().splitlines()) for p in dumps)
    assert [row["diff"] for row in index["rows"]] == [0] * len(index["rows"])
    val_step_2 = index["sources"].index(
        next(s for s in index["sources"] if s["name"] == "examples/run val step 2")
    )
    trained = next(
        d for d, row in zip(details["details"], index["rows"], strict=True) if row["src"] == val_step_2
    )
    assert trained["omega"]["training"]["step"] == 2
    assert 0.5 <= trained["omega"]["apatch"]["weight"] <= 2.0


def test_every_example_episode_replays_to_its_recorded_reward_and_labels():
    data = build(read_sources([EXAMPLES / "run"]))
    recorded = [episode for source in read_sources([EXAMPLES / "run"]) for episode in source.episodes]
    assert len(recorded) == len(data.rows) == 40
    for episode, detail in zip(recorded, data.details, strict=True):
        assert detail["replayed"]["reward"] == episode.recorded["reward"]
        assert detail["replayed"]["labels"] == episode.recorded["labels"]
        assert detail["disagreements"] == []


def test_a_record_the_replay_contradicts_is_flagged_on_the_page(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(EXAMPLES / "run", run)
    dump = run / "validation" / "0.jsonl"
    rows = [json.loads(line) for line in dump.read_text().splitlines()]
    rows[0]["score"] = 1.0 - rows[0]["score"]
    dump.write_text("".join(json.dumps(row) + "\n" for row in rows))
    data = build(read_sources([run]))
    assert data.disagreements == 1
    assert data.details[0]["disagreements"] == [
        f"reward: recorded {rows[0]['score']}, replayed {1.0 - rows[0]['score']}"
    ]


def test_a_replayed_conversation_is_what_the_environment_served_during_the_eval(tmp_path, capsys):
    by_category = [[t for t in split_ids("test") if category_of(t) == c] for c in CATEGORIES]
    tasks = [ids[k] for k, ids in enumerate(by_category)]  # other scenarios: the endpoint tells them apart
    script = Script(tasks, noisy=True)
    out = tmp_path / "eval"
    parser = argparse.ArgumentParser()
    add_eval_arguments(parser)
    with serve(script) as url:
        argv = [
            "--base-url",
            url,
            "--model",
            "oracle",
            "--out",
            str(out),
            "--split",
            "test",
            "--tasks",
            ",".join(tasks),
        ]
        assert run_eval_command(parser.parse_args(argv)) == 0
    assert f"seal view {out}" in capsys.readouterr().out
    data = build(read_sources([out]))
    assert [source["kind"] for source in data.sources] == ["eval"]
    assert data.disagreements == 0
    last_request = {}
    for body in script.requests:
        task = script.by_question[next(m["content"] for m in body["messages"] if m["role"] == "user")]
        last_request[task] = body["messages"]
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    rejected = 0
    for row, detail, record in zip(data.rows, data.details, records, strict=True):
        served = last_request[row["task"]]
        rebuilt = conversation(detail, data.texts.items)
        assert rebuilt[: len(served)] == served
        assert rebuilt[len(served)]["role"] == "assistant"
        assert (detail["replayed"]["reward"], detail["replayed"]["labels"]) == (
            record["reward"],
            record["labels"],
        )
        rejected += sum(len(step["rejected"]) for turn in detail["turns"] for step in turn["steps"])
    assert rejected, "the noisy endpoint's rejected calls are on the page with their reason"


def test_a_diagnose_output_is_read_with_the_action_logs_it_now_writes(tmp_path, capsys):
    folder = tmp_path / "diagnosis"
    assert main(["diagnose", "--input", str(EXAMPLES / "actions.jsonl"), "--out", str(folder)]) == 0
    assert f"seal view {folder}" in capsys.readouterr().out
    data = build(read_sources([folder]))
    assert [source["kind"] for source in data.sources] == ["diagnose"]
    assert len(data.rows) == 8 and data.disagreements == 0
    assert all(
        detail["turns"][0]["label"] == row["labels"][0]
        for row, detail in zip(data.rows, data.details, strict=True)
    )


def test_seal_report_ends_with_the_view_command(tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(EXAMPLES / "run", run)
    assert main(["report", str(run)]) == 0
    assert f"seal view {run}" in capsys.readouterr().out.splitlines()[-1]


def test_help_lists_every_input():
    parser = build_parser(["view"])
    text = (
        next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        .choices["view"]
        .format_help()
    )
    for kind in (
        "seal eval",
        "seal diagnose",
        "training run",
        "actions.jsonl",
        "validation/{step}.jsonl",
        "--out",
    ):
        assert kind in text


def bad_folders(root: Path) -> dict[str, tuple[Path, str]]:
    """name -> (folder, the one line expected to name what is wrong)."""
    empty = root / "empty"
    empty.mkdir()
    corrupt_log = root / "corrupt_log"
    corrupt_log.mkdir()
    lines = (EXAMPLES / "actions.jsonl").read_text().splitlines()
    (corrupt_log / "actions.jsonl").write_text(lines[0] + "\n" + lines[1][:40] + "\n")
    corrupt_dump = root / "corrupt_dump"
    shutil.copytree(EXAMPLES / "run", corrupt_dump)
    dump = corrupt_dump / "validation" / "2.jsonl"
    rows = dump.read_text().splitlines()
    rows[2] = json.dumps({**json.loads(rows[2]), "action_log": "{not json"})
    dump.write_text("\n".join(rows) + "\n")
    orphan = root / "orphan"
    orphan.mkdir()
    (orphan / "episodes.jsonl").write_text('{"task_id": "multi_turn_base_4", "reward": 1.0}\n')
    bad_record = root / "bad_record"
    bad_record.mkdir()
    shutil.copy(EXAMPLES / "actions.jsonl", bad_record / "actions.jsonl")
    records = [{"task_id": json.loads(line)["task_id"], "reward": 1.0} for line in lines]
    records[3]["reward"] = "1.0"
    (bad_record / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return {
        "empty": (empty, f"{empty} holds no episodes"),
        "bad_record": (bad_record, f"""{bad_record / "episodes.jsonl"}:4: 'reward' is "1.0", not"""),
        "corrupt_log": (corrupt_log, f"{corrupt_log / 'actions.jsonl'}:2: not JSON"),
        "corrupt_dump": (corrupt_dump, f"{dump}:3: 'action_log' is not JSON text"),
        "orphan": (orphan, f"{orphan / 'episodes.jsonl'} has no action logs beside it"),
    }


@pytest.mark.parametrize("name", ["empty", "corrupt_log", "corrupt_dump", "orphan", "bad_record"])
def test_bad_input_is_refused_in_one_line_naming_file_and_line(tmp_path, capsys, name):
    folder, expected = bad_folders(tmp_path)[name]
    out = tmp_path / "page.html"
    assert main(["view", str(folder), "--out", str(out)]) == 1
    error = capsys.readouterr().err
    assert error.startswith(f"seal view: {expected}") and error.count("\n") == 1, error
    assert not out.exists()


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the viewer's script")
def test_the_viewer_shows_bidi_and_other_invisible_characters_as_escapes():
    """The page's own function (defined before its main block), run by node on a reply with U+202E."""
    script = (ASSETS / "viewer.js").read_text(encoding="utf-8").split("(async function () {")[0]
    probe = "console.log(JSON.stringify(visibleText(process.argv[1])));"
    shown = subprocess.run(
        ["node", "-e", script + probe, "report\u202etxt.exe\u200b\x07 ok\tend\n"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(shown) == "report\\u202Etxt.exe\\u200B\\u0007 ok\tend\n"


def test_a_full_disk_leaves_no_partial_page_behind(tmp_path, capsys, monkeypatch):
    def half_then_full(path: Path, text: str, **_: object) -> None:
        with open(path, "w", encoding="utf-8") as half:
            half.write(text[: len(text) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_text", half_then_full)
    out = tmp_path / "pages" / "view.html"
    assert main(["view", str(EXAMPLES), "--out", str(out)]) == 1
    assert list(out.parent.iterdir()) == []
    assert capsys.readouterr().err.strip() == f"seal view: cannot write {out}: No space left on device"
