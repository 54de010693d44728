"""The environment on every node (`seal.rollout.env_backend=ray`), on a two-raylet `ray.cluster_utils.Cluster`
in this machine: placement, local actors, Ω across actors (the `full` interface, whose guidelines Evolve
chooses), a killed actor survived, and a dead fleet started again by the trainer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from ray.cluster_utils import Cluster
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from transformers import AutoTokenizer

from seal.bfcl.tasks import CATEGORIES
from seal.dataset import TRAIN_AGENT
from seal.env.client import EnvClient, EnvServiceError, EnvUnavailableError, open_episode
from seal.env.connect import close_shared_clients, put_profile
from seal.env.interface import build_interface, evolve
from seal.env.omega_state import omega_digest, restore
from seal.env.ray_actors import (
    NAMESPACE,
    Placement,
    RayEnvClient,
    actor_name,
    agreed_omega,
)
from seal.env.store import EpisodeStore, StoreError, StoreSettings
from seal.protocol.ground_truth import ground_truth_actions
from seal.tocf import REFERENCE_LABELS, FailureProfile
from seal.tocf.labels import PASS, RESPONSE_MISMATCH, STATE_MISMATCH
from seal.trainer.experiment import PROJECT_ROOT, compose_experiment
from seal.trainer.rl.agent_loop import request_task
from seal.trainer.rl.resume_omega import restore_omega
from seal.trainer.rl.trainer import SealPPOTrainer
from seal.trainer.sft.scripted_server import ScriptedLLMServer
from tests.support import ray_session
from tests.support.rollout_helpers import model_folder, row

TASK = "multi_turn_base_0"
CALL_TIMEOUT_S = 120.0
"""A client's wait for an answer: a call that finds an actor dead starts its replacement (a process and its
imports) inside it, which a loaded 2-core machine took over 30 s to do."""
NODE_RESOURCES = ("node_a", "node_b")
pytestmark = pytest.mark.local_ray  # a Ray of its own, on the worker that runs the session's (conftest.py)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """Two raylets with distinct node ids and resources, one CPU each; this process drives the head. The
    session's Ray (tests/conftest.py), if up, is stopped first; the next module that needs it starts it."""
    ray_session.stop()
    nodes = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False, "resources": {NODE_RESOURCES[0]: 1}},
    )
    nodes.add_node(num_cpus=1, resources={NODE_RESOURCES[1]: 1})
    ray.init(address=nodes.address)
    nodes.wait_for_nodes()
    yield nodes
    ray.shutdown()
    nodes.shutdown()


@pytest.fixture(scope="module")
def trainer(cluster: Cluster) -> SealPPOTrainer:
    """The trainer's SEAL part alone, which places the actors and preflights them on every node."""
    trainer = object.__new__(SealPPOTrainer)
    overrides = ["seal.rollout.env_backend=ray", "seal.interface.preset=full"]
    trainer.config = compose_experiment(PROJECT_ROOT / "exp" / "SEAL.yaml", overrides)
    trainer.init_seal()
    return trainer


@pytest.fixture(scope="module")
def placement(trainer: SealPPOTrainer) -> Placement:
    return trainer.env_actors


async def play_ground_truth(client: EnvClient, task_id: str = TASK) -> float:
    async with open_episode(client, task_id, "train") as episode:
        for action in ground_truth_actions(task_id):
            if (await episode.step(action))["done"]:
                break
    assert episode.result is not None
    return episode.result.reward


def failures(state_mismatches: int, response_mismatches: int) -> dict[str, Any]:
    """C_t of a batch of failed trajectories, each with one of the two labels."""
    profile = FailureProfile()
    for label, count in ((STATE_MISMATCH, state_mismatches), (RESPONSE_MISMATCH, response_mismatches)):
        for _ in range(count):
            profile.observe([label], 0.0, CATEGORIES[0])
    return profile.to_json()


def node_with(resource: str) -> str:
    return next(node["NodeID"] for node in ray.nodes() if node["Alive"] and resource in node["Resources"])


def test_one_actor_lands_on_every_node(placement: Placement):
    nodes = {node_with(resource) for resource in NODE_RESOURCES}
    assert len(nodes) == 2 and set(placement.actors) == nodes
    for node, names in placement.actors.items():
        assert names == [actor_name(node, 0)]
        actor = ray.get_actor(names[0], namespace=NAMESPACE)
        assert ray.get(actor.node_id.remote()) == node


