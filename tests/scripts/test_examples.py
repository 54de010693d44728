"""examples/ is what scripts/make_examples.py builds, and the commands the docs give for it work."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from seal.cli import main as seal
from tests.support.script_module import load_script

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def test_the_examples_are_what_the_project_s_code_builds_and_stay_small():
    assert load_script("make_examples").main(["--check"]) == 0
    assert sum(path.stat().st_size for path in EXAMPLES.rglob("*") if path.is_file()) < 200_000


def test_seal_diagnose_on_the_example_logs_passes_the_ground_truths_only(tmp_path):
    assert seal(["diagnose", "--input", str(EXAMPLES / "actions.jsonl"), "--out", str(tmp_path)]) == 0
    logs = [json.loads(line) for line in (EXAMPLES / "actions.jsonl").read_text().splitlines()]
    episodes = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert [e["reward"] for e in episodes] == [float(log["example"] == "ground truth") for log in logs]


def test_the_stats_script_reads_the_example_run(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "stats_validation_bfcl.py"),
            "--run",
            "examples/run",
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    selection = json.loads((EXAMPLES / "run" / "test_report.json").read_text())["selection"]
    tested = [line.split()[:3] for line in done.stdout.splitlines() if line.split()[:1] == ["test"]]
    assert tested == [["test", str(selection[f"{which}_step"]), which] for which in ("best", "last")]
    assert {"val_curves.png", "label_shares.png", "pass_rates.csv"} <= {p.name for p in tmp_path.iterdir()}
