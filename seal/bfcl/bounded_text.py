"""A value rendered as text, at most so many characters, cut while it is walked.

`str()` of a checker's state differences renders the whole simulated state first (bfcl-eval's `Directory`
repr walks its tree, a shared subtree once per path), only for the text to be cut to a few hundred
characters afterwards. `bounded_text` emits pieces in order and stops once the limit is reached, so its
cost is the limit's, whatever the value holds (cycles included).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bfcl_eval.eval_checker.multi_turn_eval.func_source_code.gorilla_file_system import Directory, File

SCALARS = (str, int, float, bool, type(None), bytes)


def _pieces(value: Any, limit: int) -> Iterator[str]:
    """The text of `value` piece by piece, as `str()` writes it (bfcl-eval's files and folders as their own
    repr does): containers and objects (their attributes) walked lazily, and no piece longer than about
    `limit` characters."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Text):
            yield item.text
        elif isinstance(item, SCALARS):
            shown = item[: limit + 1] if isinstance(item, str | bytes) else item
            yield repr(shown) if isinstance(item, str | bytes) and item is not value else str(shown)
        elif isinstance(item, dict):
            stack.append(_Text("}"))
            stack.extend(
                _separated(
                    [
                        (_Text(f"{key!r}: "), v) if isinstance(key, str) else (key, _Text(": "), v)
                        for key, v in reversed(list(item.items()))
                    ]
                )
            )
            stack.append(_Text("{"))
        elif isinstance(item, list | tuple | set | frozenset):
            opening, closing = _brackets(item)
            stack.append(_Text(closing))
            stack.extend(_separated([(member,) for member in reversed(list(item))]))
            stack.append(_Text(opening))
        elif isinstance(item, File):  # bfcl-eval's own repr of its file system, walked
            stack.extend([_Text(">>"), _Text(str(item.content)[: limit + 1])])
            stack.append(_Text(f"<<File: {str(item.name)[: limit + 1]}, Content: "))
        elif isinstance(item, Directory):
            parent = item.parent.name if item.parent else None
            stack.extend([_Text(">"), item.contents])
            stack.append(_Text(f"<Directory: {str(item.name)[: limit + 1]}, Parent: {parent}, Contents: "))
        elif hasattr(item, "__dict__"):
            attributes = {k: v for k, v in vars(item).items() if k != "parent"}
            stack.append(_Text(">"))
            stack.append(attributes)
            stack.append(_Text(f"<{type(item).__name__} "))
        else:
            yield f"<{type(item).__name__}>"


def _brackets(item: list | tuple | set | frozenset) -> tuple[str, str]:
    """What `str()` puts around the members: `(1,)` for a one-member tuple, `set()` for an empty set."""
    if isinstance(item, list):
        return "[", "]"
    if isinstance(item, tuple):
        return "(", ",)" if len(item) == 1 else ")"
    name = type(item).__name__
    if not item:
        return f"{name}(", ")"
    return ("{", "}") if isinstance(item, set) else (f"{name}({{", "})")


class _Text:
    """Literal text within the walk (brackets, separators, keys)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _separated(groups: list[tuple[Any, ...]]) -> list[Any]:
    """Stack entries for `groups` (given last first) joined by ", "."""
    entries: list[Any] = []
    for position, group in enumerate(groups):
        if position:
            entries.append(_Text(", "))
        entries.extend(reversed(group))
    return entries


def bounded_text(value: Any, limit: int) -> str:
    """`value` as text, at most `limit` characters and then "..." when there was more."""
    kept: list[str] = []
    length = 0
    for piece in _pieces(value, limit):
        if length + len(piece) > limit:
            kept.append(piece[: limit - length])
            return "".join(kept) + "..."
        kept.append(piece)
        length += len(piece)
    return "".join(kept)
