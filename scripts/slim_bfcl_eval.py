"""Install bfcl-eval with only the dependencies its multi-turn data, executor and checker import.

bfcl-eval 2026.3.23 declares numpy==1.26.4, torch (through sentence-transformers), faiss and a dozen
vendor SDKs, none of which the multi-turn environment imports, and its numpy pin conflicts with
verl. Installing it with --no-deps works but leaves `pip check` reporting 19 unmet requirements.
This script rewrites the wheel's Requires-Dist to what the package really needs here, so the
environment is consistent and `pip check` means something. Idempotent.

    python scripts/slim_bfcl_eval.py        # what install.sh runs; takes no options
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

VERSION = "2026.3.23"
NEEDED = [
    "requests",
    "tqdm",
    "pandas",
    "pydantic>=2.8.2",
    "filelock",
    "tree_sitter==0.21.3",
    "tree-sitter-java==0.21.0",
    "tree-sitter-javascript==0.21.4",
    "openai>=1.86.0",
    "mpmath==1.3.0",
    "tenacity>=8.5.0",
    "overrides",
]
MARK = "X-Seal-Slimmed: yes"


def already_slim() -> bool:
    try:
        dist = metadata.distribution("bfcl-eval")
    except metadata.PackageNotFoundError:
        return False
    return dist.version == VERSION and MARK in (dist.read_text("METADATA") or "")


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def slim_metadata(text: str, needed: list[str] = NEEDED) -> str:
    """The METADATA with its Requires-Dist lines replaced by `needed`, and the slimmed mark."""
    kept = [line for line in text.splitlines() if not line.startswith("Requires-Dist:")]
    header_end = next((i for i, line in enumerate(kept) if line == ""), len(kept))
    extra = [f"Requires-Dist: {req}" for req in needed] + [MARK]
    return "\n".join(kept[:header_end] + extra + kept[header_end:]) + "\n"


def rewrite_wheel(source: Path, target: Path, needed: list[str] = NEEDED) -> None:
    with zipfile.ZipFile(source) as zin:
        entries = {info.filename: zin.read(info) for info in zin.infolist()}
    meta_name = next(name for name in entries if name.endswith(".dist-info/METADATA"))
    record_name = meta_name.replace("METADATA", "RECORD")
    entries[meta_name] = slim_metadata(entries[meta_name].decode(), needed).encode()
    rows = [f"{name},{_digest(data)},{len(data)}" for name, data in entries.items() if name != record_name]
    entries[record_name] = ("\n".join([*rows, f"{record_name},,"]) + "\n").encode()
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zout:
        for name, data in entries.items():
            zout.writestr(name, data)


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args(argv)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    if already_slim():
        print(f"bfcl-eval {VERSION} already installed with its multi-turn dependencies only")
    else:
        _install_slim(pip)
    subprocess.run([*pip, "install", *NEEDED], check=True)


def _install_slim(pip: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([*pip, "download", "--no-deps", "-d", tmp, f"bfcl-eval=={VERSION}"], check=True)
        wheel = next(Path(tmp).glob("bfcl_eval-*.whl"))
        slim = Path(tmp) / "slim" / wheel.name
        slim.parent.mkdir()
        rewrite_wheel(wheel, slim)
        subprocess.run([*pip, "install", "--no-deps", "--force-reinstall", str(slim)], check=True)
    print(f"bfcl-eval {VERSION} installed; requirements: {', '.join(NEEDED)}")


if __name__ == "__main__":
    main()
