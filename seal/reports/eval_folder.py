"""`seal report DIR` of a `seal eval` output folder: what the endpoint did, per category.

Reads the folder `seal eval --out DIR` writes (seal/evaluation/store.py): `episodes.jsonl` (reward, labels,
`cut` and `llm_calls` per episode) and `actions.jsonl` (each episode's model calls). Prints the pass rate and
the ground-truth turns' label shares per category (`seal.results.tables.summarize`, as `seal eval` prints
them), then per category the episodes a limit cut (context window, call limit, generation length) and those
that end in a loop (`seal.results.endings`, as `seal eval` counts them); writes report.md and labels.png into
the --out folder.
Endpoint failures are left out of the pass rate, as `seal eval` leaves them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from seal.bfcl.tasks import category_of
from seal.jsonl import json_objects
from seal.protocol import DEFAULT_PROTOCOL
from seal.results.endings import LOOP_CALLS, ends_in_loop
from seal.results.files import ACTIONS, EPISODES, RUN
from seal.results.pass_rate import category_order
from seal.results.tables import SHORT_NAMES, markdown_table, plot_label_shares, summarize

CUTS = ("context", "calls", "generation")
"""The limits that cut an eval episode (seal/evaluation/runner.py `cut`)."""
REPORT_MD = "report.md"
LABELS_PNG = "labels.png"


def is_eval_folder(folder: Path) -> bool:
    """A `seal eval` output folder: its run.json and episodes.jsonl."""
    return (folder / RUN).is_file() and (folder / EPISODES).is_file()


def read_episodes(folder: Path) -> tuple[list[dict[str, Any]], int]:
    """The scored episode lines (endpoint failures left out, as in the pass rate) and how many failed."""
    records = [record for _, record in json_objects(folder / EPISODES)]
    scored = [r for r in records if "error" not in r and isinstance(r.get("task_id"), str)]
    return scored, len(records) - len(scored)


def looped_tasks(folder: Path) -> set[str]:
    """The tasks whose action log (the first of a task, as `seal eval --resume` keeps it) ends in a loop."""
    path = folder / ACTIONS
    seen: set[str] = set()
    looped: set[str] = set()
    if not path.is_file():
        return looped
    for _, log in json_objects(path):
        task_id, actions = log.get("task_id"), log.get("actions")
        if not isinstance(task_id, str) or not isinstance(actions, list) or task_id in seen:
            continue
        seen.add(task_id)
        if ends_in_loop([str(action) for action in actions], str(log.get("protocol", DEFAULT_PROTOCOL))):
            looped.add(task_id)
    return looped


def cuts_and_loops(episodes: Sequence[dict[str, Any]], looped: set[str]) -> dict[str, dict[str, int]]:
    """Per category: episodes, those each limit cut, and those that end in a loop."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(("n", *CUTS, "loops"), 0))
    for episode in episodes:
        row = counts[category_of(episode["task_id"])]
        row["n"] += 1
        if episode.get("cut") in CUTS:
            row[episode["cut"]] += 1
        row["loops"] += episode["task_id"] in looped
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
        f"{markdown_table(summary)}\n{cuts_table(cuts_and_loops(episodes, looped_tasks(folder)))}"
    )
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; name a folder")
    out.mkdir(parents=True, exist_ok=True)
    (out / REPORT_MD).write_text(text, encoding="utf-8")
    plot_label_shares(summary, out / LABELS_PNG, title=f"Turn labels by category — {folder.resolve().name}")
    return text
