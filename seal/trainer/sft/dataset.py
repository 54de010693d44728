"""verl's SFT trainer reads pre-tokenised rows (`seal.trainer.sft.data`) through its `data.custom_cls` hook.

verl 0.9.1's own `MultiTurnSFTDataset` re-renders chat messages one by one, which is not token for token
what `SealAgentLoop` builds (the newline after each `<|im_end|>`, the tool prompt, clipped observations).
This class hands over the rollout's tokens unchanged: `input_ids`, `loss_mask` (1 on assistant tokens),
and positions 0..n-1, in the `no_padding` layout that verl's training engine takes.

    data.custom_cls.path=pkg://seal.trainer.sft.dataset data.custom_cls.name=PretokenizedSFTDataset

`RowMeanSFTDataset` hands over the same rows with each row's loss mask scaled to sum to 1
(`sft.loss_weighting: row`): verl's loss divides the masked sum by the global batch's mask sum, which then
counts rows, not tokens.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import torch
from omegaconf import DictConfig, ListConfig
from torch.utils.data import Dataset

COLUMNS = ("task_id", "input_ids", "loss_mask")
TRUNCATIONS = ("error", "left", "right")


class PretokenizedSFTDataset(Dataset):
    """Rows of `input_ids` and `loss_mask` lists (parquet), cut to `data.max_length` per `data.truncation`."""

    def __init__(
        self,
        parquet_files: str | list[str],
        tokenizer: Any,
        config: DictConfig,
        processor: Any = None,
        max_samples: int = -1,
    ) -> None:
        pad_mode = config.get("pad_mode", "no_padding")
        if pad_mode != "no_padding":
            raise ValueError(
                f"data.pad_mode must be no_padding (verl's SFT engine takes only that), not {pad_mode}"
            )
        self.truncation = config.get("truncation", "error")
        if self.truncation not in TRUNCATIONS:
            raise ValueError(
                f"data.truncation must be one of {', '.join(TRUNCATIONS)}, not {self.truncation}"
            )
        self.max_length = int(config.get("max_length", 1024))
        files = list(parquet_files) if isinstance(parquet_files, list | ListConfig) else [parquet_files]
        frame = pd.concat([pd.read_parquet(path, columns=list(COLUMNS)) for path in files], ignore_index=True)
        if max_samples > 0:
            frame = frame.iloc[:max_samples]
        self.task_ids = frame["task_id"].tolist()
        self.input_ids = [torch.tensor(ids, dtype=torch.long) for ids in frame["input_ids"]]
        self.loss_masks = [torch.tensor(mask, dtype=torch.long) for mask in frame["loss_mask"]]
        for task_id, ids, mask in zip(self.task_ids, self.input_ids, self.loss_masks, strict=True):
            if ids.shape != mask.shape:
                raise ValueError(f"{task_id}: {len(ids)} input_ids but {len(mask)} loss_mask entries")

    def __len__(self) -> int:
        return len(self.input_ids)

    def __getitem__(self, item: int) -> dict[str, torch.Tensor]:
        input_ids, loss_mask = self.input_ids[item], self.loss_masks[item]
        if len(input_ids) > self.max_length:
            if self.truncation == "error":
                raise ValueError(
                    f"{self.task_ids[item]}: {len(input_ids)} tokens > data.max_length={self.max_length}"
                )
            kept = slice(-self.max_length, None) if self.truncation == "left" else slice(self.max_length)
            input_ids, loss_mask = input_ids[kept], loss_mask[kept]
        return {
            "input_ids": input_ids,
            "position_ids": torch.arange(len(input_ids), dtype=torch.long),
            "loss_mask": loss_mask,
        }


class RowMeanSFTDataset(PretokenizedSFTDataset):
    """The same rows, each row's trained tokens weighing 1 in all: verl's token-mean loss becomes the mean
    over the batch's rows of each row's token mean (`sft.loss_weighting: row`)."""

    def __getitem__(self, item: int) -> dict[str, torch.Tensor]:
        row = super().__getitem__(item)
        mask = row["loss_mask"]
        row["loss_mask"] = mask.to(torch.float32) / max(int(mask.sum()), 1)
        return row
