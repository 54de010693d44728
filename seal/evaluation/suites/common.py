"""What every out-of-distribution suite of `seal eval` shares: the request, the run folder, the progress bar.

A suite selects item ids, plays them against the endpoint (each finished item appended to OUT as it ends,
as for BFCL V3), then summarizes the records in Table 2's shape. The endpoint preflight comes first (a dead
endpoint is refused in about a second, nothing written), then the suite's own preparation (models loaded,
data read), then the items.
"""

from __future__ import annotations

import argparse
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from seal.evaluation.budget import ContextBudget
from seal.evaluation.command import (
    _slug,
    add_endpoint_arguments,
    api_key_from_env,
    check_endpoint_arguments,
)
from seal.evaluation.endpoint import ChatEndpoint
from seal.evaluation.runner import Played, Progress
from seal.evaluation.session import EndpointSettings, budgeted_endpoint, run_to_exit
from seal.evaluation.store import OutputError, RunFolder
from seal.evaluation.suites.extras import go_offline
from seal.flags import add_flags, settings_from_flags
from seal.results.endings import endings, endings_line
from seal.urls import masked_url


@dataclass(frozen=True, kw_only=True)
class SuiteRequest(EndpointSettings):
    """One validated run of a suite; `options` is the suite's own settings dataclass."""

    suite: str
    options: Any = None

    def meta(self) -> dict[str, Any]:
        """`run.json`: what was run (no key; URLs with their credentials masked, seal/urls.py)."""
        fields = {
            k: v for k, v in asdict(self).items() if k not in ("out", "resume", "retry_failed", "options")
        }
        options = asdict(self.options) if self.options is not None else {}
        for key, value in options.items():
            if key.endswith("base_url") and isinstance(value, str):
                options[key] = masked_url(value)
        return {**fields, "base_url": masked_url(self.base_url), "options": options}


@dataclass
class SuiteRun:
    """What a suite plays its items with: the request, the endpoint and its budget, the records so far
    (resumed ones included) and `record`, which stores a finished item."""

    request: SuiteRequest
    endpoint: ChatEndpoint
    budget: ContextBudget
    done: dict[str, dict[str, Any]]
    record: Callable[[Played], None]


class Suite(ABC):
    """One benchmark run through `seal eval --suite NAME`."""

    name: ClassVar[str]
    description: ClassVar[str]
    settings: ClassVar[type | None] = None
    max_llm_calls: ClassVar[tuple[int, str]]
    """Default of --max-llm-calls and what it counts in this suite."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """The shared flags, `--max-llm-calls` with this suite's default and meaning, the suite's own."""
        shared = [f.name for f in fields(EndpointSettings) if f.name != "max_llm_calls"]
        add_endpoint_arguments(parser, shared)
        default, meaning = self.max_llm_calls
        parser.add_argument(
            "--max-llm-calls", type=int, default=default, help=f"{meaning} (default: %(default)s)"
        )
        if self.settings is not None:
            add_flags(parser.add_argument_group(f"{self.name} options"), self.settings)

    @abstractmethod
    def missing(self) -> str | None:
        """Why this suite cannot run here (an extra not installed, a key not set), in one line; else None."""

    @abstractmethod
    def select(self, request: SuiteRequest) -> tuple[str, ...]:
        """The item ids of this run, in report order (`--limit`: the first N of each category)."""

    async def prepare(self, request: SuiteRequest) -> None:  # noqa: B027 (optional hook)
        """Load what the items need (models, data) once the endpoint answered."""

    @abstractmethod
    async def play(self, run: SuiteRun, todo: Sequence[str]) -> None:
        """Play the `todo` items; `run.record(played)` stores each one as it ends."""

    @abstractmethod
    def summarize(self, records: Sequence[dict[str, Any]], request: SuiteRequest) -> dict[str, Any]:
        """summary.json: per category and the suite's average as Table 2 reports them."""

    @abstractmethod
    def table(self, summary: dict[str, Any]) -> str:
        """The summary as a Markdown table."""


@dataclass
class SuiteProgress(Progress):
    """The bar over every item; the pass rate over the scored ones (a memory prerequisite is not scored)."""

    unscored: int = 0
    """Items already done (resumed) that carry no reward."""
    desc: str = field(default="")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.bar.set_description(f"seal eval {self.desc}")
        self.bar.update(self.unscored)

    def add(self, record: dict[str, Any]) -> None:
        if "reward" in record:
            super().add(record)
        else:
            self.bar.update(1)


@dataclass(frozen=True)
class SuiteOutcome:
    """What a run ended with: the summary, the lines a resume dropped, the items played now and how many of
    them the endpoint failed."""

    summary: dict[str, Any]
    dropped: int
    ran: int
    failed: int


def build_suite_request(suite: Suite, args: argparse.Namespace) -> SuiteRequest:
    """Validate the parsed options; raises UsageError (or the settings' ValueError) with one line."""
    check_endpoint_arguments(args)
    options = settings_from_flags(suite.settings, args) if suite.settings is not None else None
    out = args.out or Path("outputs") / "eval" / f"{_slug(args.model)}-{suite.name}-{args.protocol}"
    return settings_from_flags(SuiteRequest, args, suite=suite.name, out=Path(out), options=options)


