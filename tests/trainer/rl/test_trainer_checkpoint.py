"""SEAL state in verl's checkpoints: `_save_checkpoint` writes global_step_N/seal_state.json beside verl's
files, `_load_checkpoint` (resume_mode auto and resume_path) restores C_t, ρ and Ω exactly and sends Ω's
whole state to the (restarted) environment service, so Ω continues across the resume (test_resume_omega.py).

verl's own `_save_checkpoint`/`_load_checkpoint` run underneath; only the FSDP worker group, which needs
GPUs, is replaced by `FolderWorkerGroup`, which saves and loads a file in the folder verl gives it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from torchdata.stateful_dataloader import StatefulDataLoader
from verl.trainer.ppo.checkpoint_callback import build_checkpoint_callback

from seal.trainer.experiment import PROJECT_ROOT, compose_experiment
from seal.trainer.rl.closed_loop import ClosedLoop
from seal.trainer.rl.trainer import STATE_FILE, SealPPOTrainer, load_seal_state, save_seal_state
from seal.trainer.rl.trajectory import TrajectoryFields
from seal.trainer.settings import settings_from_config
from tests.support.doubles import trajectory_fields
from tests.support.service_thread import served_interface, service_in_thread

STEP = 3


class FolderWorkerGroup:
    """The actor worker group's checkpoint interface, as files: what verl asks it to save is there to load."""

    def __init__(self) -> None:
        self.loaded: list[str] = []
        self.state_before_weights: list[bool] = []
        """Per save: was `seal_state.json` already in the step folder when verl asked for the weights?"""

    def save_checkpoint(
        self, local_path: str, hdfs_path: str | None, step: int, max_ckpt_to_keep=None
    ) -> None:
        self.state_before_weights.append((Path(local_path).parent / STATE_FILE).is_file())
        Path(local_path).mkdir(parents=True, exist_ok=True)
        (Path(local_path) / "weights.json").write_text(json.dumps({"step": step}))

    def load_checkpoint(self, local_path: str, del_local_after_load: bool = False) -> None:
        self.loaded.append(json.loads((Path(local_path) / "weights.json").read_text())["step"])


def build(url: str, folder: Path, *overrides: str) -> SealPPOTrainer:
    config = compose_experiment(
        PROJECT_ROOT / "exp" / "SEAL_full_loop.yaml",
        [f"seal.rollout.env_url={url}", f"trainer.default_local_dir={folder}", *overrides],
    )
    trainer = object.__new__(SealPPOTrainer)
    trainer.config = config
    trainer.trainer_mode = "sync"
    trainer.use_critic = False
    trainer.checkpoint_callback = build_checkpoint_callback(config)
    trainer.actor_rollout_wg = FolderWorkerGroup()
    trainer.train_dataloader = StatefulDataLoader(list(range(40)), batch_size=4)
    trainer.steps_per_epoch = 10
    trainer.init_seal()
    return trainer


def batch(step: int) -> list[TrajectoryFields]:
    rows = []
    for i, labels in enumerate(
        [["argument_mismatch", "pass"], ["argument_mismatch"] * 3, ["recovery_failure", "pass"], ["pass"]]
    ):
        rows.append(
            trajectory_fields(
                f"multi_turn_base_{i}",
                category="multi_turn_base" if i % 2 else "multi_turn_long_context",
                labels=labels * step,
                taxonomy="paper",
                reward=1.0 if labels == ["pass"] else 0.0,
                llm_calls=2,
                env_seconds=0.1,
                gen_seconds=0.2,
            )
        )
    return rows


def train_steps(trainer: SealPPOTrainer, steps: int, first: int = 1) -> None:
    """SEAL's part of training steps `first` to `steps`: C_t, ρ and Evolve on the live service."""
    for step in range(first, steps + 1):
        trainer.global_steps = step
        trainer.closed_loop.step(batch(step), [1.0, -1.0, -1.0, 1.0], step, epoch=0, groups=["uid0"] * 4)
        trainer._evolve(trainer.closed_loop.profile.to_json(), {})


@pytest.fixture
def saved_run(tmp_path):
    """A run saved at step 3 through verl's `_save_checkpoint`, its service since gone."""
    folder = tmp_path / "checkpoints"
    with service_in_thread(interface_preset="full", taxonomy="paper") as url:
        trainer = build(url, folder)
        train_steps(trainer, STEP)
        trainer._save_checkpoint()
    assert trainer.actor_rollout_wg.state_before_weights == [True]  # so before verl's tracker file too
    return folder, trainer.closed_loop.to_json()


