"""The episodes the environment service holds: ids, limits, idle reaping and the current interface Ω.

All service behaviour lives here, so the HTTP routes and the in-process client behave identically;
the routes only translate. Every method validates its input before it changes anything and raises a
`StoreError` whose `status` is the HTTP code the service answers with and whose `reason` is one line.

Concurrency: methods are synchronous and thread-safe. `_lock` guards the episode table and the
counters, `_omega_lock` serialises Evolve, and every episode has its own lock, so the operations on
one episode run one at a time whichever thread or event loop calls them.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

from pydantic import ValidationError

from seal.bfcl.call_deadline import may_call_a_worker
from seal.bfcl.tasks import UnknownTaskError, get_task, load_tasks, split_ids
from seal.env.budget import ToolBudget, worst_episode_bytes
from seal.env.context_limits import CUTS
from seal.env.episode import MODES, Episode, EpisodeDoneError, EpisodeLimits, EpisodeResult, Mode
from seal.env.interface import DEFAULT_PRESET, PRESETS, Interface, build_interface, evolve
from seal.env.interface_record import InterfaceRecord
from seal.env.omega_state import restore
from seal.flags import comma_list, setting
from seal.protocol import DEFAULT_PROTOCOL, PROTOCOLS, Protocol, get_protocol
from seal.records import MAX_VERSION, describe
from seal.tocf.labels import DEFAULT_PRIORITY, DEFAULT_TAXONOMY, TAXONOMIES, validate_priority

MAX_TASK_ID_CHARS = 128
MAX_PROTOCOL_CHARS = 64
MAX_REASON_CHARS = 500


def one_line(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """Collapse whitespace so a reason is a single log- and header-safe line."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class StoreError(Exception):
    """A request the store refuses; `status` is the HTTP code, `reason` a one-line explanation."""

    status = 400

    def __init__(self, reason: str) -> None:
        self.reason = one_line(reason)
        super().__init__(self.reason)


class UnknownEpisode(StoreError):
    status = 404


class UnknownTask(StoreError):
    status = 404


class EpisodeFinished(StoreError):
    status = 409


class Unservable(StoreError):
    """A well-formed Ω that this store cannot serve: another config than its own, or not what it renders."""

    status = 409


class TooManyEpisodes(StoreError):
    status = 429


class BadRequest(StoreError):
    status = 422


