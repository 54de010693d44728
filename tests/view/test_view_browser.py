"""`seal view`'s page in a real browser: headless Chromium (Debian's `chromium`) driven by Playwright.

The page is opened from disk as a user opens it: filters, an episode turn by turn, hostile model text shown
as text, the compare view, and the load time of a 300-task eval and of a run's 10 validation dumps.
Needs `bash install.sh --dev` (the chromium package and playwright). Without them a developer's run skips
these tests with the reason, except under CI (CI=true), where a missing browser fails them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from seal.bfcl.tasks import get_task
from seal.cli import main
from tests.support.view_pages import (
    CHROMIUM,
    EXAMPLES,
    chromium,
    embedded,
    eval_folder,
    opened,
    run_folder,
)

MISSING = (
    "the playwright package"
    if find_spec("playwright") is None
    else None
    if Path(CHROMIUM).is_file()
    else f"{CHROMIUM} (Debian's chromium package)"
)
pytestmark = pytest.mark.skipif(
    MISSING is not None and not os.environ.get("CI"), reason=f"{MISSING} missing: bash install.sh --dev"
)
SIZE_LIMIT_BYTES = 20_000_000
HOSTILE = (
    '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
    '<tool_call>\n{"name": "<b>bold</b>", "arguments": {}}\n</tool_call>'
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    assert MISSING is None, f"{MISSING} is not installed (bash install.sh --dev installs it)"
    with chromium() as launched:
        yield launched


def view(folders: list[Path], out: Path) -> Path:
    assert main(["view", *map(str, folders), "--out", str(out)]) == 0
    return out


def visible_rows(tab: Any) -> list[list[str]]:
    return tab.eval_on_selector_all(
        "#episodes tbody tr:not([hidden])", "rows => rows.map(r => [...r.cells].map(c => c.textContent))"
    )


def choose(tab: Any, select: str, text: str) -> None:
    """Pick the option of `select` whose text starts with `text`."""
    value = tab.eval_on_selector(
        select, "(s, text) => [...s.options].find(o => o.textContent.startsWith(text)).value", text
    )
    tab.select_option(select, value)


def test_filter_open_an_episode_and_compare_two_folders(browser, tmp_path):
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    log = {"task_id": "multi_turn_base_4", "protocol": "qwen_fc", "actions": [HOSTILE] * 5}
    (hostile / "actions.jsonl").write_text(json.dumps(log) + "\n")
    page_file = view([EXAMPLES, hostile], tmp_path / "page.html")
    index, _ = embedded(page_file)
    rows = index["rows"]
    tab, errors, _ = opened(browser, page_file)
    assert len(visible_rows(tab)) == len(rows)

    choose(tab, "#f-category", "miss_param")
    shown = visible_rows(tab)
    assert {row[3] for row in shown} == {"miss_param"}
    assert len(shown) == sum(row["cat"] == "miss_param" for row in rows)
    assert tab.text_content("#count") == f"{len(shown)} of {len(rows)} episodes shown"
    choose(tab, "#f-outcome", "fail")
    assert len(visible_rows(tab)) == sum(row["cat"] == "miss_param" and not row["pass"] for row in rows)
    choose(tab, "#f-category", "all")
    choose(tab, "#f-outcome", "all")

    tab.check("#f-loop")
    looping = visible_rows(tab)
    assert {row[8] for row in looping} == {"loop"} and len(looping) == sum(row["loop"] for row in rows)
    choose(tab, "#f-source", "hostile")
    assert [row[0] for row in visible_rows(tab)] == ["hostile"]
    tab.click("#episodes tbody tr:not([hidden])")
    replies = tab.eval_on_selector_all("#detail pre.reply", "nodes => nodes.map(n => n.textContent)")
    assert replies and set(replies) == {HOSTILE}
    assert tab.evaluate("window.pwned") is None
    assert tab.eval_on_selector_all("#detail img, #detail b", "nodes => nodes.length") == 0
    assert "Tool '<b>bold</b>' is not available" in tab.text_content("#detail .calls .rejected")
    assert tab.eval_on_selector_all("script", "nodes => nodes.length") == 3
    tab.uncheck("#f-loop")
    choose(tab, "#f-source", "all")

    choose(tab, "#f-source", "examples/run val step 0")
    tab.fill("#f-search", "multi_turn_base_4")
    [shown_row] = visible_rows(tab)
    assert shown_row[:3] == ["examples/run val step 0", "0", "multi_turn_base_4"]
    tab.click("#episodes tbody tr:not([hidden])")
    expected = next(r for r in rows if r["task"] == "multi_turn_base_4" and r["step"] == 0)
    chips = tab.eval_on_selector_all("#detail .turn h3 .chip", "nodes => nodes.map(n => n.textContent)")
    assert chips == expected["labels"]
    question = get_task("multi_turn_base_4").questions[0][0]["content"]
    assert tab.text_content("#detail .turn .msg-user pre") == question
    assert "examples/run val step 0" in tab.text_content("#detail h2")

    tab.click("#detail .compare-open")
    assert tab.is_visible("#compare") and not tab.is_visible("#detail")
    choose(tab, "#c-left", "examples/run val step 0")
    choose(tab, "#c-right", "examples/run val step 4")
    tab.select_option("#c-task", "multi_turn_base_4")
    tab.click("#c-show")
    heads = tab.eval_on_selector_all("#compare .side h2", "nodes => nodes.map(n => n.textContent)")
    assert heads == [
        "multi_turn_base_4 — examples/run val step 0",
        "multi_turn_base_4 — examples/run val step 4",
    ]
    later = next(r for r in rows if r["task"] == "multi_turn_base_4" and r["step"] == 4)
    table = tab.eval_on_selector_all("#compare .turn-labels tr", "rows => rows.map(r => r.textContent)")
    assert table[1:] == [
        f"{t}{a}{b}" for t, (a, b) in enumerate(zip(expected["labels"], later["labels"], strict=True))
    ]
    assert errors == []


def test_a_300_task_eval_and_ten_validation_dumps_open_whole_within_the_size_limit(browser, tmp_path):
    """Every episode is in the table; how fast the pages open is benchmarks/bench_view.py's to measure (a
    time limit here would turn red on a loaded machine)."""
    pages = {
        "eval": view([eval_folder(tmp_path / "eval", 300)], tmp_path / "eval.html"),
        "run": view([run_folder(tmp_path / "run", 10)], tmp_path / "run.html"),
    }
    for name, count in (("eval", 300), ("run", 1000)):
        tab, errors, _ = opened(browser, pages[name])
        assert len(visible_rows(tab)) == count
        assert pages[name].stat().st_size < SIZE_LIMIT_BYTES
        assert errors == []
        tab.close()


def test_every_label_chip_says_what_it_means_and_rules_read_as_words(browser, tmp_path):
    from seal.tocf.diagnosis import RULE_WORDS
    from seal.tocf.labels import LABEL_MEANINGS

    rejected = tmp_path / "rejected"
    rejected.mkdir()
    log = {"task_id": "multi_turn_base_4", "protocol": "qwen_fc", "actions": [HOSTILE]}
    (rejected / "actions.jsonl").write_text(json.dumps(log) + "\n")
    page_file = view([EXAMPLES, rejected], tmp_path / "page.html")
    index, _ = embedded(page_file)
    tab, errors, _ = opened(browser, page_file)

    titles = tab.eval_on_selector_all(".chip", "chips => chips.map(c => [c.textContent, c.title])")
    assert len(titles) >= sum(len(row["labels"]) for row in index["rows"])
    assert all(title == LABEL_MEANINGS[label] for label, title in titles)
    legend = tab.eval_on_selector_all("#legend li", "items => items.map(i => i.textContent)")
    assert legend == [f"{label} {LABEL_MEANINGS[label]}" for label in index["labels"]]

    choose(tab, "#f-source", "examples/run val step 0")
    tab.click("#episodes tbody tr:not([hidden])")
    whys = tab.eval_on_selector_all("#detail .turn > .why", "nodes => nodes.map(n => n.textContent)")
    assert whys and not any("{" in why for why in whys)
    assert all(any(words in why for words in RULE_WORDS.values()) for why in whys)
    assert '"rule"' in tab.text_content("#detail .turn details pre")  # the raw JSON, one click away

    choose(tab, "#f-source", "rejected")
    tab.click("#episodes tbody tr:not([hidden])")
    first = tab.text_content('#detail .turn[data-turn="0"]')
    assert "✗ rejected" in first and "rejected: counted as no call" in first
    later = tab.eval_on_selector_all("#detail .turn .counted", "nodes => nodes.length")
    assert later == 1  # only the turn whose call was rejected, not the unreached ones
    assert errors == []


def test_the_table_fills_the_window_ids_sort_naturally_and_long_text_stays_in_its_card(browser, tmp_path):
    reply = '<tool_call>\n{"name": "cd", "arguments": {"folder": "' + "x" * 3000 + '"}}\n</tool_call>'
    folders = [tmp_path / "before", tmp_path / "after"]
    for folder in folders:
        folder.mkdir()
        logs = [
            {"task_id": f"multi_turn_base_{n}", "protocol": "qwen_fc", "actions": [reply]}
            for n in (21, 100, 4)
        ]
        (folder / "actions.jsonl").write_text("".join(json.dumps(log) + "\n" for log in logs))
    page_file = view(folders, tmp_path / "page.html")
    tab, errors, _ = opened(browser, page_file)
    window = tab.evaluate("window.innerHeight")
    table = tab.eval_on_selector("#table-wrap", "box => box.getBoundingClientRect().height")
    assert table > 0.6 * window
    tasks = tab.eval_on_selector_all("#c-task option", "options => options.map(o => o.value)")
    assert tasks == ["multi_turn_base_4", "multi_turn_base_21", "multi_turn_base_100"]
    tab.click("#episodes tbody tr")
    overflowing = tab.eval_on_selector_all(
        "#detail .turn",
        "turns => turns.flatMap(t => [...t.querySelectorAll('*')].filter("
        "n => n.getBoundingClientRect().right > t.getBoundingClientRect().right + 1)).length",
    )
    assert overflowing == 0
    assert errors == []
