"""The step's group metrics say where the cut episodes sit: GRPO pushes a failing episode down only in a
mixed group, so a loop that runs to the call limit in a group where every sample failed is never pushed
down. Computed by `ClosedLoop.step` from the trajectories and their groups alone."""

from __future__ import annotations

from seal.trainer.rl.closed_loop import ClosedLoop
from seal.trainer.settings import SealSettings
from tests.support.doubles import trajectory_fields


def group_metrics(rows: list[tuple[str, float, bool, str]]) -> dict[str, float]:
    """`ClosedLoop.step` over (group, reward, cut, env_error) rows; its `seal/groups/` metrics."""
    trajectories = [
        trajectory_fields("multi_turn_base_1", reward=reward, truncated=cut, env_error=error)
        for _, reward, cut, error in rows
    ]
    result = ClosedLoop(SealSettings()).step(
        trajectories, [0.0] * len(rows), 1, 0, groups=[group for group, *_ in rows]
    )
    return {key: value for key, value in result.metrics.items() if key.startswith("seal/groups/")}


def test_cut_episodes_are_counted_by_whether_their_group_carries_an_advantage():
    metrics = group_metrics(
        [
            ("mixed", 1.0, False, ""),
            ("mixed", 0.0, True, ""),  # cut, pushed down
            ("failed", 0.0, True, ""),  # cut, in a group with no advantage
            ("failed", 0.0, True, ""),
            ("passed", 1.0, False, ""),
            ("passed", 1.0, True, ""),  # cut yet passing: its group has no advantage either
        ]
    )
    assert metrics == {
        "seal/groups/mixed_share": 1 / 3,
        "seal/groups/all_failed_share": 1 / 3,
        "seal/groups/cut_in_mixed_share": 1 / 4,
    }


def test_an_env_error_row_is_neither_a_failure_nor_a_cut_and_no_cut_means_no_cut_share():
    metrics = group_metrics(
        [
            ("a", 1.0, False, ""),
            ("a", 0.0, True, "connection refused"),  # the environment failed: it trains nothing
            ("b", 0.0, False, ""),
            ("b", 0.0, False, ""),
        ]
    )
    assert metrics == {"seal/groups/mixed_share": 0.0, "seal/groups/all_failed_share": 0.5}