@dataclass(frozen=True)
class StoreSettings:
    """What a service operator tunes; validated up front so a bad flag fails at start, not per request.

    The single source of these defaults: `seal serve` and `python -m env_service` generate their
    flags from the fields (seal/flags.py), as part of `env_service.app.ServiceSettings`.
    """

    max_episodes: int = setting(512, "open-episode limit (429 beyond it)")
    ttl_s: float = setting(1800.0, "seconds before an idle episode is reaped", flag="--ttl")
    interface_preset: str = setting(
        DEFAULT_PRESET, "training interface Ω to start from", choices=tuple(PRESETS)
    )
    taxonomy: str = setting(DEFAULT_TAXONOMY, "diagnosis taxonomy", choices=TAXONOMIES)
    priority: tuple[str, ...] | None = setting(
        None,
        f"paper taxonomy: comma-separated failure order (unset: {','.join(DEFAULT_PRIORITY)})",
        parse=lambda text: validate_priority(comma_list(text)),
    )
    max_steps: int | None = setting(None, "optional per-episode cap on model steps")
    memory_budget_mib: int = setting(
        0,
        "MiB the open episodes may hold at worst (seal.env.budget.worst_episode_bytes each): an episode is "
        "admitted only while they fit, else 429 (0: half of the machine's memory)",
    )
    budget: ToolBudget = field(default_factory=ToolBudget)
    """What an episode's tool calls may cost (seal/env/budget.py); its fields are flags of their own."""

    def __post_init__(self) -> None:
        if self.max_episodes < 1 or self.memory_budget_mib < 0:
            raise ValueError("max_episodes must be at least 1 and memory_budget_mib not negative")
        if not self.ttl_s > 0:
            raise ValueError("ttl_s must be positive")
        if self.interface_preset not in PRESETS:
            raise ValueError(
                f"unknown interface preset {self.interface_preset!r} (expected {', '.join(PRESETS)})"
            )
        if self.taxonomy not in TAXONOMIES:
            raise ValueError(f"unknown taxonomy {self.taxonomy!r} (expected {', '.join(TAXONOMIES)})")
        if self.priority is not None:
            object.__setattr__(self, "priority", validate_priority(self.priority))
        EpisodeLimits(max_steps=self.max_steps)
        if self.episode_limit < 1:
            raise ValueError(
                f"memory_budget_mib {self.memory_budget_mib} holds no episode "
                f"({worst_episode_bytes(self.budget) >> 20} MiB each at worst)"
            )

    @property
    def episode_limit(self) -> int:
        """Episodes open at once: `max_episodes`, or fewer when their worst case passes the memory budget."""
        budget = self.memory_budget_mib << 20 or os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
        return min(self.max_episodes, budget // worst_episode_bytes(self.budget))


class CreatedEpisode(NamedTuple):
    episode_id: str
    messages: list[dict[str, str]]
    interface_version: int


@dataclass
class _Entry:
    """One held episode; `episode` is dropped at finish so its tool instances are freed early."""

    episode: Episode | None
    last_access: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    result: EpisodeResult | None = None


class EpisodeStore:
    """Open episodes keyed by uuid4 hex ids, an open-episode limit, an idle TTL and the current Ω."""

    def __init__(
        self, settings: StoreSettings | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings = settings or StoreSettings()
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._reserved = 0
        self._episode_limit = self.settings.episode_limit
        self._lock = threading.Lock()
        self._omega_lock = threading.Lock()
        self._interface = build_interface(self.settings.interface_preset)
        self._limits = EpisodeLimits(max_steps=self.settings.max_steps, budget=self.settings.budget)
        self._counters: Counter[str] = Counter()
        self.task_count = len(load_tasks())

    # -- reads ----------------------------------------------------------------------------
    @property
    def interface(self) -> Interface:
        return self._interface

    @property
    def open_count(self) -> int:
        return len(self._entries) + self._reserved

    def counters(self) -> dict[str, int]:
        """Cumulative event counts (created, steps, finished, deleted, reaped, rejected_full, evolved)."""
        with self._lock:
            return dict(self._counters)

    def health(self) -> dict[str, Any]:
        self.reap()
        return {
            "status": "ok",
            "tasks": self.task_count,
            "episodes_open": self.open_count,
            "interface_version": self._interface.version,
            "taxonomy": self.settings.taxonomy,
            "pid": os.getpid(),
        }

    def list_tasks(self, split: str = "all") -> list[str]:
        if not isinstance(split, str):
            raise BadRequest("split must be a string")
        try:
            return list(split_ids(split))
        except ValueError as exc:
            raise BadRequest(str(exc)) from None

    def interface_json(self) -> dict[str, Any]:
        return self._interface.to_json()

    # -- episodes -------------------------------------------------------------------------
    def create(self, task_id: str, mode: str, protocol: str | None = None) -> CreatedEpisode:
        """Validate everything, reserve a slot, then build the episode outside the table lock."""
        checked = self._check_create(task_id, mode, protocol)
        try:
            task = get_task(task_id)
        except UnknownTaskError as exc:
            raise UnknownTask(str(exc)) from None
        self.reap()
        with self._lock:
            if len(self._entries) + self._reserved >= self._episode_limit:
                self._counters["rejected_full"] += 1
                raise TooManyEpisodes(
                    f"open-episode limit of {self._episode_limit} reached (--max-episodes, and what "
                    "--memory-budget-mib holds at worst); finish and delete episodes first"
                )
            self._reserved += 1
        try:
            episode = Episode(
                task,
                mode=cast(Mode, mode),
                protocol=checked,
                interface=self._interface,
                limits=self._limits,
                taxonomy=self.settings.taxonomy,
                priority=self.settings.priority,
            )
            messages = episode.reset()
        finally:
            with self._lock:
                self._reserved -= 1
        episode_id = uuid.uuid4().hex
        with self._lock:
            self._entries[episode_id] = _Entry(episode, self._clock())
            self._counters["created"] += 1
        return CreatedEpisode(episode_id, messages, episode.interface.version)

    @staticmethod
    def _check_create(task_id: Any, mode: Any, protocol: Any) -> Protocol:
        if not isinstance(task_id, str) or not 0 < len(task_id) <= MAX_TASK_ID_CHARS:
            raise BadRequest(f"task_id must be a string of 1 to {MAX_TASK_ID_CHARS} characters")
        if mode not in MODES:
            raise BadRequest(f"mode must be one of {', '.join(MODES)}")
        name = DEFAULT_PROTOCOL if protocol is None else protocol
        if not isinstance(name, str) or len(name) > MAX_PROTOCOL_CHARS or name not in PROTOCOLS:
            raise BadRequest(f"protocol must be one of {', '.join(sorted(PROTOCOLS))}")
        return get_protocol(name)

    def step(self, episode_id: str, action: str) -> dict[str, Any]:
        if not isinstance(action, str):
            raise BadRequest("action must be a string")
        entry = self._get(episode_id)
        with entry.lock:
            if entry.episode is None or entry.episode.done:
                raise EpisodeFinished(
                    f"episode {episode_id} has ended; call finish (and delete) instead of step"
                )
            try:
                result = entry.episode.step(action)
            except EpisodeDoneError as exc:
                raise EpisodeFinished(str(exc)) from None
        with self._lock:
            self._counters["steps"] += 1
        return {"observation": result.observation, "done": result.done, "info": result.info}

    def heavy(self, episode_id: str, action: str | None = None) -> bool:
        """The episode's calls have cost enough (seal/env/budget.py), or its next step (`action`) may wait up
        to a deadline for a worker process (seal/bfcl/call_deadline.py), so that it should not run on a loop
        that answers other episodes; False for an unknown or finished one. A finish (`action` None) is heavy
        only by the meter: it runs again the calls the steps ran, which the meter has counted (a stopped
        call its whole deadline), and the answers of those that ended are remembered."""
        with self._lock:
            entry = self._entries.get(_id_key(episode_id))
        episode = None if entry is None else entry.episode
        if episode is None:
            return False
        waits = action is not None and episode.executor.calls_out_of_process and may_call_a_worker(action)
        return episode.meter.heavy or waits

    def finish(self, episode_id: str, close: bool = False, cut: str | None = None) -> EpisodeResult:
        """Score once and keep only the result, so a repeated finish answers the same and steps get 409.

        With `close` the episode is also deleted, saving the client a round trip per episode. A `cut`
        (one of `CUTS` but none: the limit of the player's context that ended it) truncates an unfinished
        episode before it is scored, so it is scored and recorded alike wherever the store runs.
        """
        if cut is not None and cut not in CUTS[1:]:
            raise BadRequest(f"cut must be one of {', '.join(CUTS[1:])}")
        entry = self._get(episode_id)
        with entry.lock:
            if entry.episode is not None:
                if cut is not None and not entry.episode.done:
                    entry.episode.truncate(cut)
                entry.result = entry.episode.finish()
                entry.episode = None
                with self._lock:
                    self._counters["finished"] += 1
            result = cast(EpisodeResult, entry.result)
        if close:
            self.delete(episode_id)
        return result

    def delete(self, episode_id: str) -> None:
        self.reap()
        with self._lock:
            if self._entries.pop(_id_key(episode_id), None) is None:
                raise UnknownEpisode(_unknown(episode_id))
            self._counters["deleted"] += 1

    def reap(self) -> int:
        """Drop episodes idle for longer than the TTL; the table is kept in last-access order."""
        horizon = self._clock() - self.settings.ttl_s
        reaped = 0
        with self._lock:
            while self._entries:
                episode_id, entry = next(iter(self._entries.items()))
                if entry.last_access > horizon:
                    break
                del self._entries[episode_id]
                reaped += 1
            self._counters["reaped"] += reaped
        return reaped

    def _get(self, episode_id: str) -> _Entry:
        self.reap()
        key = _id_key(episode_id)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                raise UnknownEpisode(_unknown(episode_id))
            entry.last_access = self._clock()
            self._entries.move_to_end(key)
            return entry

    # -- interface Ω ----------------------------------------------------------------------
    def update_profile(self, profile: Mapping[str, Any], version: int | None = None) -> dict[str, Any]:
        """Evolve(Ω, C): episodes created afterwards use the new Ω, open ones keep theirs.

        The new Ω is numbered `version` when given (a resumed run restoring its saved Ω), else one
        more than the current one.
        """
        if not isinstance(profile, Mapping):
            raise BadRequest("profile must be a JSON object (the failure profile C_t)")
        if version is not None and (
            isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= MAX_VERSION
        ):
            raise BadRequest(f"version must be an integer from 0 to {MAX_VERSION}, got {version!r}")
        with self._omega_lock:
            if version is None and self._interface.version >= MAX_VERSION:
                raise BadRequest(f"Ω is at version {MAX_VERSION}, the last; give the new one a version")
            try:
                evolved = evolve(self._interface, dict(profile), version)
            except (ValueError, TypeError) as exc:
                raise BadRequest(f"malformed profile: {exc}") from None
            self._interface = evolved
        with self._lock:
            self._counters["evolved"] += 1
        return evolved.to_json()

    def put_interface(self, omega: Mapping[str, Any]) -> dict[str, Any]:
        """Serve exactly the Ω whose whole state (`Interface.to_json()`, its text included) is `omega`: a
        resumed run's, which Evolve from Ω0 could not make again (guideline selection has hysteresis).
        422 when `omega` is not the record (`InterfaceRecord`, the route's schema), 409 when it is one this
        store cannot serve (another config, or guidelines and text that do not agree)."""
        try:
            record = InterfaceRecord.model_validate(omega)
        except ValidationError as exc:
            raise BadRequest(describe(exc.errors(include_url=False, include_input=False))) from None
        try:
            interface = restore(record.model_dump())
        except (ValueError, TypeError) as exc:
            raise Unservable(f"not an Ω this service can serve: {exc}") from None
        self.adopt_interface(interface)
        return self.interface_json()

    def adopt_interface(self, interface: Interface) -> None:
        """Serve exactly `interface` (an environment actor replacing one that died takes over its Ω
        whole: Evolve again from Ω0 could choose other guidelines); its config must be this store's."""
        if interface.config != self._interface.config:
            raise Unservable(
                f"cannot adopt an Ω of another interface config than preset {self.settings.interface_preset}"
            )
        with self._omega_lock:
            self._interface = interface


def _id_key(episode_id: Any) -> str:
    return episode_id if isinstance(episode_id, str) else ""


def _unknown(episode_id: Any) -> str:
    shown = episode_id[:64] if isinstance(episode_id, str) else type(episode_id).__name__
    return f"unknown episode {shown!r} (never created, deleted, or reaped after the idle TTL)"
