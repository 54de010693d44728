"""`SealAgentLoop`: one verl rollout trajectory = one BFCL episode of the environment service.

The opening messages come from the environment; each generation is token in, token out through
verl's `server_manager`; the sampled tokens enter the context unchanged (verl's continuous-token
helpers), so the trained tokens are exactly the sampled ones, with `response_mask` 1 on them and 0 on
every environment and template token. The episode's verifier reward is the trajectory's reward.

Episodes run under the released code's limits (`seal.env.context_limits`): at most
`max_llm_calls` calls, no call whose prompt would pass `max_model_len − max_response_length`, every
environment message clipped to `max_env_tokens`. The trained response is the first
`max_response_length` tokens; the episode plays on past that cut and is scored on its end.

A failing environment never raises out of `run`: a trajectory whose service call fails before it is
scored is played once more from the start; if that fails too it comes back well-formed with reward 0,
`env_error` set and no loss token (the trainer keeps it out of the update, of A-Patch and of C_t).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
import weakref
from array import array
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput

from seal.bfcl.tasks import category_of
from seal.env.client import EnvServiceError, open_episode
from seal.env.connect import shared_client
from seal.env.context_limits import ContextLimits, Decode, Encode, tokenizer_codec
from seal.env.driver import Driven, Reply, drive
from seal.env.episode import MODES
from seal.trainer.rl import AGENT_LOOPS
from seal.trainer.rl.trajectory import TrajectoryFields
from seal.trainer.rl.turn_boundaries import exact_builder
from seal.trainer.rollout_settings import RolloutSettings

LOG = logging.getLogger(__name__)
CHATML_END = "<|im_end|>"
OPENING_CACHE_SIZE = 256
ENV_ATTEMPTS = 2
"""A trajectory whose environment fails before it is scored is played once more from the start."""
_OPENINGS: OrderedDict[tuple[int, bytes], asyncio.Task[tuple[array, bool]]] = OrderedDict()


def agent_loop_config_path() -> str:
    """Absolute path of the packaged agent-loop list, for `rollout.agent.agent_loop_config_path`."""
    return str(AGENT_LOOPS)


def trajectory_request_id(task_id: str, mode: str) -> str:
    """`{task_id}/{mode}/{uuid}`: one id for all generations of a trajectory (verl routes them to the
    same server, for its prefix cache), readable in the server's logs."""
    return f"{task_id}/{mode}/{uuid.uuid4().hex}"


def request_task(request_id: str) -> tuple[str, str]:
    """(task id, mode) of a `trajectory_request_id`."""
    task_id, mode, _ = request_id.rsplit("/", 2)
    return task_id, mode


@dataclass(frozen=True)
class _Resolved:
    """What a trainer config says to every trajectory, resolved once: verl builds an agent loop per
    trajectory, and each read of an interpolated key (prompt_length, ...) re-parses it (ms apiece)."""

    config: weakref.ref[Any]
    rollout: DictConfig
    settings: RolloutSettings


_RESOLVED: dict[int, _Resolved] = {}


def _resolved(trainer_config: Any) -> _Resolved:
    cached = _RESOLVED.get(id(trainer_config))
    if cached is None or cached.config() is not trainer_config:
        rollout = OmegaConf.create(
            OmegaConf.to_container(trainer_config.actor_rollout_ref.rollout, resolve=True)
        )
        cached = _Resolved(weakref.ref(trainer_config), rollout, rollout_settings(trainer_config))
        _RESOLVED[id(trainer_config)] = cached
    return cached


_TOKEN_LIMITS: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


def _token_limit(tokenizer: Any) -> int:
    """`len(tokenizer)`, counted once per tokenizer (a worker loads one and never changes its vocabulary):
    counting Qwen2.5's 151,665 tokens takes tens of milliseconds, and verl builds a loop per trajectory."""
    if tokenizer not in _TOKEN_LIMITS:
        _TOKEN_LIMITS[tokenizer] = len(tokenizer)
    return _TOKEN_LIMITS[tokenizer]


def rollout_settings(trainer_config: Any) -> RolloutSettings:
    """`seal.rollout` of the trainer config; the defaults when the config has no `seal` section."""
    node = OmegaConf.select(trainer_config, "seal.rollout", default=None)
    if node is None:
        return RolloutSettings()
    values = OmegaConf.to_container(node, resolve=True)
    try:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(RolloutSettings), values))
    except ConfigKeyError as exc:
        raise ValueError(f"unknown seal.rollout setting(s): {exc.key}") from None


def uses_chatml(tokenizer: Any) -> bool:
    template = getattr(tokenizer, "chat_template", None) or ""
    return "<|im_start|>" in template and CHATML_END in template


