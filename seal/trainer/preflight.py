"""What a launch checks before the first GPU is allocated: the data files and the environment service.

`check_data` makes sure every parquet file the run reads holds exactly its split (building a missing one);
`check_environment` plays a few ground-truth episodes through the service the run will use, in the
training and the validation mode, checks that the service diagnoses with the configured taxonomy and
serves the configured interface, then applies A-Patch and Evolve to a synthetic batch built from those
labels — so a wrong service, split or setting fails in seconds on a CPU, not after the model loaded.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd
from omegaconf import DictConfig, ListConfig

from seal.bfcl.tasks import CATEGORIES, SPLITS, category_of, split_ids
from seal.dataset import EVAL_AGENT, TRAIN_AGENT, parquet_bytes
from seal.env.client import EnvClient, EnvServiceError, HttpEnvClient, open_episode
from seal.env.interface import build_interface, evolve
from seal.protocol.ground_truth import ground_truth_actions
from seal.tocf import APatchState, FailureProfile, apatch_factors
from seal.tocf.labels import CORRECT_ABSTENTION, EXCLUDED, LABELS_OF, PASS
from seal.trainer.settings import SealSettings
from seal.urls import masked_url

EPISODE_MODES = ("train", "eval")
"""Training rollouts run under Ω, validation and test episodes under the raw interface."""


class PreflightError(RuntimeError):
    """A check failed; the message is one line that says what and where."""


@dataclass(frozen=True)
class DataFile:
    split: str
    path: Path
    built: bool


@dataclass(frozen=True)
class EpisodeCheck:
    task_id: str
    mode: str
    reward: float
    labels: tuple[str, ...]


@dataclass(frozen=True)
class EnvironmentReport:
    """What the environment preflight saw: the episodes, and what A-Patch and Evolve made of a batch."""

    where: str
    episodes: tuple[EpisodeCheck, ...]
    apatch: str
    evolve: str


# -- data --------------------------------------------------------------------------------------------
def data_files(config: DictConfig, test_files: Path | None = None) -> dict[str, list[Path]]:
    """The parquet files of each split the run reads (`test` only when `test_files` is given)."""
    files = {"train": _paths(config.data.train_files), "val": _paths(config.data.val_files)}
    if test_files is not None:
        files["test"] = [test_files]
    return files


def check_data(files: dict[str, list[Path]]) -> list[DataFile]:
    """Each split's files together hold exactly the split's tasks, with the split's agent loop; a missing
    single file is built (deterministically, as `scripts/prepare_data.py` does)."""
    checked = []
    for split, paths in files.items():
        built = False
        if len(paths) == 1 and not paths[0].exists():
            paths[0].parent.mkdir(parents=True, exist_ok=True)
            paths[0].write_bytes(parquet_bytes(split))
            built = True
        _check_split(split, paths)
        checked.extend(DataFile(split, path, built) for path in paths)
    return checked


def _check_split(split: str, paths: Sequence[Path]) -> None:
    """The files hold exactly `split`'s tasks; val files may instead hold several whole splits (a
    validation-only pass scoring, say, the train and val tasks at once), each row with its split's agent."""
    missing = [str(path) for path in paths if not path.is_file()]
    if missing:
        raise PreflightError(f"{split} data: {', '.join(missing)} missing (run scripts/prepare_data.py)")
    try:
        frame = pd.concat([pd.read_parquet(path, columns=["agent_name", "extra_info"]) for path in paths])
    except (OSError, ValueError, KeyError) as exc:
        raise PreflightError(f"{split} data: {paths[0]} is not a SEAL parquet file: {exc}") from exc
    ids = [info["task_id"] for info in frame["extra_info"]]
    held = _whole_splits(ids) if split == "val" else None
    if held is None:
        held = [split]
        expected = split_ids(split)
        if sorted(ids) != sorted(expected):
            extra, absent = sorted(set(ids) - set(expected)), sorted(set(expected) - set(ids))
            raise PreflightError(
                f"{split} data: {len(ids)} rows do not match the {len(expected)}-task {split} split "
                f"(not in the split: {extra[:3]}, missing: {absent[:3]}); "
                "rebuild with scripts/prepare_data.py"
            )
    agent_of = {
        task: TRAIN_AGENT if name == "train" else EVAL_AGENT for name in held for task in split_ids(name)
    }
    wrong = sorted(
        {agent for task, agent in zip(ids, frame["agent_name"], strict=True) if agent != agent_of[task]}
    )
    if wrong:
        raise PreflightError(
            f"{split} data: agent_name {wrong} where {sorted(set(agent_of.values()))} is expected"
        )


def _whole_splits(ids: Sequence[str]) -> list[str] | None:
    """The splits `ids` are, each whole and once, in split order; None when they are not that."""
    held = [name for name in SPLITS if set(split_ids(name)) & set(ids)]
    return held if held and sorted(ids) == sorted(t for name in held for t in split_ids(name)) else None


def _paths(value: str | ListConfig | list[str]) -> list[Path]:
    items = [value] if isinstance(value, str) else list(value)
    return [Path(item) for item in items]


# -- environment -------------------------------------------------------------------------------------
def preflight_tasks(split: str = "val") -> list[str]:
    """One task of each category: the first of the split."""
    ids = split_ids(split)
    return [next(task for task in ids if category_of(task) == category) for category in CATEGORIES]


