"""The docs site builds with `mkdocs build --strict`: a broken link or anchor, or a page left out of the
navigation, fails the suite. The docs tooling comes with `bash install.sh --dev` (which CI runs); without it a
developer's run skips these with the reason, except under CI (CI=true), where it fails them."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
needs_mkdocs = pytest.mark.skipif(
    find_spec("material") is None and not os.environ.get("CI"),
    reason="the docs tooling: bash install.sh --dev",
)


@needs_mkdocs
def test_the_site_builds_strict_without_a_warning(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "WARNING" not in done.stderr
    for page in (
        "index.html",
        "guides/evaluation/index.html",
        "reference/settings/index.html",
        "design/index.html",
        "guides/slurm/index.html",
    ):
        assert (tmp_path / "site" / page).is_file(), page
    style = (tmp_path / "site" / "stylesheets" / "code.css").read_text()
    assert "pre-wrap" in style and "stylesheets/code.css" in (tmp_path / "site" / "index.html").read_text()


@needs_mkdocs
def test_a_broken_link_fails_the_strict_build(tmp_path):
    """The check can fail: the same build on a copy of the docs with one link to a missing page."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the guide](guides/missing.md).\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text("site_name: x\ndocs_dir: docs\ntheme:\n  name: material\nnav:\n  - Home: index.md\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(config),
            "--site-dir",
            str(tmp_path / "s"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
    )
    assert done.returncode != 0 and "guides/missing.md" in done.stderr
