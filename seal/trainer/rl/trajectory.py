"""What every rollout trajectory carries besides its tokens: verl's `extra_fields`, typed once.

`SealAgentLoop` writes `TrajectoryFields.extra_fields()` on every sample (same keys always); the
trainer reads them back from TransferQueue with `TrajectoryFields.from_extra_fields`. The values of
`reward_extra_info` go into verl's validation dump and metrics, which take scalars and strings only,
so lists and the action log travel there as JSON strings.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any

REWARD_EXTRA_INFO = "reward_extra_info"


@dataclass(frozen=True)
class TrajectoryFields:
    """One trajectory's episode facts; `env_error` non-empty means: reward 0 by failure, not by the model."""

    task_id: str
    category: str
    mode: str
    """`train` (interface Ω) or `eval` (the raw BFCL interface)."""
    labels: list[str]
    """One diagnosis label per ground-truth turn; empty when the environment failed before finish."""
    taxonomy: str
    interface_version: int
    """Version of Ω the episode ran under; -1 when the episode could not be created."""
    reward: float
    """The verifier's reward (1.0 iff BFCL's checker passes), 0.0 on a truncated or failed episode."""
    llm_calls: int
    truncated: bool
    """A limit ended the trajectory before the episode was done (`cut` says which), or the episode's own
    per-turn step limit did."""
    env_error: str
    """Why the environment failed this trajectory ('' when it did not); such trajectories are left out
    of A-Patch and of the failure profile."""
    env_seconds: float
    """Time spent waiting for the environment (create, steps, finish)."""
    gen_seconds: float
    """Time spent waiting for the LLM server."""
    actions: list[str]
    """The assistant messages as sent to the environment: with task_id and protocol, the action log."""
    protocol: str
    cut: str = "none"
    """What ended the trajectory before the episode was done: `none` (done, or an env error), `calls`
    (`seal.rollout.max_llm_calls`), `context` (the next prompt would pass `max_model_len −
    max_response_length`, or the opening prompt is over `max_prompt_length`), `generation` (one reply used
    its whole `max_tokens` without ending its turn; never sent to the environment)."""
    response_tokens: int = 0
    """Tokens of the whole played response (everything after the opening prompt), cut or not."""
    trained_tokens: int = 0
    """Sampled tokens the update trains on: mask-1 tokens within the first `max_response_length`."""
    trained_cut: bool = False
    """The response ran past `max_response_length`: the turns past the cut were played and scored but
    carry no gradient."""
    split: str = ""
    """The row's split (extra_info.split: train, val or test; '' when absent): verl concatenates
    validation files into one set, so the split is what tells val from test in the dump."""

    def action_log(self) -> dict[str, Any]:
        """DESIGN §3.4's action log, which replays the episode exactly."""
        return {"task_id": self.task_id, "protocol": self.protocol, "actions": list(self.actions)}

    def reward_extra_info(self) -> dict[str, Any]:
        """Scalars and JSON strings only: what verl's validation dump and metrics can take. No `reward`
        key: verl lists the scores under that name itself (the dump's `score` column is the reward)."""
        return {
            "task_id": self.task_id,
            "category": self.category,
            "split": self.split,
            "mode": self.mode,
            "labels": json.dumps(self.labels),
            "taxonomy": self.taxonomy,
            "interface_version": self.interface_version,
            "llm_calls": self.llm_calls,
            "truncated": self.truncated,
            "cut": self.cut,
            "trained_tokens": self.trained_tokens,
            "trained_cut": self.trained_cut,
            "env_error": self.env_error,
            "action_log": json.dumps(self.action_log()),
        }

    def extra_fields(self) -> dict[str, Any]:
        return {**asdict(self), REWARD_EXTRA_INFO: self.reward_extra_info()}

    @classmethod
    def from_extra_fields(cls, extra: dict[str, Any]) -> TrajectoryFields:
        """Back from a sample's `extra_fields` (as TransferQueue returns them)."""
        return cls(**{f.name: extra[f.name] for f in fields(cls) if f.name in extra or f.default is MISSING})


TRAJECTORY_KEYS = tuple(f.name for f in fields(TrajectoryFields))
"""The `extra_fields` keys every SEAL sample has (plus `reward_extra_info`)."""
