"""The endpoint of one `seal eval` run, preflighted, with the context budget its episodes share."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from seal.evaluation.budget import ContextBudget, tokenizer_tools
from seal.evaluation.endpoint import ChatEndpoint, PreflightError, RetryPolicy
from seal.evaluation.store import OutputError

T = TypeVar("T")


@dataclass(frozen=True)
class EndpointSettings:
    """What every suite's request says about the endpoint and the limits: the fields `EvalRequest` and
    `SuiteRequest` share, declared once."""

    base_url: str
    model: str
    concurrency: int
    max_tokens: int
    max_model_len: int | None
    max_llm_calls: int
    max_env_tokens: int
    tokenizer: str | None
    timeout: float
    retries: int
    backoff: float


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


def run_to_exit(run: Coroutine[Any, Any, T], out: Path) -> tuple[T | None, int]:
    """Run a whole evaluation; on failure print its one line and give `seal eval`'s exit status: 1 the
    preflight failed (nothing written), 2 bad arguments or an unusable output folder, 130 interrupted."""
    try:
        return asyncio.run(run), 0
    except PreflightError as exc:
        print(f"seal eval: error: {exc}", file=sys.stderr)
        return None, 1
    except (OutputError, ValueError, OSError) as exc:
        print(f"seal eval: error: {exc}", file=sys.stderr)
        return None, 2
    except KeyboardInterrupt:
        print(f"seal eval: interrupted; finished work is in {out}, rerun with --resume", file=sys.stderr)
        return None, 130
