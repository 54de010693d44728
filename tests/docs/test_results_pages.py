"""The results pages are what `compare_runs.py --results` generates from the committed result files: a
result line added without regenerating the page (or the README's row) fails here."""

from __future__ import annotations

from pathlib import Path

from tests.support.script_module import load_script

ROOT = Path(__file__).resolve().parents[2]
compare_runs = load_script("compare_runs")
PAGES = {"results/qwen_coder_1_5b": "docs/qwen_coder_1_5b.md"}
"""Each results folder and the page generated from it."""


def test_each_results_page_and_the_readme_row_are_what_the_result_files_generate(capsys):
    for results, page in PAGES.items():
        argv = [
            "--results",
            str(ROOT / results),
            "--page",
            str(ROOT / page),
            "--readme",
            str(ROOT / "README.md"),
        ]
        assert compare_runs.main([*argv, "--check"]) == 0, capsys.readouterr().err
