"""Issue 56: one ordinary call cannot stall or crash the environment. MathAPI's calls run in worker
processes stopped at `max_call_s`; a stopped call changes nothing and is rejected, a result too large to
show is the tool's error, and an episode keeps a bounded amount of its actions."""

from __future__ import annotations

import json
import time

import pytest

from seal.bfcl.tasks import load_tasks
from seal.env.budget import ToolBudget
from seal.env.episode import Episode, EpisodeLimits
from seal.env.store import EpisodeStore, StoreSettings, TooManyEpisodes
from seal.protocol.ground_truth import ground_truth_actions

MATH_TASK = next(t.id for t in load_tasks().values() if "MathAPI" in t.involved_classes)
LIMITS = EpisodeLimits(budget=ToolBudget(max_call_s=0.3))


def call(name: str, **arguments: object) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def test_a_call_past_its_deadline_is_stopped_and_rejected_in_about_the_deadline():
    episode = Episode(MATH_TASK, limits=LIMITS)
    started = time.monotonic()
    step = episode.step(call("logarithm", value=2, base=10, precision=10**7))
    waited = time.monotonic() - started
    reply = step.observation[0]["content"]
    assert "took longer than 0.3 s and was stopped" in reply and not step.info["accepted"]
    assert waited < 20 * 0.3  # not the minutes precision 10**7 takes
    assert episode.meter.heavy  # what the worker spent counts against the budget
    assert episode.finish().reward == 0.0


def test_a_stopped_call_leaves_the_episode_as_it_was_so_the_ground_truth_still_passes():
    """With room in the episode's CPU budget (the stopped call's time is charged to it), the ground truth
    played after the stopped call passes: the call changed nothing and is not re-executed at finish."""
    budget = ToolBudget(max_call_s=0.3, max_step_cpu_s=5.0, max_episode_cpu_s=5.0)
    episode = Episode(MATH_TASK, limits=EpisodeLimits(budget=budget))
    episode.step(call("power", base=3, exponent=10**9))
    for action in ground_truth_actions(MATH_TASK):
        episode.step(action)
    result = episode.finish()
    assert result.reward == 1.0 and result.verifier["valid"]


@pytest.mark.parametrize(
    ("arguments", "why"),
    [({"base": 10, "exponent": 5000}, "digits"), ({"base": 2.5, "exponent": 10**6}, "out of range")],
)
def test_a_result_too_large_to_show_is_a_scored_error_and_finish_scores(arguments, why):
    episode = Episode(MATH_TASK, limits=LIMITS)
    step = episode.step(call("power", **arguments))
    assert why in step.observation[0]["content"] and step.info["errors"]
    episode.step("Done.")
    assert episode.finish().reward == 0.0


def test_the_checker_stops_a_slow_call_too():
    """A call under the deadline in its step is re-executed at finish under the same deadline."""
    episode = Episode(MATH_TASK, limits=LIMITS)
    episode.step(call("square_root", number=2, precision=20_000))
    while not episode.done:
        episode.step("Done.")
    assert episode.finish().reward == 0.0


def test_an_episode_keeps_its_actions_up_to_its_budget_then_their_digests():
    limits = EpisodeLimits(budget=ToolBudget(max_episode_action_chars=1_000))
    episode = Episode(MATH_TASK, limits=limits)
    episode.step("a" * 900)
    episode.step("b" * 900)
    kept, digest = episode.actions
    assert kept == "a" * 900 and digest.startswith("[action not kept: 900 characters, sha256 ")


def test_episodes_are_admitted_only_while_their_worst_case_fits_the_memory_budget():
    settings = StoreSettings(memory_budget_mib=7, budget=ToolBudget(max_episode_action_chars=262_144))
    store = EpisodeStore(settings)
    assert settings.episode_limit == 2
    opened = [store.create(MATH_TASK, "eval") for _ in range(2)]
    with pytest.raises(TooManyEpisodes, match="memory-budget-mib"):
        store.create(MATH_TASK, "eval")
    store.delete(opened[0].episode_id)
    store.create(MATH_TASK, "eval")


def test_a_memory_budget_that_holds_no_episode_is_refused_in_one_line():
    with pytest.raises(ValueError, match="holds no episode"):
        StoreSettings(memory_budget_mib=1)


def test_a_call_is_charged_its_own_time_never_its_workers_load():
    """A worker's first call waits for the worker to load (an interpreter and bfcl-eval): that load is
    the service's cost, so the ground truth's first MathAPI call stays within the step's CPU budget."""
    from seal.bfcl.call_deadline import _Worker

    worker = _Worker()
    started = time.monotonic()
    try:
        assert worker.call("add", (2, 3), {}, 5.0) == ("value", {"result": 5})
    finally:
        worker.stop()
    waited = time.monotonic() - started
    assert worker.seconds < waited / 2


def test_an_answer_once_given_is_remembered_and_costs_no_worker_again(monkeypatch):
    """MathAPI is pure: a finish runs each call four times (BFCL's checker and the turn checks, the model's
    and the ground truth's), and only the first goes to a worker."""
    from bfcl_eval.eval_checker.multi_turn_eval.func_source_code.math_api import MathAPI

    from seal.bfcl import call_deadline

    call_deadline.install()
    big = 10**20  # past the small arguments that run in-process
    first = MathAPI().multiply(a=big, b=678)

    def no_worker(*_: object) -> None:
        raise AssertionError("asked a worker again")

    monkeypatch.setattr(call_deadline._Worker, "call", no_worker)
    again = MathAPI().multiply(a=big, b=678)
    assert again == first == {"result": big * 678} and again is not first
    with pytest.raises(AssertionError, match="asked a worker again"):
        MathAPI().multiply(a=big, b=679)


def test_a_call_with_small_arguments_runs_in_process_and_any_other_in_a_worker(monkeypatch):
    """Small arguments bound every MathAPI method to microseconds (the ground truth's all are): no round
    trip; a large precision, exponent or integer may not be cheap, so it goes to a worker."""
    from bfcl_eval.eval_checker.multi_turn_eval.func_source_code.math_api import MathAPI

    from seal.bfcl import call_deadline

    call_deadline.install()

    def no_worker(*_: object) -> None:
        raise AssertionError("asked a worker")

    monkeypatch.setattr(call_deadline._Worker, "call", no_worker)
    assert MathAPI().power(base=2, exponent=10) == {"result": 1024}
    assert MathAPI().mean(numbers=[1.0, 2.0, 3.0]) == {"result": 2.0}
    assert MathAPI().square_root(16, precision=5)["result"] == 4
    expensive = (
        ("power", {"base": 2, "exponent": 101}),
        ("square_root", {"number": 2, "precision": 1000}),
        ("add", {"a": 10**16, "b": 1}),
        ("sum_values", {"numbers": [1] * 1001}),
    )
    for name, arguments in expensive:
        with pytest.raises(AssertionError, match="asked a worker"):
            getattr(MathAPI(), name)(**arguments)
