"""What a sitting's looping greedy episodes resend after training, each loop sorted into one kind, so that a
loop the environment's parsing made can be told from one the policy's calls made. A loop's message is the
task-scores file's `repeated` (its first `REPEATED_CHARS` characters), read by the two tool-call rules of the
Qwen2.5 campaigns:

- stray tags: a format error only under the strict tag rule (`qwen_fc_strict_tags`): valid call blocks with
  tag text around them, which the released code's parsing (`qwen_fc`) drops before it runs the calls;
- malformed: a format error under both rules;
- unavailable function: calls, one of which names a function the task does not offer at its start (one it
  withholds until a later turn, or a made-up name), which the environment answers as not available;
- offered functions: calls of offered functions only, resent (a wrong argument, a state they cannot change).

A message cut at `REPEATED_CHARS` is read up to the end of its last whole call block (its cut tail is no stray
tag), plus the name of the call it was cut in where the cut left that name whole (a message cut before any
whole name counts as malformed)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from seal.bfcl.tasks import get_task
from seal.protocol import get_protocol
from seal.protocol.qwen_fc import CLOSE_TAG
from seal.results.campaign import CampaignError
from seal.results.endings import REPEATED_CHARS

RELEASED, STRICT = "qwen_fc", "qwen_fc_strict_tags"
KINDS = ("stray tags", "malformed", "unavailable function", "offered functions")


_NAME = re.compile(r'"name"\s*:\s*"([^"\\]+)"')


def whole_blocks(message: str) -> tuple[str, str | None]:
    """`message`, where it may have been cut at `REPEATED_CHARS`, up to the end of its last whole block, and
    the name of the call in the cut tail (None where there is none, or the cut left no whole name)."""
    if len(message) < REPEATED_CHARS:
        return message, None
    end = message.rindex(CLOSE_TAG) + len(CLOSE_TAG) if CLOSE_TAG in message else 0
    cut_in = _NAME.search(message, end)
    return message[:end], cut_in.group(1) if cut_in else None


def loop_kind(message: str, task_id: str) -> str:
    """The kind (one of `KINDS`) of the repeated message of a looping episode of task `task_id`."""
    text, cut_in = whole_blocks(message)
    released = get_protocol(RELEASED).parse(text)
    names = [call.name for call in released.calls] + ([cut_in] if cut_in else [])
    if released.errors or not names or not all(isinstance(name, str) for name in names):
        return "malformed"
    if get_protocol(STRICT).parse(text).errors:
        return "stray tags"
    offered = {doc["name"] for doc in get_task(task_id).functions}
    return "offered functions" if set(names) <= offered else "unavailable function"


def loop_kind_rows(sittings: Sequence[tuple[str, int, Path]]) -> list[dict[str, str]]:
    """One row per sitting (arm name, seed, its task-scores file) whose greedy episodes after training
    looped: the loops over val and test, and how many of each kind."""
    rows = []
    for arm, seed, path in sittings:
        if not path.is_file():
            continue
        try:
            scores = pd.read_csv(path, dtype=str, keep_default_na=False)
            if not {"looped", "repeated"} <= set(scores.columns):  # written before loops were kept
                continue
            after = scores[(scores["when"] == "after") & (scores["looped"] == "True")]
            kinds = Counter(loop_kind(row["repeated"], row["task_id"]) for _, row in after.iterrows())
        except (ValueError, KeyError) as exc:
            raise CampaignError(f"{path}: not a task-scores file ({' '.join(str(exc).split())})") from None
        if kinds:
            splits = " + ".join(
                f"{n} {split}" for split, n in after["split"].value_counts(sort=False).items()
            )
            rows.append({"arm": arm, "seed": str(seed), "loops after training": splits})
            rows[-1] |= {kind: str(kinds[kind]) for kind in KINDS}
    return rows
