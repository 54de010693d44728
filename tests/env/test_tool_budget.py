"""The tool budget's parts: the file system measured and rolled back at its cap, renderings cut while they
are walked, the budget's settings on every path a service is configured by."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from bfcl_eval.eval_checker.multi_turn_eval.func_source_code.gorilla_file_system import Directory, File

from env_service.__main__ import build_parser
from env_service.app import ServiceSettings
from seal.bfcl.bounded_text import bounded_text
from seal.bfcl.executor import Executor
from seal.bfcl.ground_truth import ground_truth_calls
from seal.bfcl.state_size import FileSystemGuard, tree_size
from seal.bfcl.tasks import load_tasks
from seal.env.budget import OUT_OF_MEMORY_READING, OUT_OF_MEMORY_RUNNING, ToolBudget
from seal.env.episode import Episode, EpisodeLimits
from seal.env.store import EpisodeStore, StoreSettings
from seal.flags import settings_from_flags, to_flags
from tests.support.budget_attacks import ATTACK_TASK, doubling_calls, message, repeated


def paths_by_walking(directory: Directory, prefix: int = 0) -> tuple[int, int]:
    """The plain recursive count `tree_size` must agree with: every path and its characters."""
    paths = chars = 0
    for name, item in directory.contents.items():
        length = prefix + 1 + len(name)
        paths, chars = paths + 1, chars + length
        if isinstance(item, Directory):
            below = paths_by_walking(item, length)
            paths, chars = paths + below[0], chars + below[1]
        else:
            chars += len(item.content)
    return paths, chars


def shared_tree(rounds: int) -> Directory:
    """What the doubling builds: each level holds two directories sharing one contents dict."""
    root = Directory("root")
    level = Directory("leaf")
    level.contents = {"f": File("f", "abc")}
    for i in range(rounds):
        parent = Directory(f"d{i}")
        left, right = Directory(f"a{i}", parent), Directory(f"b{i}", parent)
        left.contents = right.contents = level.contents
        parent.contents = {left.name: left, right.name: right}
        level = parent
    root.contents = {"top": level}
    return root


def test_the_size_of_a_shared_tree_is_its_paths_counted_once_per_distinct_dict():
    root = shared_tree(12)
    size = tree_size(root, 10**9, 10**12)
    assert (size.paths, size.chars, size.over) == (*paths_by_walking(root), False)
    started = time.thread_time()
    huge = tree_size(shared_tree(60), 10**30, 10**40)
    assert huge.paths > 2**60 and time.thread_time() - started < 0.5
    assert tree_size(shared_tree(13), 4_096, 10**9).over


def test_a_file_whose_content_the_model_wrote_as_a_number_counts_as_its_text():
    """`echo(content=3.14, ...)` stores the number itself (a sampled Qwen2.5-Coder-1.5B did it): the size
    guard counts its text rather than failing the episode."""
    root = Directory("root")
    root.contents = {"n.txt": File("n.txt", 3.14)}
    size = tree_size(root, 100, 1_000)
    assert (size.paths, size.chars, size.over) == (1, len("/n.txt") + len("3.14"), False)


def test_the_methods_taken_as_read_only_leave_every_ground_truth_tree_as_it_was():
    """Every ground-truth call of a READ_ONLY method, on the state the task's calls before it left."""
    checked = Counter()
    for task in load_tasks().values():
        if "GorillaFileSystem" not in task.involved_classes:
            continue
        executor = Executor(task)
        fs = executor.instances["GorillaFileSystem"]
        for call in (call for turn in ground_truth_calls(task) for call in turn):
            before = paths_by_walking(fs.root)
            executor.execute(call)
            if call.name in FileSystemGuard.READ_ONLY:
                assert paths_by_walking(fs.root) == before, (task.id, call.name)
                checked[call.name] += 1
    assert set(checked) == FileSystemGuard.READ_ONLY - {"pwd"}


def test_a_cycle_counts_as_over_the_cap():
    root = Directory("root")
    loop = Directory("loop", root)
    loop.contents = {"again": loop}
    root.contents = {"loop": loop}
    assert tree_size(root, 4_096, 10**6).over


def test_a_call_past_the_cap_is_undone_and_the_file_system_is_as_before():
    budget = ToolBudget(max_state_nodes=64)
    episode = Episode(ATTACK_TASK, limits=EpisodeLimits(budget=budget))
    episode.reset()
    episode.step(message(doubling_calls(4, finds=0)))
    fs = episode.executor.instances["GorillaFileSystem"]
    before = paths_by_walking(fs.root)
    step = episode.step(
        message(
            [("cp", {"source": "a4", "destination": "b4"}), ("cp", {"source": "a4", "destination": "a4"})]
        )
    )
    assert [r["name"] for r in step.info["rejected"]] == ["cp", "cp"]
    assert all("more than 64 paths; the call was undone" in r["reason"] for r in step.info["rejected"])
    assert paths_by_walking(fs.root) == before and "b4" not in fs._current_dir.contents
    assert episode.executor.state_size() is not None and episode.executor.state_size().paths == before[0]


