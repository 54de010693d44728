"""Overrides of keys that nothing reads are refused, with the key that was probably meant."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from seal.trainer.experiment import compose_experiment
from seal.trainer.launch.override_keys import OverrideKeyError, check_override_keys

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def seal_defaults():
    return compose_experiment(ROOT / "exp" / "SEAL.yaml")


@pytest.mark.parametrize(
    ("override", "meant"),
    [
        ("+trainer.tset_freq=5", "trainer.test_freq"),
        ("++trainer.tset_freq=5", "trainer.test_freq"),
        ("trainer.tset_freq=5", "trainer.test_freq"),
        ("+seal.taxnomy=paper", "seal.taxonomy"),
        ("+seal.interface.adpt=false", "seal.interface.adapt"),
        ("data.train_batch_sz=16", "data.train_batch_size"),
        ("actor_rollout_ref.actr.optim.lr=1e-6", "actor_rollout_ref.actor.optim.lr"),
        ("trainr.test_freq=5", "trainer.test_freq"),
    ],
)
def test_a_misspelt_key_is_refused_with_the_key_it_resembles(seal_defaults, override, meant):
    with pytest.raises(OverrideKeyError) as refused:
        check_override_keys(seal_defaults, [override])
    message = str(refused.value)
    assert message.startswith(f"{override}: nothing reads ") and message.endswith(f"did you mean `{meant}`?")
    assert "\n" not in message


@pytest.mark.parametrize("override", ["+trainer.brand_new=abc", "+seal.rollout.zzz=1", "+zzz=1"])
def test_a_new_key_nothing_reads_is_refused_without_a_wild_guess(seal_defaults, override):
    with pytest.raises(OverrideKeyError, match="nothing reads") as refused:
        check_override_keys(seal_defaults, [override])
    assert "did you mean" not in str(refused.value)


@pytest.mark.parametrize(
    "override",
    [
        "trainer.test_freq=5",
        "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
        "+actor_rollout_ref.model.override_config.rope_scaling.type=linear",
        "+actor_rollout_ref.rollout.engine_kwargs.vllm.swap_space=4",
        "+ray_kwargs.ray_init.address=auto",
        "+ray_kwargs.ray_init.runtime_env.env_vars.HF_HOME=/cache",
        "+seal.apatch.rho.recovery_failure=1.5",
        "actor=dp_actor",
        "~ray_kwargs.ray_init.num_cpus",
    ],
)
def test_keys_that_something_reads_pass(seal_defaults, override):
    check_override_keys(seal_defaults, [override])


@pytest.mark.parametrize(
    ("override", "says"),
    [
        (
            "~trainer.test_freq",
            "verl or SEAL reads trainer.test_freq, which cannot be deleted; set trainer.test_freq=...",
        ),
        ("~trainer.rollout_data_dir", "cannot be deleted; set trainer.rollout_data_dir=null"),
        ("=5", "an override needs a key (key=value)"),
    ],
)
def test_a_deletion_of_a_key_something_reads_and_an_override_without_a_key_are_refused(
    seal_defaults, override, says
):
    with pytest.raises(OverrideKeyError) as refused:
        check_override_keys(seal_defaults, [override])
    assert str(refused.value).startswith(f"{override}: ") and says in str(refused.value)


def test_a_field_of_the_dataclass_verl_builds_a_section_into_may_be_added(seal_defaults):
    assert "enable_sleep_mode" not in seal_defaults.actor_rollout_ref.rollout  # not in verl's yaml
    check_override_keys(seal_defaults, ["+actor_rollout_ref.rollout.enable_sleep_mode=true"])
    with pytest.raises(OverrideKeyError) as refused:
        check_override_keys(seal_defaults, ["+actor_rollout_ref.rollout.enable_sleep_mod=true"])
    assert str(refused.value).endswith("did you mean `actor_rollout_ref.rollout.enable_sleep_mode`?")


@pytest.mark.parametrize(
    "override",
    [
        "actor_rollout_ref.model.override_config.attn_implementation=sdpa",
        "actor_rollout_ref.rollout.enable_sleep_mode=true",
    ],
)
def test_a_new_key_of_an_open_map_or_a_dataclass_needs_the_plus(seal_defaults, override):
    with pytest.raises(OverrideKeyError) as refused:
        check_override_keys(seal_defaults, [override])
    assert str(refused.value).endswith(f"add it with +{override}")


def test_the_check_reads_the_config_without_changing_it(seal_defaults):
    before = OmegaConf.to_yaml(seal_defaults)
    with pytest.raises(OverrideKeyError):
        check_override_keys(seal_defaults, ["+actor_rollout_ref.model.override_config.x=1", "+trainer.x=5"])
    assert OmegaConf.to_yaml(seal_defaults) == before
