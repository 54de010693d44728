"""The 800 BFCL V3 multi-turn tasks, their ground truth, function docs and the SEAL split."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
SPLITS = ("train", "val", "test")
SPLIT_FILE = Path(__file__).resolve().parents[2] / "data" / "bfcl_split.json"


class UnknownTaskError(KeyError):
    """A task id that is not one of the 800 multi-turn tasks."""

    def __str__(self) -> str:
        return f"unknown task id {self.args[0]!r} (expected multi_turn_<category>_<0..199>)"


@dataclass(frozen=True)
class Task:
    """One multi-turn task; treat every container as read-only (episodes copy what they mutate)."""

    id: str
    category: str
    questions: tuple[tuple[dict[str, Any], ...], ...]
    initial_config: dict[str, Any]
    involved_classes: tuple[str, ...]
    functions: tuple[dict[str, Any], ...]
    missed_functions: MappingProxyType[int, tuple[dict[str, Any], ...]]
    ground_truth: tuple[tuple[str, ...], ...]

    @property
    def long_context(self) -> bool:
        return "long_context" in self.id

    @property
    def num_turns(self) -> int:
        return len(self.ground_truth)

    def all_functions(self) -> list[dict[str, Any]]:
        """Every doc the task can ever show: the initial ones plus all held-out ones."""
        docs = list(self.functions)
        for turn in sorted(self.missed_functions):
            docs.extend(self.missed_functions[turn])
        return docs


GROUND_TRUTH_DEFECTS = frozenset({"multi_turn_miss_func_49"})
"""Tasks whose own ground truth cannot pass in this bfcl-eval version: miss_func_49 calls `tail` in
turn 1, two turns before `tail` is revealed (docs/design.md §3.1)."""


def category_of(task_id: str) -> str:
    """`multi_turn_miss_func_12` -> `multi_turn_miss_func`."""
    return task_id.rsplit("_", 1)[0]


def _build(entry: dict[str, Any], answer: dict[str, Any]) -> Task:
    if entry["id"] != answer["id"]:
        raise ValueError(f"bfcl-eval data out of order: question {entry['id']} vs answer {answer['id']}")
    missed = {int(turn): tuple(docs) for turn, docs in entry.get("missed_function", {}).items()}
    return Task(
        id=entry["id"],
        category=category_of(entry["id"]),
        questions=tuple(tuple(turn) for turn in entry["question"]),
        initial_config=entry["initial_config"],
        involved_classes=tuple(entry["involved_classes"]),
        functions=tuple(entry["function"]),
        missed_functions=MappingProxyType(missed),
        ground_truth=tuple(tuple(turn) for turn in answer["ground_truth"]),
    )


_READ_ONCE = threading.Lock()
"""One block at a time: two threads' blocks interleaved could leave the other's reader in bfcl-eval."""


@contextmanager
def _files_read_once() -> Iterator[None]:
    """Inside the block bfcl-eval's `load_file` reads and parses each file once and hands out fresh copies:
    its task loader reads every function-doc file again for each task, under a file lock (1,348 reads for the
    800 tasks, two thirds of an environment service's start-up). The loader's logic stays bfcl-eval's."""
    import bfcl_eval.utils as bfcl_utils
    import orjson

    parsed: dict[tuple[str, bool], bytes] = {}
    with _READ_ONCE:
        read = bfcl_utils.load_file

        def once(file_path: str | Path, sort_by_id: bool = False, use_lock: bool = True) -> list[dict]:
            key = (str(file_path), sort_by_id)
            if key not in parsed:
                parsed[key] = orjson.dumps(read(file_path, sort_by_id=sort_by_id, use_lock=use_lock))
            return orjson.loads(parsed[key])  # fresh dicts for each caller, as a read gives

        bfcl_utils.load_file = once
        try:
            yield
        finally:
            bfcl_utils.load_file = read


@cache
def load_tasks() -> MappingProxyType[str, Task]:
    """All 800 tasks from the bfcl-eval package data, keyed by id (loaded once per process)."""
    from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

    tasks: dict[str, Task] = {}
    with _files_read_once():
        for category in CATEGORIES:
            entries = load_dataset_entry(category, include_prereq=False, include_language_specific_hint=False)
            answers = load_ground_truth_entry(category)
            for entry, answer in zip(entries, answers, strict=True):
                tasks[entry["id"]] = _build(entry, answer)
    return MappingProxyType(tasks)


def get_task(task_id: str) -> Task:
    try:
        return load_tasks()[task_id]
    except KeyError:
        raise UnknownTaskError(task_id) from None


@cache
def load_split(path: Path = SPLIT_FILE) -> MappingProxyType[str, tuple[str, ...]]:
    """The SEAL/T3RL split: train 400, val 100, test 300, the same scenario indices in every category."""
    raw = json.loads(Path(path).read_text())
    return MappingProxyType({name: tuple(raw[name]) for name in SPLITS})


def split_ids(split: str) -> tuple[str, ...]:
    """Task ids of `train`, `val`, `test` or `all` (the three splits, in that order)."""
    if split == "all":
        return tuple(task_id for name in SPLITS for task_id in load_split()[name])
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} (expected one of {', '.join((*SPLITS, 'all'))})")
    return load_split()[split]