def test_a_task_on_each_node_plays_on_that_node_s_actor(placement: Placement):
    @ray.remote(num_cpus=0)
    def episode_on_this_node(task_id: str) -> tuple[str, str, float]:
        """Refers to nothing of this module, which a worker would have to import (verl and all)."""

        async def play() -> tuple[str, float]:
            client = RayEnvClient(timeout=CALL_TIMEOUT_S)
            async with open_episode(client, task_id, "train") as episode:
                for action in ground_truth_actions(task_id):
                    if (await episode.step(action))["done"]:
                        break
            return str(episode.episode_id), episode.result.reward if episode.result else -1.0

        episode_id, reward = asyncio.run(play())
        return ray.get_runtime_context().get_node_id(), episode_id, reward

    for resource in NODE_RESOURCES:
        node = node_with(resource)
        pinned = episode_on_this_node.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)
        )
        ran_on, episode_id, reward = ray.get(pinned.remote(TASK))
        assert ran_on == node and episode_id.startswith(actor_name(node, 0) + ":") and reward == 1.0


async def test_omega_versions_agree_on_every_actor_after_put_profile(
    placement: Placement, trainer: SealPPOTrainer
):
    before = (await RayEnvClient(node_id=next(iter(placement.actors))).get_interface())["version"]
    profile = FailureProfile()
    profile.observe([PASS, REFERENCE_LABELS[-1]], 0.0, CATEGORIES[0])
    served = await RayEnvClient().put_profile(profile.to_json())
    assert served["version"] == before + 1
    for node in placement.actors:
        assert (await RayEnvClient(node_id=node).get_interface())["version"] == before + 1
    restored = await asyncio.to_thread(put_profile, trainer.seal_settings.rollout.env(), profile.to_json(), 7)
    assert restored["version"] == 7 and restored["profile"] == served["profile"]
    for node in placement.actors:
        assert (await RayEnvClient(node_id=node).get_interface())["version"] == 7
    with pytest.raises(EnvServiceError, match="profile must be a JSON object"):
        await RayEnvClient().put_profile(["not", "a", "profile"])  # type: ignore[arg-type]


def test_actors_that_disagree_on_omega_are_named_in_one_line():
    omega = {"version": 3, "guidelines": ["State-aware", "Format"]}
    other_text = {"version": 3, "guidelines": ["Format"]}  # the same version is not the same Ω
    says = (
        rf"^409: environment actor b serves Ω v3, guidelines \[Format\], digest {omega_digest(other_text)}; "
        rf"the others v3, guidelines \[State-aware, Format\], digest {omega_digest(omega)}$"
    )
    with pytest.raises(EnvServiceError, match=says):
        agreed_omega({"a": (omega, None), "b": (other_text, None), "c": (omega, None)})
    with pytest.raises(EnvServiceError, match=r"^409: environment actor b serves Ω v2, "):
        agreed_omega({"a": (omega, None), "b": ({**omega, "version": 2}, None)})
    with pytest.raises(EnvServiceError, match=r"^422: environment actor a: bad$"):
        agreed_omega({"a": (None, (422, "bad")), "b": (omega, None)})
    assert agreed_omega({"a": (omega, None), "b": (dict(omega), None)}) == omega


def test_a_store_adopts_an_omega_whole_and_refuses_one_of_another_preset():
    evolved = evolve(evolve(build_interface("full"), failures(20, 80)), failures(10, 90))
    store = EpisodeStore(StoreSettings(interface_preset="full"))
    store.adopt_interface(restore(evolved.to_json()))
    assert store.interface_json() == evolved.to_json() and evolved.guidelines == ("State-aware", "Format")
    with pytest.raises(StoreError, match="another interface config than preset reference"):
        EpisodeStore(StoreSettings()).adopt_interface(evolved)
    with pytest.raises(ValueError, match="does not render as it says"):
        restore({**evolved.to_json(), "system_suffix": "something else"})


