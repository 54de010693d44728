"""The failure profile C_t (docs/design.md §4.2): label counts and rewards over a window and a running total.

Counts are per-turn label occurrences; each occurrence also adds its trajectory's reward to the label's
reward_sum, so reward_sum / count is the mean trajectory reward of that label's occurrences.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from seal.tocf.labels import EXCLUDED

VERSION = 1
SCOPES = ("window", "total")
METRICS = {
    "seal/profile/{scope}/trajectories": "trajectories C_t has counted: in the window (since its last reset) "
    "or in total",
    "seal/profile/{scope}/count/{label}": "occurrences of the label in C_t's scope",
    "seal/profile/{scope}/prevalence/{label}": "the label's share of the scope's weighable labels",
    "seal/profile/{scope}/mean_reward/{label}": "mean reward of the trajectories behind the label's "
    "occurrences",
}
"""Every metric `FailureProfile.metrics` logs (the trainer's prefix `seal/profile`), with its meaning: the
source of docs/reference/metrics.md."""
_STATS_KEYS = frozenset({"trajectories", "labels", "reward_sum", "by_category"})
MAX_EXACT = 2**53
"""Counts and sums beyond this are not exact in JSON (IEEE doubles); no real profile comes near it."""


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_EXACT:
        raise ValueError(f"{where} must be a non-negative integer (at most 2^53), got {repr(value)[:40]}")
    return value


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or abs(value) > MAX_EXACT:
        raise ValueError(f"{where} must be a finite number (at most 2^53 in size), got {repr(value)[:40]}")
    if not math.isfinite(value):
        raise ValueError(f"{where} must be a finite number, got {value!r}")
    return float(value)


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and k for k in value):
        raise ValueError(f"{where} must be an object with non-empty string keys")
    return value


@dataclass
class ProfileStats:
    """One scope (window or total) of the profile; the S object of the JSON."""

    trajectories: int = 0
    labels: dict[str, int] = field(default_factory=dict)
    reward_sum: dict[str, float] = field(default_factory=dict)
    by_category: dict[str, dict[str, int]] = field(default_factory=dict)

    def observe(self, labels: Sequence[str], reward: float, category: str) -> None:
        self.trajectories += 1
        per_category = self.by_category.setdefault(category, {})
        for label in labels:
            self.labels[label] = self.labels.get(label, 0) + 1
            self.reward_sum[label] = self.reward_sum.get(label, 0.0) + reward
            per_category[label] = per_category.get(label, 0) + 1

    def add(self, other: ProfileStats) -> None:
        self.trajectories += other.trajectories
        for label, n in other.labels.items():
            self.labels[label] = self.labels.get(label, 0) + n
        for label, r in other.reward_sum.items():
            self.reward_sum[label] = self.reward_sum.get(label, 0.0) + r
        for category, counts in other.by_category.items():
            mine = self.by_category.setdefault(category, {})
            for label, n in counts.items():
                mine[label] = mine.get(label, 0) + n

    def copy(self) -> ProfileStats:
        fresh = ProfileStats()
        fresh.add(self)
        return fresh

    def weighable_total(self) -> int:
        """Occurrences of labels that are not excluded: the denominator of every prevalence."""
        return sum(n for label, n in self.labels.items() if label not in EXCLUDED)

    def to_json(self) -> dict[str, Any]:
        return {
            "trajectories": self.trajectories,
            "labels": dict(sorted(self.labels.items())),
            "reward_sum": dict(sorted(self.reward_sum.items())),
            "by_category": {c: dict(sorted(v.items())) for c, v in sorted(self.by_category.items())},
        }

    @classmethod
    def from_json(cls, data: Any, where: str) -> ProfileStats:
        data = _object(data, where)
        unknown = sorted(set(data) - _STATS_KEYS)
        if unknown:
            raise ValueError(f"{where} has unknown key(s) {unknown}; expected {sorted(_STATS_KEYS)}")
        labels = _object(data.get("labels", {}), f"{where}.labels")
        reward_sum = _object(data.get("reward_sum", {}), f"{where}.reward_sum")
        by_category = _object(data.get("by_category", {}), f"{where}.by_category")
        return cls(
            trajectories=_count(data.get("trajectories", 0), f"{where}.trajectories"),
            labels={k: _count(v, f"{where}.labels.{k}") for k, v in labels.items()},
            reward_sum={k: _number(v, f"{where}.reward_sum.{k}") for k, v in reward_sum.items()},
            by_category={
                c: {
                    k: _count(v, f"{where}.by_category.{c}.{k}")
                    for k, v in _object(counts, f"{where}.by_category.{c}").items()
                }
                for c, counts in by_category.items()
            },
        )


class FailureProfile:
    """C_t: a window (since the last reset) and a running total of label statistics."""

    def __init__(self, window: ProfileStats | None = None, total: ProfileStats | None = None) -> None:
        self.window = window if window is not None else ProfileStats()
        self.total = total if total is not None else ProfileStats()

    def _scope(self, scope: str) -> ProfileStats:
        if scope == "window":
            return self.window
        if scope == "total":
            return self.total
        raise ValueError(f"unknown scope {scope!r}; expected one of {list(SCOPES)}")

    def observe(self, labels: Sequence[str], reward: float, category: str) -> None:
        """Add one trajectory: its per-turn labels, its reward and its task category."""
        if isinstance(labels, str):
            raise ValueError("labels must be a sequence of label names, not a string")
        reward = _number(reward, "reward")
        self.window.observe(labels, reward, category)
        self.total.observe(labels, reward, category)

    def observe_batch(
        self,
        labels_per_traj: Sequence[Sequence[str] | None],
        rewards: Sequence[float],
        categories: Sequence[str],
    ) -> int:
        """Add a batch; None entries (env error, unlabelled) are skipped. Returns how many were added."""
        if not len(labels_per_traj) == len(rewards) == len(categories):
            raise ValueError(
                f"batch lengths differ: {len(labels_per_traj)} label lists, {len(rewards)} rewards, "
                f"{len(categories)} categories"
            )
        added = 0
        for labels, reward, category in zip(labels_per_traj, rewards, categories, strict=True):
            if labels is None:
                continue
            self.observe(labels, reward, category)
            added += 1
        return added

    def reset_window(self) -> None:
        self.window = ProfileStats()

    def merge(self, other: FailureProfile) -> FailureProfile:
        """A new profile holding the sums of both windows and of both totals (e.g. across workers)."""
        window, total = self.window.copy(), self.total.copy()
        window.add(other.window)
        total.add(other.total)
        return FailureProfile(window, total)

    def count(self, label: str, scope: str = "window") -> int:
        return self._scope(scope).labels.get(label, 0)

    def counts(self, scope: str = "window") -> dict[str, int]:
        return dict(self._scope(scope).labels)

    def trajectories(self, scope: str = "window") -> int:
        return self._scope(scope).trajectories

    def mean_reward(self, label: str, scope: str = "window") -> float:
        """Mean trajectory reward over the label's occurrences; 0.0 when the label never occurred."""
        stats = self._scope(scope)
        n = stats.labels.get(label, 0)
        return stats.reward_sum.get(label, 0.0) / n if n else 0.0

    def prevalence(self, label: str, scope: str = "window") -> float:
        """count(label) / occurrences of all non-excluded labels; 0.0 on an empty profile."""
        stats = self._scope(scope)
        denominator = stats.weighable_total()
        return stats.labels.get(label, 0) / denominator if denominator else 0.0

    def category_counts(self, category: str, scope: str = "window") -> dict[str, int]:
        return dict(self._scope(scope).by_category.get(category, {}))

    def metrics(self, prefix: str = "seal/profile") -> dict[str, float]:
        """Flat scalars for the step logger: trajectories, and per label count, prevalence, mean reward."""
        out: dict[str, float] = {}
        for scope in SCOPES:
            stats = self._scope(scope)
            out[f"{prefix}/{scope}/trajectories"] = float(stats.trajectories)
            for label in sorted(stats.labels):
                out[f"{prefix}/{scope}/count/{label}"] = float(stats.labels[label])
                out[f"{prefix}/{scope}/prevalence/{label}"] = self.prevalence(label, scope)
                out[f"{prefix}/{scope}/mean_reward/{label}"] = self.mean_reward(label, scope)
        return out

    def to_json(self) -> dict[str, Any]:
        return {"version": VERSION, "window": self.window.to_json(), "total": self.total.to_json()}

    @classmethod
    def from_json(cls, data: Any) -> FailureProfile:
        """Parse `to_json`'s output; anything malformed raises ValueError naming the offending key."""
        data = _object(data, "profile")
        if "version" not in data:
            raise ValueError("profile: missing key 'version'")
        if isinstance(data["version"], bool) or data["version"] != VERSION:
            raise ValueError(f"profile: unsupported version {data['version']!r}; expected {VERSION}")
        unknown = sorted(set(data) - {"version", *SCOPES})
        if unknown:
            raise ValueError(f"profile has unknown key(s) {unknown}; expected version, window, total")
        for scope in SCOPES:
            if scope not in data:
                raise ValueError(f"profile: missing key {scope!r}")
        return cls(
            ProfileStats.from_json(data["window"], "profile.window"),
            ProfileStats.from_json(data["total"], "profile.total"),
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FailureProfile):
            return NotImplemented
        return self.to_json() == other.to_json()

    def __repr__(self) -> str:
        return f"FailureProfile(window={self.window.trajectories} traj, total={self.total.trajectories} traj)"
