"""The task runner starts TransferQueue beside the trainer's set-up, and nothing uses it before it is up."""

from __future__ import annotations

import sys
import threading
import types

from omegaconf import OmegaConf

from seal.trainer.rl import task_runner, trainer

WAIT_S = 30


class Events:
    """What happened, in order, across the runner's two threads."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.lock = threading.Lock()
        self.set_up_started = threading.Event()

    def add(self, event: str) -> None:
        with self.lock:
            self.order.append(event)


def fake_transfer_queue(events: Events, fail: bool) -> types.ModuleType:
    """A transfer_queue whose init waits until the trainer's set-up has started: run one after the other,
    the two would never meet."""
    module = types.ModuleType("transfer_queue")

    def init(conf) -> None:
        assert events.set_up_started.wait(WAIT_S), "TransferQueue started only after the trainer's set-up"
        events.add(f"transfer queue up with {conf.backend.storage_backend}")
        if fail:
            raise RuntimeError("no storage actors")

    module.init = init
    module.close = lambda: events.add("transfer queue closed")
    return module


def fake_trainer(events: Events, fail: bool) -> type:
    class Trainer:
        def __init__(self, config) -> None:
            events.add("trainer built")

        def init(self) -> None:
            events.set_up_started.set()
            events.add("trainer set up")
            if fail:
                raise RuntimeError("no GPUs")

        def fit(self, agent_loop_manager) -> None:
            events.add("fit")

    return Trainer


def run_task_runner(
    monkeypatch, *, tq_fails: bool = False, set_up_fails: bool = False
) -> tuple[list[str], Exception | None]:
    """The runner's run on fakes: what happened in order, and the error it raised."""
    events = Events()
    monkeypatch.setattr(trainer, "SealPPOTrainer", fake_trainer(events, set_up_fails))
    monkeypatch.setitem(sys.modules, "transfer_queue", fake_transfer_queue(events, tq_fails))
    runner = object.__new__(task_runner.SealTaskRunner.__ray_actor_class__)
    runner.trainer = None
    runner.init_agent_loop_manager = lambda: events.add("agent loop workers")
    runner.agent_loop_manager = None
    config = OmegaConf.create(
        {
            "trainer": {"v1": {"trainer_mode": "sync"}},
            "transfer_queue": {"backend": {"storage_backend": "Simple"}},
        }
    )
    try:
        runner.run(config)
    except RuntimeError as error:
        return events.order, error
    return events.order, None


def test_transfer_queue_comes_up_during_the_set_up_and_before_the_agent_loop_workers(monkeypatch, capsys):
    order, error = run_task_runner(monkeypatch)
    assert error is None
    assert order.index("trainer set up") < order.index("agent loop workers")
    up = "transfer queue up with Simple"  # the task runner's TransferQueue config
    assert order.index(up) < order.index("agent loop workers") < order.index("fit")
    assert order[-1] == "transfer queue closed"
    out = capsys.readouterr().out
    assert out.index(task_runner.TRANSFER_QUEUE_STARTING) < out.index("TransferQueue ready in ")


def test_a_failed_set_up_waits_for_transfer_queue_before_closing_it(monkeypatch):
    order, error = run_task_runner(monkeypatch, set_up_fails=True)
    assert str(error) == "no GPUs"
    assert "agent loop workers" not in order
    assert order[-2:] == ["transfer queue up with Simple", "transfer queue closed"]


def test_a_failed_transfer_queue_stops_the_run_before_the_agent_loop_workers(monkeypatch):
    order, error = run_task_runner(monkeypatch, tq_fails=True)
    assert str(error) == "no storage actors"
    assert "agent loop workers" not in order and order[-1] == "transfer queue closed"
