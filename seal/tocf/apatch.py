"""A-Patch (docs/design.md §4.3): diagnosis-weighted GRPO advantages, static (paper Eq. 11–12) or dynamic.

Pure functions over plain lists so the trainer can call them on whatever it holds and tests can check
them by hand; the only state, the current ρ, lives in `APatchState` and goes into the checkpoint.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from seal.tocf.labels import DEFAULT_RHO, EXCLUDED, PASS
from seal.tocf.profile import FailureProfile

APPLY_TO = ("all", "positive_advantage", "negative_advantage")
METRIC_PREFIX = "seal/apatch"
METRICS = {
    "seal/apatch/missing_label_count": "trajectories without labels (factor 1)",
    "seal/apatch/label_frac/{label}": "the label's share of all label occurrences in the batch",
    "seal/apatch/label_weight/{label}": "ρ of the label used for this step's weights",
    "seal/apatch/mean_scale": "mean A-Patch factor after `apply_to` (1 during warm-up)",
    "seal/apatch/scaled_count": "trajectories whose factor is not 1",
    "seal/apatch/warmup_skipped": "1 while `warmup_steps` keeps every factor at 1",
}
"""Every metric `apatch_factors` returns, with its meaning: the source of docs/reference/metrics.md."""
STATE_VERSION = 1


def _finite(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _natural(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return value


def _rho_table(rho: Mapping[str, Any], name: str) -> dict[str, float]:
    if not isinstance(rho, Mapping):
        raise ValueError(f"{name} must be a mapping label -> weight, got {type(rho).__name__}")
    table = {}
    for label, weight in rho.items():
        if not isinstance(label, str):
            raise ValueError(f"{name} keys must be label names, got {label!r}")
        table[label] = _finite(weight, f"{name}[{label!r}]")
        if table[label] < 0:
            raise ValueError(f"{name}[{label!r}] must be >= 0, got {weight!r}")
    return table


def _clip(x: float, lo: float, hi: float) -> float:
    return min(hi, max(lo, x))


APATCH_MODES = ("off", "static", "dynamic")
"""off: advantages untouched (vanilla GRPO); static: fixed ρ0 (paper Eq. 11–12); dynamic: ρ follows C_t."""


@dataclass
class APatchConfig:
    """A-Patch (DESIGN §4.3): weights w = clip(Σ p(z) ρ(z), w_min, w_max) scale each trajectory's advantage.

    The one declaration of A-Patch's settings: the Hydra schema of the `seal.apatch` config section
    (seal/trainer/settings.py) and what the functions below take. Every field may be set to zero where zero
    means something (ema_beta 0 freezes ρ, prevalence_alpha 0 keeps targets at ρ0, confidence_samples 0
    trusts a label from its first occurrence).
    """

    mode: str = "dynamic"
    """off | static | dynamic (the paper's "w/o closed-loop update" ablation is static)."""
    w_min: float = 0.5
    """Lower clip of a trajectory's weight (Table 4: 0.5)."""
    w_max: float = 2.0
    """Upper clip of a trajectory's weight (Table 4: 2.0)."""
    rho: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_RHO))
    """ρ0 per label (paper Table 6 and DESIGN §4.3), over DEFAULT_RHO label by label; a label in neither
    weighs 1.0."""
    ema_beta: float = 0.25
    """Dynamic mode: ρ ← (1−β) ρ + β target each step."""
    prevalence_alpha: float = 1.0
    """Dynamic mode: how strongly a label's prevalence raises its target."""
    confidence_samples: int = 32
    """Dynamic mode: occurrences in the window before a label's target moves fully."""
    apply_to: str = "all"
    """all | positive_advantage | negative_advantage."""
    warmup_steps: int = 0
    """Steps before the weights are applied (C_t and ρ are still updated)."""
    normalize_mean: bool = False
    """Rescale the batch's weights to mean 1 (then clip again)."""

    def __post_init__(self) -> None:
        if self.mode not in APATCH_MODES:
            raise ValueError(f"seal.apatch.mode must be one of {list(APATCH_MODES)}, got {self.mode!r}")
        w_min, w_max = _finite(self.w_min, "w_min"), _finite(self.w_max, "w_max")
        if not 0 < w_min <= w_max:
            raise ValueError(f"need 0 < w_min <= w_max (zero would erase signs), got {w_min}, {w_max}")
        beta = _finite(self.ema_beta, "ema_beta")
        if not 0 <= beta <= 1:
            raise ValueError(f"ema_beta must be in [0, 1], got {beta}")
        alpha = _finite(self.prevalence_alpha, "prevalence_alpha")
        if alpha < 0:
            raise ValueError(f"prevalence_alpha must be >= 0, got {alpha}")
        _natural(self.confidence_samples, "confidence_samples")
        _natural(self.warmup_steps, "warmup_steps")
        if self.apply_to not in APPLY_TO:
            raise ValueError(f"apply_to must be one of {list(APPLY_TO)}, got {self.apply_to!r}")
        if not isinstance(self.normalize_mean, bool):
            raise ValueError(f"normalize_mean must be a bool, got {self.normalize_mean!r}")
        self.rho = {**DEFAULT_RHO, **_rho_table(self.rho, "rho")}
        self.w_min, self.w_max, self.ema_beta, self.prevalence_alpha = w_min, w_max, beta, alpha

    @property
    def enabled(self) -> bool:
        """The trainer scales advantages (mode static or dynamic)."""
        return self.mode != "off"

    @property
    def dynamic(self) -> bool:
        """ρ follows C_t every step (the closed loop); static keeps ρ0."""
        return self.mode == "dynamic"


