"""BFCL V3 multi-turn tasks, safe execution and the official verifier.

Importing ``bfcl_eval.utils`` creates ``result/``, ``score/`` and ``.file_locks/`` under
``BFCL_PROJECT_ROOT`` (site-packages by default), so it is pointed at a writable cache
folder before anything from bfcl-eval is imported.
"""

import os
from pathlib import Path

_cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "seal" / "bfcl"
os.environ.setdefault("BFCL_PROJECT_ROOT", str(_cache))
Path(os.environ["BFCL_PROJECT_ROOT"]).mkdir(parents=True, exist_ok=True)