@dataclass
class _Rollout:
    """The trajectory being built: verl's runtime token stream and its response-side metadata."""

    prompt_ids: list[int] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = None
    messages: list[dict[str, str]] = field(default_factory=list)
    sampled: list[list[int]] = field(default_factory=list)
    driven: Driven = field(default_factory=Driven)
    """The calls, actions, clipped observations and cut, as the episode driver played them."""
    env_error: str = ""
    gen_seconds: float = 0.0
    weight_versions: dict[str, Any] = field(default_factory=dict)
    """`min_global_steps`/`max_global_steps`: the policy versions that generated the trajectory, as the
    server reports them; V1's step metrics (staleness) read them from every sample."""

    reply_end: tuple[int, int] | None = None
    """Token and mask lengths after the last reply: where a trajectory cut by its context ends."""

    def mark_reply_end(self) -> None:
        self.reply_end = (len(self.token_ids), len(self.mask))

    def drop_last_observation(self) -> None:
        """End the trajectory on the model's last reply, as the released code did: an observation the
        model will never answer is not part of it."""
        if self.reply_end is None:
            return
        tokens, mask = self.reply_end
        self.token_ids, self.mask = self.token_ids[:tokens], self.mask[:mask]
        if self.logprobs is not None:
            self.logprobs = self.logprobs[:mask]

    def note_weights(self, server_fields: dict[str, Any], global_steps: Any) -> None:
        """First call's `min_global_steps`, last call's `max_global_steps` (the step's own version when
        the server says nothing or nothing was generated)."""
        self.weight_versions.setdefault(
            "min_global_steps", server_fields.get("min_global_steps", global_steps)
        )
        self.weight_versions["max_global_steps"] = server_fields.get("max_global_steps", global_steps)