def test_save_puts_seal_state_beside_verls_files(saved_run):
    """seal_state.json is written before verl saves anything, so the tracker file, written last, never
    names a step folder without it."""
    folder, state = saved_run
    step_folder = folder / f"global_step_{STEP}"
    assert (step_folder / "actor" / "weights.json").is_file()
    assert (step_folder / "data.pt").is_file()
    assert (folder / "latest_checkpointed_iteration.txt").read_text() == str(STEP)
    saved = json.loads((step_folder / STATE_FILE).read_text())
    assert saved == state
    assert saved["interface"]["version"] == STEP
    assert saved["apatch"]["updates"] == STEP
    assert saved["profile"]["total"]["trajectories"] == 4 * STEP


@pytest.mark.parametrize("resume", ["auto", "resume_path"])
def test_restore_round_trips_exactly_and_the_restarted_service_gets_the_profile(saved_run, resume):
    folder, state = saved_run
    with service_in_thread(interface_preset="full", taxonomy="paper") as url:
        overrides = [f"trainer.resume_mode={resume}"]
        if resume == "resume_path":
            overrides.append(f"trainer.resume_from_path={folder / f'global_step_{STEP}'}")
        trainer = build(url, folder, *overrides)
        assert served_interface(url)["version"] == 0
        trainer._load_checkpoint()
        served = served_interface(url)
        resumed_at = trainer.global_steps
        restored = trainer.closed_loop
        assert restored.to_json() == state
        assert restored.profile.to_json() == state["profile"]
        assert restored.apatch.rho == state["apatch"]["rho"]
        train_steps(trainer, STEP + 1, first=STEP + 1)
        evolved = served_interface(url)

    assert resumed_at == STEP
    assert trainer.actor_rollout_wg.loaded == [STEP]
    assert served["version"] == state["interface"]["version"] == STEP
    assert served["profile"] == state["interface"]["profile"]
    assert served["guidelines"] == state["interface"]["guidelines"]
    assert evolved["version"] == restored.interface["version"] == STEP + 1
    assert evolved["profile"] == restored.profile.to_json() != state["profile"]


def test_a_resumed_step_continues_as_the_uninterrupted_run_would(tmp_path):
    def run_to_step_3(folder: Path) -> SealPPOTrainer:
        with service_in_thread(interface_preset="full", taxonomy="paper") as url:
            trainer = build(url, folder)
            train_steps(trainer, STEP)
        return trainer

    straight = run_to_step_3(tmp_path / "a").closed_loop
    interrupted = run_to_step_3(tmp_path / "b")
    save_seal_state(interrupted.closed_loop, tmp_path / "b" / "state")
    resumed = ClosedLoop(settings_from_config(interrupted.config))
    load_seal_state(resumed, tmp_path / "b" / "state")
    signs = [1.0, -1.0, -1.0, 1.0]
    groups = ["uid0"] * 4
    assert resumed.step(batch(STEP + 1), signs, STEP + 1, epoch=0, groups=groups) == straight.step(
        batch(STEP + 1), signs, STEP + 1, epoch=0, groups=groups
    )
    assert resumed.to_json() == straight.to_json()


def test_a_checkpoint_without_seal_state_is_a_clear_error(tmp_path):
    loop = ClosedLoop(settings_from_config(compose_experiment(PROJECT_ROOT / "exp" / "SEAL.yaml")))
    with pytest.raises(RuntimeError, match=r"seal_state\.json is missing"):
        load_seal_state(loop, tmp_path)
    (tmp_path / STATE_FILE).write_text('{"version": 1, "profile": {}}')
    before = loop.to_json()
    with pytest.raises(RuntimeError, match=r"seal_state\.json: profile\.version: Field required"):
        load_seal_state(loop, tmp_path)
    assert loop.to_json() == before


def test_step_metrics_give_the_share_of_each_cut_and_the_trained_tokens():
    loop = ClosedLoop(settings_from_config(compose_experiment(PROJECT_ROOT / "exp" / "SEAL.yaml")))
    batch = [
        trajectory_fields("multi_turn_base_0", cut="none", trained_tokens=100, response_tokens=100),
        trajectory_fields(
            "multi_turn_base_1",
            cut="context",
            truncated=True,
            trained_tokens=300,
            response_tokens=900,
            trained_cut=True,
        ),
        trajectory_fields(
            "multi_turn_base_2", cut="calls", truncated=True, trained_tokens=50, response_tokens=60
        ),
        trajectory_fields(
            "multi_turn_base_3", cut="context", truncated=True, trained_tokens=10, response_tokens=10
        ),
    ]
    metrics = loop.step(batch, [0.0] * 4, step=1, epoch=0, groups=["a", "b", "c", "d"]).metrics
    assert metrics["seal/cut_share/context"] == 0.5
    assert metrics["seal/cut_share/calls"] == metrics["seal/cut_share/none"] == 0.25
    assert metrics["seal/cut_share/generation"] == 0.0 and metrics["seal/truncated_share"] == 0.75
    assert metrics["seal/trained_cut_share"] == 0.25
    assert metrics["seal/trained_tokens/mean"] == 115.0 and metrics["seal/response_tokens/mean"] == 267.5
