"""`seal eval --out` on a full disk: nothing is created until it can be written, so a failed start never
blocks the next start or `--resume`; a `run.json` an older version left empty is handled or explained."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from seal.evaluation import store
from seal.evaluation.store import OutputError, RunFolder
from tests.evaluation.test_eval import lines, run, sample
from tests.support.scripted_endpoint import Script, serve

META = {"model": "oracle", "protocol": "qwen_fc", "taxonomy": "reference"}


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch):
    """Every file `seal eval` flushes to disk fails as on a full disk; `undo()` frees the disk."""

    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(store.os, "fsync", no_space)
    return lambda: monkeypatch.undo()


def everything_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_start_on_a_full_disk_leaves_no_folder_and_says_so_in_one_line(tmp_path, full_disk):
    out = tmp_path / "runs" / "nested" / "eval"
    with pytest.raises(OutputError) as refused:
        RunFolder(out).start(META)
    message = str(refused.value)
    assert "\n" not in message and "No space left on device" in message
    assert everything_under(tmp_path) == []


def test_a_start_on_a_full_disk_in_an_existing_folder_leaves_it_as_it_was(tmp_path, full_disk):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(OutputError):
        RunFolder(tmp_path).start(META)
    assert everything_under(tmp_path) == ["notes.txt"]


def test_seal_eval_on_a_full_disk_creates_nothing_and_resume_then_runs(tmp_path, capsys, full_disk):
    tasks = sample(1)[:2]
    out = tmp_path / "eval"
    with serve(Script(tasks)) as url:
        assert run(url, out, tasks=tasks) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "No space left on device" in err
        assert not out.exists()
        full_disk()
        assert run(url, out, "--resume", tasks=tasks) == 0
    assert [e["task_id"] for e in lines(out / "episodes.jsonl")] == tasks
    assert json.loads((out / "run.json").read_text())["model"] == "oracle"


def test_an_empty_run_json_an_older_version_left_before_any_episode_is_started_over(tmp_path):
    tasks = sample(1)[:1]
    out = tmp_path / "eval"
    out.mkdir()
    for name in ("run.json", "episodes.jsonl", "actions.jsonl"):
        (out / name).write_text("")
    with serve(Script(tasks)) as url:
        assert run(url, out, "--resume", tasks=tasks) == 0
    assert [e["task_id"] for e in lines(out / "episodes.jsonl")] == tasks


def test_an_empty_run_json_beside_episodes_is_one_line_saying_how_to_go_on(tmp_path, capsys):
    tasks = sample(1)[:3]
    out = tmp_path / "eval"
    with serve(Script(tasks)) as url:
        assert run(url, out, tasks=tasks[:1]) == 0
        (out / "run.json").write_text("")
        capsys.readouterr()
        assert run(url, out, "--resume", tasks=tasks) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "run.json is empty" in err
        assert "delete it and rerun with --resume" in err
        (out / "run.json").unlink()
        assert run(url, out, "--resume", tasks=tasks) == 0
    assert [e["task_id"] for e in lines(out / "episodes.jsonl")] == tasks
