"""`python -m env_service --host 127.0.0.1 --port 8082 ...` and `seal serve`: run the environment service."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from env_service.app import LOG_LEVELS, serve
from seal.env.interface import PRESETS
from seal.tocf.labels import TAXONOMIES


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """The service's options, shared by `python -m env_service` and `seal serve`."""
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default loopback only)")
    parser.add_argument("--port", type=int, default=8082)
    parser.add_argument("--max-episodes", type=int, default=512, help="open-episode limit (429 beyond it)")
    parser.add_argument("--ttl", type=float, default=1800.0, help="seconds before an idle episode is reaped")
    parser.add_argument(
        "--max-body-bytes", type=int, default=1 << 20, help="request body limit (413 beyond it)"
    )
    parser.add_argument("--interface-preset", choices=list(PRESETS), default="reference")
    parser.add_argument(
        "--taxonomy", choices=list(TAXONOMIES), default="reference", help="diagnosis taxonomy"
    )
    parser.add_argument("--max-steps", type=int, default=None, help="optional per-episode step cap")
    parser.add_argument("--log-level", choices=list(LOG_LEVELS), default="info")


def serve_from_args(args: argparse.Namespace) -> None:
    serve(
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        max_episodes=args.max_episodes,
        ttl_s=args.ttl,
        max_body_bytes=args.max_body_bytes,
        interface_preset=args.interface_preset,
        taxonomy=args.taxonomy,
        max_steps=args.max_steps,
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m env_service", description="The SEAL BFCL environment service."
    )
    add_serve_arguments(parser)
    serve_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    main()
