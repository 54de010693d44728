"""SEAL's own work in a training step, apart from verl: C_t, ρ, the A-Patch factors, metrics, the saved state.

`ClosedLoop.step` takes one batch's trajectories (labels as the environment computed them), each one's
GRPO advantage summed over its trained tokens and its GRPO group (verl's `uid`), and returns the factor to
multiply each advantage by, plus the step's `seal/` metrics. A trajectory whose environment failed
(`env_error`; its advantage is 0) keeps factor 1 and is left out of C_t and of the reward metrics.
Trajectories are the `TrajectoryFields` the agent loop wrote into each sample's `extra_fields`; verl's
padding rows never get here. The trainer does the I/O (TransferQueue, the environment service, the
checkpoint folder).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from seal.env.context_limits import CUTS
from seal.env.interface import Interface
from seal.results.pass_rate import pass_rates
from seal.tocf.apatch import APatchState, apatch_factors
from seal.tocf.labels import EXCLUDED
from seal.tocf.profile import FailureProfile
from seal.trainer.rl.state_record import STATE_VERSION, checked_state
from seal.trainer.rl.trajectory import TrajectoryFields
from seal.trainer.settings import SealSettings

PREFIX = "seal"
METRICS = {
    "seal/reward/mean": "mean reward of the step's healthy trajectories (the train pass rate)",
    "seal/groups/mixed_share": "share of GRPO groups whose rewards are not all equal: the groups that "
    "carry an advantage",
    "seal/groups/all_failed_share": "share of GRPO groups in which every healthy trajectory failed: no "
    "advantage, so nothing in them is pushed down",
    "seal/groups/cut_in_mixed_share": "of the step's trajectories a limit cut, the share in mixed groups: "
    "the cut episodes (a loop that runs to the call limit, say) the update pushes down; absent when none "
    "was cut",
    "seal/label_share/{label}": "the label's share of the batch's weighable ground-truth-turn labels",
    "seal/pass_rate/{category}": "share of the category's trajectories that pass",
    "seal/pass_rate/mean": "mean of the per-category pass rates (the paper's Avg, on the train batch)",
    "seal/env_error_count": "trajectories whose environment failed (`env_error`; they train nothing)",
    "seal/truncated_share": "share of trajectories a limit cut before the episode was done",
    "seal/cut_share/{cut}": "share of trajectories ended by this cut: none, context, calls or generation",
    "seal/trained_cut_share": "share of trajectories whose response ran past `max_response_length` (the rest "
    "was played and scored, not trained)",
    "seal/trained_tokens/mean": "mean sampled tokens a trajectory's update trains on",
    "seal/response_tokens/mean": "mean response tokens of a trajectory (sampled and environment tokens)",
    "seal/env_seconds/mean": "mean seconds a trajectory spent in the environment",
    "seal/env_seconds/max": "longest time a trajectory spent in the environment (s)",
    "seal/gen_seconds/mean": "mean seconds a trajectory spent generating",
    "seal/gen_seconds/max": "longest time a trajectory spent generating (s)",
    "seal/apatch/scale_mean": "mean factor the step's advantages were multiplied by (1 where A-Patch is off "
    "or an advantage is 0)",
    "seal/apatch/scale_min": "smallest advantage factor of the step",
    "seal/apatch/scale_max": "largest advantage factor of the step",
    "seal/advantage/net_share": "the step's advantages after A-Patch, each row's summed over its trained "
    "tokens (the weight verl's token-mean loss gives it): their sum over the sum of their sizes, from -1 "
    "(the update only pushes sampled text down) to 1 (it only pulls it up); longer failing episodes and "
    "larger factors on failures move it below 0",
    "seal/advantage/scale_positive": "mean factor of the rows whose advantage is positive",
    "seal/advantage/scale_negative": "mean factor of the rows whose advantage is negative",
    "seal/rho/{label}": "the label's current A-Patch weight ρ after this step's update",
    "seal/interface/version": "version of the interface Ω the service holds after the step",
    "seal/interface/active_cues": "behavioural guidelines in the system prompt of Ω after the step",
    "seal/interface/cue/{name}": "1 for each guideline Ω holds after the step",
}
"""Every metric `ClosedLoop.step` logs, with its meaning: the source of docs/reference/metrics.md."""
CUE_PREFIX = f"{PREFIX}/interface/cue/"


@dataclass(frozen=True)
class StepResult:
    factors: list[float]
    metrics: dict[str, float]


class ClosedLoop:
    """C_t (the failure profile), ρ (A-Patch's current weights) and the last Ω the service reported."""

    def __init__(self, settings: SealSettings) -> None:
        self.settings = settings
        self.apatch_config = settings.apatch
        self.profile = FailureProfile()
        self.apatch = APatchState.initial(self.apatch_config)
        self.interface: dict[str, Any] | None = None
        self.window_epoch = 0

    def step(
        self,
        trajectories: Sequence[TrajectoryFields],
        advantages: Sequence[float],
        step: int,
        epoch: int,
        *,
        groups: Sequence[str],
    ) -> StepResult:
        """Add the batch to C_t, update ρ (dynamic mode), compute the factors; `step` counts from 1.
        `advantages` are each row's summed over its trained tokens: A-Patch reads their signs, the
        `seal/advantage/` metrics their sizes."""
        if not len(trajectories) == len(advantages) == len(groups):
            raise ValueError(
                f"{len(trajectories)} trajectories but {len(advantages)} advantages and {len(groups)} groups"
            )
        if self.settings.reset_window_each_epoch and epoch != self.window_epoch:
            self.profile.reset_window()
            self.window_epoch = epoch
        labels = [None if t.env_error else list(t.labels) for t in trajectories]
        self.profile.observe_batch(
            labels, [t.reward for t in trajectories], [t.category for t in trajectories]
        )
        settings = self.settings.apatch
        if settings.mode == "dynamic":
            self.apatch.update(self.profile, self.apatch_config)
        metrics = _batch_metrics(trajectories)
        metrics.update(_reward_metrics(trajectories, groups))
        if settings.enabled:
            weights, apatch_metrics = apatch_factors(
                advantages, labels, self.apatch.rho, self.apatch_config, step - 1
            )
            factors = [w if a else 1.0 for w, a in zip(weights, advantages, strict=True)]  # nothing at 0
            metrics.update(apatch_metrics)
        else:
            factors = [1.0] * len(trajectories)
        if factors:
            metrics[f"{PREFIX}/apatch/scale_mean"] = sum(factors) / len(factors)
            metrics[f"{PREFIX}/apatch/scale_min"] = min(factors)
            metrics[f"{PREFIX}/apatch/scale_max"] = max(factors)
        metrics.update(_push_metrics(advantages, factors))
        metrics.update({f"{PREFIX}/rho/{label}": w for label, w in sorted(self.apatch.rho.items())})
        metrics.update(self.profile.metrics(f"{PREFIX}/profile"))
        metrics.update(self.interface_metrics())
        return StepResult(factors, metrics)

    def interface_metrics(self) -> dict[str, float]:
        if self.interface is None:
            return {}
        guidelines = self.interface.get("guidelines") or []
        out = {
            f"{PREFIX}/interface/version": float(self.interface.get("version", 0)),
            f"{PREFIX}/interface/active_cues": float(len(guidelines)),
        }
        out.update({f"{CUE_PREFIX}{name}": 1.0 for name in guidelines})
        return out

    def replace_interface_metrics(self, metrics: dict[str, float]) -> None:
        """Ω's metrics in place of those `step` logged, once Evolve has replaced Ω: a guideline Evolve
        dropped would otherwise still read 1 in the step's metrics."""
        for key in [key for key in metrics if key.startswith(CUE_PREFIX)]:
            del metrics[key]
        metrics.update(self.interface_metrics())

    def to_json(self) -> dict[str, Any]:
        """`seal_state.json`: everything a resumed run needs to continue exactly where this one stopped."""
        return {
            "version": STATE_VERSION,
            "profile": self.profile.to_json(),
            "apatch": self.apatch.to_json(),
            "interface": self.interface,
            "window_epoch": self.window_epoch,
        }

    def load_json(self, data: Any) -> None:
        """Restore `to_json`'s output; ValueError (one line naming the field, nothing changed) unless it is
        the whole record (`SealStateRecord`) and its Ω one `Interface` can be."""
        state = checked_state(data)
        profile = FailureProfile.from_json(state["profile"])
        apatch = APatchState.from_json(state["apatch"])
        interface = state["interface"]
        if interface is not None:
            try:
                Interface.from_json(interface)
            except ValueError as exc:
                raise ValueError(f"interface: {exc}") from None
        self.profile, self.apatch, self.window_epoch = profile, apatch, state["window_epoch"]
        self.interface = interface


def _reward_metrics(trajectories: Sequence[TrajectoryFields], groups: Sequence[str]) -> dict[str, float]:
    """Over the healthy trajectories: the mean reward, the share of GRPO groups whose rewards are not all
    equal (the groups that give GRPO a learning signal) and of those where all failed, and how many of the
    cut trajectories sit in a mixed group; groups with no healthy row are not counted."""
    rewards: dict[str, list[float]] = {}
    for t, group in zip(trajectories, groups, strict=True):
        if not t.env_error:
            rewards.setdefault(group, []).append(t.reward)
    if not rewards:
        return {}
    healthy = [r for members in rewards.values() for r in members]
    mixed = {group for group, members in rewards.items() if len(set(members)) > 1}
    metrics = {
        f"{PREFIX}/reward/mean": sum(healthy) / len(healthy),
        f"{PREFIX}/groups/mixed_share": len(mixed) / len(rewards),
        f"{PREFIX}/groups/all_failed_share": sum(max(m) <= 0.0 for m in rewards.values()) / len(rewards),
    }
    cut = [group for t, group in zip(trajectories, groups, strict=True) if t.truncated and not t.env_error]
    if cut:
        metrics[f"{PREFIX}/groups/cut_in_mixed_share"] = sum(group in mixed for group in cut) / len(cut)
    return metrics


def _push_metrics(advantages: Sequence[float], factors: Sequence[float]) -> dict[str, float]:
    """Which way the step's update goes once A-Patch has scaled it (`METRICS`' `seal/advantage/`): a GRPO
    group's advantages sum to zero per trajectory, but not once each is weighed by its trained tokens and
    its factor. Empty where no row has an advantage."""
    scaled = [a * f for a, f in zip(advantages, factors, strict=True) if a]
    if not scaled:
        return {}
    metrics = {f"{PREFIX}/advantage/net_share": sum(scaled) / sum(abs(x) for x in scaled)}
    for name, side in (("positive", 1.0), ("negative", -1.0)):
        mine = [f for a, f in zip(advantages, factors, strict=True) if a * side > 0]
        if mine:
            metrics[f"{PREFIX}/advantage/scale_{name}"] = sum(mine) / len(mine)
    return metrics


def _batch_metrics(trajectories: Sequence[TrajectoryFields]) -> dict[str, float]:
    """Label shares, pass rate per category (and their mean), environment health, what cut the
    trajectories (`cut_share/*`), how much of their responses is trained, and timings."""
    metrics: dict[str, float] = {}
    healthy = [t for t in trajectories if not t.env_error]
    occurrences = Counter(label for t in healthy for label in t.labels)
    weighable = sum(n for label, n in occurrences.items() if label not in EXCLUDED)
    for label, n in sorted(occurrences.items()):
        metrics[f"{PREFIX}/label_share/{label}"] = (
            n / weighable if label not in EXCLUDED and weighable else 0.0
        )
    rates = pass_rates((t.category, t.reward) for t in trajectories)
    for category, rate in rates.by_category.items():
        metrics[f"{PREFIX}/pass_rate/{category}"] = rate
    if rates.by_category:
        metrics[f"{PREFIX}/pass_rate/mean"] = rates.mean
    n = len(trajectories)
    if n:
        metrics[f"{PREFIX}/env_error_count"] = float(n - len(healthy))
        metrics[f"{PREFIX}/truncated_share"] = sum(t.truncated for t in trajectories) / n
        for cut in CUTS:
            metrics[f"{PREFIX}/cut_share/{cut}"] = sum(t.cut == cut for t in trajectories) / n
        metrics[f"{PREFIX}/trained_cut_share"] = sum(t.trained_cut for t in trajectories) / n
        metrics[f"{PREFIX}/trained_tokens/mean"] = sum(t.trained_tokens for t in trajectories) / n
        metrics[f"{PREFIX}/response_tokens/mean"] = sum(t.response_tokens for t in trajectories) / n
        for name in ("env_seconds", "gen_seconds"):
            values = [getattr(t, name) for t in trajectories if math.isfinite(getattr(t, name))]
            if values:
                metrics[f"{PREFIX}/{name}/mean"] = sum(values) / len(values)
                metrics[f"{PREFIX}/{name}/max"] = max(values)
    return metrics
