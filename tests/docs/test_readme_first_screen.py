"""The README's first screen (40 lines) holds the set-up, which runs the main job, the tests, and the four
jobs: train, evaluate, diagnose and view, read results."""

from __future__ import annotations

from tests.docs.test_runnable_blocks import BLOCKS, ROOT, commands

SCREEN = 40


def test_the_first_screen_sets_up_runs_the_main_job_and_shows_the_four_jobs():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:SCREEN]
    first = [b for b in BLOCKS if b.page == "README.md" and b.line + b.text.count("\n") + 1 < SCREEN]
    setup = commands(first[0].text)
    assert setup[0][:2] == ["bash", "install.sh"] and setup[1][:4] == [
        "python",
        "launcher.py",
        "--conf",
        "exp/SEAL.yaml",
    ]
    assert ["python", "-m", "pytest", "-q"] in setup  # CI's command
    shown = [words for block in first[1:] for words in commands(block.text)]
    assert any(words[:2] == ["python", "launcher.py"] and "--dry-run" not in words for words in shown)
    for job in ("eval", "view", "report", "diagnose"):
        assert any(words[:2] == ["seal", job] for words in shown), job
    assert len(lines) == SCREEN and any(line.startswith("## ") for line in lines)
