"""The failure profile C_t (docs/design.md §4.2): counting, JSON, merge, reset and malformed input."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seal.tocf.profile import FailureProfile


def sample() -> FailureProfile:
    profile = FailureProfile()
    profile.observe(["pass", "state_mismatch", "state_mismatch", "gt_error"], 0.0, "multi_turn_base")
    profile.observe(["pass", "spurious_tool_call"], 1.0, "multi_turn_miss_func")
    return profile


def test_counts_are_per_turn_and_rewards_per_occurrence() -> None:
    profile = sample()
    s = profile.to_json()["window"]
    assert s == {
        "trajectories": 2,
        "labels": {"gt_error": 1, "pass": 2, "spurious_tool_call": 1, "state_mismatch": 2},
        "reward_sum": {"gt_error": 0.0, "pass": 1.0, "spurious_tool_call": 1.0, "state_mismatch": 0.0},
        "by_category": {
            "multi_turn_base": {"gt_error": 1, "pass": 1, "state_mismatch": 2},
            "multi_turn_miss_func": {"pass": 1, "spurious_tool_call": 1},
        },
    }
    assert profile.to_json()["total"] == s
    assert profile.mean_reward("pass") == 0.5
    assert profile.mean_reward("state_mismatch") == 0.0
    assert profile.mean_reward("never_seen") == 0.0
    assert profile.count("state_mismatch") == 2 and profile.trajectories() == 2
    assert profile.category_counts("multi_turn_miss_func") == {"pass": 1, "spurious_tool_call": 1}


def test_prevalence_leaves_excluded_labels_out_of_the_denominator() -> None:
    profile = sample()
    assert profile.prevalence("state_mismatch") == 2 / 5
    assert profile.prevalence("gt_error") == 1 / 5
    assert sum(profile.prevalence(x) for x in ("pass", "state_mismatch", "spurious_tool_call")) == 1.0
    assert FailureProfile().prevalence("pass") == 0.0


def test_reset_window_keeps_the_total() -> None:
    profile = sample()
    profile.reset_window()
    assert profile.trajectories("window") == 0 and profile.counts("window") == {}
    assert profile.trajectories("total") == 2 and profile.count("pass", "total") == 2
    profile.observe(["response_mismatch"], 0.0, "multi_turn_long_context")
    assert profile.counts("window") == {"response_mismatch": 1}
    assert profile.count("response_mismatch", "total") == 1 and profile.trajectories("total") == 3


def test_merge_sums_window_and_total_without_touching_inputs() -> None:
    a, b = sample(), FailureProfile()
    b.observe(["pass"], 1.0, "multi_turn_base")
    b.reset_window()
    b.observe(["state_mismatch"], 0.5, "multi_turn_base")
    before = (a.to_json(), b.to_json())
    merged = a.merge(b)
    assert (a.to_json(), b.to_json()) == before
    assert merged.count("state_mismatch") == 3 and merged.count("pass") == 2
    assert merged.count("pass", "total") == 3 and merged.trajectories("total") == 4
    assert merged.mean_reward("state_mismatch") == pytest.approx(0.5 / 3)
    assert merged.category_counts("multi_turn_base") == {"gt_error": 1, "pass": 1, "state_mismatch": 3}


def test_observe_batch_skips_unlabelled_trajectories() -> None:
    profile = FailureProfile()
    added = profile.observe_batch([["pass"], None, ["state_mismatch"]], [1.0, 0.0, 0.0], ["a", "b", "c"])
    assert (
        added == 2
        and profile.trajectories() == 2
        and set(profile.to_json()["window"]["by_category"]) == {"a", "c"}
    )
    with pytest.raises(ValueError, match="batch lengths differ"):
        profile.observe_batch([["pass"]], [1.0, 0.0], ["a"])


def test_observe_rejects_a_string_and_a_bad_reward() -> None:
    with pytest.raises(ValueError, match="not a string"):
        FailureProfile().observe("pass", 1.0, "a")
    with pytest.raises(ValueError, match="reward must be a finite number"):
        FailureProfile().observe(["pass"], float("nan"), "a")


def test_unknown_scope_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown scope 'epoch'"):
        sample().prevalence("pass", "epoch")


def test_json_round_trip() -> None:
    profile = sample()
    profile.reset_window()
    profile.observe(["instance_mismatch"], 0.25, "multi_turn_base")
    data = json.loads(json.dumps(profile.to_json()))
    assert data["version"] == 1
    restored = FailureProfile.from_json(data)
    assert restored == profile and restored.to_json() == profile.to_json()
    assert restored.mean_reward("instance_mismatch") == 0.25


def test_missing_keys_inside_a_scope_mean_zero() -> None:
    restored = FailureProfile.from_json({"version": 1, "window": {}, "total": {"labels": {"pass": 3}}})
    assert restored.trajectories() == 0 and restored.count("pass", "total") == 3
    assert restored.mean_reward("pass", "total") == 0.0


def test_metrics_are_flat_floats() -> None:
    metrics = sample().metrics()
    assert metrics["seal/profile/window/trajectories"] == 2.0
    assert metrics["seal/profile/total/count/state_mismatch"] == 2.0
    assert metrics["seal/profile/window/prevalence/state_mismatch"] == 0.4
    assert metrics["seal/profile/window/mean_reward/pass"] == 0.5
    assert all(isinstance(v, float) for v in metrics.values())
    assert set(sample().metrics("x")) == {k.replace("seal/profile", "x", 1) for k in metrics}


def _good() -> dict:
    return sample().to_json()


def _mutate(path: list[str], value: object) -> dict:
    data = copy.deepcopy(_good())
    target = data
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    "data, message",
    [
        ([1, 2], "profile must be an object"),
        (_mutate(["version"], KeyError), "missing key 'version'"),
        (_mutate(["version"], 2), "unsupported version 2"),
        (_mutate(["version"], True), "unsupported version True"),
        (_mutate(["total"], KeyError), "missing key 'total'"),
        (_mutate(["extra"], {}), r"unknown key\(s\) \['extra'\]"),
        (_mutate(["window"], []), "profile.window must be an object"),
        (
            _mutate(["window", "trajectories"], -1),
            "profile.window.trajectories must be a non-negative integer",
        ),
        (
            _mutate(["window", "trajectories"], 1.5),
            "profile.window.trajectories must be a non-negative integer",
        ),
        (
            _mutate(["total", "labels", "pass"], "2"),
            "profile.total.labels.pass must be a non-negative integer",
        ),
        (
            _mutate(["total", "reward_sum", "pass"], float("inf")),
            "profile.total.reward_sum.pass must be a finite",
        ),
        (_mutate(["total", "reward_sum"], {"pass": None}), "profile.total.reward_sum.pass must be a finite"),
        (
            _mutate(["window", "by_category", "multi_turn_base"], 3),
            "by_category.multi_turn_base must be an object",
        ),
        (
            _mutate(["window", "by_category", "multi_turn_base", "pass"], -2),
            "by_category.multi_turn_base.pass must be a non-negative integer",
        ),
        (_mutate(["window", "mean_reward"], {}), r"profile.window has unknown key\(s\) \['mean_reward'\]"),
    ],
)
def test_malformed_profile_is_rejected(data: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FailureProfile.from_json(data)


labels_st = st.lists(
    st.sampled_from(["pass", "state_mismatch", "spurious_tool_call", "gt_error"]), max_size=5
)
traj_st = st.tuples(labels_st, st.sampled_from([0.0, 0.5, 1.0]), st.sampled_from(["base", "miss_func"]))


@given(st.lists(traj_st, max_size=12), st.integers(0, 12))
def test_merging_split_batches_equals_observing_all(trajs: list, split: int) -> None:
    whole, left, right = FailureProfile(), FailureProfile(), FailureProfile()
    for i, (labels, reward, category) in enumerate(trajs):
        whole.observe(labels, reward, category)
        (left if i < split else right).observe(labels, reward, category)
    merged = left.merge(right)
    assert merged.counts() == whole.counts() and merged.trajectories() == whole.trajectories()
    for label in whole.counts():
        assert merged.mean_reward(label) == pytest.approx(whole.mean_reward(label))
    assert FailureProfile.from_json(json.loads(json.dumps(merged.to_json()))) == merged
