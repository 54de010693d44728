"""Charts read as drawn: the legend in stacking order, distinct hues, whole steps, the test points."""

from __future__ import annotations

import colorsys
import itertools

import pytest
from matplotlib.colors import to_rgb

from seal.bfcl.tasks import CATEGORIES
from seal.results.pass_rate import SplitScore
from seal.results.tables import LABEL_COLOURS, SHORT_NAMES, label_order, label_shares_figure

SUMMARY = {
    "by_category": {
        "multi_turn_base": {
            "n": 25,
            "pass_rate": 0.4,
            "labels": {"pass": 0.6, "state_mismatch": 0.3, "spurious_tool_call": 0.1},
        },
        "multi_turn_miss_func": {
            "n": 24,
            "pass_rate": 0.25,
            "labels": {"pass": 0.5, "argument_mismatch": 0.3, "recovery_failure": 0.2},
        },
    }
}


def legend_texts(ax) -> list[str]:
    return [text.get_text() for text in ax.get_legend().get_texts()]


def hue(colour: str) -> float:
    return colorsys.rgb_to_hsv(*to_rgb(colour))[0]


def test_the_labels_legend_lists_the_stack_from_the_top_and_the_bars_say_what_their_numbers_are():
    ax = label_shares_figure(SUMMARY).axes[0]
    stacked = label_order({label for entry in SUMMARY["by_category"].values() for label in entry["labels"]})
    assert legend_texts(ax) == stacked[::-1]
    ticks = [tick.get_text() for tick in ax.get_xticklabels()]
    assert ticks == ["base\n25 episodes", "miss_func\n24 episodes"]
    assert [text.get_text() for text in ax.texts] == ["episodes passed: 40%", "episodes passed: 25%"]


LOOKALIKES = [("argument_mismatch", "recovery_failure"), ("spurious_tool_call", "state_mismatch")]
"""Pairs that once had two shades of one hue."""


def test_every_label_has_its_own_colour_and_former_lookalikes_differ_in_hue():
    assert len(set(LABEL_COLOURS.values())) == len(LABEL_COLOURS)
    for first, second in LOOKALIKES:
        apart = abs(hue(LABEL_COLOURS[first]) - hue(LABEL_COLOURS[second]))
        assert min(apart, 1 - apart) > 0.1, (first, second)


@pytest.fixture(scope="module")
def stats():
    from seal.reports import runs

    return runs


def score(step: int, rates: tuple[float, ...]) -> SplitScore:
    by_category = dict(zip(CATEGORIES, rates, strict=True))
    return SplitScore(step, 100, by_category, sum(rates) / len(rates))


def test_the_training_labels_legend_lists_the_stack_from_the_top(stats):
    shares = {1: {"pass": 0.5, "state_mismatch": 0.5}, 2: {"pass": 0.7, "instance_mismatch": 0.3}}
    ax = stats.label_shares_figure(shares, "t").axes[0]
    assert legend_texts(ax) == label_order({"pass", "state_mismatch", "instance_mismatch"})[::-1]


def test_val_curves_have_whole_steps_and_show_the_tested_checkpoints(stats):
    val = [score(0, (0.2, 0.1, 0.1, 0.0)), score(3, (0.5, 0.3, 0.2, 0.1)), score(5, (0.4, 0.3, 0.3, 0.1))]
    test = [("best", score(3, (0.45, 0.3, 0.25, 0.1))), ("last", score(5, (0.4, 0.35, 0.3, 0.05)))]
    fig = stats.val_curves_figure(val, test, val[1], "t")
    ax = fig.axes[0]
    fig.canvas.draw()
    assert all(float(tick).is_integer() for tick in ax.get_xticks())
    points = {
        (line.get_xdata()[0], round(line.get_ydata()[0], 6))
        for line in ax.get_lines()
        if len(line.get_xdata()) == 1 and line.get_label().startswith("test Avg")
    }
    assert points == {(which.step, round(100 * which.mean, 6)) for _, which in test}
    single = [line for line in ax.get_lines() if len(line.get_xdata()) == 1]
    per_category = [line for line in single if line.get_mfc() == "none"]
    assert len(per_category) == len(CATEGORIES) * len(test)
    assert sum(itertools.chain(*(line.get_xdata() for line in per_category))) == 4 * (3 + 5)


def test_val_curves_of_categories_with_equal_pass_rates_stay_apart_and_each_is_plotted(stats):
    val = [score(0, (0.2, 0.2, 0.2, 0.0)), score(2, (0.5, 0.5, 0.5, 0.1)), score(4, (0.4, 0.4, 0.4, 0.1))]
    ax = stats.val_curves_figure(val, [], val[1], "t").axes[0]
    curves = {line.get_label(): line for line in ax.get_lines() if line.get_label().startswith("val ")}
    by_category = [curves[f"val {SHORT_NAMES[category]}"] for category in CATEGORIES]
    for category, line in zip(CATEGORIES, by_category, strict=True):
        assert list(line.get_ydata()) == [100 * s.by_category[category] for s in val]
    styles = {(line.get_marker(), line.get_linestyle()) for line in by_category}
    assert len(styles) == len(CATEGORIES)
    xs = [tuple(line.get_xdata()) for line in by_category]
    assert len(set(xs)) == len(CATEGORIES)  # equal curves are drawn side by side, not on one another
    assert all(abs(x - s.step) < 0.5 for line in xs for x, s in zip(line, val, strict=True))
