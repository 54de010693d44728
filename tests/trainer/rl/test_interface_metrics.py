"""A step's `seal/interface/` metrics describe the Ω the service holds after the step, as
`seal_steps.jsonl` records it: when Evolve replaces Ω, a guideline it dropped no longer reads 1."""

from __future__ import annotations

import pytest

import seal.trainer.rl.trainer as trainer_module
from seal.env.client import EnvServiceError
from seal.trainer.rl.closed_loop import CUE_PREFIX, ClosedLoop
from seal.trainer.rl.trainer import SealPPOTrainer
from seal.trainer.settings import SealSettings

IN_USE = {"version": 3, "guidelines": ["Active-respond", "Call-format", "State-aware"]}
EVOLVED = {"version": 4, "guidelines": ["Call-format", "Cautious-call", "State-aware"]}


def evolving_trainer() -> tuple[SealPPOTrainer, dict[str, float]]:
    """A trainer whose step has logged the Ω its episodes saw, as `ClosedLoop.step` does."""
    trainer = object.__new__(SealPPOTrainer)
    trainer.seal_settings = SealSettings()
    trainer.global_steps = 3
    trainer.closed_loop = ClosedLoop(trainer.seal_settings)
    trainer.closed_loop.interface = dict(IN_USE)
    return trainer, trainer.closed_loop.interface_metrics()


def cues(metrics: dict[str, float]) -> dict[str, float]:
    """The guidelines the metrics report, by name."""
    return {key.removeprefix(CUE_PREFIX): v for key, v in metrics.items() if key.startswith(CUE_PREFIX)}


def test_evolve_replaces_the_guidelines_the_step_logged_with_the_evolved_ones(monkeypatch):
    trainer, metrics = evolving_trainer()
    monkeypatch.setattr(trainer_module, "put_profile", lambda env, profile: dict(EVOLVED))
    trainer._evolve({}, metrics)
    assert cues(metrics) == {"Call-format": 1.0, "Cautious-call": 1.0, "State-aware": 1.0}
    assert metrics["seal/interface/active_cues"] == 3.0
    assert metrics["seal/interface/version"] == 4.0
    assert metrics["seal/interface/evolve_failed"] == 0.0


def test_a_failed_evolve_keeps_the_omega_in_use_in_the_metrics(monkeypatch):
    trainer, metrics = evolving_trainer()

    def refuse(env, profile):
        raise EnvServiceError(503, "the service is draining")

    monkeypatch.setattr(trainer_module, "put_profile", refuse)
    trainer._evolve({}, metrics)
    assert cues(metrics) == {"Active-respond": 1.0, "Call-format": 1.0, "State-aware": 1.0}
    assert metrics["seal/interface/version"] == 3.0
    assert metrics["seal/interface/evolve_failed"] == 1.0


@pytest.mark.parametrize("guidelines", [[], ["Recover"]])
def test_replacing_leaves_the_other_metrics_alone(guidelines):
    loop = ClosedLoop(SealSettings())
    loop.interface = {"version": 7, "guidelines": guidelines}
    metrics = {"seal/reward/mean": 0.25, f"{CUE_PREFIX}State-aware": 1.0}
    loop.replace_interface_metrics(metrics)
    assert metrics["seal/reward/mean"] == 0.25
    assert cues(metrics) == dict.fromkeys(guidelines, 1.0)
    assert metrics["seal/interface/active_cues"] == len(guidelines)
