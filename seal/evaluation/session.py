"""The endpoint of one `seal eval` run, preflighted, with the context budget its episodes share."""

from __future__ import annotations

import asyncio
import errno
import sys
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

from seal.env.context_limits import EpisodeBudget
from seal.evaluation.budget import ContextBudget, tokenizer_tools
from seal.evaluation.endpoint import ChatEndpoint, PreflightError, RetryPolicy
from seal.evaluation.store import OutputError
from seal.flags import REQUIRED, setting
from seal.protocol import DEFAULT_PROTOCOL, PROTOCOLS

T = TypeVar("T")

DEFAULT_KEY_ENV = "OPENAI_API_KEY"


def _budget_setting(name: str) -> Any:
    """`EpisodeBudget`'s setting `name`, default and help, for a field of another dataclass."""
    (field,) = [f for f in fields(EpisodeBudget) if f.name == name]
    return setting(field.default, field.metadata["help"])


@dataclass(frozen=True, kw_only=True)
class EndpointSettings:
    """What every suite's request says about the endpoint, the limits and the run folder: the fields
    `EvalRequest` and `SuiteRequest` share, declared once; they are also `seal eval`'s shared flags
    (`seal.flags.add_flags`), checked by `check_endpoint_arguments`. The episode limits' defaults are
    `EpisodeBudget`'s (training's); a suite of its own step limit gives `--max-llm-calls` its own default."""

    base_url: str = setting(REQUIRED, "OpenAI-compatible API root, e.g. http://host:8000/v1")
    model: str = setting(REQUIRED, "model name sent in each request")
    protocol: str = setting(DEFAULT_PROTOCOL, "tool-call protocol", choices=sorted(PROTOCOLS))
    limit: int | None = setting(
        None, "only the first N selected tasks of each category, for smoke runs (default: all)"
    )
    concurrency: int = setting(8, "episodes in flight at once")
    out: Path | None = setting(
        None, "output folder (default: outputs/eval/<model>-<split or suite>-<protocol>)", parse=Path
    )
    """None until the request is built, which fills in the default folder."""
    resume: bool = setting(False, "skip tasks already in OUT/episodes.jsonl")
    retry_failed: bool = setting(False, "with --resume, run again the episodes the endpoint failed")
    max_tokens: int = setting(
        4096,
        "max_tokens per reply, as training's max_response_length: no call starts from a prompt past the "
        "window minus this",
    )
    max_env_tokens: int = _budget_setting("max_env_tokens")
    max_model_len: int | None = setting(
        None, "the model's context window in tokens (default: what the endpoint's /models reports)"
    )
    tokenizer: str | None = setting(
        None,
        "local tokenizer of the served model: count prompt tokens exactly (default: none, counted from "
        "each response's usage)",
        metavar="DIR",
    )
    timeout: float = setting(300.0, "seconds per request")
    retries: int = setting(3, "retries of a transient failure")
    backoff: float = setting(1.0, "first retry delay in seconds, doubled each time")
    api_key_env: str | None = setting(
        None, f"environment variable holding the API key (default: {DEFAULT_KEY_ENV})", metavar="VAR"
    )
    """The variable the key was read from (the key itself is never stored)."""
    max_llm_calls: int = _budget_setting("max_llm_calls")


@asynccontextmanager
async def budgeted_endpoint(
    settings: EndpointSettings, api_key: str | None
) -> AsyncIterator[tuple[ChatEndpoint, ContextBudget]]:
    """The pooled client after its preflight (raises PreflightError, nothing written), and the budget."""
    count, codec = (None, None) if settings.tokenizer is None else tokenizer_tools(Path(settings.tokenizer))
    policy = RetryPolicy(retries=settings.retries, backoff=settings.backoff)
    async with ChatEndpoint(
        settings.base_url,
        settings.model,
        api_key=api_key,
        max_tokens=settings.max_tokens,
        timeout=settings.timeout,
        policy=policy,
        max_connections=settings.concurrency,
    ) as endpoint:
        served = await endpoint.preflight()
        budget = ContextBudget(
            max_tokens=settings.max_tokens,
            window=settings.max_model_len or served.window,
            count=count,
            max_llm_calls=settings.max_llm_calls,
            max_env_tokens=settings.max_env_tokens,
            codec=codec,
        )
        yield endpoint, budget


NO_SPACE = 3
"""`seal eval`'s exit status when the disk (or the user's quota) is full: not a bad argument (2)."""


def _out_of_space(exc: BaseException) -> bool:
    """Whether `exc`, or the OSError it was raised from, is a full disk or quota (a group's leaves are asked
    one by one: an episode's write fails inside the run's task group)."""
    cause = exc if isinstance(exc, OSError) else exc.__cause__
    return isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT)


def run_to_exit(run: Coroutine[Any, Any, T], out: Path) -> tuple[T | None, int]:
    """Run a whole evaluation; on failure print its one line and give `seal eval`'s exit status: 1 the
    preflight failed (nothing written), 2 bad arguments or an unusable output folder, `NO_SPACE` the disk
    (or quota) filled, 130 interrupted."""
    try:
        return asyncio.run(run), 0
    except PreflightError as exc:
        print(f"seal eval: error: {exc}", file=sys.stderr)
        return None, 1
    except (OutputError, OSError, ExceptionGroup) as exc:
        if isinstance(exc, ExceptionGroup) and exc.subgroup(_out_of_space) is None:
            raise
        if not isinstance(exc, ExceptionGroup) and not _out_of_space(exc):
            print(f"seal eval: error: {exc}", file=sys.stderr)
            return None, 2
        print(
            f"seal eval: error: no space left on the disk of {out}; finished work is in it: free space and "
            "rerun with --resume",
            file=sys.stderr,
        )
        return None, NO_SPACE
    except ValueError as exc:
        print(f"seal eval: error: {exc}", file=sys.stderr)
        return None, 2
    except KeyboardInterrupt:
        print(f"seal eval: interrupted; finished work is in {out}, rerun with --resume", file=sys.stderr)
        return None, 130
