"""The environment on every node (`seal.rollout.env_backend=ray`), on a two-raylet `ray.cluster_utils.Cluster`
in this machine: placement, local actors, Ω across actors, and a killed actor survived."""

from __future__ import annotations

import asyncio
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
from seal.env.ray_actors import (
    NAMESPACE,
    Placement,
    RayEnvClient,
    actor_name,
    agreed_omega,
)
from seal.protocol.ground_truth import ground_truth_actions
from seal.tocf import REFERENCE_LABELS, FailureProfile
from seal.tocf.labels import PASS
from seal.trainer.experiment import PROJECT_ROOT, compose_experiment
from seal.trainer.rl.agent_loop import request_task
from seal.trainer.rl.trainer import SealPPOTrainer
from seal.trainer.sft.scripted_server import ScriptedLLMServer
from tests.support import ray_session
from tests.support.rollout_helpers import model_folder, row

TASK = "multi_turn_base_0"
NODE_RESOURCES = ("node_a", "node_b")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """Two raylets with distinct node ids and resources, one CPU each; this process drives the head. The
    session's Ray (tests/conftest.py), if up, is stopped meanwhile and started again after."""
    shared = ray.is_initialized()
    if shared:
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
    if shared:
        ray_session.start()


@pytest.fixture(scope="module")
def trainer(cluster: Cluster) -> SealPPOTrainer:
    """The trainer's SEAL part alone, which places the actors and preflights them on every node."""
    trainer = object.__new__(SealPPOTrainer)
    trainer.config = compose_experiment(PROJECT_ROOT / "exp" / "SEAL.yaml", ["seal.rollout.env_backend=ray"])
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
            client = RayEnvClient(timeout=30)
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
    omega = {"version": 3}
    with pytest.raises(EnvServiceError, match=r"^409: environment actor b serves Ω v2, the others v3$"):
        agreed_omega({"a": (omega, None), "b": ({"version": 2}, None), "c": (omega, None)})
    with pytest.raises(EnvServiceError, match=r"^422: environment actor a: bad$"):
        agreed_omega({"a": (None, (422, "bad")), "b": (omega, None)})
    assert agreed_omega({"a": (omega, None), "b": (omega, None)}) == omega


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
        RayEnvClient(timeout=30, node_id=victim_node),
        RayEnvClient(timeout=30, node_id=other_node),
    )
    version = (await other.get_interface())["version"]
    assert version > 0  # an evolved Ω, which the replacement must serve too
    doomed = await victim.create_episode(TASK, "train")
    surviving = open_episode(other, TASK, "train")
    async with surviving:
        actions = ground_truth_actions(TASK)
        await surviving.step(actions[0])
        ray.kill(ray.get_actor(actor_name(victim_node, 0), namespace=NAMESPACE), no_restart=True)
        with pytest.raises(EnvUnavailableError):
            await victim.step(doomed["episode_id"], actions[0])
        for action in actions[1:]:
            if (await surviving.step(action))["done"]:
                break
    assert surviving.result is not None and surviving.result.reward == 1.0
    assert (await victim.get_interface())["version"] == version
    assert await play_ground_truth(victim) == 1.0


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
