"""The episode driver (seal/env/driver.py): the order of the cuts, the clip, and what a model failure leaves,
on an in-process store with a scripted model."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from seal.env.client import EnvServiceError, InProcessEnvClient, open_episode
from seal.env.context_limits import EpisodeBudget, character_codec
from seal.env.driver import Driven, ModelError, Reply, drive
from seal.protocol.ground_truth import ground_truth_actions

TASK = "multi_turn_base_0"


@dataclass
class Scripted:
    """Replies from a list; `fits` says whether the opening fits, `room` how many calls the context holds."""

    replies: list[Reply | ModelError]
    fits: bool = True
    room: int = 100
    seen: list[list[dict[str, str]]] = field(default_factory=list)

    async def open(self, messages: list[dict[str, str]]) -> bool:
        return self.fits

    async def reply(self) -> Reply | None:
        if self.room == 0:
            return None
        self.room -= 1
        reply = self.replies.pop(0)
        if isinstance(reply, ModelError):
            raise reply
        return reply

    def codec(self):
        return character_codec(1)

    async def observe(self, action: str, observation: list[dict[str, str]]) -> None:
        self.seen.append(observation)


def truth(n: int | None = None) -> list[Reply]:
    return [Reply(text, whole=True) for text in ground_truth_actions(TASK)[:n]]


async def play(model: Scripted, budget: EpisodeBudget | None = None) -> tuple[Driven, dict]:
    client = InProcessEnvClient()
    async with open_episode(client, TASK, "eval") as session:
        driven = await drive(session, model, budget or EpisodeBudget())
    assert session.result is not None
    return driven, session.result.to_json()


async def test_the_ground_truth_plays_to_the_end_uncut():
    driven, result = await play(Scripted(truth()))
    assert (driven.cut, driven.error, result["reward"], result["truncated"]) == ("none", None, 1.0, False)
    assert driven.calls == len(driven.actions) == len(ground_truth_actions(TASK))


@pytest.mark.parametrize(
    ("model", "cut", "calls", "sent"),
    [
        (Scripted(truth(), fits=False), "context", 0, 0),
        (Scripted(truth(), room=2), "context", 2, 2),
        (Scripted([*truth(1), Reply("unfinished", whole=False)]), "generation", 2, 1),
    ],
    ids=["opening", "context", "generation"],
)
async def test_a_cut_truncates_the_episode_where_it_stands(model, cut, calls, sent):
    driven, result = await play(model)
    assert (driven.cut, driven.calls, len(driven.actions)) == (cut, calls, sent)
    assert result["truncated"] and result["reward"] == 0.0 and result["verifier"]["error_message"] == cut


async def test_the_call_limit_cuts_after_the_step_and_the_observation_is_not_shown():
    model = Scripted(truth())
    driven, result = await play(model, EpisodeBudget(max_llm_calls=3))
    assert (driven.cut, driven.calls, len(model.seen)) == ("calls", 3, 2)
    assert result["truncated"] and result["steps"] == 3


async def test_every_environment_message_is_clipped_with_the_model_s_counts():
    model = Scripted(truth())
    await play(model, EpisodeBudget(max_env_tokens=64))
    shown = [m["content"] for observation in model.seen for m in observation]
    assert all(len(text) <= 64 for text in shown) and any("message cut:" in text for text in shown)


async def test_a_model_error_is_recorded_and_the_partial_episode_still_scored():
    driven, result = await play(Scripted([*truth(2), ModelError("HTTP 500")]))
    assert (driven.error, driven.cut, driven.calls) == ("HTTP 500", "none", 2)
    assert result["labels"] and not result["truncated"]


async def test_a_cut_that_is_not_one_of_the_limits_is_refused_by_the_store():
    client = InProcessEnvClient()
    created = await client.create_episode(TASK, "eval")
    with pytest.raises(EnvServiceError, match="cut must be one of calls, context, generation"):
        await client.finish(created["episode_id"], cut="bored")
