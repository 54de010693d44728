"""The learning recipe (exp/learn_seal.yaml, exp/learn_vanilla.yaml, exp/sft_learn.yaml): the arms differ
only in SEAL's parts, one `seed` sets every seed verl reads and the run's folder, and the one SFT start holds,
for each arm, the rows that arm's own agent loop renders, token for token."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from transformers import AutoTokenizer

from seal.bfcl.tasks import split_ids
from seal.trainer.experiment import PROJECT_ROOT, compose_experiment, validate_experiment
from seal.trainer.launch.sft import replayed_rows, validate_sft
from seal.trainer.settings import settings_from_config
from tests.support.rollout_helpers import model_folder, worker_samples
from tests.support.service_thread import service_in_thread
from tests.trainer.test_trainer_config import flat

EXP = PROJECT_ROOT / "exp"
ARMS = {"learn_seal": ("reference", True, "dynamic"), "learn_vanilla": ("none", False, "off")}
SEEDED = ("data.seed", "actor_rollout_ref.rollout.seed", "actor_rollout_ref.actor.data_loader_seed")
TASKS = (split_ids("train")[0], next(t for t in split_ids("train") if "miss_func" in t))


@pytest.mark.parametrize("name", ARMS)
def test_each_arm_is_the_recipe_and_one_seed_sets_every_seed_and_the_run_folder(name):
    config = compose_experiment(EXP / f"{name}.yaml", ["seed=3"])
    settings = validate_experiment(config, check_data=False)
    assert (settings.interface.preset, settings.interface.adapt, settings.apatch.mode) == ARMS[name]
    assert [OmegaConf.select(config, key) for key in SEEDED] == [3, 3, 3]
    assert (
        Path(config.trainer.default_local_dir).parent.name == config.trainer.experiment_name == f"{name}_s3"
    )
    assert config.data.train_max_samples >= 64 and config.trainer.total_training_steps >= 24
    steps_per_epoch = config.data.train_max_samples // config.data.train_batch_size
    assert steps_per_epoch * config.trainer.total_epochs >= config.trainer.total_training_steps
    assert config.data.val_max_samples == -1 and config.data.val_files.endswith("bfcl_val.parquet")
    assert config.trainer.val_before_train and config.trainer.test_freq == config.trainer.total_training_steps
    actor = config.actor_rollout_ref.actor
    assert (actor.optim.lr, actor.use_kl_loss, config.algorithm.use_kl_in_reward) == (1e-5, False, False)
    assert (config.data.train_batch_size, config.actor_rollout_ref.rollout.n) == (8, 8)
    assert config.data.max_response_length == 1024
    window = config.actor_rollout_ref.rollout.max_model_len
    assert config.data.max_prompt_length + config.data.max_response_length == window


def test_the_arms_differ_in_seal_s_parts_and_their_names_only():
    seal, vanilla = (flat(OmegaConf.to_container(compose_experiment(EXP / f"{n}.yaml"))) for n in ARMS)
    differing = {key for key in seal.keys() | vanilla.keys() if seal.get(key) != vanilla.get(key)}
    assert differing == {
        "seal.interface.preset",
        "seal.interface.adapt",
        "seal.apatch.mode",
        "trainer.experiment_name",
        "trainer.default_local_dir",
        "trainer.validation_data_dir",
    }


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return model_folder(tmp_path_factory.mktemp("chatml"), TASKS)


def test_the_sft_start_holds_each_arms_own_rendering_token_for_token(folder):
    """The rows of exp/sft_learn.yaml against verl's `AgentLoopWorker` on each arm's config, playing against
    a service that serves the arm's interface as the launcher starts it: equal prompt (the first prompt the
    arm's loop renders), response and loss mask; and the two arms' prompts are not the same."""
    sft = compose_experiment(EXP / "sft_learn.yaml", [f"model.path={folder}"])
    settings = validate_sft(sft)
    assert {Path(conf).stem for conf in settings.all_episodes} == set(ARMS)
    rows = replayed_rows(sft, settings, TASKS)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    prompts = {}
    for conf in settings.all_episodes:
        arm = compose_experiment(conf, [f"actor_rollout_ref.model.path={folder}"])
        with service_in_thread(interface_preset=settings_from_config(arm).interface.preset) as url:
            arm.seal.rollout.env_url = url
            samples = asyncio.run(worker_samples(arm, tokenizer, TASKS))
        for task, (prompt, response, mask) in zip(TASKS, samples, strict=True):
            (row,) = [r for r in rows if r.task_id == task and r.input_ids[: len(prompt)] == prompt]
            assert row.input_ids == prompt + response
            assert row.loss_mask == [0] * len(prompt) + mask and any(mask)
        prompts[Path(conf).stem] = [sample[0] for sample in samples]
    assert all(a != b for a, b in zip(prompts["learn_seal"], prompts["learn_vanilla"], strict=True))
    assert len(rows) == len(ARMS) * len(TASKS)
