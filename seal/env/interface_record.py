"""Ω's whole state as JSON (`Interface.to_json`), typed once: the strict record that `PUT /interface/state`
takes and `seal_state.json` keeps, and from which the service's OpenAPI schema is generated.

The record says everything a JSON Schema can: the config's every field with its type and range, guideline
names from `GUIDELINES` (each once; the record lists them in Ω's order, whatever order they came in), C_t's
shape. What no schema can say is checked where Ω is built (`seal.env.omega_state.restore`): the guidelines
fit the config (at most `max_lines`, none when it switches them off) and `system_suffix` is the text they
render.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, Field

from seal.env.interface import GUIDELINES
from seal.env.profile_record import ProfileJson
from seal.records import CLOSED, Count, Version

GuidelineName = Literal[tuple(GUIDELINES)]  # type: ignore[valid-type]
Share = Annotated[float, Field(ge=0.0, le=1.0)]


def _in_omega_order(names: list[str]) -> list[str]:
    if len(set(names)) != len(names):
        raise ValueError("each guideline may be listed once")
    return [name for name in GUIDELINES if name in names]


Guidelines = Annotated[
    list[GuidelineName],
    Field(max_length=len(GUIDELINES), json_schema_extra={"uniqueItems": True}),
    AfterValidator(_in_omega_order),
]


class InterfaceConfigRecord(BaseModel):
    """`seal.env.interface.InterfaceConfig`, every field present (as `asdict` writes it)."""

    model_config = CLOSED
    schema_required: bool
    schema_type: bool
    schema_enum: bool
    note: bool
    error_hints: bool
    guidelines: bool
    min_count: Count
    min_prevalence: Share
    max_reward: Share
    max_lines: Count
    hysteresis: Annotated[float, Field(ge=0.0, le=0.5)]


class InterfaceRecord(BaseModel):
    """An Ω's whole state as `GET /interface` answers it, its text included."""

    model_config = CLOSED
    version: Version
    config: InterfaceConfigRecord
    guidelines: Guidelines
    profile: ProfileJson | None = Field(description="the failure profile C_t this Ω was evolved from")
    system_suffix: str = Field(
        description="the text Ω adds to the system prompt: the one its config and guidelines render"
    )


class SavedInterface(InterfaceRecord):
    """Ω as a checkpoint's `seal_state.json` keeps it: one saved before Ω's text was has none (null or
    absent), and a resumed run re-derives it (seal/trainer/rl/resume_omega.py)."""

    system_suffix: str | None = None  # type: ignore[assignment]