async def check_environment(
    client: EnvClient, where: str, settings: SealSettings, tasks: Sequence[str]
) -> EnvironmentReport:
    """Play `tasks`' ground truth in both modes through `client` (the service, the environment actors of
    one node, or an in-process store) and check what comes back; `where` names it in errors."""
    try:
        await _check_interface(client, where, settings)
        episodes = [
            await _play(client, task_id, mode, settings) for mode in EPISODE_MODES for task_id in tasks
        ]
    except EnvServiceError as exc:
        raise PreflightError(f"{where}: {exc}") from exc
    profile = FailureProfile()
    labels, rewards = _synthetic_batch(episodes, settings.taxonomy)
    for trajectory, reward in zip(labels, rewards, strict=True):
        profile.observe(trajectory, reward, CATEGORIES[0])
    apatch = _check_apatch(labels, rewards, profile, settings)
    return EnvironmentReport(where, tuple(episodes), apatch, _check_evolve(profile, settings))


async def check_service(url: str, settings: SealSettings, tasks: Sequence[str]) -> EnvironmentReport:
    """`check_environment` through the HTTP service at `url`."""
    client = HttpEnvClient(url, timeout=settings.rollout.env_timeout_s, retries=settings.rollout.env_retries)
    try:
        return await check_environment(client, f"environment service at {masked_url(url)}", settings, tasks)
    finally:
        await client.aclose()


async def _check_interface(client: EnvClient, where: str, settings: SealSettings) -> None:
    served = (await client.get_interface())["config"]
    expected = asdict(build_interface(settings.interface.preset).config)
    if served != expected:
        raise PreflightError(
            f"{where} serves another interface than seal.interface.preset="
            f"{settings.interface.preset} (start it with --interface-preset {settings.interface.preset})"
        )


async def _play(client: EnvClient, task_id: str, mode: str, settings: SealSettings) -> EpisodeCheck:
    async with open_episode(client, task_id, mode, settings.rollout.protocol) as episode:
        for action in ground_truth_actions(task_id, settings.rollout.protocol):
            if (await episode.step(action))["done"]:
                break
    result = episode.result
    assert result is not None
    if result.taxonomy != settings.taxonomy:
        raise PreflightError(
            f"the service diagnoses with taxonomy {result.taxonomy!r} but seal.taxonomy is "
            f"{settings.taxonomy!r} (start it with --taxonomy {settings.taxonomy})"
        )
    if result.reward != 1.0 or not result.labels:
        raise PreflightError(
            f"{task_id} ({mode}): the ground truth scored {result.reward} with labels {result.labels}; "
            "the environment or the verifier is broken"
        )
    return EpisodeCheck(task_id, mode, result.reward, tuple(result.labels))


def _synthetic_batch(episodes: Sequence[EpisodeCheck], taxonomy: str) -> tuple[list[list[str]], list[float]]:
    """The ground-truth trajectories (reward 1) plus one failing trajectory per failure label (reward 0)."""
    labels = [list(episode.labels) for episode in episodes if episode.mode == "train"]
    rewards = [1.0] * len(labels)
    for label in LABELS_OF[taxonomy]:
        if label not in {PASS, CORRECT_ABSTENTION, *EXCLUDED}:
            labels.append([PASS, label])
            rewards.append(0.0)
    return labels, rewards


def _check_apatch(
    labels: list[list[str]], rewards: list[float], profile: FailureProfile, settings: SealSettings
) -> str:
    if not settings.apatch.enabled:
        return "off: GRPO's advantages are used as they are"
    config = settings.apatch
    rho = APatchState.initial(config).update(profile, config)
    mean, spread = statistics.fmean(rewards), statistics.pstdev(rewards) or 1.0
    advantages = [(reward - mean) / spread for reward in rewards]
    weights, metrics = apatch_factors(advantages, labels, rho, config, step=config.warmup_steps)
    factors = [w for a, w in zip(advantages, weights, strict=True) if a]
    if any(not f > 0 for f in factors):
        raise PreflightError("A-Patch would change the sign of an advantage")
    if any(not config.w_min - 1e-9 <= f <= config.w_max + 1e-9 for f in factors):
        raise PreflightError(f"A-Patch weights outside [{config.w_min}, {config.w_max}]: {factors}")
    mean_scale = metrics["seal/apatch/mean_scale"]
    return (
        f"{settings.apatch.mode}: weights {min(factors):.2f}..{max(factors):.2f}, mean {mean_scale:.2f}, "
        f"on {rewards.count(1.0)} ground truths and {rewards.count(0.0)} failures"
    )


def _check_evolve(profile: FailureProfile, settings: SealSettings) -> str:
    preset = settings.interface.preset
    if not settings.interface.adapt:
        return f"off: the training interface Ω stays preset {preset}, v0"
    start = build_interface(preset)
    evolved = evolve(start, profile.to_json())
    change = f"interface Ω v0 -> v{evolved.version} from the batch's failure counts"
    if not start.config.guidelines:
        return f"{change} (preset {preset} adds no guidelines)"
    return f"{change}: {len(evolved.guidelines)} guideline(s) added to the prompt"
