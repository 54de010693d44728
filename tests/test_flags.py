"""`seal.flags`: a settings dataclass gives its command's flags and is built back from them."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import pytest

from seal.flags import REQUIRED, add_flags, setting, settings_from_flags, to_flags


@dataclass(frozen=True, kw_only=True)
class Run:
    url: str = setting(REQUIRED, "where to send requests", metavar="URL")
    resume: bool = setting(False, "continue the run in OUT")
    timeout: float = setting(300.0, "seconds per request")
    out: Path | None = setting(None, "output folder (default: runs/<url>)", parse=Path)
    chosen: tuple[str, ...]


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="run")
    add_flags(parser, Run, ["url", "resume", "timeout", "out"])
    return parser


def test_required_switch_and_given_fields_build_the_settings():
    args = parser().parse_args(["--url", "http://h", "--resume", "--out", "o"])
    run = settings_from_flags(Run, args, chosen=("a",))
    assert run == Run(url="http://h", resume=True, timeout=300.0, out=Path("o"), chosen=("a",))


@dataclass
class Store:
    keep: bool = setting(False, "keep finished episodes")
    ttl: float = setting(1800.0, "seconds before an idle episode is reaped")


def test_to_flags_gives_a_switch_only_when_it_is_on():
    assert to_flags(Store(keep=True, ttl=60.0)) == ["--keep", "--ttl", "60.0"]
    assert to_flags(Store()) == []
    parsed = argparse.ArgumentParser()
    add_flags(parsed, Store)
    assert settings_from_flags(Store, parsed.parse_args(to_flags(Store(keep=True)))) == Store(keep=True)


def test_a_missing_required_flag_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_:
        parser().parse_args([])
    assert exit_.value.code == 2
    assert "the following arguments are required: --url" in capsys.readouterr().err


def test_the_help_names_each_default_once():
    shown = parser().format_help()
    assert "--url URL" in shown and "(default: 300.0)" in shown and "(default: off)" in shown
    assert "(default: runs/<url>)" in shown and "(default: None)" not in shown
