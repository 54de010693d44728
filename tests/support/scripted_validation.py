"""A SealPPOTrainer without a model whose validation is scripted: verl's `_validate` (agent loop, rollout
servers, TransferQueue) needs GPUs, so `scripted_validate` stands in for it, scoring the tasks verl's loader
yields and handing them to SealPPOTrainer's dump and metrics as verl does; the loaders are verl's, over the
real parquet files."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig
from torchdata.stateful_dataloader import StatefulDataLoader
from verl.trainer.ppo.utils import create_rl_dataset
from verl.utils.dataset.rl_dataset import collate_fn

from seal.bfcl.tasks import CATEGORIES, split_ids
from seal.dataset import parquet_bytes
from seal.trainer.rl.finish_by import finish_by_of
from seal.trainer.rl.trainer import SealPPOTrainer
from seal.trainer.settings import settings_from_config
from tests.support.chatml import chatml_tokenizer


def passes(task_id: str) -> bool:
    """The scripted model: it solves the tasks whose number is a multiple of 3."""
    return int(task_id.rsplit("_", 1)[1]) % 3 == 0


def expected_mean(split: str) -> float:
    rates = []
    for category in CATEGORIES:
        ids = [t for t in split_ids(split) if t.startswith(f"{category}_")]
        rates.append(sum(passes(t) for t in ids) / len(ids))
    return sum(rates) / len(rates)


def scripted_validate(self: SealPPOTrainer) -> dict[str, float]:
    """Stands in for verl's `_validate`: each task of the loader played once, scored by `passes`, its rows
    dumped to `trainer.validation_data_dir` and scored through `_val_metrics_update`."""
    task_ids, sources = [], []
    for batch in self.val_dataloader:
        task_ids += [str(reward["ground_truth"]) for reward in batch["reward_model"]]
        sources += [str(source) for source in batch["data_source"]]
    self.loaders_played.append(task_ids)
    scores = [float(passes(task_id)) for task_id in task_ids]
    extra = {"reward": scores, "task_id": task_ids}
    n = len(task_ids)
    self._dump_generations(
        [""] * n, [""] * n, task_ids, scores, extra, self.config.trainer.validation_data_dir
    )
    return self._val_metrics_update(sources, [f"u{i}" for i in range(n)], extra, [1] * n)


def write_split_files(folder: Path) -> None:
    """data/bfcl_val.parquet and data/bfcl_test.parquet's rows, as `bfcl_{split}.parquet` in `folder`."""
    for split in ("val", "test"):
        (folder / f"bfcl_{split}.parquet").write_bytes(parquet_bytes(split))


def bare_trainer(config: DictConfig, folder: Path, total_steps: int) -> SealPPOTrainer:
    """The trainer's validation side over `folder`'s val split (`write_split_files`), with no model."""
    tokenizer = chatml_tokenizer(["hello world"], vocab_size=300)
    trainer = object.__new__(SealPPOTrainer)
    trainer.config = config
    trainer.seal_settings = settings_from_config(config)
    trainer.finish_by = finish_by_of(config, trainer.seal_settings.finish_by)
    trainer.tokenizer, trainer.processor = tokenizer, None
    trainer.val_dataset = create_rl_dataset(
        [str(folder / "bfcl_val.parquet")], config.data, tokenizer, None, is_train=False
    )
    trainer.val_dataloader = StatefulDataLoader(trainer.val_dataset, batch_size=50, collate_fn=collate_fn)
    trainer.total_training_steps = total_steps
    trainer.loaders_played = []
    trainer._init_dump_executor()
    return trainer
