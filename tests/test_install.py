"""The installed environment is consistent, and bfcl-eval declares only what its multi-turn parts import."""

import subprocess
import sys
from importlib import metadata

from tests.script_module import load_script


def load_slim():
    return load_script("slim_bfcl_eval")


def test_pip_check_is_clean_and_the_stack_imports():
    check = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout
    imports = subprocess.run(
        [sys.executable, "-c", "import seal, verl, bfcl_eval"], capture_output=True, text=True
    )
    assert imports.returncode == 0, imports.stderr


def test_installed_bfcl_eval_declares_only_the_multi_turn_requirements():
    slim = load_slim()
    assert slim.already_slim()
    declared = metadata.requires("bfcl-eval")
    assert declared == slim.NEEDED
    assert not any(name.startswith(("numpy", "torch", "sentence-transformers", "faiss")) for name in declared)


def test_slim_metadata_keeps_the_headers_and_replaces_the_requirements():
    slim = load_slim()
    original = (
        "Metadata-Version: 2.4\nName: bfcl-eval\nRequires-Dist: numpy==1.26.4\nRequires-Dist: torch\n\nREADME"
    )
    rewritten = slim.slim_metadata(original)
    head, body = rewritten.split("\n\n", 1)
    assert head.splitlines()[:2] == ["Metadata-Version: 2.4", "Name: bfcl-eval"]
    assert [
        line.split(": ", 1)[1] for line in head.splitlines() if line.startswith("Requires-Dist")
    ] == slim.NEEDED
    assert slim.MARK in head and body == "README\n"
