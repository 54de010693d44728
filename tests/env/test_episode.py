"""Episodes: ground-truth replay, safety against injected calls, isolation and official verdicts."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

from seal.bfcl.calls import ToolCall
from seal.bfcl.ground_truth import ground_truth_calls
from seal.bfcl.isolation import drop_namespace, fresh_namespace, leftover_instances
from seal.bfcl.tasks import get_task, load_tasks
from seal.env.episode import Episode, EpisodeDoneError, EpisodeLimits
from seal.env.interface import OBSERVATION_NOTE, build_interface
from seal.protocol import get_protocol
from seal.protocol.ground_truth import END_OF_TURN, ground_truth_actions

GT_DEFECT = "multi_turn_miss_func_49"  # its ground truth calls `tail` two turns before `tail` is revealed


def play(task_id: str, actions: list[str], fmt: str = "qwen_fc", **options) -> dict:
    episode = Episode(task_id, protocol=fmt, **options)
    episode.reset()
    for action in actions:
        if episode.done:
            break
        episode.step(action)
    return episode.finish()


@pytest.mark.parametrize("fmt", ["qwen_fc", "python_list"])
def test_ground_truth_replay_scores_one_on_every_task(fmt):
    failing = [t for t in load_tasks() if play(t, ground_truth_actions(t, fmt), fmt).reward != 1.0]
    assert failing == [GT_DEFECT]
    assert leftover_instances() == []


def test_the_ground_truth_defect_is_rejected_by_availability_not_by_the_checker():
    result = play(GT_DEFECT, ground_truth_actions(GT_DEFECT))
    rejected = [c for turn in result.evidence for c in turn["calls"] if not c["accepted"]]
    assert "tail" in {c["name"] for c in rejected}
    assert all("'tail' is not available" in c["reject_reason"] for c in rejected)


def test_eval_prompt_is_the_raw_protocol_prompt():
    task = get_task("multi_turn_base_0")
    messages = Episode(task, mode="eval").reset()
    assert messages[0] == {"role": "system", "content": get_protocol("qwen_fc").system_prompt(task.functions)}
    assert messages[1] == {"role": "user", "content": task.questions[0][0]["content"]}


def test_turns_advance_on_plain_text_and_the_episode_completes():
    episode = Episode("multi_turn_base_0")
    episode.reset()
    first = episode.step("I will not call anything.")
    assert (
        first.info["turn_ended"]
        and first.observation[0]["content"] == episode.task.questions[1][0]["content"]
    )
    while not episode.done:
        episode.step(END_OF_TURN)
    assert episode.completed and not episode.truncated
    with pytest.raises(EpisodeDoneError):
        episode.step(END_OF_TURN)
    result = episode.finish()
    assert result.reward == 0.0 and result.labels[0] == "empty_turn_model_response"


def test_miss_func_reveal_turn_adds_the_held_out_tools():
    task = get_task("multi_turn_miss_func_0")
    ((reveal_turn, docs),) = task.missed_functions.items()
    episode = Episode(task)
    episode.reset()
    hidden = docs[0]["name"]
    assert hidden not in episode.available_tools
    observation = []
    while episode.turn < reveal_turn:
        observation = episode.step(END_OF_TURN).observation
    assert hidden in episode.available_tools
    assert "I have updated some more functions" in observation[0]["content"]


def test_step_limit_per_turn_truncates_and_scores_zero():
    call = get_protocol("qwen_fc").format_calls([ToolCall("pwd")])
    episode = Episode("multi_turn_base_0", limits=EpisodeLimits(max_steps_per_turn=3))
    episode.reset()
    results = [episode.step(call) for _ in range(3)]
    assert [r.done for r in results] == [False, False, True] and results[-1].info["truncated"]
    assert episode.finish().reward == 0.0 and episode.finish().truncated


def test_episode_cap_truncates():
    episode = Episode("multi_turn_base_0", limits=EpisodeLimits(max_steps=2))
    episode.reset()
    episode.step(END_OF_TURN)
    assert episode.step(END_OF_TURN).done and episode.truncated


INJECTIONS = [
    {"name": "open('/tmp/seal_pwned','w').close", "arguments": {}},
    {"name": "__import__('os').system", "arguments": {"command": "touch /tmp/seal_pwned"}},
    {"name": "ls pwd", "arguments": {}},
    {"name": "ls+pwd", "arguments": {}},
    {"name": "os.system", "arguments": {"command": "touch /tmp/seal_pwned"}},
    {"name": "__class__", "arguments": {}},
    {"name": "__init__", "arguments": {}},
    {"name": "_load_scenario", "arguments": {"scenario": {}}},
    {"name": "eval", "arguments": {"source": "open('/tmp/seal_pwned','w')"}},
    {"name": "cd", "arguments": {"folder) or open('/tmp/seal_pwned','w') or (x": "a"}},
    {"name": "cd", "arguments": {"__class__": "x"}},
    {"name": "cd", "arguments": {"folder": "'); open('/tmp/seal_pwned','w'); ('"}},
    {"name": "cd", "arguments": {"folder": "x" * 100_000}},
    {"name": "cd", "arguments": {"folder": json.loads("[" * 200 + "]" * 200)}},
    {"name": "cd", "arguments": "open('/tmp/seal_pwned','w')"},
    {"name": 42, "arguments": {}},
    {"name": ["cd"], "arguments": {}},
]


@pytest.mark.parametrize("payload", INJECTIONS, ids=range(len(INJECTIONS)))
def test_injected_calls_execute_nothing_and_the_episode_goes_on(payload, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    target = Path("/tmp/seal_pwned")
    target.unlink(missing_ok=True)
    episode = Episode("multi_turn_base_0")
    episode.reset()
    state_before = repr(vars(episode.executor.instances["GorillaFileSystem"]))
    text = "<tool_call>\n" + json.dumps(payload) + "\n</tool_call>"
    result = episode.step(text)
    assert not target.exists() and list(tmp_path.iterdir()) == []
    assert not result.done and result.observation
    content = result.observation[0]["content"]
    assert any(
        marker in content
        for marker in ("[ERROR] Invalid tool call format:", "Error during execution", '"error"')
    )
    assert repr(vars(episode.executor.instances["GorillaFileSystem"])) == state_before
    replay = ground_truth_actions("multi_turn_base_0")
    for action in replay:
        episode.step(action)
    assert episode.finish().reward == 1.0


ISOLATION_TASK = "multi_turn_long_context_152"
SHARED_CARD = "3456789034567890"  # a card every long-context TravelAPI instance gets from long_context.py


def wrong_actions(seed: int, task_id: str) -> list[str]:
    """Ground truth, read-only balance checks of the shared card, and seed-chosen mistakes.

    Some variants pay for insurance with a long-context extension card, which bfcl-eval shares
    between all instances: without isolation one episode's payment shows up in another's balance.
    """
    rng = random.Random(seed)
    protocol = get_protocol("qwen_fc")
    token = {"access_token": "secureAccessToken12345"}
    balance = ToolCall("get_credit_card_balance", {**token, "card_id": SHARED_CARD})
    insurance = ToolCall(
        "purchase_insurance",
        {
            **token,
            "insurance_type": "comprehensive",
            "booking_id": "booking_998",
            "insurance_cost": 100.0,
            "card_id": SHARED_CARD,
        },
    )
    actions = []
    for calls in ground_truth_calls(get_task(task_id)):
        roll = rng.random()
        if calls and roll < 0.3:
            calls = [*calls, insurance]
        elif calls and roll < 0.45:
            calls = [ToolCall(c.name, {k: _bump(v) for k, v in c.arguments.items()}) for c in calls]
        elif calls and roll < 0.55:
            calls = calls[:1]
        actions.append(protocol.format_calls([balance, *calls]))
        actions.append(END_OF_TURN)
    return actions


def _bump(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    return value


def test_interleaved_episodes_match_one_by_one_runs():
    logs = [wrong_actions(seed, ISOLATION_TASK) for seed in range(64)]
    one_by_one = []
    for log in logs:
        episode = Episode(ISOLATION_TASK)
        episode.reset()
        observations = [episode.step(action).observation for action in log]
        one_by_one.append((observations, episode.finish()))
    episodes = [Episode(ISOLATION_TASK) for _ in logs]
    for episode in episodes:
        episode.reset()
    interleaved: list[list] = [[] for _ in logs]
    for position in range(max(len(log) for log in logs)):
        for i in random.Random(position).sample(range(len(logs)), len(logs)):
            if position < len(logs[i]):
                interleaved[i].append(episodes[i].step(logs[i][position]).observation)
    results = [(interleaved[i], episodes[i].finish()) for i in range(len(logs))]
    diverging = [i for i, (ours, alone) in enumerate(zip(results, one_by_one, strict=True)) if ours != alone]
    assert diverging == []
    rewards = {result.reward for _, result in results}
    assert rewards == {0.0, 1.0}
    assert leftover_instances() == []


def _perturb(calls: list[ToolCall], kind: str, rng: random.Random) -> list[ToolCall]:
    if kind == "missing_call":
        return calls[:-1]
    if kind == "extra_call":
        return [*calls, calls[0]]
    target = rng.randrange(len(calls))
    changed = {
        k: (_bump(v) if isinstance(v, int | float) else f"{v}x" if isinstance(v, str) else v)
        for k, v in calls[target].arguments.items()
    }
    return [*calls[:target], ToolCall(calls[target].name, changed), *calls[target + 1 :]]


@pytest.mark.parametrize("kind", ["wrong_value", "missing_call", "extra_call"])
def test_verdicts_equal_the_official_checker_on_perturbed_trajectories(kind):
    rng = random.Random(kind)
    protocol = get_protocol("qwen_fc")
    task_ids = sorted(t for t in load_tasks() if t != GT_DEFECT)
    disagreements, outcomes = [], set()
    for task_id in rng.sample(task_ids, 120):
        task = get_task(task_id)
        turns = ground_truth_calls(task)
        hit = rng.choice([i for i, calls in enumerate(turns) if calls])
        turns[hit] = _perturb(turns[hit], kind, rng)
        actions = [
            a for calls in turns for a in ([protocol.format_calls(calls)] if calls else []) + [END_OF_TURN]
        ]
        ours = play(task_id, actions).reward
        decoded = [[[c.to_call_string() for c in calls]] if calls else [] for calls in turns]
        namespace = fresh_namespace("official")
        entry = {
            "id": task.id,
            "initial_config": task.initial_config,
            "involved_classes": list(task.involved_classes),
        }
        official = multi_turn_checker(
            decoded, [list(t) for t in task.ground_truth], entry, task.category, namespace
        )
        drop_namespace(namespace)
        outcomes.add(ours)
        if ours != float(official["valid"]):
            disagreements.append((task_id, ours, official.get("error_type")))
    assert disagreements == []
    assert 0.0 in outcomes


def test_eval_mode_never_sees_the_interface_and_reference_adds_only_its_markers():
    reference = build_interface("reference")
    raw = get_protocol("qwen_fc")
    for task in load_tasks().values():
        base = [{"role": "system", "content": raw.system_prompt(task.functions)}]
        base += [{"role": "user", "content": m["content"]} for m in task.questions[0]]
        assert Episode(task, mode="eval", interface=reference).reset() == base
        trained = Episode(task, mode="train", interface=reference).reset()
        assert trained[1:] == base[1:]
        system = trained[0]["content"]
        assert system.endswith("\n\n" + OBSERVATION_NOTE)
        tools = system.removesuffix("\n\n" + OBSERVATION_NOTE)
        assert tools.replace(" [required]", "") == base[0]["content"]
        required = sum(len(doc["parameters"].get("required", [])) for doc in task.functions)
        assert tools.count(" [required]") == required


def test_train_mode_error_observations_carry_hints_and_eval_mode_does_not():
    bad = get_protocol("qwen_fc").format_calls([ToolCall("cd", {})])
    for mode, hinted in (("train", True), ("eval", False)):
        episode = Episode("multi_turn_base_0", mode=mode, interface=build_interface("full"))
        episode.reset()
        content = episode.step(bad).observation[0]["content"]
        assert "missing 1 required positional argument: 'folder'" in content
        assert ("[Hint]" in content) is hinted


def test_strict_parsing_rejects_the_whole_message_and_lenient_runs_the_valid_calls():
    protocol = get_protocol("qwen_fc")
    text = protocol.format_calls([ToolCall("cd", {"folder": "document"}), ToolCall("compare_files", {})])
    strict = Episode("multi_turn_base_0")
    strict.reset()
    rejected = strict.step(text)
    assert rejected.info["accepted"] == [] and rejected.info["rejected"][0]["name"] == "compare_files"
    assert rejected.observation[0]["content"].startswith("[ERROR] Invalid tool call format:")
    assert strict.executor.instances["GorillaFileSystem"]._current_dir.name == "workspace"

    lenient = Episode("multi_turn_base_0", limits=EpisodeLimits(strict=False))
    lenient.reset()
    partial = lenient.step(text + "\n<tool_call>\n{broken}\n</tool_call>")
    assert [call["name"] for call in partial.info["accepted"]] == ["cd"]
    assert lenient.executor.instances["GorillaFileSystem"]._current_dir.name == "document"
    contents = [message["content"] for message in partial.observation]
    assert '"current_working_directory": "document"' in contents[0]
    assert "compare_files" in contents[0] and any(
        c.startswith("[ERROR] Invalid tool call format:") for c in contents
    )
    labels = lenient.finish().evidence[0]
    assert labels["rejected_messages"] == 1 and [c["accepted"] for c in labels["calls"]] == [True, False]


@pytest.mark.parametrize(("fmt", "reward"), [("qwen_fc", 1.0), ("qwen_fc_strict_tags", 0.0)])
def test_a_stray_closing_tag_after_each_call_is_dropped_unless_the_protocol_rejects_it(fmt, reward):
    """The 1.5B's loop message: valid blocks, then a `</tool_call>` of no block. The released code runs the
    blocks' calls; `qwen_fc_strict_tags` rejects every such message, so no call of the task ever runs."""
    task = "multi_turn_base_0"
    actions = [f"{a}\n</tool_call>" if "<tool_call>" in a else a for a in ground_truth_actions(task, fmt)]
    result = play(task, actions, fmt)
    assert result.reward == reward
    calls = [call for turn in result.evidence for call in turn["calls"]]
    assert calls and all(call["accepted"] is (reward == 1.0) for call in calls)