class SealAgentLoop(AgentLoopBase):
    """Registered twice (agent_loops.yaml): `seal_agent` plays `train` episodes, `seal_eval_agent` `eval`."""

    def __init__(self, *args: Any, mode: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if mode not in MODES:
            raise ValueError(f"SealAgentLoop mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.mode = mode
        resolved = _resolved(self.config)
        self.rollout_config = resolved.rollout
        self.settings = resolved.settings
        self.client = shared_client(self.settings.env())
        self.response_length = int(self.rollout_config.response_length)
        window = self.rollout_config.get("max_model_len") or (
            int(self.rollout_config.prompt_length) + self.response_length
        )
        self.window = int(window)
        self.limits = ContextLimits(
            max_llm_calls=self.settings.max_llm_calls,
            max_env_tokens=self.settings.max_env_tokens,
            context_tokens=self.window - self.response_length,
        )
        self.encode, self.decode = tokenizer_codec(self.tokenizer)
        self._prompt_cut = False
        # The builder follows config.json's model_type; a ChatML template (SmolLM2 says "llama") needs
        # the Qwen builder, or the newline after each sampled <|im_end|> goes missing (turn_boundaries).
        self.continuous_token_builder = exact_builder(
            self.tokenizer,
            self.continuous_token_builder,
            uses_chatml(self.tokenizer),
            self.apply_chat_template_kwargs,
        )
        self.end_of_turn_ids = {
            token
            for token in (self.tokenizer.eos_token_id, self.tokenizer.convert_tokens_to_ids(CHATML_END))
            if isinstance(token, int) and token != self.tokenizer.unk_token_id
        }
        # The one masked token of a trajectory without a response (the environment failed at once).
        self.filler_id = min(self.end_of_turn_ids, default=self.tokenizer.pad_token_id or 0)
        self.token_limit = _token_limit(self.tokenizer)

    def _cap_text_prompt_length(self, prompt_ids: list[int]) -> list[int]:
        """verl's cap of the opening prompt, noting that it cut: such an episode is not played."""
        self._prompt_cut = len(prompt_ids) > self.rollout_config.prompt_length
        return super()._cap_text_prompt_length(prompt_ids)

    async def _initial_tokens(self, messages: list[dict[str, str]]) -> list[int]:
        """`ct_build_initial_tokens`, built once per opening: the rollouts of a GRPO group share their
        opening and start together, and rendering and tokenizing a 20-30 kB tool prompt is the largest
        part of a trajectory's CPU. The shared build is shielded from one waiter's cancellation."""
        key = (id(self.tokenizer), orjson.dumps(messages))
        loop = asyncio.get_running_loop()
        built = _OPENINGS.get(key)
        if built is None or built.get_loop() is not loop:
            built = _OPENINGS[key] = loop.create_task(self._build_initial_tokens(messages))
            while len(_OPENINGS) > OPENING_CACHE_SIZE:
                _OPENINGS.popitem(last=False)
        else:
            _OPENINGS.move_to_end(key)
        try:
            prompt_ids, self._prompt_cut = await asyncio.shield(built)
        except Exception:
            _OPENINGS.pop(key, None)
            raise
        return list(prompt_ids)

    async def _build_initial_tokens(self, messages: list[dict[str, str]]) -> tuple[array, bool]:
        prompt_ids = await self.ct_build_initial_tokens(messages)
        return array("q", prompt_ids), self._prompt_cut

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        task_id = _task_id(kwargs)
        for attempt in range(ENV_ATTEMPTS):
            rollout = _Rollout()
            episode = open_episode(self.client, task_id, self.mode, self.settings.protocol)
            stream = _TokenStream(self, rollout, task_id, sampling_params, kwargs.get("global_steps"))
            try:
                async with episode:
                    await drive(episode, stream, self.limits, rollout.driven)
                break
            except EnvServiceError as exc:
                rollout.env_error = str(exc)
                again = "playing it again from the start" if attempt + 1 < ENV_ATTEMPTS else "giving up"
                LOG.warning("environment failed %s (%s episode), %s: %s", task_id, self.mode, again, exc)
        if not rollout.prompt_ids:
            rollout.prompt_ids = await self.ct_build_initial_tokens(list(kwargs["raw_prompt"]))
            rollout.token_ids = list(rollout.prompt_ids)
        result = episode.result
        response_tokens = len(rollout.token_ids) - len(rollout.prompt_ids)
        trained = 0 if rollout.env_error else sum(rollout.mask[: self.response_length])
        fields = TrajectoryFields(
            task_id=task_id,
            category=result.category if result else category_of(task_id),
            split=_split(kwargs),
            mode=self.mode,
            labels=result.labels if result else [],
            taxonomy=result.taxonomy if result else "",
            interface_version=episode.interface_version,
            reward=result.reward if result and not rollout.env_error else 0.0,
            llm_calls=rollout.driven.calls,
            truncated=rollout.driven.cut != "none" or bool(result and result.truncated),
            cut=rollout.driven.cut,
            response_tokens=response_tokens,
            trained_tokens=trained,
            trained_cut=response_tokens > self.response_length,
            env_error=rollout.env_error,
            env_seconds=episode.env_seconds,
            gen_seconds=rollout.gen_seconds,
            actions=rollout.driven.actions,
            protocol=self.settings.protocol,
        )
        rollout.weight_versions.setdefault("min_global_steps", kwargs.get("global_steps"))
        rollout.weight_versions.setdefault("max_global_steps", kwargs.get("global_steps"))
        output = self._output(rollout, fields)
        if self.settings.trace_dir:
            self._trace(self.settings.trace_dir, rollout, fields, output)
        return output

    def _output(self, rollout: _Rollout, fields: TrajectoryFields) -> AgentLoopOutput:
        """Cut to `response_length` (verl does not); an empty response becomes one masked end token; an
        env-error trajectory has no loss token."""
        response = rollout.token_ids[len(rollout.prompt_ids) :][: self.response_length]
        mask = rollout.mask[: self.response_length]
        logprobs = rollout.logprobs[: self.response_length] if rollout.logprobs is not None else None
        if not response:
            response, mask = [self.filler_id], [0]
            logprobs = [0.0] if logprobs is not None else None
        if logprobs is None and self.rollout_config.get("calculate_log_probs", False):
            logprobs = [0.0] * len(mask)  # nothing sampled; the batch's rows must all carry log-probs
        if fields.env_error:
            mask = [0] * len(mask)  # an infrastructure failure must not train the policy
        return AgentLoopOutput(
            prompt_ids=rollout.prompt_ids,
            response_ids=response,
            response_mask=mask,
            response_logprobs=logprobs,
            reward_score=fields.reward,
            num_turns=len(rollout.messages) + 1,
            metrics=AgentLoopMetrics(generate_sequences=fields.gen_seconds, tool_calls=fields.env_seconds),
            extra_fields={**fields.extra_fields(), **rollout.weight_versions},
        )

    def _trace(
        self, trace_dir: str, rollout: _Rollout, fields: TrajectoryFields, output: AgentLoopOutput
    ) -> None:
        """One JSON line per trajectory, one file per process (processes never interleave): what was
        trained on next to what the model sampled and what the environment said."""
        record = {
            "task_id": fields.task_id,
            "mode": fields.mode,
            "truncated": fields.truncated,
            "cut": fields.cut,
            "env_error": fields.env_error,
            "prompt_ids": output.prompt_ids,
            "response_ids": output.response_ids,
            "response_mask": output.response_mask,
            "sampled_texts": [self.tokenizer.decode(ids) for ids in rollout.sampled],
            "observations": rollout.driven.observations,
        }
        folder = Path(trace_dir)
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / f"trajectories.{os.getpid()}.jsonl", "ab") as trace:
            trace.write(orjson.dumps(record) + b"\n")


class _TokenStream:
    """The agent loop's `Model` (seal.env.driver): verl's token-in, token-out server on the trajectory's
    token stream, built with verl's continuous-token helpers."""

    def __init__(
        self,
        loop: SealAgentLoop,
        rollout: _Rollout,
        task_id: str,
        sampling_params: dict[str, Any],
        global_steps: Any,
    ) -> None:
        self.loop = loop
        self.rollout = rollout
        self.request_id = trajectory_request_id(task_id, loop.mode)
        self.sampling_params = sampling_params
        self.global_steps = global_steps
        self.per_call = loop.settings.max_tokens_per_call or loop.response_length

    async def open(self, messages: list[dict[str, str]]) -> bool:
        """The opening's tokens; False when verl's prompt cap cut them (such an episode is not played)."""
        rollout = self.rollout
        rollout.messages = messages
        rollout.prompt_ids = await self.loop._initial_tokens(messages)
        rollout.token_ids = list(rollout.prompt_ids)
        return not self.loop._prompt_cut

    async def reply(self) -> Reply | None:
        """One generation merged into the stream; None (ending the trajectory on the model's last reply)
        when the prompt would pass `max_model_len − max_response_length`."""
        loop, rollout = self.loop, self.rollout
        if loop.limits.context_full(len(rollout.token_ids)):
            rollout.drop_last_observation()
            return None
        max_tokens = min(self.per_call, loop.window - len(rollout.token_ids))
        start = time.perf_counter()
        output = await loop.server_manager.generate(
            self.request_id,
            prompt_ids=rollout.token_ids,
            sampling_params={**self.sampling_params, "max_tokens": max_tokens},
        )
        rollout.gen_seconds += time.perf_counter() - start
        rollout.note_weights(output.extra_fields or {}, self.global_steps)
        sampled = list(output.token_ids[:max_tokens])
        rollout.sampled.append(sampled)
        logprobs = _logprobs(output.log_probs, len(sampled), rollout)
        merged, rollout.mask, rollout.logprobs = await loop.ct_merge_assistant_token(
            rollout.token_ids, sampled, rollout.mask, rollout.logprobs, assistant_logprobs=logprobs
        )
        rollout.token_ids = merged.token_ids
        rollout.mark_reply_end()
        if not sampled or sampled[-1] not in loop.end_of_turn_ids or max(sampled) >= loop.token_limit:
            # A reply cut by max_tokens, or holding an id past the tokenizer's (Qwen2.5 pads its embedding
            # to 151,936 rows; vLLM refuses such an id in the next prompt): never sent.
            return Reply("", whole=False)
        # The model's text as written: Llama-3 tokenizers ship clean_up_tokenization_spaces=true, which
        # transformers 4.x applies on decode (" ," -> ","), changing call arguments.
        text = loop.tokenizer.decode(sampled, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        return Reply(text, whole=True)

    def codec(self) -> tuple[Encode, Decode]:
        return self.loop.encode, self.loop.decode

    async def observe(self, action: str, observation: list[dict[str, str]]) -> None:
        rollout = self.rollout
        previous = [*rollout.messages, {"role": "assistant", "content": action}]
        rollout.messages = [*previous, *observation]
        merged, rollout.mask, rollout.logprobs = await self.loop.ct_merge_context_msg(
            previous, rollout.messages, rollout.token_ids, rollout.mask, rollout.logprobs
        )
        rollout.token_ids = merged.token_ids


def _logprobs(sampled_logprobs: list[float] | None, count: int, rollout: _Rollout) -> list[float] | None:
    """The server's log-probs of the sampled tokens, kept once any call returned them (0.0 where not)."""
    if sampled_logprobs is None and rollout.logprobs is None:
        return None
    if rollout.logprobs is None:
        rollout.logprobs = [0.0] * len(rollout.mask)
    kept = list(sampled_logprobs or [])[:count]
    return kept + [0.0] * (count - len(kept))


def _split(sample: dict[str, Any]) -> str:
    extra = sample.get("extra_info")
    split = extra.get("split") if isinstance(extra, dict) else None
    return split if isinstance(split, str) else ""


def _task_id(sample: dict[str, Any]) -> str:
    """The row's task id (`extra_info.task_id`, written by seal/dataset.py)."""
    extra = sample.get("extra_info") or {}
    task_id = extra.get("task_id") if isinstance(extra, dict) else None
    if not isinstance(task_id, str):
        raise ValueError("a SEAL rollout row needs extra_info.task_id (see scripts/prepare_data.py)")
    return task_id
