"""`seal report DIR` of a `seal eval` output folder: what the endpoint did, per category.

Reads the folder `seal eval --out DIR` writes (seal/evaluation/store.py): `episodes.jsonl` (reward, labels,
`cut` and `llm_calls` per episode) and `actions.jsonl` (each episode's model calls). Prints the pass rate and
the ground-truth turns' label shares per category (`seal.reports.tables.summarize`, as `seal eval` prints
them), then per category the episodes a limit cut (context window, call limit, generation length) and those
that end in a loop (`ends_in_loop`); writes report.md and labels.png into the --out folder.
Endpoint failures are left out of the pass rate, as `seal eval` leaves them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from seal.bfcl.tasks import category_of
from seal.evaluation.store import ACTIONS, EPISODES, RUN
from seal.jsonl import json_objects
from seal.reports.pass_rate import category_order
from seal.reports.tables import SHORT_NAMES, markdown_table, plot_label_shares, summarize

LOOP_CALLS = 5
"""An episode ends in a loop when its last this many model calls are one and the same text."""
CUTS = ("context", "calls", "generation")
"""The limits that cut an eval episode (seal/evaluation/runner.py `cut`)."""
REPORT_MD = "report.md"
LABELS_PNG = "labels.png"


def is_eval_folder(folder: Path) -> bool:
    """A `seal eval` output folder: its run.json and episodes.jsonl."""
    return (folder / RUN).is_file() and (folder / EPISODES).is_file()


def ends_in_loop(calls: Sequence[str], n: int = LOOP_CALLS) -> bool:
    """The episode's last `n` model calls are identical: the model repeats itself until a limit stops it."""
    return len(calls) >= n and len(set(calls[-n:])) == 1


def read_episodes(folder: Path) -> tuple[list[dict[str, Any]], int]:
    """The scored episode lines (endpoint failures left out, as in the pass rate) and how many failed."""
    records = [record for _, record in json_objects(folder / EPISODES)]
    scored = [r for r in records if "error" not in r and isinstance(r.get("task_id"), str)]
    return scored, len(records) - len(scored)


def model_calls(folder: Path) -> dict[str, list[str]]:
    """Each episode's model calls, by task id (the first log of a task, as `seal eval --resume` keeps it)."""
    path = folder / ACTIONS
    calls: dict[str, list[str]] = {}
    if not path.is_file():
        return calls
    for _, log in json_objects(path):
        actions = log.get("actions")
        if isinstance(log.get("task_id"), str) and isinstance(actions, list):
            calls.setdefault(log["task_id"], [str(action) for action in actions])
    return calls


def cuts_and_loops(
    episodes: Sequence[dict[str, Any]], calls: dict[str, list[str]]
) -> dict[str, dict[str, int]]:
    """Per category: episodes, those each limit cut, and those that end in a loop."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(("n", *CUTS, "loops"), 0))
    for episode in episodes:
        row = counts[category_of(episode["task_id"])]
        row["n"] += 1
        if episode.get("cut") in CUTS:
            row[episode["cut"]] += 1
        row["loops"] += ends_in_loop(calls.get(episode["task_id"], []))
    return {category: counts[category] for category in sorted(counts, key=category_order)}


def cuts_table(counts: dict[str, dict[str, int]]) -> str:
    """One markdown row per category and one for all: cut by each limit, ends in a loop (count and share)."""
    header = ["category", "n", *(f"cut: {cut}" for cut in CUTS), f"loop (last {LOOP_CALLS} calls alike)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    total = {key: sum(row[key] for row in counts.values()) for key in ("n", *CUTS, "loops")}
    for name, row in [*((SHORT_NAMES.get(c, c), r) for c, r in counts.items()), ("**all**", total)]:
        cells = [f"{row[key]} ({row[key] / row['n']:.0%})" if row["n"] else "0" for key in (*CUTS, "loops")]
        lines.append("| " + " | ".join([name, str(row["n"]), *cells]) + " |")
    return "\n".join(lines) + "\n"


def report_eval(folder: Path, out: Path) -> str:
    """The report of one `seal eval` folder, printed and written (report.md, labels.png) into `out`."""
    episodes, failed = read_episodes(folder)
    if not episodes:
        raise ValueError(f"{folder / EPISODES} holds no scored episode")
    summary = summarize(episodes)
    text = (
        f"{folder}: seal eval, {len(episodes)} scored episode(s), {failed} endpoint failure(s) left out\n\n"
        f"{markdown_table(summary)}\n{cuts_table(cuts_and_loops(episodes, model_calls(folder)))}"
    )
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; name a folder")
    out.mkdir(parents=True, exist_ok=True)
    (out / REPORT_MD).write_text(text, encoding="utf-8")
    plot_label_shares(summary, out / LABELS_PNG, title=f"Turn labels by category — {folder.resolve().name}")
    return text
