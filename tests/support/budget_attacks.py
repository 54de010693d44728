"""Messages made only of ordinary, accepted BFCL calls that cost the environment far more than their text
(issue 43): the k-round `cp`/`mv` doubling of the file system and thousands of `ls`/`cat` in one message."""

from __future__ import annotations

import json
from typing import Any

ATTACK_TASK = "multi_turn_base_1"
"""A task whose only tool class is the file system."""

Call = tuple[str, dict[str, Any]]


def message(calls: list[Call]) -> str:
    """One qwen_fc assistant message making `calls` in order, written compactly (so that ~2,000 short calls
    fit in one action)."""
    return "".join(
        f"<tool_call>{json.dumps({'name': name, 'arguments': arguments}, separators=(',', ':'))}</tool_call>"
        for name, arguments in calls
    )


def doubling_calls(rounds: int, finds: int = 2) -> list[Call]:
    """`mkdir a0`, then per round `cp a_i b_i; mkdir a_{i+1}; mv a_i a_{i+1}; mv b_i a_{i+1}`: bfcl-eval's
    shallow `cp` shares the copied contents, so the tree holds ~2^rounds paths; `finds` walks of it follow."""
    calls: list[Call] = [("mkdir", {"dir_name": "a0"})]
    for i in range(rounds):
        calls += [
            ("cp", {"source": f"a{i}", "destination": f"b{i}"}),
            ("mkdir", {"dir_name": f"a{i + 1}"}),
            ("mv", {"source": f"a{i}", "destination": f"a{i + 1}"}),
            ("mv", {"source": f"b{i}", "destination": f"a{i + 1}"}),
        ]
    return calls + [("find", {"path": "."})] * finds


def long_named_files(count: int, name_chars: int = 1_000) -> list[Call]:
    """`count` files with names of `name_chars` characters (what makes each `ls` long)."""
    return [("touch", {"file_name": f"{i:04d}" + "x" * (name_chars - 4)}) for i in range(count)]


def big_file(chars: int = 19_000) -> list[Call]:
    """A file `f` of `chars` characters (what makes each `cat f` long; an argument may hold 20,000)."""
    return [("touch", {"file_name": "f"}), ("echo", {"content": "y" * chars, "file_name": "f"})]


def repeated(name: str, arguments: dict[str, Any], count: int) -> list[Call]:
    return [(name, arguments)] * count
