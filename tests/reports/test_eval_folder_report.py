"""`seal report DIR` reads a `seal eval` output folder: pass rate and label shares per category, the
episodes each limit cut and those that end in a loop; a folder that does not exist is named as missing."""

from __future__ import annotations

import argparse
import json
import re

from seal.bfcl.calls import ToolCall
from seal.bfcl.tasks import get_task, split_ids
from seal.cli import main as seal
from seal.evaluation.command import add_eval_arguments, run_eval_command
from seal.protocol import DEFAULT_PROTOCOL, get_protocol
from seal.results.tables import SHORT_NAMES
from tests.support.scripted_endpoint import Script, serve

TASKS = [
    "multi_turn_base_131",
    "multi_turn_miss_func_9",
    "multi_turn_miss_param_81",
    "multi_turn_long_context_29",
]
"""Val tasks of four scenarios (the oracle tells them apart by their opening), two of 5 turns or more."""
STUCK = TASKS[:2]
"""The tasks a stuck model plays by repeating one call until its calls run out."""


def evaluate(script: Script, out, *extra: str) -> None:
    parser = argparse.ArgumentParser()
    add_eval_arguments(parser)
    with serve(script) as url:
        argv = ["--base-url", url, "--model", "oracle", "--out", str(out), "--tasks", ",".join(TASKS), *extra]
        assert run_eval_command(parser.parse_args(argv)) == 0


def table_rows(text: str, first_header: str) -> dict[str, list[str]]:
    """The markdown table whose header starts with `first_header`: row name -> its cells."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        name, *cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[name] = cells
    return rows


def test_the_report_of_an_eval_folder_shows_pass_rates_labels_cuts_and_loops(tmp_path, capsys):
    silent, oracle, stuck = tmp_path / "silent", tmp_path / "oracle", tmp_path / "stuck"
    evaluate(Script(TASKS, silent=True), silent)  # one reply per turn, always the same text: no call
    evaluate(Script(TASKS), oracle, "--max-llm-calls", "2")
    call = get_protocol(DEFAULT_PROTOCOL).format_calls([ToolCall("ls", {})])
    evaluate(Script(TASKS, repeats=dict.fromkeys(STUCK, call)), stuck)
    capsys.readouterr()
    assert seal(["report", str(silent), str(oracle), "--out", str(tmp_path / "stats")]) == 0
    out = capsys.readouterr().out
    silent_text, oracle_text = out.split(f"{oracle}: seal eval")
    for folder, text in ((silent, silent_text), (oracle, oracle_text)):
        summary = json.loads((folder / "summary.json").read_text())
        rates = table_rows(text, "category")
        for category, entry in summary["by_category"].items():
            assert rates[SHORT_NAMES[category]][1] == f"{entry['pass_rate']:.1%}"
        assert (tmp_path / "stats" / folder.name / "report.md").read_text() in out.replace(
            f"{oracle}: seal eval", f"\n{oracle}: seal eval"
        )
        assert (tmp_path / "stats" / folder.name / "labels.png").stat().st_size > 0
    loops = table_rows(silent_text, "category")  # the first table: pass rates; then cuts and loops
    cuts = table_rows(silent_text.split("| category | n | pass rate")[1], "category")
    long_enough = {t for t in TASKS if get_task(t).num_turns >= 5}
    assert 0 < len(long_enough) < len(TASKS) and set(TASKS) <= set(split_ids("val"))
    assert cuts["**all**"][-1].startswith("0 (")  # five quiet turns in a row repeat no call: no loop
    for task in TASKS:
        assert loops[SHORT_NAMES[task.rsplit("_", 1)[0]]][1] == "0.0%"  # silent never passes
    assert seal(["report", str(stuck), "--out", str(tmp_path / "stats")]) == 0
    stuck_cuts = table_rows(capsys.readouterr().out.split("| category | n | pass rate")[1], "category")
    assert stuck_cuts["**all**"][-1].startswith(f"{len(STUCK)} (")
    for task in TASKS:
        row = stuck_cuts[SHORT_NAMES[task.rsplit("_", 1)[0]]]
        assert row[-1].startswith("1 (" if task in STUCK else "0 ("), (task, row)
    oracle_cuts = table_rows(oracle_text.split("| category | n | pass rate")[1], "category")
    cut_by_calls = int(re.match(r"\d+", oracle_cuts["**all**"][2]).group())
    episodes = [json.loads(line) for line in (oracle / "episodes.jsonl").read_text().splitlines()]
    assert cut_by_calls == sum(e["cut"] == "calls" for e in episodes) > 0


def test_a_folder_that_does_not_exist_is_named_as_missing(tmp_path, capsys):
    assert seal(["report", str(tmp_path / "nowhere")]) == 1
    assert capsys.readouterr().err == f"seal report: no such folder: {tmp_path / 'nowhere'}\n"
