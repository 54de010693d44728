"""Eval-mode episodes against a chat endpoint, a bounded number at a time, each saved as it ends.

Episode work (parsing, executing tools, the checker) is synchronous and takes milliseconds, so it
runs inline on the event loop; only the endpoint calls are awaited. The loop is single-threaded,
which also keeps bfcl-eval's module-global executor state free of races.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from seal.env.episode import Episode
from seal.evaluation.budget import BudgetedChat, ContextBudget
from seal.evaluation.endpoint import ChatEndpoint, EndpointError
from seal.evaluation.store import RunFolder
from seal.reports import episode_record


@dataclass(frozen=True)
class Played:
    """One finished episode: its §4.4 line (with "error" when the endpoint failed it) and its action log.

    An episode the endpoint failed is not the model's result: it is listed, not scored.
    """

    record: dict[str, Any]
    action_log: dict[str, Any]

    @property
    def failed(self) -> bool:
        return "error" in self.record


async def play(
    endpoint: ChatEndpoint, budget: ContextBudget, task_id: str, protocol: str, taxonomy: str
) -> Played:
    """Send the conversation, step the episode with the reply's text, until the episode is done.

    Training's limits apply (`ContextBudget`): a prompt past the context limit, the call limit, or a
    reply cut by its `max_tokens` truncates the episode (`cut`: context, calls, generation), which the
    environment scores like any unfinished one (reward 0); environment messages are clipped before the
    model reads them. An endpoint failure ends the episode where it stands and marks it with "error";
    it is still labelled so the partial trajectory can be read.
    """
    episode = Episode(task_id, mode="eval", protocol=protocol, taxonomy=taxonomy)
    messages = episode.reset()
    chat = BudgetedChat(endpoint, budget)
    error: str | None = None
    cut = "none"
    calls = 0
    try:
        while not episode.done:
            if calls >= budget.max_llm_calls:
                cut = "calls"
                break
            completion = await chat.reply(messages)
            if completion is None:
                cut = "context"
                break
            calls += 1
            if completion.finish_reason == "length":
                cut = "generation"
                break
            action = completion.text
            step = episode.step(action)
            messages.append({"role": "assistant", "content": action})
            messages.extend(chat.clip(step.observation))
    except EndpointError as exc:
        error = str(exc)
    if cut != "none":
        episode.truncate(cut)
    record = {**episode_record(episode.finish()), "cut": cut, "llm_calls": calls}
    if error is not None:
        record["error"] = error
    return Played(record, episode.action_log())


@dataclass
class Progress:
    """The bar over the whole selection, with the running pass rate of every finished episode."""

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
            passed = sum(row["reward"] >= 1.0 for row in scored)
            rate = passed / len(scored) if scored else 0.0
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
    endpoint: ChatEndpoint,
    task_ids: Sequence[str],
    *,
    budget: ContextBudget,
    protocol: str,
    taxonomy: str,
    concurrency: int,
    folder: RunFolder,
    progress: Progress,
) -> list[Played]:
    """Play `task_ids`, at most `concurrency` at once, appending each to `folder` as it ends."""
    gate = asyncio.Semaphore(concurrency)
    played: list[Played] = []

    async def one(task_id: str) -> None:
        async with gate:
            result = await play(endpoint, budget, task_id, protocol, taxonomy)
        folder.append(result.action_log, result.record)
        played.append(result)
        progress.add(result.record)

    async with asyncio.TaskGroup() as group:
        for task_id in task_ids:
            group.create_task(one(task_id))
    return played
