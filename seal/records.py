"""Strict JSON records, typed once with pydantic: parsed from the raw bytes and refused in one line.

A record that crosses a boundary (a request body, a checkpoint's `seal_state.json`) is a pydantic model with
`CLOSED`: no unknown field, no coercion (a string is never a number), so every malformed input, bad JSON,
nesting past the parser's depth limit included, is one `ValidationError` that `describe` says in one line.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

CLOSED = ConfigDict(extra="forbid", strict=True)
MAX_EXACT = 2**53
"""Counts and sums beyond this are not exact in JSON (IEEE doubles); no real record comes near it."""
SHOWN_PROBLEMS = 6
"""A refusal lists this many validation problems; a record with more gets their count."""
M = TypeVar("M", bound=BaseModel)


def _whole(value: Any) -> Any:
    """JSON Schema counts 62.0 as an integer, strict pydantic does not: accept it as 62."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


MAX_VERSION = MAX_EXACT - 1
"""The largest Ω version: one more than it is still exact, so a version can always be told from the next."""
Count = Annotated[int, Field(ge=0, le=MAX_EXACT), BeforeValidator(_whole)]
"""A non-negative integer. (The bounds come before the validator, or the JSON Schema loses them.)"""
Version = Annotated[int, Field(ge=0, le=MAX_VERSION), BeforeValidator(_whole)]
"""An Ω version."""
Sum = Annotated[float, Field(ge=-MAX_EXACT, le=MAX_EXACT, allow_inf_nan=False)]
Label = Annotated[str, Field(min_length=1)]


def describe(errors: list[Any]) -> str:
    """Every problem, `where: what`, separated by semicolons; the first few when there are many."""
    shown = [_problem(error) for error in errors[:SHOWN_PROBLEMS]]
    more = f"; and {len(errors) - SHOWN_PROBLEMS} more problem(s)" if len(errors) > SHOWN_PROBLEMS else ""
    return "; ".join(shown) + more


def _problem(error: Any) -> str:
    if error.get("type") == "json_invalid":
        return f"malformed JSON: {error['msg']}"
    where = ".".join(str(part) for part in error.get("loc", ())) or "body"
    return f"{where}: {error['msg']}"
