"""`seal eval`: score any OpenAI-compatible chat endpoint on the BFCL multi-turn splits.

Eval-mode episodes (raw interface, docs/design.md §3.4) are played against
`{base_url}/chat/completions`; outputs go to `--out` as docs/design.md §4.4 describes, plus
`summary.md` and `run.json` (what was run). A preflight request checks the endpoint, the model and
the key before anything is written. Episodes run under training's limits (seal/evaluation/budget.py):
no call whose prompt would pass `window − max_tokens`, at most `--max-llm-calls` calls, environment
messages clipped to `--max-env-tokens`; an episode a limit cuts is truncated (reward 0, in the pass
rate), while the endpoint's own failures are listed by task id and left out of the pass rate.
The API key is read from the environment only and is never written anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from seal.bfcl.tasks import category_of, split_ids
from seal.env.client import EnvClient, EnvServiceError
from seal.env.connect import DEFAULT_URL, ENV_BACKENDS, EnvSettings, open_environment
from seal.env.store import StoreSettings
from seal.evaluation.budget import ContextBudget
from seal.evaluation.endpoint import ChatEndpoint, PreflightError
from seal.evaluation.official import rescore
from seal.evaluation.openings import CUT_BEFORE_FIRST_CALL, check_openings
from seal.evaluation.runner import Progress, run_episodes
from seal.evaluation.samples import sample_folder, sample_seed, sampled_summary, sampled_table
from seal.evaluation.session import DEFAULT_KEY_ENV, EndpointSettings, budgeted_endpoint, run_to_exit
from seal.evaluation.store import OutputError, RunFolder
from seal.flags import add_flags, setting, settings_from_flags
from seal.results.endings import endings, endings_line
from seal.results.tables import markdown_table, summarize
from seal.tocf.labels import DEFAULT_TAXONOMY, TAXONOMIES
from seal.urls import masked_url

SPLIT_CHOICES = ("test", "val", "train", "all")
EVAL_BACKENDS = ("inprocess", *(backend for backend in ENV_BACKENDS if backend != "inprocess"))
"""`--env-backend` choices, the default first."""
SHOWN_DISAGREEMENTS = 10


class UsageError(ValueError):
    """A bad argument: reported as one line, exit status 2."""


@dataclass(frozen=True, kw_only=True)
class EvalRequest(EndpointSettings):
    """Everything one run needs, validated (the API key travels separately and is never stored); its
    fields with a `setting` are the flags of `seal eval` on BFCL V3."""

    split: str = setting(
        "val",
        "task split: the default is the split checkpoints are chosen on; report test",
        choices=SPLIT_CHOICES,
    )
    task_ids: tuple[str, ...]
    """The tasks of the run, chosen by --split, --tasks and --limit."""
    taxonomy: str = setting(DEFAULT_TAXONOMY, "turn labels", choices=TAXONOMIES)
    official: bool = setting(
        False, "re-score the action logs with bfcl-eval's checker and report disagreements"
    )
    env_backend: str = setting(
        "inprocess",
        "where the episodes run: a store in this process, the environment service at --env-url (a running "
        "`seal serve`), or environment actors on the Ray cluster (a local one if none is up); every backend "
        "plays the same episodes",
        choices=EVAL_BACKENDS,
    )
    env_url: str | None = setting(
        None,
        f"with --env-backend http: the running environment service (default: {DEFAULT_URL})",
        metavar="URL",
    )
    temperature: float = setting(
        0.0, "sampling temperature of every reply: 0 is greedy; verl's rollouts sample at 1.0"
    )
    seed: int | None = setting(
        None,
        "sampling seed: each request carries one drawn from SEED (SEED+K-1 for sample K of --samples) and "
        "its conversation, so tasks and turns sample independently and a rerun repeats them (default: "
        "none, the server's own randomness)",
    )
    samples: int = setting(
        1,
        "episodes per task (needs --temperature above 0): each sample is a run folder OUT/sample_K, and the "
        "summary gives pass@1 (the mean over samples), pass@N and the share of tasks whose samples are mixed",
    )

    def meta(self) -> dict[str, Any]:
        """`run.json`: what was run, the URL's credentials masked (seal/urls.py); the environment's URL is
        not kept: every backend plays the same episodes."""
        left_out = ("task_ids", "out", "resume", "retry_failed", "env_url", "limit", "api_key_env")
        fields = {k: v for k, v in asdict(self).items() if k not in left_out}
        return {**fields, "base_url": masked_url(self.base_url), "tasks": len(self.task_ids)}

    def environment(self) -> EnvSettings:
        """Where the episodes run; an in-process store or the actors diagnose with `taxonomy`."""
        return EnvSettings(
            backend=self.env_backend,
            url=self.env_url or DEFAULT_URL,
            store=StoreSettings(taxonomy=self.taxonomy),
        )


@dataclass(frozen=True)
class EvalReport:
    summary: dict[str, Any]
    ran: int
    failed: int
    first_error: str | None
    dropped: int
    records: list[dict[str, Any]] = field(default_factory=list)
    """The selection's episode lines in order (one run; empty for the summary of samples)."""

    @property
    def endpoint_errors(self) -> list[str]:
        return self.summary["endpoint_errors"]["task_ids"]


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `seal eval` on BFCL V3 (the `bfcl_v3` suite): `EvalRequest`'s settings, and `--tasks`,
    a selection the request holds as the task ids it resolves to."""
    add_flags(parser, EvalRequest, [f.name for f in fields(EvalRequest) if f.name != "task_ids"])
    parser.add_argument(
        "--tasks", help="comma-separated task ids, all within --split (default: the whole split)"
    )


def add_endpoint_arguments(parser: argparse.ArgumentParser, names: Sequence[str] | None = None) -> None:
    """The options every suite of `seal eval` shares (`EndpointSettings`; only `names` when given)."""
    add_flags(parser, EndpointSettings, names)


def _select(split: str, tasks: str | None, limit: int | None) -> tuple[str, ...]:
    selected = split_ids(split)
    if tasks is not None:
        wanted = [t.strip() for t in tasks.split(",") if t.strip()]
        if not wanted:
            raise UsageError("--tasks names no task")
        known = set(selected)
        outside = [t for t in wanted if t not in known]
        if outside:
            raise UsageError(f"task {outside[0]!r} is not in the {split} split")
        selected = tuple(dict.fromkeys(wanted))
    if limit is not None:
        taken: Counter[str] = Counter()
        kept = []
        for task_id in selected:
            category = category_of(task_id)
            if taken[category] < limit:
                taken[category] += 1
                kept.append(task_id)
        selected = tuple(kept)
    return selected


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "model"


def check_endpoint_arguments(args: argparse.Namespace) -> None:
    """Validate the options of `add_endpoint_arguments` (and --max-llm-calls); raises UsageError."""
    parts = urlsplit(args.base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"--base-url must be an http(s) URL, got {masked_url(args.base_url)!r}")
    if not args.model.strip():
        raise UsageError("--model must not be empty")
    for name in ("concurrency", "max_tokens", "limit", "max_model_len", "max_llm_calls"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if args.max_env_tokens < 64:
        raise UsageError(f"--max-env-tokens must be at least 64, got {args.max_env_tokens}")
    if not args.timeout > 0:
        raise UsageError(f"--timeout must be positive, got {args.timeout}")
    if args.retries < 0 or args.backoff < 0:
        raise UsageError("--retries and --backoff must not be negative")
    if args.retry_failed and not args.resume:
        raise UsageError("--retry-failed only applies with --resume")
    if args.tokenizer is not None and not Path(args.tokenizer).is_dir():
        raise UsageError(f"--tokenizer {args.tokenizer} is not a folder")


def build_request(args: argparse.Namespace) -> EvalRequest:
    """Validate the parsed options; raises UsageError with the one-line reason."""
    check_endpoint_arguments(args)
    if not 0 <= args.temperature <= 2:
        raise UsageError(f"--temperature must be between 0 and 2, got {args.temperature}")
    if args.samples < 1:
        raise UsageError(f"--samples must be at least 1, got {args.samples}")
    if args.samples > 1 and args.temperature == 0:
        raise UsageError("--samples above 1 needs --temperature above 0: greedy samples are all the same")
    if args.env_url is not None and args.env_backend != "http":
        raise UsageError("--env-url names an environment service: it takes --env-backend http")
    out = args.out or Path("outputs") / "eval" / f"{_slug(args.model)}-{args.split}-{args.protocol}"
    return settings_from_flags(
        EvalRequest, args, task_ids=_select(args.split, args.tasks, args.limit), out=Path(out)
    )


def api_key_from_env(var: str | None) -> str | None:
    """The key named by `--api-key-env` (which must be set), else `$OPENAI_API_KEY` if set."""
    if var is not None:
        key = os.environ.get(var)
        if not key:
            raise UsageError(f"--api-key-env names {var}, which is not set in the environment")
        return key
    return os.environ.get(DEFAULT_KEY_ENV) or None


def _markdown(request: EvalRequest, report: EvalReport) -> str:
    lines = [
        f"# seal eval: {request.split}",
        "",
        f"model `{request.model}` · base URL `{request.meta()['base_url']}` · "
        f"protocol `{request.protocol}` · taxonomy `{request.taxonomy}`",
        "",
        _table(report.summary).rstrip("\n"),
    ]
    notes = _notes(request, report)
    if notes:
        lines.append("")
        lines.extend(f"  - {n.strip()}" if n.startswith("  ") else f"- {n}" for n in notes)
    return "\n".join(lines) + "\n"


def _table(summary: dict[str, Any]) -> str:
    return sampled_table(summary) if "samples" in summary else markdown_table(summary)


def _sampled_notes(request: EvalRequest, summary: dict[str, Any]) -> list[str]:
    rates = ", ".join(f"{rate:.1%}" for rate in summary["sample_pass_rates"])
    notes = [
        f"{summary['samples']} samples a task at temperature {request.temperature:g} (seed "
        f"{'none' if request.seed is None else request.seed}); each sample's pass rate: {rates}",
        f"each sample is a run folder: {sample_folder(request.out, 1)} .. "
        f"{sample_folder(request.out, summary['samples']).name} (seal view, seal diagnose, --resume)",
    ]
    errors = summary["endpoint_errors"]
    if errors["count"]:
        notes.append(
            f"{errors['count']} task(s) with an endpoint error in some sample are left out of every rate "
            f"(rerun with --resume --retry-failed): {', '.join(errors['task_ids'])}"
        )
    return notes


def _notes(request: EvalRequest, report: EvalReport) -> list[str]:
    notes = []
    if report.dropped:
        notes.append(f"resume dropped {report.dropped} broken or failed line(s); those tasks ran again")
    summary = report.summary
    if "samples" in summary:
        return notes + _sampled_notes(request, summary)
    notes.append(
        f"pass rate over {summary['n']} scored episode(s), {summary['truncated']} of them truncated "
        f"(context window or step limit: reward 0); {len(report.endpoint_errors)} endpoint error(s) "
        "excluded from the pass rate"
    )
    notes.append(endings_line(f"pass rate {summary['pass_rate']:.1%}", summary["endings"]))
    first_cut = summary[CUT_BEFORE_FIRST_CALL]["count"]
    if first_cut:
        notes.append(
            f"{first_cut} of {summary['n']} scored episode(s) were cut before their first call: the opening "
            f"prompt plus --max-tokens {request.max_tokens} does not fit the model's window; lower "
            "--max-tokens (with --tokenizer, seal eval checks every task before it starts)"
        )
    if report.endpoint_errors:
        notes.append(
            f'endpoint errors ("error" in episodes.jsonl; rerun with --resume --retry-failed): '
            f"{', '.join(report.endpoint_errors)}"
        )
    if report.failed:
        notes.append(
            f"{report.failed} of {report.ran} episode(s) run now failed on the endpoint; "
            f"first: {report.first_error}"
        )
    official = report.summary.get("official")
    if official is not None:
        notes.append(
            f"official re-score: {official['checked']} checked, "
            f"{len(official['disagreements'])} disagreement(s) with the episode rewards"
        )
        for item in official["disagreements"][:SHOWN_DISAGREEMENTS]:
            notes.append(
                f"  {item['task_id']}: reward {item['reward']:g}, "
                f"official_verdict {item['official_verdict']:g}, "
                f"multi_turn_checker {item['multi_turn_checker']:g} ({item['why']})"
            )
    return notes


async def evaluate(request: EvalRequest, api_key: str | None) -> EvalReport:
    """Preflight, run (or resume) the episodes, then write the summary; with `--samples N`, N runs of the
    selection side by side (one concurrency limit, one progress bar), then the summary of their samples.

    Raises PreflightError (nothing written) when the endpoint cannot serve the run, OutputError on an
    unusable --out.
    """
    async with budgeted_endpoint(request, api_key) as (endpoint, budget):
        warning = check_openings(
            budget.window, budget.max_tokens, request.task_ids, request.protocol, budget.count
        )
        if warning is not None:
            print(f"seal eval: warning: {warning}", file=sys.stderr)
        async with open_environment(request.environment()) as client:
            await _check_environment(client, request)
            runs = [_open(part) for part in _parts(request)]
            gate = asyncio.Semaphore(request.concurrency)
            progress = Progress(
                total=len(request.task_ids) * request.samples,
                finished=[record for run in runs for record in run.records.values()],
            )
            try:
                reports = await asyncio.gather(
                    *(
                        _play(
                            run,
                            client,
                            endpoint.sampling(request.temperature, run.request.seed),
                            budget,
                            gate,
                            progress,
                        )
                        for run in runs
                    )
                )
            finally:
                progress.close()
    return reports[0] if request.samples == 1 else _summarize_samples(request, reports)


async def _check_environment(client: EnvClient, request: EvalRequest) -> None:
    """The environment answers and diagnoses with `--taxonomy` (a running service has its own)."""
    try:
        health = await client.health()
    except EnvServiceError as exc:
        raise PreflightError(f"the environment ({request.env_backend}) does not answer: {exc}") from exc
    if health.get("taxonomy", request.taxonomy) != request.taxonomy:
        raise PreflightError(
            f"the environment service at {masked_url(request.environment().url)} diagnoses with taxonomy "
            f"{health['taxonomy']!r}, not --taxonomy {request.taxonomy!r}: pass --taxonomy "
            f"{health['taxonomy']} or start the service with --taxonomy {request.taxonomy}"
        )


@dataclass
class _Run:
    """One run folder opened for play: the episodes it keeps from before and the lines it dropped."""

    request: EvalRequest
    folder: RunFolder
    records: dict[str, dict[str, Any]]
    dropped: int


def _parts(request: EvalRequest) -> list[EvalRequest]:
    """The run itself, or with `--samples N` one run a sample: OUT/sample_K, seed SEED+K-1."""
    if request.samples == 1:
        return [request]
    return [
        replace(request, out=sample_folder(request.out, k), samples=1, seed=sample_seed(request.seed, k))
        for k in range(1, request.samples + 1)
    ]


def _open(request: EvalRequest) -> _Run:
    """Start the run folder, or resume it; OutputError when it cannot be used."""
    folder = RunFolder(request.out)
    try:
        if request.resume:
            resumed = folder.resume(request.meta(), request.task_ids, request.retry_failed)
            return _Run(request, folder, dict(resumed.records), resumed.dropped)
        folder.start(request.meta())
    except OSError as exc:
        raise OutputError(f"cannot use --out {request.out}: {exc}") from exc
    return _Run(request, folder, {}, 0)


async def _play(
    run: _Run,
    client: EnvClient,
    endpoint: ChatEndpoint,
    budget: ContextBudget,
    gate: asyncio.Semaphore,
    progress: Progress,
) -> EvalReport:
    """The run's episodes not played yet, then its summary."""
    request, folder, records = run.request, run.folder, run.records
    todo = [task_id for task_id in request.task_ids if task_id not in records]
    with folder:
        played = await run_episodes(
            client,
            endpoint,
            todo,
            budget=budget,
            protocol=request.protocol,
            gate=gate,
            folder=folder,
            progress=progress,
        )
    records.update((p.record["task_id"], p.record) for p in played)
    folder.put_in_order(request.task_ids)
    ordered = [records[t] for t in request.task_ids]
    scored = [r for r in ordered if "error" not in r]
    summary = summarize(scored, request.split)
    summary["endings"] = endings(scored)
    failed_ids = [r["task_id"] for r in ordered if "error" in r]
    summary["endpoint_errors"] = {"count": len(failed_ids), "task_ids": failed_ids}
    first_cut = [r["task_id"] for r in ordered if r.get("cut") == "context" and r.get("llm_calls") == 0]
    summary[CUT_BEFORE_FIRST_CALL] = {"count": len(first_cut), "task_ids": first_cut}
    if request.official:
        summary["official"] = rescore(folder.action_logs(), {t: r["reward"] for t, r in records.items()})
    failures = [p for p in played if p.failed]
    report = EvalReport(
        summary,
        len(played),
        len(failures),
        failures[0].record["error"] if failures else None,
        run.dropped,
        ordered,
    )
    folder.write_summary(summary, _markdown(request, report))
    return report


