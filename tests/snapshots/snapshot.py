"""Snapshots of what a refactoring must not change, kept as tests: each `check` compares a value with the JSON
stored under tests/snapshots/data/. `SEAL_WRITE_SNAPSHOTS=1 python -m pytest tests/snapshots` rewrites them;
a diff of the data files then shows exactly what changed, for review."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

DATA = Path(__file__).with_name("data")
WRITE = os.environ.get("SEAL_WRITE_SNAPSHOTS") == "1"


def digest(value: Any) -> str:
    """A short, stable fingerprint of a JSON-shaped value (token lists, whole files)."""
    text = value if isinstance(value, str | bytes) else json.dumps(value, sort_keys=True)
    raw = text if isinstance(text, bytes) else text.encode()
    return hashlib.sha256(raw).hexdigest()[:16]


def check(name: str, value: Any) -> None:
    """`value` equals the stored snapshot `name` (JSON-shaped; compared as decoded JSON)."""
    path = DATA / f"{name}.json"
    shaped = json.loads(json.dumps(value))
    if WRITE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(shaped, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
        return
    assert path.is_file(), f"no snapshot {path}: write it with SEAL_WRITE_SNAPSHOTS=1"
    assert shaped == json.loads(path.read_text()), f"{name} differs from {path}"
