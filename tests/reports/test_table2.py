"""Table 2 from `seal eval` OOD folders: the paper's columns and averages; 'not run' for a missing suite."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from seal.reports import table2

ROOT = Path(__file__).resolve().parents[2]
STATS = str(ROOT / "scripts" / "stats_validation_bfcl.py")


def suite_folder(root: Path, suite: str, rates: dict[str, float], **meta: object) -> Path:
    folder = root / suite
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"suite": suite, "options": {}, **meta}))
    categories = {name: {"n": 10, "rate": rate} for name, rate in rates.items()}
    average = sum(rates.values()) / len(rates)
    (folder / "summary.json").write_text(
        json.dumps({"suite": suite, "categories": categories, "average": average})
    )
    return folder


def model(root: Path, web: bool = True) -> Path:
    suite_folder(root, "bfcl_v4_memory", {"memory_kv": 10.0, "memory_vector": 20.0, "memory_rec_sum": 30.0})
    suite_folder(root, "tau2", {"airline": 20.0, "retail": 30.0, "telecom": 10.0})
    if web:
        suite_folder(root, "bfcl_v4_web_search", {"web_search_base": 6.0, "web_search_no_snippet": 2.0})
    return root


def test_a_model_row_has_the_papers_columns_and_averages(tmp_path):
    row = table2.model_row("seal", model(tmp_path / "seal"))
    assert dict(zip(table2.COLUMNS, row.values, strict=True)) == {
        "V4 Avg": pytest.approx((4.0 + 20.0) / 2),
        "Web Search": 4.0,
        "Memory": 20.0,
        "τ² Avg": 20.0,
        "Retail": 30.0,
        "Airline": 20.0,
        "Telecom": 10.0,
    }


def test_without_web_search_the_v4_columns_say_not_run_and_the_paper_rows_follow(tmp_path):
    rows = table2.table2_rows({"base": model(tmp_path / "base", web=False), "seal": model(tmp_path / "seal")})
    lines = table2.markdown(rows).splitlines()
    assert lines[0] == "| Model | V4 Avg | Web Search | Memory | τ² Avg | Retail | Airline | Telecom |"
    assert lines[2] == "| base | not run | not run | 20.00 | 20.00 | 30.00 | 20.00 | 10.00 |"
    assert lines[3] == "| seal | 12.00 | 4.00 | 20.00 | 20.00 | 30.00 | 20.00 | 10.00 |"
    assert lines[4:] == [
        "| paper: Qwen2.5-7B | 9.17 | 6.50 | 11.83 | 16.11 | 16.67 | 20.00 | 11.67 |",
        "| paper: + Vanilla RL | 10.26 | 7.50 | 13.02 | 17.19 | 19.30 | 20.00 | 12.28 |",
        "| paper: + SEAL | 12.71 | 9.50 | 15.92 | 20.79 | 26.32 | 22.00 | 14.04 |",
    ]


def test_the_paper_rows_match_docs_paper_results():
    text = (ROOT / "docs" / "paper_results.md").read_text()
    for name, values in table2.PAPER.items():
        label = name.removeprefix("paper: ")
        assert f"| {label} | " + " | ".join(f"{v:.2f}" for v in values) + " |" in text


def test_partial_runs_are_named(tmp_path):
    root = tmp_path / "m"
    suite_folder(root, "tau2", {"retail": 50.0}, limit=2, options={"domains": ["retail"]})
    report = table2.report({"m": root})
    assert "tau2 partial (--limit 2 --domains retail)" in report
    assert "| m | not run | not run | not run | 50.00 | 50.00 | — | — |" in report


@pytest.mark.parametrize(
    ("pairs", "message"),
    [(["base"], "expected NAME=DIR"), (["a=x", "a=y"], "given twice"), (["a="], "expected NAME=DIR")],
)
def test_bad_model_arguments_are_one_line_errors(pairs, message):
    with pytest.raises(table2.Table2Error, match=message):
        table2.parse_models(pairs)


def test_a_folder_without_runs_or_with_two_of_a_suite_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(table2.Table2Error, match="holds no seal eval run"):
        table2.model_row("x", tmp_path / "empty")
    suite_folder(tmp_path / "two" / "a", "tau2", {"retail": 1.0})
    suite_folder(tmp_path / "two" / "b", "tau2", {"retail": 2.0})
    (tmp_path / "two" / "a" / "tau2").rename(tmp_path / "two" / "tau2_a")
    (tmp_path / "two" / "b" / "tau2").rename(tmp_path / "two" / "tau2_b")
    with pytest.raises(table2.Table2Error, match="two tau2 runs"):
        table2.model_row("x", tmp_path / "two")


def test_the_stats_script_prints_table_2_and_writes_it(tmp_path):
    model(tmp_path / "seal")
    out = tmp_path / "report"
    done = subprocess.run(
        [sys.executable, STATS, "--ood", f"seal={tmp_path / 'seal'}", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert "| seal | 12.00 | 4.00 | 20.00 |" in done.stdout
    assert json.loads((out / "table2.json").read_text())["rows"][0]["Memory"] == 20.0
    missing = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "stats_validation_bfcl.py"),
            "--ood",
            f"x={tmp_path / 'nope'}",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert missing.returncode == 1 and missing.stderr.strip().endswith("is not a folder")


def test_seal_report_ood_is_the_same_table_as_the_script(tmp_path, capsys):
    from seal.cli import main

    model(tmp_path / "seal")
    done = subprocess.run(
        [sys.executable, STATS, "--ood", f"seal={tmp_path / 'seal'}"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert main(["report", "--ood", f"seal={tmp_path / 'seal'}"]) == 0
    assert capsys.readouterr().out == done.stdout and "| seal | 12.00 | 4.00 | 20.00 |" in done.stdout
    assert main(["report", "--ood", f"x={tmp_path / 'nope'}"]) == 1
    assert capsys.readouterr().err.startswith("seal report: ")
