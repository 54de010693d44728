"""What model text may put into a tool call: values every place a call goes can hold exactly.

A call's name and arguments travel on as JSON: the service's answers (orjson), the action logs and
episode lines (UTF-8 files), verl's dumps and Parquet columns (64-bit integers). Two kinds of value a
parser can decode do not survive that trip: an integer outside the signed 64-bit range, and a string
holding a lone UTF-16 surrogate (a JSON `"\\ud800"` or a Python `'\\ud800'` escape), which is not
Unicode text and has no UTF-8 form. A call holding one is a format error the model is shown, like any
other malformed call; it never reaches execution or an answer.

The assistant text itself is read as Unicode: a lone surrogate in it (only a broken client or endpoint
sends one; tokenizers never decode to one) becomes U+FFFD, as a UTF-8 decoder reads ill-formed bytes.
"""

from __future__ import annotations

from typing import Any

INT_MIN = -(2**63)
INT_MAX = 2**63 - 1
REPLACEMENT = "\ufffd"


def is_unicode(text: str) -> bool:
    """False when `text` holds a lone surrogate (no UTF-8 form)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def unicode_text(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (a surrogate pair becomes its character)."""
    if is_unicode(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def value_problem(value: Any) -> str | None:
    """Why a decoded value cannot travel exactly (a phrase: "holds ..."), or None. Walks containers
    without recursion, so any depth is fine."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if not is_unicode(item):
                return f"holds a lone surrogate ({first_surrogate(item)}), which is not Unicode text"
        elif isinstance(item, int) and not isinstance(item, bool):
            if not INT_MIN <= item <= INT_MAX:
                return "holds an integer outside the 64-bit range"
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            pending.extend(item)
    return None


def first_surrogate(text: str) -> str:
    """The first lone surrogate of `text` as its escape, e.g. `\\ud800`."""
    surrogate = next(char for char in text if 0xD800 <= ord(char) <= 0xDFFF)
    return f"\\u{ord(surrogate):04x}"
