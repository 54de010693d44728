"""The shipped recipe's starts against issue 57's bar, by GPU count: which lines count as shipped, the rows,
and the sentence that says which part of the bar holds, computed from the lines rather than asserted."""

from __future__ import annotations

from seal.bfcl.tasks import CATEGORIES
from seal.reports.start_spread import recipe_starts, spread_rows, spread_verdict, within_sd
from seal.results.campaign import SftStart


def start(recipe: str, gpus: int, val: float, mixed: float | None = None) -> SftStart:
    return SftStart(
        recipe=recipe,
        experiment="sft",
        card="H200",
        gpus=gpus,
        steps=60,
        val=val,
        val_by_category={c: val for c in CATEGORIES},
        train_s=200.0,
        score_s=None,
        date="2026-11-30",
        commit="abc1234",
        mixed=mixed,
    )


def test_only_a_recipe_without_overrides_is_shipped_each_config_its_own():
    lines = [
        start("exp/sft.yaml", 1, 0.2),
        start("exp/sft.yaml optim.lr=1e-5", 1, 0.1),
        start("exp/other.yaml", 2, 0.3),
        start("exp/sft.yaml", 2, 0.18),
    ]
    shipped = recipe_starts(lines)
    assert list(shipped) == ["exp/sft.yaml", "exp/other.yaml"]
    assert [s.val for s in shipped["exp/sft.yaml"]] == [0.2, 0.18]


def test_rows_by_gpu_count_list_each_val_their_mean_and_the_mixed_shares_measured():
    lines = [
        start("r", 2, 0.16, 0.41),
        start("r", 1, 0.19, 0.51),
        start("r", 2, 0.18),
        start("r", 1, 0.22, 0.4),
    ]
    assert spread_rows(lines) == [
        {
            "GPUs": "1",
            "starts": "2",
            "greedy val, each": "19.0, 22.0",
            "mean": "20.5",
            "mixed, where measured": "0.51, 0.40",
        },
        {
            "GPUs": "2",
            "starts": "2",
            "greedy val, each": "16.0, 18.0",
            "mean": "17.0",
            "mixed, where measured": "0.41",
        },
    ]


def test_the_sentence_says_which_part_of_the_bar_fails_with_its_numbers():
    cleared = spread_verdict(
        "r", [start("r", 1, 0.19, 0.51), start("r", 2, 0.16, 0.41), start("r", 2, 0.18, 0.44)]
    )
    assert "every greedy val is 15 % or more" in cleared
    assert "3 of the 3 mixed shares measured are 0.30 or more (0 not measured)" in cleared
    assert "19.0 on 1 GPU(s) (1 start) and 17.0 on 2 GPU(s) (2 starts), 2.0 points apart (within" in cleared
    assert "single starts range 16.0–19.0" in cleared

    failing = spread_verdict("r", [start("r", 1, 0.26), start("r", 2, 0.12, 0.2), start("r", 2, 0.16, 0.35)])
    assert "1 of 3 greedy vals are below 15 %" in failing
    assert "1 of the 2 mixed shares measured are 0.30 or more (1 not measured)" in failing
    assert "26.0 on 1 GPU(s) (1 start) and 14.0 on 2 GPU(s) (2 starts), 12.0 points apart (beyond" in failing


def test_the_gpu_counts_means_decide_and_the_farthest_pair_only_informs():
    """Runs of one config scatter: 16 and 22 on different counts pass where the means are close, and the
    spread within a count is the pooled standard deviation."""
    lines = [start("r", 1, 0.16), start("r", 1, 0.20), start("r", 2, 0.22), start("r", 2, 0.18)]
    sentence = spread_verdict("r", lines)
    assert "18.0 on 1 GPU(s) (2 starts) and 20.0 on 2 GPU(s) (2 starts), 2.0 points apart (within" in sentence
    assert "single starts range 16.0–22.0" in sentence
    assert "a standard deviation of 2.8 points within a GPU count" in sentence  # both counts 4 apart: sd √8
    assert within_sd([start("r", 1, 0.2), start("r", 2, 0.3)]) is None


def test_five_points_apart_is_within_the_bar_and_one_gpu_count_has_no_means_to_compare():
    edge = spread_verdict("r", [start("r", 1, 0.15, 0.3), start("r", 2, 0.2, 0.3)])
    assert "5.0 points apart (within the 5 allowed)" in edge
    beyond = spread_verdict("r", [start("r", 1, 0.15), start("r", 2, 0.21)])
    assert "6.0 points apart (beyond the 5 allowed)" in beyond
    alone = spread_verdict("r", [start("r", 2, 0.15, 0.3), start("r", 2, 0.2, 0.3)])
    assert "every start trained on 2 GPU(s): no GPU counts to compare" in alone
    assert spread_verdict("r", [start("r", 1, 0.2)]).count("no mixed share is measured") == 1