def _summarize_samples(request: EvalRequest, reports: list[EvalReport]) -> EvalReport:
    """The samples' summary (pass@1, pass@N, the mixed share) and `run.json`, into OUT."""
    summary = sampled_summary([r.records for r in reports], request.split)
    summary.update(temperature=request.temperature, seed=request.seed)
    errors = [r.first_error for r in reports if r.first_error is not None]
    report = EvalReport(
        summary,
        sum(r.ran for r in reports),
        sum(r.failed for r in reports),
        errors[0] if errors else None,
        sum(r.dropped for r in reports),
    )
    folder = RunFolder(request.out)
    folder.write_meta(request.meta())
    folder.write_summary(summary, _markdown(request, report))
    return report


def run_eval_command(args: argparse.Namespace) -> int:
    """`seal eval`: 0 when the run completed, 1 when the preflight found the endpoint unusable (nothing
    written) or every episode it ran failed on the endpoint, 2 on bad arguments or an output folder it
    may not use, 3 (`NO_SPACE`) when its disk is full, 130 when interrupted (work so far is kept)."""
    try:
        request = build_request(args)
        api_key = api_key_from_env(args.api_key_env)
    except ValueError as exc:
        print(f"seal eval: error: {exc}", file=sys.stderr)
        return 2
    report, code = run_to_exit(evaluate(request, api_key), request.out)
    if report is None:
        return code
    print(_table(report.summary), end="")
    print(
        f"model {request.model} · base URL {request.meta()['base_url']} · protocol {request.protocol} · "
        f"taxonomy {request.taxonomy} · results in {request.out}"
    )
    for note in _notes(request, report):
        print(note)
    print(f"episodes turn by turn (an offline HTML page): seal view {request.out}")
    return 1 if report.ran and report.failed == report.ran else 0
