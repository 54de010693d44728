"""The Ray cluster a launch over several nodes joins, read before training starts.

On one node verl's `run_ppo` starts a Ray of its own. Over `trainer.nnodes > 1` Ray must already run on every
node (`ray start --head` here, `ray start --address` on the others: docs/guides/multi-node.md), and `ray.init`
joins it: the address in `ray_kwargs.ray_init.address`, else `RAY_ADDRESS`, else the cluster last started on
this machine. The launching node sees only its own GPUs (it may have none), so what is checked is what Ray
reports per node: `trainer.nnodes` alive nodes with `trainer.n_gpus_per_node` GPUs each, as verl's resource
pool asks (one placement group of that many GPUs per node). Without this a missing node is a trainer waiting
for resources that never come.
"""

from __future__ import annotations

from omegaconf import DictConfig

GUIDE = "docs/guides/multi-node.md"


def ray_address(config: DictConfig) -> str:
    """The cluster `ray.init` will join: `ray_kwargs.ray_init.address`, or `auto` (Ray's own search, which
    fails instead of starting a local cluster)."""
    return str(config.ray_kwargs.ray_init.get("address") or "auto")


def node_gpus(address: str) -> list[float]:
    """The GPUs of every alive node of the Ray cluster at `address`; ConnectionError (Ray's) when none
    answers there. The connection is dropped again: verl's `run_ppo` joins with the run's `runtime_env`."""
    import ray

    ray.init(address=address, log_to_driver=False)
    try:
        return [float(node["Resources"].get("GPU", 0)) for node in ray.nodes() if node["Alive"]]
    finally:
        ray.shutdown()


def cluster_problem(config: DictConfig) -> str | None:
    """Why the running Ray cluster cannot hold this multi-node launch, or None."""
    nodes, per_node = config.trainer.nnodes, config.trainer.n_gpus_per_node
    address = ray_address(config)
    where = "" if address == "auto" else f" at {address}"
    try:
        gpus = node_gpus(address)
    except ConnectionError as exc:
        said = str(exc).split(". ")[0].rstrip(".")
        return (
            f"trainer.nnodes={nodes}: no running Ray cluster joined{where} ({said}); start Ray on every "
            f"node first (here `ray start --head --port=6379 --num-gpus={per_node}`, on the others "
            f"`ray start --address=HEAD:6379 --num-gpus={per_node}`; {GUIDE})"
        )
    enough = sum(1 for count in gpus if count >= per_node)
    if enough >= nodes:
        return None
    found = ", ".join(f"{count:g}" for count in sorted(gpus, reverse=True))
    return (
        f"trainer.nnodes={nodes} x trainer.n_gpus_per_node={per_node}: the Ray cluster{where} has "
        f"{len(gpus)} alive node(s) with {found} GPU(s), {enough} with {per_node} or more; start Ray on the "
        f"missing nodes (`ray start --address=HEAD:6379 --num-gpus={per_node}`; {GUIDE})"
    )