async def test_an_unknown_episode_id_is_a_404_not_a_lost_actor(placement: Placement):
    for episode_id in ("plain-uuid", "seal-env-:", 7):
        with pytest.raises(EnvServiceError) as raised:
            await RayEnvClient().step(episode_id, "x")  # type: ignore[arg-type]
        assert raised.value.status == 404


async def test_a_killed_actor_fails_its_episode_the_others_finish_and_a_replacement_serves_omega(
    placement: Placement,
):
    victim_node, other_node = node_with(NODE_RESOURCES[1]), node_with(NODE_RESOURCES[0])
    victim, other = (
        RayEnvClient(timeout=CALL_TIMEOUT_S, node_id=victim_node),
        RayEnvClient(timeout=CALL_TIMEOUT_S, node_id=other_node),
    )
    evolved = await other.put_profile(failures(20, 80))  # an evolved Ω, which the replacement must serve too
    assert evolved["version"] > 0 and evolved["guidelines"]
    doomed = await victim.create_episode(TASK, "train")
    surviving = open_episode(other, TASK, "train")
    async with surviving:
        actions = ground_truth_actions(TASK)
        await surviving.step(actions[0])
        ray.kill(ray.get_actor(actor_name(victim_node, 0), namespace=NAMESPACE), no_restart=True)
        wait_until_dead(actor_name(victim_node, 0))  # ray.kill returns before the actor is gone
        with pytest.raises(EnvUnavailableError):
            await victim.step(doomed["episode_id"], actions[0])
        for action in actions[1:]:
            if (await surviving.step(action))["done"]:
                break
    assert surviving.result is not None and surviving.result.reward == 1.0
    assert await victim.get_interface() == evolved
    assert await play_ground_truth(victim) == 1.0


async def test_a_replacement_under_the_full_interface_serves_the_identical_omega_after_two_evolves(
    placement: Placement,
):
    """Step 2's evidence (state_mismatch 10%) keeps the active [State-aware] guideline (stay: 8%) but would
    not let it enter (12%): Evolve(Ω0, C_2, v) serves [Format] only, which a replacement used to serve."""
    victim_node = node_with(NODE_RESOURCES[1])
    first = await RayEnvClient(timeout=CALL_TIMEOUT_S).put_profile(failures(20, 80))
    second = await RayEnvClient(timeout=CALL_TIMEOUT_S).put_profile(failures(10, 90))
    assert first["guidelines"] == second["guidelines"] == ["State-aware", "Format"]
    rederived = evolve(build_interface("full"), second["profile"], second["version"])
    assert rederived.guidelines == ("Format",)
    victim = RayEnvClient(timeout=CALL_TIMEOUT_S, node_id=victim_node)
    assert await victim.get_interface() == second
    ray.kill(ray.get_actor(actor_name(victim_node, 0), namespace=NAMESPACE), no_restart=True)
    wait_until_dead(actor_name(victim_node, 0))  # ray.kill returns before the actor is gone
    with pytest.raises(EnvUnavailableError):
        await victim.get_interface()  # the call that finds it dead has the fleet replace it
    replaced = await victim.get_interface()
    assert replaced == second and "[State-aware]" in replaced["system_suffix"]
    third = await RayEnvClient(timeout=CALL_TIMEOUT_S).put_profile(
        failures(10, 90)
    )  # every actor agrees again
    assert third["version"] == second["version"] + 1 and third["guidelines"] == second["guidelines"]


def test_a_resumed_run_s_omega_is_served_exactly_by_every_actor_and_by_replacements(trainer: SealPPOTrainer):
    """On resume the trainer sends the checkpoint's whole Ω (seal/trainer/rl/resume_omega.py, from
    synchronous code): every actor serves it, guidelines kept by hysteresis included, and so does an actor
    that replaces a dead one."""
    saved = evolve(evolve(build_interface("full"), failures(20, 80)), failures(10, 90), version=41).to_json()
    assert saved["guidelines"] == ["State-aware", "Format"]
    restore_omega(trainer.seal_settings.rollout.env(), saved)
    nodes = list(map(node_with, NODE_RESOURCES))
    for node in nodes:
        assert asyncio.run(RayEnvClient(timeout=CALL_TIMEOUT_S, node_id=node).get_interface()) == saved
    name = actor_name(nodes[1], 0)
    dead = ray.get_actor(name, namespace=NAMESPACE)
    ray.kill(dead, no_restart=True)
    wait_until_dead(name)
    assert asyncio.run(RayEnvClient(timeout=CALL_TIMEOUT_S, node_id=nodes[1]).get_interface()) == saved
    assert ray.get_actor(name, namespace=NAMESPACE)._actor_id != dead._actor_id  # served by a replacement


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return model_folder(tmp_path_factory.mktemp("chatml"), tasks=(TASK,))


