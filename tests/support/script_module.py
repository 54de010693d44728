"""Import a file of scripts/ or benchmarks/ as a module: `scripts` itself is not importable by name (a
dependency of verl installs a top-level package of that name)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = (ROOT / "scripts", ROOT / "benchmarks")


def load_script(name: str) -> ModuleType:
    path = next(folder / f"{name}.py" for folder in FOLDERS if (folder / f"{name}.py").exists())
    spec = importlib.util.spec_from_file_location(f"seal_script_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the script is executed
    spec.loader.exec_module(module)
    return module