def _open_folder(request: SuiteRequest, selection: tuple[str, ...]) -> tuple[RunFolder, dict, int]:
    folder = RunFolder(request.out)
    try:
        recorded = folder.recorded_meta() if request.resume else None
        before = recorded.get("suite", "bfcl_v3") if recorded is not None else request.suite
        if before != request.suite:
            raise OutputError(f"{request.out} holds a {before} run, not {request.suite}; use another --out")
        if request.resume:
            resumed = folder.resume(request.meta(), selection, request.retry_failed)
            return folder, dict(resumed.records), resumed.dropped
        folder.start(request.meta())
        return folder, {}, 0
    except OSError as exc:
        raise OutputError(f"cannot use --out {request.out}: {exc}") from exc


def endpoint_errors(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    failed = [r["task_id"] for r in records if "error" in r]
    return {"count": len(failed), "task_ids": failed}


def markdown_report(suite: Suite, request: SuiteRequest, summary: dict[str, Any], notes: list[str]) -> str:
    lines = [
        f"# seal eval: {suite.name}",
        "",
        f"model `{request.model}` · base URL `{masked_url(request.base_url)}` · "
        f"protocol `{request.protocol}`",
        "",
        suite.table(summary).rstrip("\n"),
        "",
        *(f"- {note}" for note in notes),
    ]
    return "\n".join(lines) + "\n"


def notes_of(summary: dict[str, Any], dropped: int) -> list[str]:
    notes = [f"{key}: {value}" for key, value in summary.get("notes", {}).items()]
    if dropped:
        notes.append(f"resume dropped {dropped} broken or failed line(s); those items ran again")
    average = "n/a" if summary["average"] is None else f"{summary['average']:.2f}%"
    notes.append(endings_line(f"{summary['label']} {average}", summary["endings"]))
    errors = summary["endpoint_errors"]
    notes.append(
        f"{summary['scored']} scored item(s), {summary['truncated']} truncated (reward 0); "
        f"{errors['count']} endpoint error(s) excluded from the rates"
    )
    if errors["task_ids"]:
        notes.append(
            f'endpoint errors ("error" in episodes.jsonl; rerun with --resume --retry-failed): '
            f"{', '.join(errors['task_ids'][:20])}{' ...' if errors['count'] > 20 else ''}"
        )
    return notes


async def run_suite(suite: Suite, request: SuiteRequest, api_key: str | None) -> SuiteOutcome:
    """Preflight, prepare, play (or resume), summarize."""
    async with budgeted_endpoint(request, api_key) as (endpoint, budget):
        selection = suite.select(request)
        await suite.prepare(request)
        folder, done, dropped = _open_folder(request, selection)
        todo = [item for item in selection if item not in done]
        scored = [r for r in done.values() if "reward" in r]
        progress = SuiteProgress(
            total=len(selection), finished=scored, unscored=len(done) - len(scored), desc=suite.name
        )

        played_now: list[Played] = []

        def record(played: Played) -> None:
            played_now.append(played)
            folder.append(played.action_log, played.record)
            done[played.record["task_id"]] = played.record
            progress.add(played.record)

        try:
            with folder:
                await suite.play(SuiteRun(request, endpoint, budget, done, record), todo)
        finally:
            progress.close()
    folder.put_in_order(selection)
    records = [done[item] for item in selection if item in done]
    summary = suite.summarize(records, request)
    summary["endings"] = endings([r for r in records if "reward" in r and "error" not in r])
    folder.write_summary(summary, markdown_report(suite, request, summary, notes_of(summary, dropped)))
    return SuiteOutcome(summary, dropped, len(played_now), sum(p.failed for p in played_now))


def run_suite_command(suite: Suite, args: argparse.Namespace) -> int:
    """`seal eval --suite NAME`: 0 when the run completed, 1 when the endpoint was unusable (nothing written)
    or failed every item it ran, 2 on bad arguments, a missing extra or an unusable output folder, 130 when
    interrupted (work so far kept)."""
    go_offline()
    try:
        request = build_suite_request(suite, args)
        api_key = api_key_from_env(args.api_key_env)
    except ValueError as exc:
        print(f"seal eval: error: {exc}", file=sys.stderr)
        return 2
    why = suite.missing()
    if why is not None:
        print(f"seal eval: error: {why}", file=sys.stderr)
        return 2
    outcome, code = run_to_exit(run_suite(suite, request, api_key), request.out)
    if outcome is None:
        return code
    print(suite.table(outcome.summary), end="")
    print(
        f"suite {suite.name} · model {request.model} · base URL {masked_url(request.base_url)} · "
        f"protocol {request.protocol} · results in {request.out}"
    )
    for note in notes_of(outcome.summary, outcome.dropped):
        print(note)
    return 1 if outcome.ran and outcome.failed == outcome.ran else 0