async def test_the_agent_loop_plays_again_on_a_replacement_when_its_actor_dies(placement: Placement, folder):
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.protocol import DataProto
    from verl.utils.dataset.rl_dataset import collate_fn

    from seal.trainer.rl.trajectory import TRAJECTORY_KEYS, TrajectoryFields
    from tests.support.rollout_helpers import trainer_config

    actions = ground_truth_actions(TASK)
    server = ScriptedLLMServer(AutoTokenizer.from_pretrained(folder), {(TASK, "train"): actions})
    here = ray.get_runtime_context().get_node_id()
    killed: list[str] = []

    async def generate_then_kill(request_id: str, **kwargs: Any) -> Any:
        """The model's second call finds this node's actor killed under its episode."""
        if server.calls_by_request.get(request_id) == 1 and not killed:
            ray.kill(ray.get_actor(actor_name(here, 0), namespace=NAMESPACE), no_restart=True)
            killed.append(request_task(request_id)[0])
        return await ScriptedLLMServer.generate(server, request_id, **kwargs)

    server.generate = generate_then_kill  # type: ignore[method-assign]
    worker = AgentLoopWorker(trainer_config(folder, env_backend="ray", env_timeout_s=30), llm_client=server)
    rows = [row(TASK, TRAIN_AGENT, 0)]
    batch = await worker.generate_sequences(DataProto.from_single_dict(collate_fn(rows)))
    await close_shared_clients()
    got = TrajectoryFields.from_extra_fields({key: batch.non_tensor_batch[key][0] for key in TRAJECTORY_KEYS})
    assert killed == [TASK]
    assert got.env_error == "" and got.reward == 1.0 and got.llm_calls == len(actions)
    assert len(server.calls_by_request) == 2  # played again from the start, under a new trajectory id


def wait_until_dead(name: str, timeout_s: float = 60.0) -> None:
    """The actor `name` no longer answers (an actor dies with its owner, a moment after it)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get(ray.get_actor(name, namespace=NAMESPACE).node_id.remote(), timeout=5)
        except (ValueError, ray.exceptions.RayActorError):
            return
        time.sleep(0.2)
    raise AssertionError(f"{name} still answers {timeout_s:g} s after its fleet was killed")


async def test_a_dead_fleet_is_said_so_and_the_trainer_starts_one_serving_the_last_omega(
    trainer: SealPPOTrainer,
):
    """Last in the module: the fleet is killed, and with it every actor."""
    node = node_with(NODE_RESOURCES[0])
    client = RayEnvClient(timeout=CALL_TIMEOUT_S, node_id=node)
    served = await client.put_profile(failures(20, 80))  # an evolved Ω, which the new fleet must serve
    assert served["version"] > 0 and served["guidelines"]
    trainer.closed_loop.interface = served  # as the trainer's Evolve keeps the Ω every actor agreed on
    old_fleet = trainer.env_actors.fleet
    ray.kill(old_fleet, no_restart=True)
    wait_until_dead(actor_name(node, 0))
    with pytest.raises(EnvUnavailableError, match=r"environment fleet \(seal-env-fleet\) died, and every"):
        await client.get_interface()
    with pytest.raises(
        EnvUnavailableError, match=r"the trainer has not started it .*, or it died; the trainer"
    ):
        await RayEnvClient(timeout=CALL_TIMEOUT_S).get_interface()  # a client that never reached the fleet
    trainer.on_step_begin()
    assert trainer.env_actors.fleet != old_fleet and set(trainer.env_actors.actors) == set(
        map(node_with, NODE_RESOURCES)
    )
    for where in trainer.env_actors.actors:
        assert await RayEnvClient(timeout=CALL_TIMEOUT_S, node_id=where).get_interface() == served
    assert await client.get_interface() == served and await play_ground_truth(client) == 1.0
