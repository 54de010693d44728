"""One episode played to its end under the episode limits: the one place that counts the calls, applies the
three cuts and clips every environment message, for the agent loop (training) and `seal eval` alike.

The player is a `Model`: the agent loop's is verl's token stream (its opening and replies as token ids),
`seal eval`'s a chat endpoint under a context budget. The order of the checks is the released code's:

1. the opening does not fit the context: cut `context` before any call;
2. before each call, the next prompt would pass the context limit (the model says so by answering None):
   cut `context`;
3. a reply cut by its `max_tokens` is not a whole message: counted, never sent, cut `generation`;
4. the reply goes to the environment; a done episode ends here;
5. after `max_llm_calls` calls: cut `calls`;
6. the environment's messages, each clipped to `max_env_tokens` with the model's own token counts, go to the
   model, and the next call follows.

A cut is handed to the episode's session, which finishes the episode with it, so the store truncates it
before scoring, in-process, over HTTP and on Ray alike. A `ModelError` (the endpoint failed, not the model)
ends the episode where it stands; it is recorded and the episode is still finished, so its partial labels
can be read. An environment failure (`EnvServiceError`) is the caller's to handle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from seal.env.client import EpisodeSession
from seal.env.context_limits import Decode, Encode, EpisodeBudget, clip_messages


class ModelError(Exception):
    """The model's server failed a call (not the model's answer): the episode ends where it stands."""


@dataclass(frozen=True)
class Reply:
    """One generation: its text, and whether it is a whole message (it ended its turn within `max_tokens`)."""

    text: str
    whole: bool


class Model(Protocol):
    """What the driver needs from whatever generates the assistant messages."""

    async def open(self, messages: list[dict[str, str]]) -> bool:
        """Take the episode's opening messages; False when they alone do not fit the context."""
        ...

    async def reply(self) -> Reply | None:
        """The next reply, or None when the next prompt would pass the context limit."""
        ...

    def codec(self) -> tuple[Encode, Decode]:
        """How the model counts tokens now, for the clip of the environment's messages."""
        ...

    async def observe(self, action: str, observation: list[dict[str, str]]) -> None:
        """The environment's (clipped) answer to `action`, the reply just sent."""
        ...


@dataclass
class Driven:
    """How the episode was played: the calls made, the actions sent, what cut it, a model error."""

    calls: int = 0
    actions: list[str] = field(default_factory=list)
    observations: list[list[dict[str, str]]] = field(default_factory=list)
    cut: str = "none"
    error: str | None = None


async def drive(
    session: EpisodeSession, model: Model, budget: EpisodeBudget, driven: Driven | None = None
) -> Driven:
    """Play the open episode `session` with `model` until it is done or a limit cuts it; the cut is left on
    the session, whose exit finishes the episode with it. `driven` (filled in place) keeps what was played
    when the environment fails midway."""
    driven = Driven() if driven is None else driven
    try:
        await _play(session, model, budget, driven)
    except ModelError as exc:
        driven.error = str(exc)
    if driven.cut != "none":
        session.cut = driven.cut
    return driven


async def _play(session: EpisodeSession, model: Model, budget: EpisodeBudget, driven: Driven) -> None:
    if not await model.open(list(session.messages)):
        driven.cut = "context"
        return
    while True:
        reply = await model.reply()
        if reply is None:
            driven.cut = "context"
            return
        driven.calls += 1
        if not reply.whole:
            driven.cut = "generation"
            return
        driven.actions.append(reply.text)
        stepped = await session.step(reply.text)
        if stepped["done"]:
            return
        if driven.calls >= budget.max_llm_calls:
            driven.cut = "calls"
            return
        observation = clip_messages(stepped["observation"], *model.codec(), budget.max_env_tokens)
        driven.observations.append(observation)
        await model.observe(reply.text, observation)
