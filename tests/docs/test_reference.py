"""docs/reference/ is what scripts/make_docs_reference.py writes from the code: a flag, setting or metric
added without regenerating the committed pages fails here."""

from __future__ import annotations

import ast
import dataclasses
import re
import typing
from pathlib import Path

import pytest

from seal.trainer.rl.closed_loop import ClosedLoop
from seal.trainer.settings import settings_from_config
from tests.support.doubles import trajectory_fields
from tests.support.script_module import load_script

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"
make = load_script("make_docs_reference")


def page(name: str) -> str:
    return (REFERENCE / name).read_text(encoding="utf-8")


def wildcard(name: str) -> str:
    """A metric name with each `{placeholder}` as `*`, so a pattern and an f-string compare."""
    return re.sub(r"\{[^}]*\}", "*", name)


def test_the_committed_pages_are_what_the_code_generates(tmp_path, capsys):
    (tmp_path / "cli.md").write_text(page("cli.md").replace("`--resume`", "`--resumed`"))
    assert make.main(["--check", "--out", str(tmp_path)]) == 1  # one render: every page differs or is absent
    stale = capsys.readouterr().err
    assert all(f"{tmp_path / name} differs" in stale for name in make.PAGES)
    assert make.main(["--check"]) == 0


def test_every_option_of_every_seal_command_is_on_the_cli_page():
    from seal.cli import COMMANDS
    from seal.evaluation.suites import SUITES

    text = page("cli.md")
    argvs = [[name] for name in COMMANDS if name != "eval"] + [["eval", "--suite", s] for s in SUITES]
    for argv in argvs:
        for action in make._subparser(argv)._actions:
            for option in action.option_strings:
                assert f"`{option}`" in text or option in ("-h", "--help"), (argv, option)


def _keys(cls: type, prefix: str) -> list[str]:
    hints = typing.get_type_hints(cls)
    keys = []
    for field in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[field.name]):
            keys += _keys(hints[field.name], f"{prefix}{field.name}.")
        else:
            keys.append(prefix + field.name)
    return keys


def test_every_training_setting_is_on_the_settings_page():
    from seal.trainer.settings import SealSettings
    from seal.trainer.sft_settings import SFTSettings

    text = page("settings.md")
    keys = _keys(SealSettings, "seal.") + _keys(SFTSettings, "sft.")
    assert "seal.apatch.ema_beta" in keys and "seal.rollout.max_llm_calls" in keys
    assert [key for key in keys if f"`{key}`" not in text] == []


def test_a_new_setting_is_rendered_and_an_undocumented_one_is_refused():
    @dataclasses.dataclass
    class Documented:
        """A section."""

        window: int = 3
        """How far to look."""

    @dataclasses.dataclass
    class Undocumented:
        """A section."""

        window: int = 3

    rendered = "\n".join(make.settings_tables(Documented, "x.", "x"))
    assert "| `x.window` | int | `3` | How far to look. |" in rendered
    with pytest.raises(ValueError, match=r"Undocumented\.window has no docstring"):
        make.settings_tables(Undocumented, "x.", "x")


def _documented() -> set[str]:
    return {wildcard(name) for table in make.metric_tables().values() for name in table}


def test_every_metric_of_a_training_step_is_in_the_glossary():
    """A step with every kind of trajectory (labels, a cut, an env error, a mixed group) and an Ω that holds
    a guideline: each metric it logs has a meaning."""
    settings = settings_from_config({"seal": {"apatch": {"mode": "dynamic"}}})
    loop = ClosedLoop(settings)
    loop.interface = {"version": 2, "guidelines": ["schema"]}
    rows = [
        trajectory_fields("multi_turn_base_0", labels=["pass"], reward=1.0, env_seconds=0.2, gen_seconds=0.4),
        trajectory_fields("multi_turn_base_1", labels=["state_mismatch"], cut="calls", trained_cut=True),
        trajectory_fields("multi_turn_miss_func_0", labels=["spurious_tool_call"]),
        trajectory_fields("multi_turn_long_context_0", env_error="service down"),
    ]
    result = loop.step(rows, [1.0, -1.0, -1.0, 0.0], 1, 0, groups=["a", "a", "b", "c"])
    logged = {re.sub(r"/(pass|state_mismatch|spurious_tool_call)$", "/*", name) for name in result.metrics}
    documented = _documented()
    undocumented = sorted(
        name
        for name in result.metrics
        if not any(re.fullmatch(re.escape(p).replace(r"\*", "[^/]+"), name) for p in documented)
    )
    assert logged and undocumented == []


def _literal_metric_names(path: Path) -> set[str]:
    """Metric names a module writes literally: dict keys and `metrics[...]` targets that look like one."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        keys = []
        if isinstance(node, ast.Assign):
            keys = [t.slice for t in node.targets if isinstance(t, ast.Subscript)]
        elif isinstance(node, ast.DictComp):
            keys = [node.key]
        for key in keys:
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                names.add(key.value)
            elif isinstance(key, ast.JoinedStr) and isinstance(key.values[0], ast.Constant):
                names.add("".join(v.value if isinstance(v, ast.Constant) else "*" for v in key.values))
    return {name for name in names if re.match(r"(val-(core|aux)/)?seal/|timing_s/seal_", name)}


def test_every_metric_the_trainer_names_itself_is_in_the_glossary_and_on_its_page():
    written = _literal_metric_names(ROOT / "seal" / "trainer" / "rl" / "trainer.py")
    assert "timing_s/seal_evolve" in written and "val-aux/seal/pass_rate/*" in written
    assert sorted(written - _documented()) == []
    text = page("metrics.md")
    assert [
        name for table in make.metric_tables().values() for name in table if f"`{name}`" not in text
    ] == []
