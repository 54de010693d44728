"""The environment on every node of the Ray cluster (`seal.rollout.env_backend=ray`).

`EnvActor` holds an `EpisodeStore` in-process (through `InProcessEnvClient`, so it answers exactly
what the service would); `env_actors_per_node` of them run on every alive node, pinned there with
`NodeAffinitySchedulingStrategy`, named `seal-env-<node id>-<index>` in the namespace `seal_env`, so
any process of the cluster finds them with `ray.get_actor`. One `EnvFleet` actor, started by the
trainer, places them, holds the current Ω and replaces a dead actor with an actor serving that Ω
exactly (its whole state, not Evolve again from Ω0: guideline selection has hysteresis, so a
re-derivation can choose other guidelines); being the only process that creates environment actors, it
never races itself; it holds their handles, and they all end with it, that is with the run (the trainer
owns it). A fleet that died took its actors with it: the trainer notices at the start of its next step
or validation and starts a new fleet serving the last Ω every actor agreed on (`keep_fleet`).

`RayEnvClient` is the `EnvClient` of a rollout worker: it opens episodes on its own node's actors
(round robin), names the actor in the episode id so that every later call of the episode goes to
the actor that holds it, and turns a dead or silent actor into `EnvUnavailableError`, so the agent
loop's retry-from-start and env_error paths apply as they do for the HTTP service. The call that
finds an actor dead asks the fleet to replace it before it raises, so the retry plays on the
replacement. A client that finds no fleet says whether it had one (it died) or never found one.
`put_profile` goes to every actor through the fleet and checks that all serve one Ω: the same digest of
its whole state (seal/env/omega_state.py), not only the same version.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import logging
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from seal.env.client import EnvServiceError, EnvUnavailableError, InProcessEnvClient
from seal.env.episode import EpisodeResult
from seal.env.omega_state import describe_omega, omega_digest, restore
from seal.env.store import EpisodeStore, StoreSettings

LOG = logging.getLogger(__name__)
T = TypeVar("T")
Answers = dict[str, tuple[Any, tuple[int, str] | None]]
"""Each actor's answer to a call, by name: `(value, None)` or `(None, (status, reason))`."""

NAMESPACE = "seal_env"
FLEET_NAME = "seal-env-fleet"
ACTOR_PREFIX = "seal-env-"
EPISODE_SEPARATOR = ":"
ENV_CALLS = frozenset(
    {
        "create_episode",
        "step",
        "finish",
        "delete",
        "get_interface",
        "put_profile",
        "put_interface",
        "health",
        "list_tasks",
    }
)
FLEET_DIED = f"the environment fleet ({FLEET_NAME}) died, and every environment actor with it"
FLEET_REBUILT = "the trainer starts a new one serving the last agreed Ω at its next step or validation"
START_TIMEOUT_S = 120.0
"""Bound on starting one actor (a new worker process that loads the BFCL tasks)."""


def actor_name(node_id: str, index: int) -> str:
    return f"{ACTOR_PREFIX}{node_id}-{index}"


def alive_nodes() -> list[str]:
    return sorted(node["NodeID"] for node in ray.nodes() if node["Alive"])


@ray.remote(num_cpus=0, max_restarts=0)
class EnvActor:
    """One episode store; each call answers `(value, None)` or `(None, (status, reason))`.

    `num_cpus=0`: the actor must never wait behind verl's resource bundles to be placed; it uses one
    core at most, being one process.
    """

    def __init__(self, settings: StoreSettings, omega: dict[str, Any] | None) -> None:
        self.env = InProcessEnvClient(EpisodeStore(settings))
        if omega is not None:
            self.env.store.adopt_interface(restore(omega))
        # As the service does: the loaded tasks live as long as the process, and frozen, no full
        # garbage collection walks them (a 75 ms pause each).
        gc.freeze()

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    async def call(self, method: str, args: tuple[Any, ...]) -> tuple[Any, tuple[int, str] | None]:
        if method not in ENV_CALLS:
            return None, (400, f"no environment call {method!r}")
        try:
            value = await getattr(self.env, method)(*args)
        except EnvServiceError as exc:
            return None, (exc.status, exc.reason)
        return (value.to_json() if isinstance(value, EpisodeResult) else value), None


