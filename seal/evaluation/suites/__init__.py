"""The suites of `seal eval`: BFCL V3 multi-turn (in distribution) and the paper's Table 2 benchmarks.

`seal eval --suite NAME --help` lists that suite's options: the parser is built for the suite named on the
command line, so each suite shows (and accepts) only its own flags.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

DEFAULT_SUITE = "bfcl_v3"
SUITES = {
    "bfcl_v3": "BFCL V3 multi-turn through the SEAL environment (in distribution; the default)",
    "bfcl_v4_memory": "BFCL V4 Memory: three memory backends, offline (install.sh --ood)",
    "bfcl_v4_web_search": "BFCL V4 Web Search: needs SERPAPI_API_KEY and network (install.sh --ood)",
    "tau2": "tau2-bench airline, retail, telecom with a simulated user (install.sh --ood)",
}


def suite_named(argv: Sequence[str]) -> str:
    """The `--suite` on the command line (the default when absent or unknown: the parser then refuses it)."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--suite", default=DEFAULT_SUITE)
    chosen = pre.parse_known_args(list(argv))[0].suite
    return chosen if chosen in SUITES else DEFAULT_SUITE


def ood_suite(name: str):
    """The Suite object of an out-of-distribution suite."""
    if name == "tau2":
        from seal.evaluation.suites.tau2_bench import Tau2Suite

        return Tau2Suite()
    from seal.evaluation.suites.bfcl_v4 import MemorySuite, WebSearchSuite

    return {"bfcl_v4_memory": MemorySuite, "bfcl_v4_web_search": WebSearchSuite}[name]()


def add_suite_arguments(parser: argparse.ArgumentParser, suite: str) -> None:
    """`--suite` and the named suite's own options."""
    parser.add_argument(
        "--suite",
        choices=list(SUITES),
        default=DEFAULT_SUITE,
        help="; ".join(f"{name}: {text}" for name, text in SUITES.items())
        + " (default: %(default)s; --suite NAME --help lists that suite's options)",
    )
    if suite == DEFAULT_SUITE:
        from seal.evaluation.command import add_eval_arguments

        add_eval_arguments(parser)
    else:
        ood_suite(suite).add_arguments(parser)


def run_eval(args: argparse.Namespace) -> int:
    """`seal eval`, whichever suite."""
    if args.suite == DEFAULT_SUITE:
        from seal.evaluation.command import run_eval_command

        return run_eval_command(args)
    from seal.evaluation.suites.common import run_suite_command

    return run_suite_command(ood_suite(args.suite), args)