def static_weight(labels: Sequence[str], rho: Mapping[str, float], w_min: float, w_max: float) -> float:
    """w = clip(Σ_z p(z) ρ(z)) over the non-excluded labels; 1.0 when there is nothing to weigh."""
    weighable = [label for label in labels if label not in EXCLUDED]
    if not weighable:
        return 1.0
    return _clip(sum(rho.get(label, 1.0) for label in weighable) / len(weighable), w_min, w_max)


def dynamic_update(
    rho: Mapping[str, float], rho0: Mapping[str, float], profile: FailureProfile, cfg: APatchConfig
) -> dict[str, float]:
    """One closed-loop step: move ρ by EMA toward targets raised by prevalence × stagnation × confidence.

    Uses the profile's window (which must already contain this step's batch). With no non-excluded
    occurrence in the window there is no signal, and ρ is returned unchanged.
    """
    window = profile.window
    total = window.weighable_total()
    if total == 0:
        return dict(rho)
    beta = cfg.ema_beta
    updated = {}
    for label in sorted(set(rho0) | set(window.labels) | set(rho)):
        base = rho0.get(label, 1.0)
        if label in EXCLUDED:
            target = 1.0
        elif label == PASS:
            target = base
        else:
            n = window.labels.get(label, 0)
            confidence = 1.0 if cfg.confidence_samples == 0 else min(1.0, n / cfg.confidence_samples)
            stagnation = 1.0 - profile.mean_reward(label, "window")
            boost = 1.0 + cfg.prevalence_alpha * (n / total) * stagnation * confidence
            target = _clip(base * boost, cfg.w_min, cfg.w_max)
        updated[label] = (1.0 - beta) * rho.get(label, base) + beta * target
    return updated


def _normalized(weights: list[float], indices: list[int], w_min: float, w_max: float) -> list[float]:
    """Rescale the chosen weights to mean 1, then clip again (so the mean is 1 up to clipping)."""
    if not indices:
        return weights
    mean = sum(weights[i] for i in indices) / len(indices)
    out = list(weights)
    for i in indices:
        out[i] = _clip(weights[i] / mean, w_min, w_max)
    return out


def _factor(advantage: float, weight: float, apply_to: str) -> float:
    if apply_to == "positive_advantage":
        return weight if advantage > 0 else 1.0
    if apply_to == "negative_advantage":
        return weight if advantage < 0 else 1.0
    return weight