@ray.remote(num_cpus=0, max_restarts=0)
class EnvFleet:
    """Places, replaces and updates the environment actors; serves its callers in turn (a plain actor)."""

    def __init__(self, settings: StoreSettings, per_node: int, omega: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.per_node = per_node
        self.omega = omega
        """The Ω every new actor serves (`Interface.to_json()`); None: the preset's version 0."""
        self.actors: dict[str, Any] = {}
        """The fleet's handles: a non-detached actor lives while its owner holds one."""

    def place(self) -> dict[str, list[str]]:
        """Every alive node's actors (started where missing or dead), by node id."""
        return {node: self.ensure(node) for node in alive_nodes()}

    def ensure(self, node_id: str) -> list[str]:
        """The names of `node_id`'s actors, each alive: a dead one is replaced with the current Ω."""
        names = [actor_name(node_id, index) for index in range(self.per_node)]
        for name in names:
            if not _answers(name):
                self._start(name, node_id)
        return names

    def _start(self, name: str, node_id: str) -> None:
        actor = EnvActor.options(
            name=name,
            namespace=NAMESPACE,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        ).remote(self.settings, self.omega)
        ray.get(actor.node_id.remote(), timeout=START_TIMEOUT_S)
        self.actors[name] = actor
        LOG.info(
            "environment actor %s started (Ω %s)", name, describe_omega(self.omega) if self.omega else "v0"
        )

    def put_profile(self, profile: dict[str, Any], version: int | None) -> Answers:
        """Evolve on every actor (dead ones replaced first); each actor's answer by name."""
        return self._everywhere("put_profile", (profile, version))

    def put_interface(self, omega: dict[str, Any]) -> Answers:
        """Every actor (dead ones replaced first) serves exactly `omega`; each actor's answer by name."""
        return self._everywhere("put_interface", (omega,))

    def _everywhere(self, method: str, args: tuple[Any, ...]) -> Answers:
        """`method` on every actor; the Ω the first that succeeded serves is the one replacements serve."""
        names = [name for names in self.place().values() for name in names]
        refs = [_actor(name).call.remote(method, args) for name in names]
        answers = dict(zip(names, ray.get(refs), strict=True))
        served = next((value for value, error in answers.values() if error is None), None)
        if served is not None:
            self.omega = served
        return answers


def _actor(name: str) -> Any:
    return ray.get_actor(name, namespace=NAMESPACE)


def _answers(name: str) -> bool:
    try:
        ray.get(_actor(name).node_id.remote(), timeout=START_TIMEOUT_S)
    except (ValueError, RayActorError, GetTimeoutError):
        return False
    return True


@dataclass(frozen=True)
class Placement:
    """Where the fleet placed the actors (node id -> actor names), and the fleet: whoever holds this
    keeps the fleet, and so the actors, alive (a non-detached actor ends with its last handle)."""

    fleet: Any
    actors: dict[str, list[str]]
    settings: StoreSettings
    per_node: int

    def describe(self) -> str:
        return ", ".join(f"node {node[:8]}: {len(names)}" for node, names in self.actors.items())


def start_env_actors(
    settings: StoreSettings, per_node: int, omega: dict[str, Any] | None = None
) -> Placement:
    """Start the fleet (in this Ray job, ending with it) and place `per_node` actors on every node, each
    serving `omega` (None: the preset's version 0)."""
    fleet = EnvFleet.options(name=FLEET_NAME, namespace=NAMESPACE).remote(settings, per_node, omega)
    actors = ray.get(fleet.place.remote(), timeout=START_TIMEOUT_S * per_node)
    return Placement(fleet, actors, settings, per_node)


def keep_fleet(placement: Placement, omega: dict[str, Any] | None) -> Placement:
    """`placement`, its actors placed again where one died or a node joined; or, when the fleet itself
    died (its actors with it), a new fleet whose actors serve `omega`, the last Ω they all agreed on."""
    try:
        actors = ray.get(placement.fleet.place.remote(), timeout=START_TIMEOUT_S * placement.per_node)
    except RayActorError as exc:
        served = describe_omega(omega) if omega else "v0"
        LOG.warning(
            "the environment fleet died (%s); starting a new one serving Ω %s", type(exc).__name__, served
        )
        return start_env_actors(placement.settings, placement.per_node, omega)
    except RayError as exc:
        LOG.warning("the environment fleet could not place its actors again: %s", exc)
        return placement
    return Placement(placement.fleet, actors, placement.settings, placement.per_node)


@contextlib.contextmanager
def local_fleet(settings: StoreSettings, per_node: int, timeout: float) -> Iterator[RayEnvClient]:
    """Environment actors for one tool's run (`seal eval --env-backend ray`): placed on the Ray cluster this
    process is connected to, or on a local one started for the block, and removed with their fleet after."""
    started = not ray.is_initialized()
    if started:
        ray.init(address="local", include_dashboard=False, log_to_driver=False)
    try:
        placement = start_env_actors(settings, per_node)
        try:
            yield RayEnvClient(timeout=timeout)
        finally:
            ray.kill(placement.fleet)  # its actors end with it, their owner
    finally:
        if started:
            ray.shutdown()


class RayEnvClient:
    """`EnvClient` on the environment actors of one node (this process's node unless `node_id`)."""

    def __init__(self, timeout: float = 60.0, node_id: str | None = None) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.timeout = timeout
        self.node_id = node_id
        self._local: list[str] = []
        self._turn = itertools.count()
        self._handles: dict[str, Any] = {}
        self._had_fleet = False

    async def _wait(self, what: str, ref: Awaitable[T]) -> T:
        try:
            return await asyncio.wait_for(ref, self.timeout)
        except TimeoutError as exc:
            raise EnvUnavailableError(f"{what}: no answer within {self.timeout:g} s") from exc
        except RayError as exc:
            raise EnvUnavailableError(f"{what} failed ({type(exc).__name__})") from exc

    def _fleet(self) -> Any:
        """The fleet's handle; EnvUnavailableError saying whether this client had reached one before."""
        try:
            fleet = ray.get_actor(FLEET_NAME, namespace=NAMESPACE)
        except ValueError as exc:
            if self._had_fleet:
                raise EnvUnavailableError(f"{FLEET_DIED}; {FLEET_REBUILT}") from exc
            raise EnvUnavailableError(
                f"no environment fleet ({FLEET_NAME} in Ray namespace {NAMESPACE}): the trainer has not "
                f"started it (it does before the rollout workers start), or it died; {FLEET_REBUILT}"
            ) from exc
        self._had_fleet = True
        return fleet

    async def _fleet_call(self, method: str, *args: Any) -> Any:
        try:
            return await self._wait("the environment fleet", getattr(self._fleet(), method).remote(*args))
        except EnvUnavailableError as exc:
            if isinstance(exc.__cause__, RayActorError):
                raise EnvUnavailableError(f"{FLEET_DIED} during the call; {FLEET_REBUILT}") from exc
            raise

    async def _fleet_ensure(self) -> list[str]:
        return await self._fleet_call("ensure", self.node_id or ray.get_runtime_context().get_node_id())

    async def _local_actor(self) -> str:
        if not self._local:
            self._local = await self._fleet_ensure()
        return self._local[next(self._turn) % len(self._local)]

    async def _call(self, name: str, method: str, *args: Any) -> Any:
        try:
            handle = self._handles.get(name) or self._handles.setdefault(name, _actor(name))
            value, error = await self._wait(f"environment actor {name}", handle.call.remote(method, args))
        except (ValueError, EnvUnavailableError) as exc:
            self._handles.pop(name, None)
            fleet_gone = await self._replace(name)
            if fleet_gone is not None:
                raise fleet_gone from exc
            if isinstance(exc, EnvUnavailableError):
                raise
            raise EnvUnavailableError(f"environment actor {name} is gone") from exc
        if error is not None:
            raise EnvServiceError(*error)
        return value

    async def _replace(self, name: str) -> EnvServiceError | None:
        """Have the fleet start a replacement now, so the episode's retry finds one. A fleet that cannot
        is returned (its message, which says what happened, is the episode's error) and logged."""
        self._local = []
        try:
            self._local = await self._fleet_ensure()
        except EnvServiceError as exc:
            LOG.warning("environment actor %s could not be replaced: %s", name, exc)
            return exc
        return None

    def _holder(self, episode_id: str) -> tuple[str, str]:
        name, _, inner = (
            episode_id.rpartition(EPISODE_SEPARATOR) if isinstance(episode_id, str) else ("", "", "")
        )
        if not name.startswith(ACTOR_PREFIX) or not inner:
            raise EnvServiceError(
                404, f"unknown episode {str(episode_id)[:64]!r} (not an environment actor's)"
            )
        return name, inner

    async def create_episode(self, task_id: str, mode: str, protocol: str | None = None) -> dict[str, Any]:
        name = await self._local_actor()
        created = await self._call(name, "create_episode", task_id, mode, protocol)
        return {**created, "episode_id": f"{name}{EPISODE_SEPARATOR}{created['episode_id']}"}

    async def step(self, episode_id: str, action: str) -> dict[str, Any]:
        name, inner = self._holder(episode_id)
        return await self._call(name, "step", inner, action)

    async def finish(self, episode_id: str, close: bool = False, cut: str | None = None) -> EpisodeResult:
        name, inner = self._holder(episode_id)
        return EpisodeResult.from_json(await self._call(name, "finish", inner, close, cut))

    async def delete(self, episode_id: str) -> None:
        name, inner = self._holder(episode_id)
        await self._call(name, "delete", inner)

    async def get_interface(self) -> dict[str, Any]:
        return await self._call(await self._local_actor(), "get_interface")

    async def health(self) -> dict[str, Any]:
        return await self._call(await self._local_actor(), "health")

    async def list_tasks(self, split: str = "all") -> list[str]:
        return await self._call(await self._local_actor(), "list_tasks", split)

    async def put_profile(self, profile: dict[str, Any], version: int | None = None) -> dict[str, Any]:
        """Evolve on every actor of the cluster; the Ω they all serve, or one line naming one that
        refused or serves another Ω."""
        return agreed_omega(await self._fleet_call("put_profile", profile, version))

    async def put_interface(self, omega: dict[str, Any]) -> dict[str, Any]:
        """Every actor of the cluster serves exactly `omega` (a resumed run's); the Ω they all serve."""
        return agreed_omega(await self._fleet_call("put_interface", omega))


def agreed_omega(answers: dict[str, tuple[Any, tuple[int, str] | None]]) -> dict[str, Any]:
    """The one Ω every actor answered (the same whole state, by digest), or `EnvServiceError` naming the
    first actor that refused or serves another Ω."""
    served: dict[str, Any] | None = None
    for name, (value, error) in sorted(answers.items()):
        if error is not None:
            raise EnvServiceError(error[0], f"environment actor {name}: {error[1]}")
        if served is None:
            served = value
        elif omega_digest(value) != omega_digest(served):
            raise EnvServiceError(
                409,
                f"environment actor {name} serves Ω {describe_omega(value)}; "
                f"the others {describe_omega(served)}",
            )
    if served is None:
        raise EnvUnavailableError("no environment actor is alive")
    return served
