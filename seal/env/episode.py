"""The episode state machine: one BFCL task played through a protocol, step by step.

`reset()` gives the opening messages, `step(action_text)` executes one assistant message and
returns what the environment says back, `finish()` scores the episode with BFCL's official
checker and diagnoses every ground-truth turn. The environment is deterministic, so the list of
assistant messages (the action log) replays an episode exactly.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from seal.bfcl import schema
from seal.bfcl.call_deadline import call_deadline
from seal.bfcl.calls import InvalidCallError, ToolCall
from seal.bfcl.executor import Executor
from seal.bfcl.tasks import Task, get_task
from seal.bfcl.verifier import FORCE_TERMINATED, Verdict, official_verdict, turn_checks
from seal.env.action_limit import kept_action, over_long
from seal.env.budget import OUT_OF_MEMORY_READING, OUT_OF_MEMORY_RUNNING, BudgetMeter, ToolBudget
from seal.env.interface import RAW, Interface
from seal.env.problem_report import problem_text, reported_problems
from seal.protocol import DEFAULT_PROTOCOL, Protocol, get_protocol
from seal.protocol.base import CallCandidate, ParsedAction
from seal.protocol.representable import unicode_text
from seal.tocf.diagnosis import diagnose, trajectory_profile
from seal.tocf.evidence import CallEvidence, TurnEvidence
from seal.tocf.labels import DEFAULT_TAXONOMY

NOT_KEPT = "[action not kept: {chars:,} characters, sha256 {digest}]"
"""What an episode keeps of an action past its `max_episode_action_chars`."""
NOT_KEPT_PATTERN = re.compile(r"\[action not kept: [\d,]+ characters, sha256 [0-9a-f]{64}\]")
"""`NOT_KEPT` as written: an action log holding one no longer replays its episode."""
Mode = Literal["train", "eval"]
MODES = ("train", "eval")
BFCL_STEP_LIMIT = 20


class EpisodeDoneError(RuntimeError):
    """A step on an episode that has already ended."""


@dataclass(frozen=True)
class EpisodeLimits:
    """BFCL allows 20 model steps per user turn; `max_steps` optionally caps the whole episode; `budget`
    bounds what its tool calls may cost (seal/env/budget.py)."""

    max_steps_per_turn: int = BFCL_STEP_LIMIT
    max_steps: int | None = None
    strict: bool = True
    budget: ToolBudget = field(default_factory=ToolBudget)

    def __post_init__(self) -> None:
        if self.max_steps_per_turn < 1 or (self.max_steps is not None and self.max_steps < 1):
            raise ValueError("step limits must be positive")


@dataclass(frozen=True)
class StepResult:
    observation: list[dict[str, str]]
    done: bool
    info: dict[str, Any]


@dataclass(frozen=True)
class EpisodeResult:
    """What `finish` says about an episode: the service's finish body, report lines and rollout fields."""

    task_id: str
    category: str
    mode: Mode
    protocol: str
    """The protocol of the model-facing text (qwen_fc, llama3_json, python_list)."""
    interface_version: int
    """The version of Ω the episode ran under (0 = the preset; eval episodes run the raw interface)."""
    reward: float
    """1.0 iff BFCL's official multi-turn checker passes; an unfinished or truncated episode scores 0."""
    verifier: dict[str, Any]
    """The official verdict: `valid`, its error type and message."""
    taxonomy: str
    labels: list[str]
    """One diagnosis label per ground-truth turn."""
    profile: dict[str, float]
    """Share of the ground-truth turns carrying each label (the trajectory profile p_j)."""
    evidence: list[dict[str, Any]]
    """Per ground-truth turn: messages, attempted calls, the re-execution check, the label and why."""
    truncated: bool
    """A step limit or the context window ended the episode (`Episode.truncate`)."""
    steps: int
    """Assistant messages the episode received."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-shaped deep copy (what the service sends)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EpisodeResult:
        """The result from its JSON form; a missing field is a KeyError naming it."""
        return cls(**{name: data[name] for name in _RESULT_FIELDS})


@dataclass
class _Turn:
    messages: list[int] = field(default_factory=list)
    steps: list[list[ToolCall]] = field(default_factory=list)
    calls: list[CallEvidence] = field(default_factory=list)
    rejected_messages: int = 0


class Episode:
    """One task, one protocol, one interface version; owns its tool instances."""

    def __init__(
        self,
        task: Task | str,
        mode: Mode = "eval",
        protocol: Protocol | str = DEFAULT_PROTOCOL,
        interface: Interface = RAW,
        limits: EpisodeLimits | None = None,
        taxonomy: str = DEFAULT_TAXONOMY,
        priority: tuple[str, ...] | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r} (expected train or eval)")
        self.task = get_task(task) if isinstance(task, str) else task
        self.mode = mode
        self.protocol = get_protocol(protocol) if isinstance(protocol, str) else protocol
        self.interface = interface if mode == "train" else RAW
        self.limits = limits or EpisodeLimits()
        self.taxonomy = taxonomy
        self.priority = priority
        budget = self.limits.budget
        self.executor = Executor(
            self.task,
            max_state=(budget.max_state_nodes, budget.max_state_chars),
            max_call_s=budget.max_call_s,
        )
        self.meter = BudgetMeter(budget)
        self.docs = {doc["name"]: doc for doc in self.task.functions}
        self.actions: list[str] = []
        self._kept_chars = 0
        self.messages: list[dict[str, str]] = []
        """The opening messages; observations are returned, not kept (an episode holds its actions only)."""
        self.turn = 0
        self.turns = [_Turn() for _ in range(self.task.num_turns)]
        self.steps_in_turn = 0
        self.done = False
        self.completed = False
        self.truncated = False
        self.truncation: str | None = None
        """Why the episode was truncated (step limit, context window), when it was."""
        self._result: EpisodeResult | None = None

    # -- opening --------------------------------------------------------------------------
    def reset(self) -> list[dict[str, str]]:
        """The system prompt with the tools and the first user message(s)."""
        if not self.messages:
            system = self.protocol.system_prompt(
                self.interface.present(self.task.functions), extra=self.interface.system_suffix()
            )
            self.messages = [{"role": "system", "content": system}, *self._user_messages(0)]
        return [dict(m) for m in self.messages]

    def _user_messages(self, turn: int) -> list[dict[str, str]]:
        revealed = self.task.missed_functions.get(turn)
        if revealed:
            self.docs.update({doc["name"]: doc for doc in revealed})
            text = self.protocol.reveal_message(self.interface.present(revealed))
            return [{"role": "user", "content": text}]
        return [{"role": "user", "content": m["content"]} for m in self.task.questions[turn]]

    @property
    def available_tools(self) -> list[str]:
        return list(self.docs)

    # -- stepping -------------------------------------------------------------------------
    def step(self, action: str) -> StepResult:
        """Play one assistant message. Whatever it says is the model's scored action; its text is read
        as Unicode (a lone surrogate becomes U+FFFD: seal/protocol/representable.py); an over-long one is
        a rejected message, kept in part (seal/env/action_limit.py). Should the process run out of memory
        (the tool budget is meant to prevent it), a message not yet run is rejected, and one partly run
        ends the episode, scored like any truncated one: either way the step is answered."""
        if not isinstance(action, str):
            raise TypeError("an action is the assistant's message text")
        if self.done:
            raise EpisodeDoneError(f"episode of {self.task.id} has ended; no more steps")
        action = unicode_text(kept_action(action))
        self.reset()
        index = len(self.actions)
        self.actions.append(self._kept(action))
        self.steps_in_turn += 1
        turn = self.turns[self.turn]
        turn.messages.append(index)
        try:
            parsed = over_long(action) or self._within_budget(self.protocol.parse(action))
        except MemoryError:
            parsed = ParsedAction(errors=(OUT_OF_MEMORY_READING,), has_markup=True)
        self.meter.start_step()
        info: dict[str, Any] = {"turn": self.turn, "accepted": [], "rejected": [], "errors": []}
        info["turn_ended"] = not parsed.has_markup
        try:
            observation = self._end_turn() if info["turn_ended"] else self._act(index, parsed, turn, info)
        except MemoryError:
            self.truncate(OUT_OF_MEMORY_RUNNING)
            observation = self.protocol.error_observation([OUT_OF_MEMORY_RUNNING])
        if not self.done:
            self._check_limits()
        info.update(done=self.done, truncated=self.truncated, steps=len(self.actions))
        return StepResult(observation=observation, done=self.done, info=info)

    def _kept(self, action: str) -> str:
        """`action` while the episode's kept actions fit `max_episode_action_chars`, else its length and
        digest: what an open episode holds stays bounded, whatever the client sends."""
        room = self.limits.budget.max_episode_action_chars - self._kept_chars
        if len(action) <= room:
            self._kept_chars += len(action)
            return action
        digest = hashlib.sha256(action.encode("utf-8", "replace")).hexdigest()
        return NOT_KEPT.format(chars=len(action), digest=digest)

    def _within_budget(self, parsed: ParsedAction) -> ParsedAction:
        """`parsed`, or a rejection of the whole message when it makes more calls than one may."""
        too_many = self.limits.budget.too_many_calls(len(parsed.calls))
        return parsed if too_many is None else ParsedAction(errors=(too_many,), has_markup=True)

    def _end_turn(self) -> list[dict[str, str]]:
        self.turn += 1
        self.steps_in_turn = 0
        if self.turn >= self.task.num_turns:
            self.done = self.completed = True
            return []
        return self._user_messages(self.turn)

    def _validate(self, candidate: CallCandidate) -> ToolCall | str:
        """The executable call, or why it may not run (a name not shown now, or unsafe parts)."""
        name = candidate.name
        if not isinstance(name, str) or name not in self.docs or not self.executor.has_tool(name):
            return f"Tool '{_text(name)[:80]}' is not available in the current tool list."
        try:
            return ToolCall(name, candidate.arguments)
        except InvalidCallError as exc:
            return problem_text(str(exc))

    def _act(
        self, index: int, parsed: ParsedAction, turn: _Turn, info: dict[str, Any]
    ) -> list[dict[str, str]]:
        checked = [self._validate(candidate) for candidate in parsed.calls]
        for candidate, call in zip(parsed.calls, checked, strict=True):
            if isinstance(call, str):
                info["rejected"].append({"name": _text(candidate.name), "reason": call})
        problems = [*parsed.errors, *(call for call in checked if isinstance(call, str))]
        if problems and (self.limits.strict or all(isinstance(call, str) for call in checked)):
            return self._reject(index, parsed, turn, problems, info)
        step: list[ToolCall] = []
        results: list[str] = []
        for candidate, call in zip(parsed.calls, checked, strict=True):
            if isinstance(call, str):
                turn.calls.append(
                    CallEvidence(index, _text(candidate.name), accepted=False, reject_reason=call)
                )
                results.append(f"[ERROR] Invalid tool call format: {call}")
            else:
                result, accepted = self._execute(index, call, turn, info)
                results.append(result)
                if accepted:
                    step.append(call)
        turn.steps.append(step)
        if parsed.errors:
            turn.rejected_messages += 1
            errors = reported_problems(parsed.errors)
            return [*self.protocol.observation(results), *self.protocol.error_observation(errors)]
        return self.protocol.observation(results)

    def _reject(
        self, index: int, parsed: ParsedAction, turn: _Turn, problems: list[str], info: dict[str, Any]
    ) -> list[dict[str, str]]:
        turn.rejected_messages += 1
        problems = reported_problems(problems)
        reason = "; ".join(problems)
        for candidate in parsed.calls:
            turn.calls.append(
                CallEvidence(index, _text(candidate.name), accepted=False, reject_reason=reason)
            )
        if not info["rejected"]:
            info["rejected"].append({"name": "", "reason": reason})
        observation = self.protocol.error_observation(problems)
        hint = self.interface.parse_error_hint(problems, self.available_tools, protocol=self.protocol.name)
        if hint:
            observation[-1] = {**observation[-1], "content": f"{observation[-1]['content']}\n{hint}"}
        return observation

    def _execute(self, index: int, call: ToolCall, turn: _Turn, info: dict[str, Any]) -> tuple[str, bool]:
        """What the model reads of the call, and whether it ran (a call over the budget did not)."""
        refused = self.meter.refusal()
        if refused is None:
            started = self.meter.timer()
            result = self.executor.execute(call)
            self.meter.charge(started, len(result.text))
            refused = result.undone
        if refused is not None:
            reason = f"over the episode's budget: {refused}"
            turn.calls.append(CallEvidence(index, call.name, accepted=False, reject_reason=reason))
            info["rejected"].append({"name": call.name, "reason": reason})
            return f"[ERROR] {reason[0].upper()}{reason[1:]}", False
        doc = self.docs[call.name]
        error = None if result.error is None else result.error[: self.limits.budget.max_observation_chars]
        turn.calls.append(
            CallEvidence(
                index,
                call.name,
                accepted=True,
                error=error,
                schema_violations=tuple(schema.violations(doc, call.arguments)),
            )
        )
        info["accepted"].append({"name": call.name, "arguments": call.arguments})
        text = self.meter.shown(result.text)
        if error is None:
            return text, True
        info["errors"].append({"name": call.name, "error": error})
        hint = self.interface.error_hint(call.name, text, doc, arguments=call.arguments)
        return (f"{text}\n{hint}" if hint else text), True

    def _check_limits(self) -> None:
        over_turn = self.steps_in_turn >= self.limits.max_steps_per_turn
        over_episode = self.limits.max_steps is not None and len(self.actions) >= self.limits.max_steps
        if over_turn or over_episode:
            self.truncate("step limit reached")

    def truncate(self, reason: str) -> None:
        """End the episode where it stands, e.g. when the model's context window is full: it is then
        scored like any unfinished episode (reward 0, BFCL's force-terminated verdict with `reason`)."""
        self.done = self.truncated = True
        self.truncation = reason

    # -- scoring --------------------------------------------------------------------------
    def turn_evidence(self) -> list[TurnEvidence]:
        """What happened in each ground-truth turn, with its re-execution check on fresh namespaces."""
        checks = turn_checks(self.task, [turn.steps for turn in self.turns])
        return [
            TurnEvidence(
                turn=i,
                gt_empty=not self.task.ground_truth[i],
                reached=bool(turn.messages),
                messages=tuple(turn.messages),
                calls=tuple(turn.calls),
                rejected_messages=turn.rejected_messages,
                check=check,
            )
            for i, (turn, check) in enumerate(zip(self.turns, checks, strict=True))
        ]

    def finish(self) -> EpisodeResult:
        """Reward, verdict, turn labels and evidence; may be called on an unfinished episode."""
        if self._result is not None:
            return self._result
        model_turns = [turn.steps for turn in self.turns]
        with call_deadline(self.limits.budget.max_call_s):
            if self.completed:
                verdict = official_verdict(self.task, model_turns)
            else:
                reason = self.truncation or "episode ended before the last turn"
                verdict = Verdict(False, FORCE_TERMINATED, reason)
            evidence = self.turn_evidence()
        labels = diagnose(evidence, self.taxonomy, self.priority)
        self.done = True
        self._result = EpisodeResult(
            task_id=self.task.id,
            category=self.task.category,
            mode=self.mode,
            protocol=self.protocol.name,
            interface_version=self.interface.version,
            reward=1.0 if verdict.valid else 0.0,
            verifier=verdict.to_dict(),
            taxonomy=self.taxonomy,
            labels=[label.label for label in labels],
            profile=trajectory_profile(labels),
            evidence=[
                {**turn.to_dict(), "label": label.label, "why": label.evidence}
                for turn, label in zip(evidence, labels, strict=True)
            ],
            truncated=self.truncated,
            steps=len(self.actions),
        )
        return self._result

    def action_log(self) -> dict[str, Any]:
        return {"task_id": self.task.id, "protocol": self.protocol.name, "actions": list(self.actions)}


_RESULT_FIELDS = tuple(f.name for f in fields(EpisodeResult))


def _text(value: object) -> str:
    return value if isinstance(value, str) else repr(value)[:80]
