"""C_t as JSON (`FailureProfile.to_json`, docs/design.md §4.2), typed once: the strict record that the
service's `PUT /interface/profile` body, Ω's state and `seal_state.json` share. `FailureProfile.from_json`
reads what it validated."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from seal.records import CLOSED, Count, Label, Sum


class ProfileScope(BaseModel):
    """One scope S of C_t; missing keys mean zero."""

    model_config = CLOSED
    trajectories: Count = 0
    labels: dict[Label, Count] = Field(default_factory=dict)
    reward_sum: dict[Label, Sum] = Field(default_factory=dict)
    by_category: dict[Label, dict[Label, Count]] = Field(default_factory=dict)


class ProfileJson(BaseModel):
    """C_t as `seal.tocf.profile.FailureProfile.to_json` writes it."""

    model_config = CLOSED
    version: Literal[1]
    window: ProfileScope
    total: ProfileScope
