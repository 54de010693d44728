"""`OmegaConf.load` of a YAML stream for the tests: each text parsed once per process, deep copies handed out.

The suite composes Hydra configs some 260 times (launches, dry runs, experiment and agent-loop tests), and
each composition reads the same thirty-odd YAML files of verl and SEAL through `OmegaConf.load(stream)`,
whose pure-Python parse is a third of a composition. The config it returns depends on the text alone, so a
copy of the first parse of a text is that config. A text seen for the first time, or one that does not
parse, goes through OmegaConf itself, from the stream itself (an error names the file, as it would).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

Load = Callable[[Any], Any]


def parsed_once(load: Load) -> Load:
    """`load` (OmegaConf's) with each stream's text parsed once; a path goes straight to `load`."""
    parsed: dict[str | bytes, Any] = {}

    def load_stream(file_: Any) -> Any:
        if not (hasattr(file_, "read") and hasattr(file_, "seekable") and file_.seekable()):
            return load(file_)
        start = file_.tell()
        text = file_.read()
        if text not in parsed:
            file_.seek(start)
            parsed[text] = load(file_)
        return copy.deepcopy(parsed[text])

    return load_stream
