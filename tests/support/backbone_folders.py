"""The paper backbones' folders for the tests, built once per test run by `scripts/make_smoke_model.py`
itself (`--weights none`): the first pytest-xdist worker that needs them builds them under a lock, the other
waits and reuses them. Tests that run verl's agent loop use a copy with the real tokenizer and a tiny
`config.json`."""

from __future__ import annotations

import fcntl
import json
import shutil
from pathlib import Path

from seal.backbones.catalog import BACKBONES
from seal.backbones.folder import write_config
from tests.support.script_module import load_script

TINY_SHAPE = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
}
"""The released vocabulary at hidden 64: a 151,936-row embedding is ten million parameters."""
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def released_folders(root: Path) -> dict[str, Path]:
    """`make_smoke_model.py NAME --weights none root/NAME` for every backbone, once per `root`."""
    make_smoke_model = load_script("make_smoke_model")
    root.mkdir(parents=True, exist_ok=True)
    with (root / "backbones.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for name in BACKBONES:
            assert make_smoke_model.main([name, str(root / name), "--weights", "none"]) == 0
    return {name: root / name for name in BACKBONES}


def tiny_folder(released: Path, out: Path) -> Path:
    """The released folder's tokenizer with a tiny shape of its config (for verl's agent loop: no weights)."""
    out.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        shutil.copy(released / name, out / name)
    write_config(out, {**json.loads((released / "config.json").read_text()), **TINY_SHAPE})
    return out
