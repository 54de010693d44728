"""The JSON the environment's answers travel as: one codec for the service's responses, the HTTP client and
the in-process client, so every backend hands its caller the same data.

orjson renders it (the create and finish bodies are large: a 25 kB prompt, per-turn evidence). orjson
cannot render an integer outside 64 bits or a string holding a lone surrogate; the parsers keep such values
out of every call (seal/protocol/representable.py), so no answer should hold one. Should one slip through,
the answer is still rendered, never a 500 after the step was applied: each such string with U+FFFD for its
lone surrogates, each such integer as its decimal text, and the service logs a warning.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson

from seal.protocol.representable import INT_MAX, INT_MIN, unicode_text

LOG = logging.getLogger(__name__)


def dumps(value: Any) -> bytes:
    """`value` as JSON bytes; never fails on data made of JSON types, whatever their values."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError as exc:
        LOG.warning("an answer held a value JSON cannot carry exactly (%s); it was rendered as text", exc)
        return orjson.dumps(_carried(value), option=orjson.OPT_NON_STR_KEYS)


def loads(data: bytes | str) -> Any:
    return orjson.loads(data)


def round_trip(value: Any) -> Any:
    """What a caller over HTTP receives for `value`: a deep copy with exactly the service's rendering."""
    return loads(dumps(value))


def _carried(value: Any) -> Any:
    if isinstance(value, str):
        return unicode_text(value)
    if isinstance(value, int) and not isinstance(value, bool) and not INT_MIN <= value <= INT_MAX:
        return _digits(value)
    if isinstance(value, dict):
        return {_carried(key): _carried(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_carried(item) for item in value]
    return value


def _digits(value: int) -> str:
    try:
        return str(value)
    except ValueError:
        return f"<an integer of {value.bit_length()} bits>"
