"""The trainer's replay buffer is verl's own (same class, same batch sizes), but it asks TransferQueue for the
step's finished episodes every `REPLAY_POLL_S` seconds instead of verl's fixed 2 s, so `gen` ends when its
last episode does."""

from __future__ import annotations

import inspect
import time

from verl.trainer.ppo.v1 import replay_buffer

from seal.trainer.experiment import PROJECT_ROOT, compose_experiment
from seal.trainer.rl.trainer import REPLAY_POLL_S, SealPPOTrainer


def test_the_buffer_is_verls_and_waits_a_tenth_of_verls_poll_between_looks(monkeypatch):
    config = compose_experiment(PROJECT_ROOT / "exp" / "SEAL.yaml", [])
    trainer = object.__new__(SealPPOTrainer)
    trainer.config = config
    trainer.trainer_mode = config.trainer.v1.trainer_mode
    buffer = trainer._build_replay_buffer()
    assert type(buffer) is replay_buffer.ReplayBuffer
    assert (buffer.train_batch_size, buffer.gen_batch_size) == (config.data.train_batch_size,) * 2

    slept: list[float] = []
    monkeypatch.setattr(replay_buffer.time, "sleep", slept.append)
    buffer._wait_for_next_poll("train", time.time())
    assert slept == [REPLAY_POLL_S]
    verls_poll = inspect.signature(replay_buffer.ReplayBuffer).parameters["poll_interval"].default
    assert 0.1 * verls_poll >= REPLAY_POLL_S
