"""The 800 tasks, the SEAL split and the deterministic parquet files."""

import hashlib
import json
import shutil
import threading
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from seal import dataset as prepare_data
from seal.bfcl.tasks import CATEGORIES, SPLIT_FILE, UnknownTaskError, get_task, load_tasks, split_ids


def test_all_800_tasks_load_with_aligned_ground_truth():
    tasks = load_tasks()
    assert len(tasks) == 800
    assert Counter(task.category for task in tasks.values()) == {category: 200 for category in CATEGORIES}
    for task in tasks.values():
        assert len(task.questions) == len(task.ground_truth)
        assert task.functions


@pytest.mark.parametrize("category", CATEGORIES)
def test_reading_each_file_once_gives_what_bfcl_evals_loader_gives_fresh_each_time(category):
    """`load_tasks` runs bfcl-eval's loader with each file read once: the same entries (key order and number
    types too), each read its own copy, and bfcl-eval's reader back in place after."""
    import bfcl_eval.utils as bfcl_utils

    from seal.bfcl.tasks import _files_read_once

    def load() -> list[dict]:
        return bfcl_utils.load_dataset_entry(
            category, include_prereq=False, include_language_specific_hint=False
        )

    reader, theirs = bfcl_utils.load_file, load()
    with _files_read_once():
        ours, again = load(), load()
    assert json.dumps(ours) == json.dumps(theirs)
    ours[0]["function"].clear()
    assert json.dumps(again) == json.dumps(theirs)
    assert bfcl_utils.load_file is reader


def test_blocks_of_two_threads_leave_bfcl_evals_reader_in_place_whichever_ends_first():
    """The second thread's block waits for the first's: interleaved, the first ending first would restore
    bfcl-eval's reader and the second then put the first's cached one back for good."""
    import bfcl_eval.utils as bfcl_utils

    from seal.bfcl.tasks import _files_read_once

    reader = bfcl_utils.load_file
    inside, release_first, release_second = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with _files_read_once():
            inside.set()
            release_first.wait(10)

    def second() -> None:
        with _files_read_once():
            release_second.wait(10)

    one, two = threading.Thread(target=first), threading.Thread(target=second)
    one.start()
    assert inside.wait(10)
    two.start()
    time.sleep(0.2)  # room for the second block to enter, were it not held back
    release_first.set()
    one.join(10)
    release_second.set()
    two.join(10)
    assert bfcl_utils.load_file is reader


def test_miss_func_reveal_turns_hold_the_held_out_docs():
    task = get_task("multi_turn_miss_func_0")
    assert task.missed_functions
    for turn, docs in task.missed_functions.items():
        assert task.questions[turn] == ()
        shown = {doc["name"] for doc in task.functions}
        assert docs and not shown & {doc["name"] for doc in docs}


def test_unknown_task_names_the_id():
    with pytest.raises(UnknownTaskError, match="multi_turn_base_999"):
        get_task("multi_turn_base_999")


def test_split_counts_and_no_shared_scenario():
    expected = {"train": 100, "val": 25, "test": 75}
    seen: dict[str, set[str]] = {}
    for split, per_category in expected.items():
        ids = split_ids(split)
        assert len(ids) == 4 * per_category == len(set(ids))
        assert Counter(i.rsplit("_", 1)[0] for i in ids) == {c: per_category for c in CATEGORIES}
        seen[split] = {i.rsplit("_", 1)[1] for i in ids}
    assert (
        not seen["train"] & seen["val"]
        and not seen["train"] & seen["test"]
        and not seen["val"] & seen["test"]
    )
    assert len(split_ids("all")) == 800
    assert prepare_data.split_problems() == []


def test_split_file_is_the_seal_t3rl_split():
    """The SEAL/T3RL split file byte for byte; any edit to the split must be deliberate."""
    digest = hashlib.sha256(SPLIT_FILE.read_bytes()).hexdigest()
    assert digest == "d125c811c73a9420b741a874d8cdee54096a573bfca500d3cf1df4a264bc7dea"


def test_split_checker_catches_a_leak(monkeypatch):
    leaked = {**{s: split_ids(s) for s in ("train", "val", "test")}}
    leaked["val"] = (*leaked["val"][1:], leaked["train"][0])
    monkeypatch.setattr(prepare_data, "split_ids", lambda split: leaked[split])
    assert prepare_data.split_problems()


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three parquet files as `prepare_data` writes them (each build plays all 800 openings)."""
    out = tmp_path_factory.mktemp("data")
    assert prepare_data.main(["--out", str(out)]) == 0
    return out


def test_parquet_is_deterministic_and_checkable(written, tmp_path):
    """`--check` compares every file byte for byte with a fresh build: passing is the determinism."""
    assert prepare_data.main(["--out", str(written), "--check"]) == 0
    for path in written.iterdir():
        shutil.copy(path, tmp_path)
    (tmp_path / "bfcl_val.parquet").write_bytes((written / "bfcl_val.parquet").read_bytes()[:-10])
    assert prepare_data.main(["--out", str(tmp_path), "--check"]) == 1


def test_parquet_rows_have_the_verl_dataset_layout(written):
    train = pd.read_parquet(written / "bfcl_train.parquet")
    val = pd.read_parquet(written / "bfcl_val.parquet")
    assert list(train.columns) == ["prompt", "data_source", "agent_name", "reward_model", "extra_info"]
    assert set(train.agent_name) == {prepare_data.TRAIN_AGENT} and set(val.agent_name) == {
        prepare_data.EVAL_AGENT
    }
    row = train.iloc[0]
    assert row.extra_info["task_id"] == split_ids("train")[0] and row.extra_info["split"] == "train"
    assert row.data_source == row.extra_info["category"]
    assert [m["role"] for m in row.prompt] == ["system", "user"]