def apatch_factors(
    advantages: Sequence[float],
    labels_per_traj: Sequence[Sequence[str] | None],
    rho: Mapping[str, float],
    cfg: APatchConfig,
    step: int,
) -> tuple[list[float], dict[str, float]]:
    """Each trajectory's A-Patch factor and the step's metrics; the caller multiplies the advantages by the
    factors (as verl's trainer applies what its advantage estimators return).

    Only the sign of an advantage matters (`apply_to`). A trajectory with None or no labels gets factor 1
    (counted in missing_label_count); before `warmup_steps` every factor is 1. mean_scale and scaled_count
    describe the factors after apply_to. Factors are positive, so no advantage changes sign.
    """
    if len(advantages) != len(labels_per_traj):
        raise ValueError(f"{len(advantages)} advantages but {len(labels_per_traj)} label lists")
    weights: list[float] = []
    weighed: list[int] = []
    occurrences: Counter[str] = Counter()
    missing = 0
    for i, labels in enumerate(labels_per_traj):
        if not labels:
            missing += 1
            weights.append(1.0)
            continue
        occurrences.update(labels)
        weights.append(static_weight(labels, rho, cfg.w_min, cfg.w_max))
        if any(label not in EXCLUDED for label in labels):
            weighed.append(i)

    n_occ = sum(occurrences.values())
    metrics: dict[str, float] = {f"{METRIC_PREFIX}/missing_label_count": float(missing)}
    for label in sorted(set(rho) | set(occurrences)):
        metrics[f"{METRIC_PREFIX}/label_frac/{label}"] = occurrences[label] / n_occ if n_occ else 0.0
        metrics[f"{METRIC_PREFIX}/label_weight/{label}"] = float(rho.get(label, 1.0))

    if step < cfg.warmup_steps:
        metrics.update(
            {
                f"{METRIC_PREFIX}/mean_scale": 1.0,
                f"{METRIC_PREFIX}/scaled_count": 0.0,
                f"{METRIC_PREFIX}/warmup_skipped": 1.0,
            }
        )
        return [1.0] * len(advantages), metrics

    if cfg.normalize_mean:
        weights = _normalized(weights, weighed, cfg.w_min, cfg.w_max)
    factors = [_factor(a, w, cfg.apply_to) for a, w in zip(advantages, weights, strict=True)]
    metrics.update(
        {
            f"{METRIC_PREFIX}/mean_scale": sum(factors) / len(factors) if factors else 1.0,
            f"{METRIC_PREFIX}/scaled_count": float(sum(1 for f in factors if f != 1.0)),
            f"{METRIC_PREFIX}/warmup_skipped": 0.0,
        }
    )
    return factors, metrics


@dataclass
class APatchState:
    """The current ρ and how many dynamic updates produced it; saved and restored with checkpoints."""

    rho: dict[str, float]
    updates: int = 0

    @classmethod
    def initial(cls, cfg: APatchConfig) -> APatchState:
        return cls(dict(cfg.rho))

    def update(self, profile: FailureProfile, cfg: APatchConfig) -> dict[str, float]:
        """Run the dynamic update if enabled (once per step, after the batch entered the profile)."""
        if cfg.dynamic:
            self.rho = dynamic_update(self.rho, cfg.rho, profile, cfg)
            self.updates += 1
        return dict(self.rho)

    def to_json(self) -> dict[str, Any]:
        return {"version": STATE_VERSION, "rho": dict(sorted(self.rho.items())), "updates": self.updates}

    @classmethod
    def from_json(cls, data: Any) -> APatchState:
        if not isinstance(data, Mapping):
            raise ValueError(f"A-Patch state must be a JSON object, got {type(data).__name__}")
        version = data.get("version")
        if isinstance(version, bool) or version != STATE_VERSION:
            raise ValueError(f"A-Patch state: unsupported version {version!r}; expected {STATE_VERSION}")
        if "rho" not in data:
            raise ValueError("A-Patch state: missing key 'rho'")
        return cls(_rho_table(data["rho"], "A-Patch state rho"), _natural(data.get("updates", 0), "updates"))
