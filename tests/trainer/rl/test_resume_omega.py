"""A resumed run trains under exactly the Ω its checkpoint saved (seal/trainer/rl/resume_omega.py): the
restarted service is sent the saved Ω's whole state, not its profile to evolve again, which under the
`full` interface's hysteresis would serve other guidelines; older files without Ω's text resume as before."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from seal.env.connect import put_profile
from seal.env.interface import build_interface, evolve
from seal.env.omega_state import omega_digest
from seal.trainer.rl.trainer import STATE_FILE
from tests.env.test_env_actors import failures
from tests.support.service_thread import served_interface, service_in_thread
from tests.trainer.rl.test_trainer_checkpoint import build

STEP = 2
SERVICE = {"interface_preset": "full", "taxonomy": "paper"}


@pytest.fixture
def saved(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A run saved after two Evolve steps whose second keeps a guideline only by hysteresis."""
    folder = tmp_path / "checkpoints"
    with service_in_thread(**SERVICE) as url:
        trainer = build(url, folder)
        env = trainer.seal_settings.rollout.env()
        for step, profile in enumerate((failures(20, 80), failures(10, 90)), start=1):
            trainer.global_steps = step
            trainer.closed_loop.interface = put_profile(env, profile)
        trainer._save_checkpoint()
    omega = trainer.closed_loop.interface
    assert omega["guidelines"] == ["State-aware", "Format"]
    rederived = evolve(build_interface("full"), omega["profile"], omega["version"])
    assert rederived.guidelines == ("Format",)  # what re-deriving would serve
    return folder, omega


def resume(folder: Path, url: str) -> None:
    trainer = build(url, folder, "trainer.resume_mode=auto")
    trainer._load_checkpoint()
    assert trainer.global_steps == STEP


def test_a_resumed_run_s_service_serves_the_checkpoint_s_omega_exactly(saved):
    folder, omega = saved
    assert json.loads((folder / f"global_step_{STEP}" / STATE_FILE).read_text())["interface"] == omega
    with service_in_thread(**SERVICE) as url:
        assert served_interface(url)["version"] == 0
        resume(folder, url)
        served = served_interface(url)
    assert served == omega and omega_digest(served) == omega_digest(omega)
    assert "[State-aware]" in served["system_suffix"]


def test_an_older_state_file_without_omega_s_text_is_re_derived_with_a_warning(saved, caplog):
    folder, omega = saved
    path = folder / f"global_step_{STEP}" / STATE_FILE
    state = json.loads(path.read_text())
    del state["interface"]["system_suffix"]
    path.write_text(json.dumps(state))
    with service_in_thread(**SERVICE) as url, caplog.at_level(logging.WARNING):
        resume(folder, url)
        served = served_interface(url)
    assert served["version"] == omega["version"] and served["guidelines"] == ["Format"]
    said = [r.getMessage() for r in caplog.records if r.name == "seal.trainer.rl.resume_omega"]
    assert said[0] == (
        f"the checkpoint's Ω v{STEP} has no system_suffix (an older seal_state.json): re-derived by Evolve "
        "from its profile, which may choose other guidelines"
    )


def test_a_saved_omega_whose_text_does_not_render_stops_the_resume_in_one_line(saved):
    folder, _ = saved
    path = folder / f"global_step_{STEP}" / STATE_FILE
    state = json.loads(path.read_text())
    state["interface"]["system_suffix"] += " (edited)"
    path.write_text(json.dumps(state))
    with service_in_thread(**SERVICE) as url:
        with pytest.raises(RuntimeError, match=r"cannot restore the checkpoint's Ω .*does not render as it"):
            resume(folder, url)
        assert served_interface(url)["version"] == 0  # refused whole: the service serves its Ω as before