def test_cp_of_a_directory_into_itself_makes_a_cycle_which_is_undone():
    episode = Episode(ATTACK_TASK)
    episode.reset()
    step = episode.step(message([("cp", {"source": "workspace", "destination": "workspace"}), ("find", {})]))
    assert "the call was undone" in step.info["rejected"][0]["reason"]
    assert "./workspace/log.txt" in step.observation[0]["content"]


@pytest.mark.parametrize(
    "value",
    [
        {"a": [1, "x", (2, 3)], "b": {"c": None}},
        {"tweets": {0: {"id": 0, "tags": ["#a"]}, 1: {"id": 1, "tags": []}}},  # int keys, as BFCL's states
        {(1, "k"): [(5,), ()], 2.5: {True: b"x", None: {1, 2}}, "s": [set(), frozenset({3}), frozenset()]},
    ],
)
def test_a_rendering_within_its_limit_is_str_of_the_value(value):
    """The evidence text a verifier writes is the one it wrote before the walk was bounded."""
    assert bounded_text(value, 300) == str(value)


def test_a_rendering_is_cut_while_it_is_walked():
    started = time.thread_time()
    text = bounded_text({"differences": shared_tree(60)}, 300)
    assert len(text) == 303 and text.endswith("...") and time.thread_time() - started < 0.5
    assert bounded_text("x" * 10**7, 10) == "x" * 10 + "..."


def test_a_message_over_the_call_budget_runs_nothing():
    episode = Episode(ATTACK_TASK, limits=EpisodeLimits(budget=ToolBudget(max_calls_per_message=3)))
    episode.reset()
    step = episode.step(message(repeated("mkdir", {"dir_name": "x"}, 4)))
    assert (
        step.info["accepted"] == []
        and "the message makes 4 tool calls; at most 3" in step.observation[0]["content"]
    )
    assert "x" not in episode.executor.instances["GorillaFileSystem"]._current_dir.contents


def test_outputs_past_the_room_are_cut_with_a_marker():
    budget = ToolBudget(max_observation_chars=50, max_step_chars=120)
    episode = Episode(ATTACK_TASK, limits=EpisodeLimits(budget=budget))
    episode.reset()
    step = episode.step(message(repeated("find", {"path": "."}, 3)))
    shown = step.observation[0]["content"]
    assert shown.count("[... output cut:") == 3
    assert "at most 50 per output" in shown and "at most 120 per message" in shown


@pytest.mark.parametrize(
    "budget", [ToolBudget(), ToolBudget(max_calls_per_message=8, max_step_cpu_s=0.5, max_state_nodes=100)]
)
def test_the_budget_reaches_the_store_through_flags_and_options(budget):
    store = StoreSettings(budget=budget)
    assert ServiceSettings.from_options(**{**vars(budget)}).store.budget == budget
    assert settings_from_flags(ServiceSettings, build_parser().parse_args(to_flags(store))).store == store
    assert EpisodeStore(store)._limits.budget == budget


@pytest.mark.parametrize(
    "options",
    [
        {"max_calls_per_message": 0},
        {"max_step_cpu_s": 0.0},
        {"max_observation_chars": 10, "max_step_chars": 5},
    ],
)
def test_a_bad_budget_is_refused_at_start(options):
    with pytest.raises(ValueError, match=r"budget|exceed"):
        ToolBudget(**options)


def test_running_out_of_memory_answers_the_step(monkeypatch):
    """Before anything runs the message is rejected and the episode goes on; part-way it ends the episode."""
    episode = Episode(ATTACK_TASK)
    episode.reset()

    def exhausted(*_: object) -> None:
        raise MemoryError

    with monkeypatch.context() as patch:
        patch.setattr(type(episode.protocol), "parse", exhausted)
        step = episode.step(message(repeated("mkdir", {"dir_name": "x"}, 2)))
    assert OUT_OF_MEMORY_READING in step.observation[0]["content"] and not step.done
    assert "x" not in episode.executor.instances["GorillaFileSystem"]._current_dir.contents
    monkeypatch.setattr(type(episode.protocol), "observation", exhausted)
    step = episode.step(message(repeated("ls", {}, 2)))
    assert OUT_OF_MEMORY_RUNNING in step.observation[0]["content"] and step.done and step.info["truncated"]
    assert episode.finish().reward == 0.0
