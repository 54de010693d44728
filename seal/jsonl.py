"""JSON Lines files a person hands over (action logs, validation dumps, step logs), read so that every
problem is one line that names the file and the line: a missing file, a folder, bytes that are not
UTF-8, a line that is not JSON, nested past the recursion limit, or a number past Python's 4,300-digit
limit. Blank lines are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class JsonLinesError(ValueError):
    """A file that cannot be read as JSON Lines; the message is one line naming the file (and line)."""


def json_lines(path: Path) -> Iterator[tuple[str, Any]]:
    """`("FILE:LINE", value)` for every non-blank line, read one line at a time."""
    path = Path(path)
    if path.is_dir():
        raise JsonLinesError(f"{path} is a folder, not a JSON Lines file")
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise JsonLinesError(f"{path}: no such file") from None
    except OSError as exc:
        raise JsonLinesError(f"{path}: cannot read it ({exc.strerror})") from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            where = f"{path}:{number}"
            if raw.strip():
                yield where, parse_line(raw, where)


def parse_line(raw: bytes | str, where: str) -> Any:
    """One line's JSON value; `JsonLinesError` starting with `where` when it has none."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as exc:
        byte = raw[exc.start] if isinstance(raw, bytes) else 0
        raise JsonLinesError(f"{where}: not UTF-8 text (byte 0x{byte:02x} at offset {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise JsonLinesError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise JsonLinesError(f"{where}: not readable JSON (nested too deeply)") from None
    except ValueError as exc:
        raise JsonLinesError(f"{where}: not readable JSON ({str(exc).split(';')[0]})") from None


def json_objects(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """`json_lines`, each value required to be a JSON object."""
    for where, value in json_lines(path):
        if not isinstance(value, dict):
            raise JsonLinesError(f"{where}: expected a JSON object, got a JSON {_json_kind(value)}")
        yield where, value


def _json_kind(value: Any) -> str:
    kinds = {
        list: "array",
        str: "string",
        bool: "boolean",
        int: "number",
        float: "number",
        type(None): "null",
    }
    return kinds.get(type(value), type(value).__name__)
