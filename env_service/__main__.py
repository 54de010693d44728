"""`python -m env_service --host 127.0.0.1 --port 8082 ...`: run the environment service.

Its flags are generated from `ServiceSettings`, exactly as `seal serve`'s are.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from env_service.app import BindError, ServiceSettings, serve
from seal.flags import add_flags, settings_from_flags


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m env_service", description="The SEAL BFCL environment service."
    )
    add_flags(parser, ServiceSettings)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = settings_from_flags(ServiceSettings, args)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        serve(settings)
    except BindError as exc:
        parser.exit(1, f"{parser.prog}: {exc}\n")


if __name__ == "__main__":
    main()
