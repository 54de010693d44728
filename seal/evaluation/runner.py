"""Eval-mode episodes against a chat endpoint, a bounded number at a time, each saved as it ends.

The episodes run on whichever environment `seal eval --env-backend` names (seal.env.connect), through the
same driver as training's rollouts. In-process, episode work (parsing, executing tools, the checker) is
synchronous and takes milliseconds, so it runs inline on the event loop, which, single-threaded, keeps
bfcl-eval's module-global executor state free of races; the service and the Ray actors do that work in
their own processes.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from seal.bfcl.tasks import category_of
from seal.env.client import EnvClient, EnvServiceError, open_episode
from seal.env.driver import Driven, drive
from seal.env.store import one_line
from seal.evaluation.budget import BudgetedChat, ContextBudget
from seal.evaluation.endpoint import ChatEndpoint
from seal.evaluation.store import RunFolder
from seal.results.endings import ends_in_loop
from seal.results.pass_rate import pass_rates
from seal.results.tables import episode_record


@dataclass(frozen=True)
class Played:
    """One finished episode: its §4.4 line (with "error" when the endpoint failed it) and its action log.

    An episode the endpoint failed is not the model's result: it is listed, not scored. Every line says
    whether its replies end in an identical-call loop (`looped`, seal/results/endings.py), whichever suite
    played it.
    """

    record: dict[str, Any]
    action_log: dict[str, Any]

    def __post_init__(self) -> None:
        self.record.setdefault(
            "looped", ends_in_loop(self.action_log["actions"], self.action_log["protocol"])
        )

    @property
    def failed(self) -> bool:
        return "error" in self.record


async def play(
    client: EnvClient, endpoint: ChatEndpoint, budget: ContextBudget, task_id: str, protocol: str
) -> Played:
    """One eval-mode episode on `client`'s environment, driven by `seal.env.driver` with the endpoint as the
    model: training's limits apply (a prompt past the context limit, the call limit, or a reply cut by its
    `max_tokens` truncates the episode, `cut`: context, calls, generation), which the environment scores like
    any unfinished one (reward 0); environment messages are clipped before the model reads them. An
    endpoint failure ends the episode where it stands and marks it with "error"; it is still labelled so
    the partial trajectory can be read. A service's refusal marks it too, unlabelled. An exception the
    in-process environment raised on the model's text (no service stands between them) is the model's
    episode failing: it is scored, reward 0, with the exception as its `env_error`, and the run goes on.
    """
    driven = Driven()
    try:
        async with open_episode(client, task_id, "eval", protocol) as session:
            await drive(session, BudgetedChat(endpoint, budget), budget, driven)
        assert session.result is not None
        record = {**episode_record(session.result), "cut": driven.cut, "llm_calls": driven.calls}
        if driven.error is not None:
            record["error"] = driven.error
    except EnvServiceError as exc:
        error = f"environment: {exc}"
        record = {
            "task_id": task_id,
            "reward": 0.0,
            "cut": driven.cut,
            "llm_calls": driven.calls,
            "error": error,
        }
    except Exception as exc:  # in-process, the environment's own failure on the model's text
        record = {
            "task_id": task_id,
            "reward": 0.0,
            "cut": driven.cut,
            "llm_calls": driven.calls,
            "env_error": one_line(f"{type(exc).__name__}: {exc}"),
        }
    return Played(record, {"task_id": task_id, "protocol": protocol, "actions": driven.actions})


@dataclass
class Progress:
    """The bar over the whole selection, with the running pass rate of the finished episodes (the paper's
    Avg over the categories seen so far)."""

    total: int
    finished: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.bar = tqdm(
            total=self.total,
            initial=len(self.finished),
            desc="seal eval",
            unit="ep",
            file=sys.stderr,
            dynamic_ncols=True,
        )
        self._show()

    def _show(self) -> None:
        if self.finished:
            scored = [row for row in self.finished if "error" not in row]
            rate = pass_rates((category_of(row["task_id"]), row["reward"]) for row in scored).mean
            failed = len(self.finished) - len(scored)
            truncated = sum(bool(row.get("truncated")) for row in scored)
            self.bar.set_postfix_str(f"pass {rate:.1%}, truncated {truncated}, endpoint errors {failed}")

    def add(self, record: dict[str, Any]) -> None:
        self.finished.append(record)
        self.bar.update(1)
        self._show()

    def close(self) -> None:
        self.bar.close()


async def run_episodes(
    client: EnvClient,
    endpoint: ChatEndpoint,
    task_ids: Sequence[str],
    *,
    budget: ContextBudget,
    protocol: str,
    gate: asyncio.Semaphore,
    folder: RunFolder,
    progress: Progress,
) -> list[Played]:
    """Play `task_ids`, as many at once as `gate` (the run's concurrency) lets in, appending each to
    `folder` as it ends."""
    played: list[Played] = []

    async def one(task_id: str) -> None:
        async with gate:
            result = await play(client, endpoint, budget, task_id, protocol)
        folder.append(result.action_log, result.record)
        played.append(result)
        progress.add(result.record)

    async with asyncio.TaskGroup() as group:
        for task_id in task_ids:
            group.create_task(one(task_id))
    return played
