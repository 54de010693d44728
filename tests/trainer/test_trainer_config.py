"""exp/*.yaml: each composes on verl's ppo_trainer and passes validate_config; SEAL.yaml is the paper's
Table 4; every other experiment differs from the one it composes in exactly the keys it names; `seal.*`
is typed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psutil
import pytest
from omegaconf import DictConfig, OmegaConf

from seal.dataset import DATA_DIR, parquet_bytes
from seal.tocf.apatch import APatchConfig
from seal.tocf.labels import DEFAULT_RHO
from seal.trainer.experiment import PROJECT_ROOT, ExperimentError, compose_experiment, validate_experiment
from seal.trainer.settings import SealSettings, settings_from_config
from tests.support.chatml import chatml_tokenizer

EXP = PROJECT_ROOT / "exp"
EXPERIMENTS = sorted(path.stem for path in EXP.glob("*.yaml") if not path.stem.startswith("sft_"))
"""The RL experiments; the SFT ones (sft_*.yaml) are composed and launched in
tests/trainer/launch/test_sft_launch.py."""
DERIVED = {"trainer.default_local_dir", "trainer.validation_data_dir"}
"""Output folders follow trainer.experiment_name, which every experiment names."""

TABLE_4 = {
    "actor_rollout_ref.model.path": "Qwen/Qwen2.5-7B-Instruct",
    "algorithm.adv_estimator": "grpo",
    "actor_rollout_ref.rollout.n": 8,
    "actor_rollout_ref.actor.optim.lr": 1e-6,
    "data.train_batch_size": 32,
    "actor_rollout_ref.actor.ppo_mini_batch_size": 8,
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 1,
    "actor_rollout_ref.rollout.temperature": 1.0,
    "actor_rollout_ref.rollout.val_kwargs.temperature": 0.0,
    "data.max_prompt_length": 8192,
    "data.max_response_length": 4096,
    "actor_rollout_ref.rollout.max_model_len": 16384,
    "actor_rollout_ref.rollout.multi_turn.enable": True,
    "seal.rollout.max_llm_calls": 20,
    "seal.rollout.protocol": "qwen_fc",
    "algorithm.use_kl_in_reward": False,
    "actor_rollout_ref.actor.use_kl_loss": True,
    "actor_rollout_ref.actor.kl_loss_coef": 0.001,
    "actor_rollout_ref.actor.kl_loss_type": "low_var_kl",
    "actor_rollout_ref.actor.entropy_coeff": 0,
    "trainer.n_gpus_per_node": 4,
    "actor_rollout_ref.rollout.tensor_model_parallel_size": 1,
    "actor_rollout_ref.rollout.name": "vllm",
    "actor_rollout_ref.rollout.mode": "async",
    "actor_rollout_ref.rollout.gpu_memory_utilization": 0.6,
    "trainer.total_epochs": 6,
    "seal.apatch.w_min": 0.5,
    "seal.apatch.w_max": 2.0,
    # the released configuration (paper_results.md, below Table 4)
    "actor_rollout_ref.actor.clip_ratio": 0.2,
    "actor_rollout_ref.actor.clip_ratio_c": 10.0,
    "actor_rollout_ref.actor.grad_clip": 1.0,
    "actor_rollout_ref.actor.loss_agg_mode": "token-mean",
    "actor_rollout_ref.ref.fsdp_config.param_offload": True,
    "trainer.test_freq": 10,
    "trainer.val_before_train": True,
    "seal.apatch.mode": "dynamic",
    "seal.apatch.ema_beta": 0.25,
    "seal.apatch.prevalence_alpha": 1.0,
    "seal.apatch.confidence_samples": 32,
    # DESIGN §6: the paper-faithful run
    "seal.taxonomy": "reference",
    "seal.interface.preset": "reference",
}


class Composed(dict[str, DictConfig]):
    """exp/NAME.yaml composed at its first use: a process composes only the experiments its tests read (a
    composition takes a second; pytest-xdist may split this module's tests between workers)."""

    def __missing__(self, name: str) -> DictConfig:
        self[name] = compose_experiment(EXP / f"{name}.yaml")
        return self[name]


@pytest.fixture(scope="module")
def composed() -> Composed:
    return Composed()


def flat(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(flat(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: node}


def test_the_paper_experiments_the_gpu_smoke_runs_and_the_learning_recipe_are_all_there():
    assert set(EXPERIMENTS) == {
        "SEAL",
        "SEAL_3B",
        "SEAL_3B_1gpu",
        "SEAL_full_loop",
        "SEAL_ToolACE",
        "vanilla_grpo",
        "ablation_no_env_adaptation",
        "ablation_no_reweighting",
        "ablation_static_weights",
        "smoke_gpu",
        "smoke_gpu_vanilla",
        "smoke_gpu_paper_batch",
        "learn_seal",
        "learn_vanilla",
        "learn_qwen_seal",
        "learn_qwen_vanilla",
        "learn_qwen_full_loop",
        "learn_qwen_full_loop_skip",
        "learn_qwen_no_reweighting",
        "learn_qwen_seal_n16",
        "learn_qwen_vanilla_released_parse",
        "learn_qwen_seal_released_parse",
    }


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_composes_and_passes_validate_config(composed, name):
    config = composed[name]
    settings = validate_experiment(config, check_data=False)
    assert isinstance(settings, SealSettings)
    seeded = f"{name}_s{config.seed}" if "seed" in config else name  # the learning recipe's runs, per seed
    assert config.trainer.experiment_name == seeded
    assert config.trainer.use_v1 and config.transfer_queue.enable
    assert Path(config.actor_rollout_ref.rollout.agent.agent_loop_config_path).is_file()
    assert config.data.train_files == str(DATA_DIR / "bfcl_train.parquet")
    assert config.data.val_files == str(DATA_DIR / "bfcl_val.parquet")
    assert Path(config.trainer.default_local_dir).is_absolute()


def test_seal_yaml_is_table_4_field_by_field(composed):
    config = composed["SEAL"]
    drifted = {
        key: (OmegaConf.select(config, key), want)
        for key, want in TABLE_4.items()
        if OmegaConf.select(config, key) != want or type(OmegaConf.select(config, key)) is not type(want)
    }
    assert drifted == {}
    assert 400 // config.data.train_batch_size * config.trainer.total_epochs == 72  # "about 72 steps"
    assert dict(config.seal.apatch.rho) == dict(DEFAULT_RHO)  # Table 6


@pytest.mark.parametrize("name", [n for n in EXPERIMENTS if n != "SEAL"])
def test_each_experiment_differs_from_its_parent_in_exactly_the_keys_it_names(composed, name):
    own = OmegaConf.load(EXP / f"{name}.yaml")
    parent = own.defaults[0]
    named = set(flat(OmegaConf.to_container(own))) - {"defaults"}
    base = flat(OmegaConf.to_container(composed[parent], resolve=False))
    mine = flat(OmegaConf.to_container(composed[name], resolve=False))
    differing = {key for key in base.keys() | mine.keys() if base.get(key) != mine.get(key)} - DERIVED
    assert differing == named


def test_the_ablations_switch_what_the_paper_says(composed):
    def seal(name: str) -> SealSettings:
        return settings_from_config(composed[name])

    assert (seal("vanilla_grpo").apatch.mode, seal("vanilla_grpo").interface.adapt) == ("off", False)
    assert seal("ablation_no_reweighting").apatch.mode == "off"
    assert seal("ablation_no_reweighting").interface.adapt
    assert seal("ablation_static_weights").apatch.dynamic is False
    assert seal("ablation_no_env_adaptation").interface.preset == "none"
    assert (seal("SEAL_full_loop").taxonomy, seal("SEAL_full_loop").interface.preset) == ("paper", "full")
    assert composed["SEAL_3B"].data.train_batch_size == 16


def test_a_backbone_swap_is_one_override():
    config = compose_experiment(
        EXP / "SEAL.yaml", ["actor_rollout_ref.model.path=/models/Qwen2.5-3B-Instruct"]
    )
    assert config.actor_rollout_ref.model.path == "/models/Qwen2.5-3B-Instruct"


@pytest.mark.parametrize(
    "override",
    [
        "seal.apatch.ema_beta=abc",
        "seal.apatch.confidence_samples=1.5",
        "seal.interface.adapt=maybe",
        "seal.rollout.max_llm_calls=many",
        "seal.no_such_key=1",
    ],
)
def test_wrong_types_and_unknown_keys_in_seal_are_refused_at_compose(override):
    with pytest.raises(ExperimentError, match=r"SEAL\.yaml"):
        compose_experiment(EXP / "SEAL.yaml", [override])


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("seal.apatch.mode=sometimes", "seal.apatch.mode"),
        ("seal.apatch.w_min=3", "w_min"),
        ("seal.taxonomy=mine", "seal.taxonomy"),
        ("seal.interface.preset=rich", "seal.interface.preset"),
        ("seal.rollout.env_backend=inprocess", "adapt"),
        ("seal.rollout.env_actors_per_node=0", "env_actors_per_node"),
    ],
)
def test_wrong_values_in_seal_are_refused_by_validation(override, message):
    config = compose_experiment(EXP / "SEAL.yaml", [override])
    with pytest.raises(ExperimentError, match=message):
        validate_experiment(config, check_data=False)


@pytest.mark.parametrize("experiment", ["SEAL", "vanilla_grpo"])
def test_verl_s_legacy_trainer_is_refused_in_one_line(experiment):
    config = compose_experiment(EXP / f"{experiment}.yaml", ["trainer.use_v1=false"])
    with pytest.raises(
        ExperimentError, match=r"^trainer\.use_v1=false: SEAL runs on verl's V1 trainer"
    ) as raised:
        validate_experiment(config, check_data=False)
    assert "\n" not in str(raised.value)


def test_missing_experiment_file_is_one_clear_error(tmp_path):
    with pytest.raises(ExperimentError, match="no experiment file"):
        compose_experiment(tmp_path / "nope.yaml")


def test_the_apatch_section_is_the_tocf_config_with_its_defaults(composed):
    settings = settings_from_config(composed["SEAL"])
    assert isinstance(settings.apatch, APatchConfig)
    assert settings.apatch == APatchConfig() and settings.apatch.enabled and settings.apatch.dynamic


def test_the_task_runner_is_a_ray_actor_built_on_verls_v1_runner():
    from verl.trainer.main_ppo import TaskRunnerV1

    from seal.trainer.rl.task_runner import SealTaskRunner

    assert issubclass(SealTaskRunner.__ray_actor_class__, TaskRunnerV1.__ray_actor_class__)
    assert callable(SealTaskRunner.remote)


def test_the_trainer_s_prompt_loaders_leave_no_worker_process_behind(tmp_path):
    """verl's V1 trainer keeps its train iterator after fit() returns; worker processes of it would be
    SIGKILLed when Ray tears the trainer's actor down, and PyTorch would report that as a crash."""
    from seal.trainer.rl.trainer import SealPPOTrainer

    files = {split: tmp_path / f"{split}.parquet" for split in ("train", "val")}
    for split, path in files.items():
        path.write_bytes(parquet_bytes(split))
    trainer = object.__new__(SealPPOTrainer)
    trainer.config = compose_experiment(
        EXP / "SEAL.yaml", [f"data.train_files={files['train']}", f"data.val_files={files['val']}"]
    )
    trainer.tokenizer, trainer.processor = chatml_tokenizer(["hello"], 300), None
    trainer.trainer_mode, trainer.parameter_sync_step = "sync", 1
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    trainer._init_dataloader()
    assert len(trainer._fetch_one_gen_batch()["uid"]) == trainer.config.data.train_batch_size
    assert len(next(iter(trainer.val_dataloader))["raw_prompt"]) == 100
    assert {child.pid for child in psutil.Process().children(recursive=True)} <= before


def test_missing_data_files_are_renamed_into_place_whole_and_present_ones_are_kept(tmp_path, monkeypatch):
    from seal.trainer import experiment

    monkeypatch.setattr(experiment, "DATA_DIR", tmp_path / "data")
    names = {split: tmp_path / "data" / f"bfcl_{split}.parquet" for split in ("train", "val")}
    names["val"].parent.mkdir()
    names["val"].write_bytes(b"kept")
    config = OmegaConf.create(
        {"data": {"train_files": str(names["train"]), "val_files": [str(names["val"])]}}
    )
    renamed = []
    real_replace = os.replace
    monkeypatch.setattr(experiment.os, "replace", lambda a, b: renamed.append((a, b)) or real_replace(a, b))

    assert experiment.ensure_data(config) == [names["train"]]
    assert names["train"].read_bytes() == parquet_bytes("train") and names["val"].read_bytes() == b"kept"
    ((partial, final),) = renamed
    assert final == names["train"] and partial.parent == final.parent and partial.name.endswith(".partial")
    assert sorted(p.name for p in names["train"].parent.iterdir()) == [
        "bfcl_train.parquet",
        "bfcl_val.parquet",
    ]
