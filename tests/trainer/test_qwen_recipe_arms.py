"""The Qwen2.5-Coder-1.5B recipe's arms (exp/learn_qwen_*.yaml): each one the campaign names, each named one
a config, and their tool-call parsing: the recipe's arms keep the strict-tags rule their lines were measured
with, the released-parse pair differs from its arms in that rule alone; and their update in a step without a
mixed group: verl's, as every line was measured, but in `full_loop_skip`, the closed loop but for that."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from seal.protocol import PROTOCOLS
from seal.reports.results_page import ARM_NAMES
from seal.results.campaign import ARMS
from seal.trainer.experiment import PROJECT_ROOT, compose_experiment
from tests.trainer.test_trainer_config import flat

EXP = PROJECT_ROOT / "exp"
RELEASED_PARSE = "_released_parse"
NAMES = {"trainer.experiment_name", "trainer.default_local_dir", "trainer.validation_data_dir"}


def protocol_of(arm: str) -> str:
    return compose_experiment(EXP / f"learn_qwen_{arm}.yaml").seal.rollout.protocol


def differing_keys(arm: str, base: str) -> set[str]:
    variant, reference = (
        flat(OmegaConf.to_container(compose_experiment(EXP / f"learn_qwen_{name}.yaml")))
        for name in (arm, base)
    )
    return {key for key in variant.keys() | reference.keys() if variant.get(key) != reference.get(key)}


def test_every_arm_of_the_campaign_is_a_config_with_a_name_on_the_page_and_every_config_an_arm():
    configs = {path.stem.removeprefix("learn_qwen_") for path in EXP.glob("learn_qwen_*.yaml")}
    assert configs == set(ARMS) == set(ARM_NAMES)


@pytest.mark.parametrize("arm", ARMS)
def test_only_the_released_parse_arms_parse_calls_as_the_released_code(arm):
    protocol = protocol_of(arm)
    assert protocol in PROTOCOLS
    assert protocol == ("qwen_fc" if arm.endswith(RELEASED_PARSE) else "qwen_fc_strict_tags")


@pytest.mark.parametrize("arm", [arm for arm in ARMS if arm.endswith(RELEASED_PARSE)])
def test_a_released_parse_arm_is_its_arm_but_for_the_parsing_and_the_names(arm):
    assert differing_keys(arm, arm.removesuffix(RELEASED_PARSE)) == {"seal.rollout.protocol"} | NAMES


@pytest.mark.parametrize("arm", ARMS)
def test_only_full_loop_skip_leaves_the_actor_alone_in_a_step_without_a_mixed_group(arm):
    skip = compose_experiment(EXP / f"learn_qwen_{arm}.yaml").seal.skip_update_without_signal
    assert skip is (arm == "full_loop_skip")


def test_full_loop_skip_is_the_closed_loop_but_for_the_skip_and_the_names():
    assert differing_keys("full_loop_skip", "full_loop") == {"seal.skip_update_without_signal"} | NAMES
