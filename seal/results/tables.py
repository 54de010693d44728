"""Per-category tables and charts of episode results, shared by `seal eval` and `seal diagnose`."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from seal.bfcl.tasks import category_of
from seal.results.files import ACTIONS
from seal.results.pass_rate import pass_rates

if TYPE_CHECKING:
    from seal.env.episode import EpisodeResult

SHORT_NAMES = {
    "multi_turn_base": "base",
    "multi_turn_miss_func": "miss_func",
    "multi_turn_miss_param": "miss_param",
    "multi_turn_long_context": "long_context",
}


LABEL_COLOURS = {
    "pass": "#2ca02c",
    "correct_abstention": "#98df8a",
    "spurious_tool_call": "#e377c2",
    "empty_turn_model_response": "#c7c7c7",
    "missing_tool_call": "#bcbd22",
    "invalid_tool_call": "#8c564b",
    "argument_mismatch": "#ff7f0e",
    "recovery_failure": "#17becf",
    "instance_mismatch": "#9467bd",
    "state_mismatch": "#d62728",
    "response_mismatch": "#1f77b4",
    "checker_error": "#7f7f7f",
    "gt_error": "#525252",
}
"""One colour per label in every chart, so charts of different runs and taxonomies read alike: the two
kinds of success in greens, each failure its own hue (matplotlib's tab10), the judge's failures in greys."""
OTHER_COLOUR = "#dbdb8d"
"""A label no taxonomy names (a newer service, a hand-made log)."""


def run_name(logs: Path) -> str:
    """What a chart of `logs` is titled by: the run folder that holds a run's `actions.jsonl` (`seal eval
    --out DIR` writes DIR/actions.jsonl), else the file's own name without its suffix."""
    return logs.resolve().parent.name if logs.name == ACTIONS else logs.stem


def label_order(labels: Iterable[str]) -> list[str]:
    """Labels in the order charts stack them, bottom up: `LABEL_COLOURS`' order, then any other."""
    present = set(labels)
    return [label for label in LABEL_COLOURS if label in present] + sorted(present - set(LABEL_COLOURS))


def colour_of(label: str) -> str:
    return LABEL_COLOURS.get(label, OTHER_COLOUR)


def legend_as_stacked(ax: Any) -> None:
    """A legend beside the axes that lists the stacked labels as they are drawn: top of the stack first."""
    handles, names = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], names[::-1], loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)


def summarize(episodes: Sequence[dict[str, Any]], split: str | None = None) -> dict[str, Any]:
    """`{"split", "n", "pass_rate", "truncated", "by_category": {category: {"n", "pass_rate", "truncated",
    "labels": {label: share}}}}`.

    `pass_rate` overall is the mean over the categories present (the paper's "Avg"); label shares
    are shares of ground-truth turns within the category. `truncated` counts the episodes a limit
    (steps, context window) ended: they score 0 and stay in the pass rate's denominator.
    """
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for episode in episodes:
        grouped[category_of(episode["task_id"])].append(episode)
    rates = pass_rates((category, row["reward"]) for category, rows in grouped.items() for row in rows)
    by_category = {}
    for category, rate in rates.by_category.items():
        rows = grouped[category]
        labels = Counter(label for row in rows for label in row.get("labels", []))
        turns = sum(labels.values())
        by_category[category] = {
            "n": len(rows),
            "pass_rate": rate,
            "truncated": sum(bool(row.get("truncated")) for row in rows),
            "labels": {label: count / turns for label, count in sorted(labels.items())} if turns else {},
        }
    return {
        "split": split,
        "n": len(episodes),
        "pass_rate": rates.mean,
        "truncated": sum(entry["truncated"] for entry in by_category.values()),
        "by_category": by_category,
    }


def _all_labels(summary: dict[str, Any]) -> list[str]:
    return sorted({label for entry in summary["by_category"].values() for label in entry["labels"]})


def markdown_table(summary: dict[str, Any]) -> str:
    """One row per category (and the average): n, pass rate, truncated episodes, then the share of
    turns per label."""
    labels = _all_labels(summary)
    header = ["category", "n", "pass rate", "truncated", *labels]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for category, entry in summary["by_category"].items():
        shares = [f"{entry['labels'].get(label, 0.0):.1%}" for label in labels]
        name = SHORT_NAMES.get(category, category)
        row = [name, str(entry["n"]), f"{entry['pass_rate']:.1%}", str(entry["truncated"]), *shares]
        lines.append("| " + " | ".join(row) + " |")
    average = ["**average**", str(summary["n"]), f"{summary['pass_rate']:.1%}", str(summary["truncated"])]
    lines.append("| " + " | ".join([*average, *[""] * len(labels)]) + " |")
    return "\n".join(lines) + "\n"


def label_shares_figure(summary: dict[str, Any], title: str = "Turn labels by category") -> Any:
    """Per category, a bar of the ground-truth turns' label shares (stacked in `label_order`), with the
    category's episode count below it and its episode pass rate above it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    categories = list(summary["by_category"])
    entries = [summary["by_category"][c] for c in categories]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(categories) + 3), 4.8))
    names = [f"{SHORT_NAMES.get(c, c)}\n{summary['by_category'][c]['n']} episodes" for c in categories]
    bottoms = [0.0] * len(categories)
    for label in label_order(_all_labels(summary)):
        shares = [entry["labels"].get(label, 0.0) for entry in entries]
        ax.bar(names, shares, bottom=bottoms, label=label, color=colour_of(label))
        bottoms = [b + s for b, s in zip(bottoms, shares, strict=True)]
    for x, entry in enumerate(entries):
        ax.text(x, 1.02, f"episodes passed: {entry['pass_rate']:.0%}", ha="center", fontsize=8)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("share of ground-truth turns, by label")
    ax.set_title(title)
    legend_as_stacked(ax)
    fig.tight_layout()
    return fig


def plot_label_shares(summary: dict[str, Any], path: Path, title: str = "Turn labels by category") -> Path:
    """`label_shares_figure` written to `path` as a PNG."""
    import matplotlib.pyplot as plt

    fig = label_shares_figure(summary, title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def episode_record(result: EpisodeResult, with_labels: bool = True) -> dict[str, Any]:
    """The machine-readable line of docs/design.md §4.4 for one episode."""
    record: dict[str, Any] = {
        "task_id": result.task_id,
        "reward": result.reward,
        "taxonomy": result.taxonomy,
        "truncated": result.truncated,
    }
    if with_labels:
        record.update(labels=result.labels, profile=result.profile, evidence=result.evidence)
    return record
