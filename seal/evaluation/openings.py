"""Whether the selected tasks' opening prompts leave room for a reply: said before a run is wasted.

An episode whose opening prompt is past `window − max_tokens` is cut before its first call (training's
context rule, seal/evaluation/budget.py) and scores 0. With a model of an 8k window and the default
`--max-tokens 4096`, that is every BFCL task, and the run would report 0% after hours. Where the run can
know it first, it says so first: `--max-tokens` not below the window is refused, and with `--tokenizer`
every selected opening is counted exactly (all cut: refused; some cut: one warning line). Without a
tokenizer the episodes cut before their first call are counted in the summary (`cut_before_first_call`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from seal.env.episode import Episode
from seal.evaluation.budget import TokenCounter
from seal.evaluation.endpoint import PreflightError

CUT_BEFORE_FIRST_CALL = "cut_before_first_call"
"""summary.json: `{"count", "task_ids"}` of the episodes cut by their context before their first call."""


@dataclass(frozen=True)
class OpeningFit:
    """Opening prompt tokens per task against `limit` = window − max_tokens (a prompt must stay below it)."""

    window: int
    max_tokens: int
    sizes: dict[str, int]

    @property
    def limit(self) -> int:
        return self.window - self.max_tokens

    @property
    def cut(self) -> list[str]:
        return [task_id for task_id, size in self.sizes.items() if size >= self.limit]

    def advice(self) -> str:
        """What would let every selected task make its first call."""
        fitting = self.window - max(self.sizes.values()) - 1
        if fitting >= 1:
            return f"--max-tokens {fitting} or less fits every selected task"
        return f"the longest opening alone needs a window over {max(self.sizes.values()):,} tokens"

    def problem(self) -> tuple[str, bool] | None:
        """(one line, whether the run is pointless), or None when every opening fits."""
        cut = self.cut
        if not cut:
            return None
        sizes = [self.sizes[task_id] for task_id in cut]
        where = (
            f"the {self.window:,}-token window minus --max-tokens {self.max_tokens} ({self.limit:,} tokens)"
        )
        outcome = "cut before its first call and score 0"
        if len(cut) == len(self.sizes):
            return (
                f"every selected task opens with a prompt of {min(sizes):,} to {max(sizes):,} tokens, "
                f"at or past {where}: every episode would be {outcome}; {self.advice()}",
                True,
            )
        return (
            f"{len(cut)} of {len(self.sizes)} selected tasks open with a prompt at or past {where} "
            f"(e.g. {cut[0]}, {self.sizes[cut[0]]:,} tokens): each will be {outcome}; {self.advice()}",
            False,
        )


def opening_sizes(task_ids: Sequence[str], protocol: str, count: TokenCounter) -> dict[str, int]:
    """The exact prompt tokens of each task's opening (eval mode: the raw interface)."""
    return {task_id: count(Episode(task_id, mode="eval", protocol=protocol).reset()) for task_id in task_ids}


def check_openings(
    window: int | None, max_tokens: int, task_ids: Sequence[str], protocol: str, count: TokenCounter | None
) -> str | None:
    """Raise `PreflightError` when no selected episode could make its first call; a warning line when some
    could not; None when all can or it cannot be known before the run (no window, or no tokenizer)."""
    if window is None:
        return None
    if max_tokens >= window:
        raise PreflightError(
            f"--max-tokens {max_tokens} leaves no room for a prompt in the model's {window:,}-token window: "
            "every episode would be cut before its first call; lower --max-tokens"
        )
    if count is None or not task_ids:
        return None
    found = OpeningFit(window, max_tokens, opening_sizes(task_ids, protocol, count)).problem()
    if found is None:
        return None
    line, pointless = found
    if pointless:
        raise PreflightError(line)
    return line
