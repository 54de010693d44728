"""The longest assistant message an episode reads. A longer one is the model's mistake, as a malformed call
is: the step is applied as a rejected message with the environment's error observation and scored, never
refused as a bad request (which the trainer would count as an environment failure).

An episode keeps, and `HttpEnvClient` sends, at most `MAX_ACTION_CHARS + 1` characters of an action: enough
to know it was over-long wherever it is played or replayed, and a request body (at most 6 bytes a
character, JSON-escaped) well under the service's 1 MiB limit, however long the generation was.
"""

from __future__ import annotations

from seal.protocol.base import ParsedAction

MAX_ACTION_CHARS = 131_072
OVER_LONG = (
    f"the message is longer than the {MAX_ACTION_CHARS:,} characters an action may have; it was not read"
)


def kept_action(action: str) -> str:
    """The part of `action` an episode keeps and a client sends: all of it, or of an over-long one its
    first `MAX_ACTION_CHARS + 1` characters, still over-long."""
    return action[: MAX_ACTION_CHARS + 1]


def over_long(action: str) -> ParsedAction | None:
    """What an over-long action says (one format error, no call), or None when it is to be parsed."""
    return ParsedAction(errors=(OVER_LONG,), has_markup=True) if len(action) > MAX_ACTION_CHARS else None
