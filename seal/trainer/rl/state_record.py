"""`seal_state.json` (C_t, ρ, Ω beside a checkpoint) typed once: the strict record a resumed run validates
whole before it restores anything.

Read with pydantic's JSON parser, so a value of the wrong type anywhere (Ω's config included), an unknown
key, bad JSON or JSON nested past the parser's depth limit is one line naming the file and the field, at
load, never a bare TypeError or RecursionError later in the run.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, ValidationError

from seal.env.interface_record import SavedInterface
from seal.env.profile_record import ProfileJson
from seal.records import CLOSED, Count, Label, describe
from seal.tocf.apatch import STATE_VERSION as APATCH_VERSION

STATE_VERSION = 1
Weight = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]


class APatchRecord(BaseModel):
    """ρ as `seal.tocf.apatch.APatchState.to_json` writes it."""

    model_config = CLOSED
    version: Literal[APATCH_VERSION]  # type: ignore[valid-type]
    rho: dict[Label, Weight]
    updates: Count = 0


class SealStateRecord(BaseModel):
    """`ClosedLoop.to_json`: everything a resumed run needs to continue exactly where its run stopped."""

    model_config = CLOSED
    version: Literal[STATE_VERSION]  # type: ignore[valid-type]
    profile: ProfileJson
    apatch: APatchRecord
    interface: SavedInterface | None
    window_epoch: Count


def read_state(path: Path) -> dict[str, Any]:
    """The record in the file at `path`; ValueError, one line naming each bad field."""
    return _checked(SealStateRecord.model_validate_json, path.read_bytes())


def checked_state(data: Any) -> dict[str, Any]:
    """`data` (parsed JSON) as the record holds it; ValueError, one line naming each bad field."""
    return _checked(SealStateRecord.model_validate, data)


def _checked(validate: Callable[[Any], SealStateRecord], data: Any) -> dict[str, Any]:
    try:
        return validate(data).model_dump(exclude_unset=True)
    except ValidationError as exc:
        raise ValueError(describe(exc.errors(include_url=False, include_input=False))) from None
