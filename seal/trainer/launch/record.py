"""The launch record: what exactly was run, so a result can be traced back and repeated.

`launcher_record/<experiment>/<UTC time>/` holds `config.yaml` (the resolved config), `overrides.txt`
(the command-line overrides, one per line) and `record.json` (command, git revision, package versions,
the environment service used). One folder per launch, so a resumed run keeps the record of every launch.
Credentials a URL carries (`http://user:pw@host`) are masked in all three (seal/urls.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from seal.trainer.experiment import PROJECT_ROOT, to_yaml
from seal.urls import masked_text, masked_values

RECORD_ROOT = Path("launcher_record")
PACKAGES = (
    "seal",
    "verl",
    "torch",
    "vllm",
    "sglang",
    "transformers",
    "ray",
    "transfer-queue",
    "flash-attn",
    "bfcl-eval",
    "hydra-core",
    "omegaconf",
    "numpy",
)


def launch_stamp() -> str:
    """UTC time of the launch, sortable and file-name safe."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def git_revision(root: Path = PROJECT_ROOT) -> dict[str, Any]:
    """The commit of the checkout and whether it has uncommitted changes (None outside a git checkout)."""
    try:
        commit = _git(root, "rev-parse", "HEAD")
        dirty = bool(_git(root, "status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit, "dirty": dirty}


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True, timeout=30
    ).stdout.strip()


def package_versions(names: Sequence[str] = PACKAGES) -> dict[str, str | None]:
    """Installed version of each package; None where it is not installed."""
    versions: dict[str, str | None] = {"python": sys.version.split()[0]}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def write_record(
    folder: Path,
    config: DictConfig,
    conf: Path,
    overrides: Sequence[str],
    argv: Sequence[str],
    environment: dict[str, Any],
) -> Path:
    """Write the record of one launch into `folder` (created) and return it."""
    folder.mkdir(parents=True, exist_ok=False)
    (folder / "config.yaml").write_text(masked_text(to_yaml(config)), encoding="utf-8")
    lines = "".join(f"{masked_text(line)}\n" for line in overrides)
    (folder / "overrides.txt").write_text(lines, encoding="utf-8")
    record = {
        "command": [sys.executable, *argv],
        "cwd": str(Path.cwd()),
        "conf": str(conf),
        "overrides": list(overrides),
        "experiment": config.trainer.experiment_name,
        "started_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "git": git_revision(),
        "packages": package_versions(),
        "environment_service": environment,
    }
    (folder / "record.json").write_text(json.dumps(masked_values(record), indent=2) + "\n", encoding="utf-8")
    return folder
