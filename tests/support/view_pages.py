"""`seal view` pages in headless Chromium, for the browser test and benchmarks/bench_view.py.

Large inputs are built quickly through the writers the project uses: a `seal eval` folder (`RunFolder`,
`episode_record`, `summarize`) and a run folder of validation dumps of the 100 val tasks at several steps
(`TrajectoryFields.reward_extra_info`, verl's dump row). Each episode is a replayed action log: the ground
truth, or a wrong play (stops after the first turn, or repeats its first call until the call limit cuts it:
a loop). A page is opened as a user opens it, from disk, and counts as loaded once its table is shown and
its data decoded (the page's own clock, from the start of navigation).
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from seal.bfcl.tasks import category_of, split_ids
from seal.env.replay import replay_steps
from seal.evaluation.store import RunFolder
from seal.protocol import DEFAULT_PROTOCOL
from seal.protocol.ground_truth import END_OF_TURN, ground_truth_actions
from seal.results.tables import episode_record, markdown_table, summarize
from seal.trainer.rl.trajectory import TrajectoryFields

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PLAYS = ("ground truth", "stops after the first turn", "loops on its first call")
LOOP = 6


@cache
def play(task_id: str, kind: str) -> tuple[tuple[str, ...], str]:
    """(the actions, the cut that ended them)."""
    truth = ground_truth_actions(task_id, DEFAULT_PROTOCOL)
    if kind == PLAYS[0]:
        return tuple(truth), "none"
    if kind == PLAYS[1]:
        first = truth[: truth.index(END_OF_TURN) + 1]
        return tuple(first + [END_OF_TURN] * 8), "none"
    call = next((a for a in truth if a != END_OF_TURN), END_OF_TURN)
    return (call,) * LOOP, "calls"


@cache
def played(task_id: str, kind: str):
    actions, cut = play(task_id, kind)
    log = {"task_id": task_id, "protocol": DEFAULT_PROTOCOL, "actions": list(actions)}
    return log, cut, replay_steps(log, cut=cut).result


def eval_folder(out: Path, count: int = 300, split: str = "test", shift: int = 0) -> Path:
    """A `seal eval` output of the first `count` tasks of `split`, two plays in three wrong (`shift` changes
    which task gets which play)."""
    folder = RunFolder(out)
    tasks = split_ids(split)[:count]
    folder.start(
        {"model": "synthetic", "protocol": DEFAULT_PROTOCOL, "taxonomy": "reference", "split": split}
    )
    records = []
    with folder:
        for index, task_id in enumerate(tasks):
            log, cut, result = played(task_id, PLAYS[(index + shift) % 3])
            record = {**episode_record(result), "cut": cut, "llm_calls": len(log["actions"])}
            folder.append(log, record)
            records.append(record)
    summary = summarize(records, split)
    folder.write_summary(summary, markdown_table(summary))
    return out


def run_folder(out: Path, steps: int = 10) -> Path:
    """A run folder with the val dumps of `steps` validation passes; the policy gets better step by step."""
    tasks = split_ids("val")
    for step in range(steps):
        rows = []
        for index, task_id in enumerate(tasks):
            kind = PLAYS[0] if (index + step) % steps < step + 1 else PLAYS[1 + index % 2]
            log, cut, result = played(task_id, kind)
            fields = TrajectoryFields(
                task_id=task_id,
                category=category_of(task_id),
                mode="eval",
                labels=result.labels,
                taxonomy=result.taxonomy,
                interface_version=0,
                reward=result.reward,
                llm_calls=len(log["actions"]),
                truncated=result.truncated,
                env_error="",
                env_seconds=0.0,
                gen_seconds=0.0,
                actions=log["actions"],
                protocol=DEFAULT_PROTOCOL,
                cut=cut,
                split="val",
            )
            rows.append({"gts": task_id, "score": result.reward, "step": step, **fields.reward_extra_info()})
        dump = out / "validation" / f"{step}.jsonl"
        dump.parent.mkdir(parents=True, exist_ok=True)
        dump.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return out


def embedded(page: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The page's two data blocks, decoded as the page's script decodes them."""
    text = page.read_text(encoding="utf-8")
    blocks = [
        json.loads(gzip.decompress(base64.b64decode(re.search(rf'id="{name}"[^>]*>([^<]*)<', text)[1])))
        for name in ("seal-index", "seal-details")
    ]
    return blocks[0], blocks[1]


@contextmanager
def chromium() -> Iterator[Any]:
    """Headless Chromium (Debian's package) under Playwright; no browser is downloaded."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


def opened(browser: Any, page_file: Path) -> tuple[Any, list[str], float]:
    """A new tab on the page, once its table is shown and its data decoded; (tab, errors, load ms).
    Waiting on a selector, not a script: the page's policy forbids evaluating strings."""
    tab = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.goto(page_file.as_uri())
    tab.wait_for_selector("body[data-ready=true]", state="attached", timeout=30_000)
    return tab, errors, tab.evaluate("window.sealView.loadMs")
