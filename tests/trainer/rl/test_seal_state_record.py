"""A checkpoint's `seal_state.json` is validated whole at load (`SealStateRecord`): a wrong type anywhere,
Ω's config included, or JSON nested past the parser's limit is one line naming the file and the field, and
the loop is left as it was; a valid file (one without Ω's text too) restores exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from seal.env.interface import build_interface, evolve
from seal.tocf.profile import FailureProfile
from seal.trainer.experiment import PROJECT_ROOT, compose_experiment
from seal.trainer.rl.closed_loop import ClosedLoop
from seal.trainer.rl.trainer import STATE_FILE, load_seal_state, save_seal_state
from seal.trainer.settings import settings_from_config

SETTINGS = settings_from_config(compose_experiment(PROJECT_ROOT / "exp" / "SEAL.yaml"))


def evolved_loop() -> ClosedLoop:
    """A loop whose C_t switched guidelines on, with the Ω it evolved (as the service reports it)."""
    loop = ClosedLoop(SETTINGS)
    for _ in range(20):
        loop.profile.observe(["missing_tool_call", "pass"], 0.0, "multi_turn_base")
    loop.interface = evolve(build_interface("full"), loop.profile.to_json(), 2).to_json()
    assert loop.interface["guidelines"]
    return loop


@pytest.fixture
def saved(tmp_path) -> tuple[Path, dict[str, Any]]:
    state = evolved_loop().to_json()
    save_seal_state(evolved_loop(), tmp_path)
    return tmp_path, state


def rewrite(folder: Path, text: str) -> None:
    (folder / STATE_FILE).write_text(text, encoding="utf-8")


def test_a_valid_state_restores_exactly(saved):
    folder, state = saved
    loop = ClosedLoop(SETTINGS)
    load_seal_state(loop, folder)
    assert loop.to_json() == state


def test_a_state_saved_before_omegas_text_was_loads_without_it(saved):
    folder, state = saved
    old = json.loads(json.dumps(state))
    del old["interface"]["system_suffix"]
    rewrite(folder, json.dumps(old))
    loop = ClosedLoop(SETTINGS)
    load_seal_state(loop, folder)
    assert loop.interface == old["interface"] and "system_suffix" not in loop.interface


@pytest.mark.parametrize(
    "path, value, field",
    [
        (("interface", "config", "min_count"), "8", "interface.config.min_count"),
        (("interface", "config", "note"), 1, "interface.config.note"),
        (("interface", "config", "colour"), "blue", "interface.config.colour"),
        (("interface", "version"), [3], "interface.version"),
        (("interface", "guidelines"), [7], "interface.guidelines.0"),
        (("interface", "guidelines"), "Scope", "interface.guidelines"),
        (("interface", "profile", "window", "labels", "pass"), "9", "interface.profile.window.labels.pass"),
        (("interface", "system_suffix"), 12, "interface.system_suffix"),
        (("apatch", "rho", "pass"), "1", "apatch.rho.pass"),
        (("profile", "total", "trajectories"), -1, "profile.total.trajectories"),
        (("window_epoch",), True, "window_epoch"),
    ],
)
def test_a_wrong_type_anywhere_is_one_line_naming_the_file_and_field(saved, path, value, field):
    folder, state = saved
    broken = json.loads(json.dumps(state))
    node = broken
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    rewrite(folder, json.dumps(broken))
    loop = ClosedLoop(SETTINGS)
    before = loop.to_json()
    with pytest.raises(RuntimeError) as refused:
        load_seal_state(loop, folder)
    message = str(refused.value)
    assert "\n" not in message and message.startswith(f"{folder / STATE_FILE}: {field}: ")
    assert loop.to_json() == before


def test_guidelines_their_config_does_not_allow_are_refused_at_load(saved):
    folder, state = saved
    broken = json.loads(json.dumps(state))
    broken["interface"]["config"]["max_lines"] = 0
    rewrite(folder, json.dumps(broken))
    with pytest.raises(RuntimeError, match=r"seal_state\.json: interface: .* exceed max_lines 0$"):
        load_seal_state(ClosedLoop(SETTINGS), folder)


def test_json_nested_100000_deep_is_one_line(saved):
    folder, _ = saved
    deep = "[" * 100_000 + "]" * 100_000
    rewrite(folder, f'{{"version": 1, "profile": {deep}}}')
    with pytest.raises(RuntimeError) as refused:
        load_seal_state(ClosedLoop(SETTINGS), folder)
    message = str(refused.value)
    assert "\n" not in message and "malformed JSON" in message and "recursion limit" in message
    assert len(message) < 500


def test_a_truncated_file_is_one_line(saved):
    folder, state = saved
    rewrite(folder, json.dumps(state)[:40])
    with pytest.raises(RuntimeError, match=r"seal_state\.json: malformed JSON: "):
        load_seal_state(ClosedLoop(SETTINGS), folder)


def test_the_profile_left_empty_is_refused_not_read_as_zero(saved):
    folder, state = saved
    rewrite(folder, json.dumps({**state, "profile": FailureProfile().to_json() | {"version": 2}}))
    with pytest.raises(RuntimeError, match=r"profile\.version: "):
        load_seal_state(ClosedLoop(SETTINGS), folder)
