"""Command-line flags generated from a settings dataclass, so each default and help text exists once.

A field becomes `--field-name` (or the `flag` of its metadata); its type, default, `choices` and
`help` come from the field. A `REQUIRED` field's flag must be given; a bool field defaulting to False is a
switch (`--resume`). A field whose type is itself a settings dataclass contributes its own
fields as flags, flat. `settings_from_flags` builds the dataclass back from the parsed arguments, and
`to_flags` writes settings as the flags that give them (to start a service with a run's settings).
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

S = TypeVar("S")

REQUIRED: Any = dataclasses.MISSING
"""The default of a setting without one: its flag must be given."""


def setting(
    default: Any,
    help: str,
    *,
    flag: str | None = None,
    choices: Sequence[str] | None = None,
    parse: Callable[[str], Any] | None = None,
    metavar: str | None = None,
) -> Any:
    """A dataclass field with what its command-line flag needs; `parse` turns the flag's text into a value,
    `metavar` names that text in the help (default: the flag's name, upper case)."""
    metadata = {"help": help, "flag": flag, "choices": choices, "parse": parse, "metavar": metavar}
    return dataclasses.field(default=default, metadata=metadata)


def comma_list(text: str) -> tuple[str, ...]:
    """`a,b, c` → ("a", "b", "c")."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _scalar(hint: Any) -> Any:
    """`int | None` → int: the type a flag's text is parsed as."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        (inner,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return inner
    return hint


def _leaves(cls: type) -> Iterator[tuple[dataclasses.Field, Any]]:
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        if dataclasses.is_dataclass(hint):
            yield from _leaves(hint)
        else:
            yield field, hint


KINDS = {int: "an integer", float: "a number"}
"""How a flag's type is named when its text does not parse as one (`--port abc`)."""


def _checked(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """argparse shows an `ArgumentTypeError`'s own text; a ValueError would become 'invalid value'."""

    def parse_or_explain(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            kind = KINDS.get(parse)
            raise argparse.ArgumentTypeError(f"expected {kind}, got {text!r}" if kind else str(exc)) from None

    return parse_or_explain


def add_flags(parser: argparse.ArgumentParser, cls: type, names: Sequence[str] | None = None) -> None:
    """One flag per field of `cls` (nested settings dataclasses included; only those in `names` when
    given), defaults shown in the help."""
    for field, hint in _leaves(cls):
        if names is not None and field.name not in names:
            continue
        meta = field.metadata
        if "help" not in meta:
            raise TypeError(f"{cls.__name__}.{field.name} has no help: declare it with setting()")
        flag = _flag(field)
        if hint is bool:
            _add_switch(parser, flag, field)
            continue
        default = field.default
        required = default is REQUIRED
        shown = _shown(default)
        choices = meta["choices"]
        parser.add_argument(
            flag,
            dest=field.name,
            metavar="{" + ",".join(choices) + "}"
            if choices
            else meta["metavar"] or flag.removeprefix("--").upper().replace("-", "_"),
            type=_checked(meta["parse"] or _scalar(hint)),
            choices=choices,
            required=required,
            default=None if required else default,
            help=meta["help"] if required or default is None else f"{meta['help']} (default: {shown})",
        )


def _shown(default: Any) -> str:
    """A default as the help shows it (`a,b` for a tuple)."""
    return ",".join(default) if isinstance(default, tuple) else str(default)


def _add_switch(parser: argparse.ArgumentParser, flag: str, field: dataclasses.Field) -> None:
    """A bool setting: off unless its flag is given."""
    if field.default is not False:
        raise TypeError(f"{field.name}: a bool setting is a switch, off by default")
    help = f"{field.metadata['help']} (default: off)"
    parser.add_argument(flag, dest=field.name, action="store_true", help=help)


def command_parser(
    subparsers: Any, name: str, *, prog: str, help: str, description: str
) -> argparse.ArgumentParser:
    """A command's parser: its own, named `prog`, when `subparsers` is None (a script's entry point), else
    the sub-command `name` of the parser `subparsers` belongs to (`seal NAME`)."""
    options: dict[str, Any] = {
        "description": description,
        "formatter_class": argparse.RawDescriptionHelpFormatter,
    }
    if subparsers is None:
        return argparse.ArgumentParser(prog=prog, **options)
    return subparsers.add_parser(name, help=help, **options)


def _flag(field: dataclasses.Field) -> str:
    return field.metadata["flag"] or "--" + field.name.replace("_", "-")


def to_flags(settings: Any) -> list[str]:
    """The command line that gives `settings` (a dataclass of `setting` fields): a flag for each field
    whose value is not its default, so the command's own defaults stay its defaults."""
    flags: list[str] = []
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        if dataclasses.is_dataclass(value):
            flags += to_flags(value)
        elif value is True:
            flags.append(_flag(field))
        elif value != field.default:
            text = ",".join(value) if isinstance(value, tuple) else str(value)
            flags += [_flag(field), text]
    return flags


def settings_from_flags(cls: type[S], args: argparse.Namespace, **given: Any) -> S:
    """`cls` built from the flags `add_flags(parser, cls)` added, and the fields in `given` (those without a
    flag, or whose flag's value the caller resolved); its own validation runs as usual."""
    hints = typing.get_type_hints(cls)
    values = {}
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        if field.name in given:
            values[field.name] = given[field.name]
            continue
        hint = hints[field.name]
        values[field.name] = (
            settings_from_flags(hint, args) if dataclasses.is_dataclass(hint) else getattr(args, field.name)
        )
    return cls(**values)
