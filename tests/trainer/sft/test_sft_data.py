"""Behaviour-cloning data: token for token what verl's agent-loop worker builds for the ground truth, read
back through verl's SFT dataset hook, loss on the assistant's tokens only, and never a val or test task."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
from omegaconf import OmegaConf
from transformers import AutoTokenizer
from verl.trainer.sft_trainer import create_sft_dataset
from verl.utils import tensordict_utils as tu
from verl.utils.dataset.dataset_utils import DatasetPadMode, SFTTensorCollator
from verl.workers.utils.losses import sft_loss

from seal.bfcl.tasks import CATEGORIES, split_ids
from seal.protocol.ground_truth import ground_truth_actions
from seal.trainer.experiment import compose_experiment
from seal.trainer.sft.data import (
    SFTDataError,
    SFTRow,
    episode_config,
    sft_rows,
    train_rows,
    write_sft_parquet,
)
from tests.support.rollout_helpers import model_folder, worker_samples
from tests.support.script_module import load_script
from tests.support.service_thread import service_in_thread

ROOT = Path(__file__).resolve().parents[3]
VANILLA = ROOT / "exp" / "vanilla_grpo.yaml"  # Ω preset `none`: not the in-process store's default
mask_runs = load_script("check_masks").mask_runs
prepare_sft = load_script("prepare_sft")
TRAIN = split_ids("train")
TASKS = tuple(next(t for t in TRAIN if t.rsplit("_", 1)[0] == category) for category in CATEGORIES)
SFT_DATA = {
    "custom_cls": {"path": "pkg://seal.trainer.sft.dataset", "name": "PretokenizedSFTDataset"},
    "pad_mode": "no_padding",
    "truncation": "error",
    "max_length": 32768,
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return model_folder(tmp_path_factory.mktemp("chatml"), TASKS)


@pytest.fixture(scope="module")
def tokenizer(folder: Path) -> Any:
    return AutoTokenizer.from_pretrained(folder)


@pytest.fixture(scope="module")
def sft_file(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sft") / "train.parquet"
    write_sft_parquet(sft_rows(episode_config(VANILLA, folder), TASKS), path)
    return path


def test_rows_read_through_verls_sft_hook_are_the_agent_loops_tokens_for_every_category(
    folder, tokenizer, sft_file
):
    with service_in_thread(interface_preset="none") as url:
        config = compose_experiment(
            VANILLA, [f"actor_rollout_ref.model.path={folder}", f"seal.rollout.env_url={url}"]
        )
        expected = asyncio.run(worker_samples(config, tokenizer, TASKS))
    data_config = OmegaConf.create(SFT_DATA)
    dataset = create_sft_dataset(str(sft_file), data_config, tokenizer, processor=None)
    frame = pd.read_parquet(sft_file)
    assert list(frame.task_id) == list(TASKS) and len(dataset) == len(TASKS)
    for i, (prompt, response, response_mask) in enumerate(expected):
        item = dataset[i]
        assert item["input_ids"].tolist() == prompt + response
        assert item["loss_mask"].tolist() == [0] * len(prompt) + response_mask
        assert item["position_ids"].tolist() == list(range(len(prompt) + len(response)))
        trained = [tokenizer.decode(ids) for bit, ids in mask_runs(response, response_mask) if bit]
        actions = [action + "<|im_end|>" for action in ground_truth_actions(TASKS[i])]
        if frame.truncated[i]:  # the response limit cut the conversation: its trained part is a prefix
            assert trained[:-1] == actions[: len(trained) - 1]
            assert actions[len(trained) - 1].startswith(trained[-1])
        else:
            assert trained == actions and frame.reward[i] == 1.0
    assert not frame.truncated.all()


def test_the_dataset_cuts_to_max_length_as_configured_and_errors_by_default(tokenizer, sft_file):
    longest = int(pd.read_parquet(sft_file).input_ids.map(len).max())
    cut = {**SFT_DATA, "max_length": longest - 10}
    strict = create_sft_dataset(str(sft_file), OmegaConf.create(cut), tokenizer, None)
    with pytest.raises(ValueError, match=r"data\.max_length"):
        list(strict)
    full = create_sft_dataset(str(sft_file), OmegaConf.create(SFT_DATA), tokenizer, None)
    left = create_sft_dataset(str(sft_file), OmegaConf.create({**cut, "truncation": "left"}), tokenizer, None)
    index = max(range(len(full)), key=lambda i: len(full[i]["input_ids"]))
    assert left[index]["input_ids"].tolist() == full[index]["input_ids"].tolist()[10:]
    assert left[index]["loss_mask"].tolist() == full[index]["loss_mask"].tolist()[10:]


def test_row_weighting_gives_each_row_one_unit_of_loss_through_verls_collator_and_sft_loss(
    tokenizer, sft_file
):
    """verl's loss divides the masked log-prob sum by the batch's mask sum: with `RowMeanSFTDataset` that is
    the mean over rows of each row's token mean, with the token mask the mean over all trained tokens."""
    token = create_sft_dataset(str(sft_file), OmegaConf.create(SFT_DATA), tokenizer, None)
    row_data = {**SFT_DATA, "custom_cls": {**SFT_DATA["custom_cls"], "name": "RowMeanSFTDataset"}}
    row = create_sft_dataset(str(sft_file), OmegaConf.create(row_data), tokenizer, None)
    assert len(row) == len(token) == len(TASKS)
    for i in range(len(row)):
        assert row[i]["input_ids"].tolist() == token[i]["input_ids"].tolist()
        trained = token[i]["loss_mask"].bool()
        assert torch.allclose(
            row[i]["loss_mask"][trained], torch.full((int(trained.sum()),), 1 / int(trained.sum()))
        )
        assert not row[i]["loss_mask"][~trained].any()
    generator = torch.Generator().manual_seed(0)
    log_probs = [  # each row its own scale, so that the two weightings disagree where rows differ in length
        -(i + 1) * torch.rand(len(token[i]["input_ids"]), generator=generator) for i in range(len(token))
    ]

    def verl_loss(dataset: Any) -> float:
        batch = SFTTensorCollator(DatasetPadMode.NO_PADDING)([dataset[i] for i in range(len(dataset))])
        mask = batch["loss_mask"]
        data = tu.get_tensordict(
            tensor_dict={"loss_mask": mask},
            non_tensor_dict={"dp_size": 1, "batch_num_tokens": float(mask.values().sum())},
        )
        output = {"log_probs": torch.nested.as_nested_tensor(log_probs, layout=torch.jagged)}
        return float(sft_loss(config=None, model_output=output, data=data)[0])

    # verl aligns the mask with the log-probs by one position (the token a log-prob predicts)
    shifted = [torch.roll(token[i]["loss_mask"], -1).bool() for i in range(len(token))]
    per_row = [float(-lp[m].mean()) for lp, m in zip(log_probs, shifted, strict=True)]
    all_tokens = float(-torch.cat([lp[m] for lp, m in zip(log_probs, shifted, strict=True)]).mean())
    assert verl_loss(row) == pytest.approx(sum(per_row) / len(per_row), rel=1e-5)
    assert verl_loss(token) == pytest.approx(all_tokens, rel=1e-5)
    assert sum(per_row) / len(per_row) != pytest.approx(all_tokens, rel=1e-3)  # the rows differ in length


def test_a_held_out_task_is_neither_played_nor_written(sft_file, tmp_path):
    held_out = split_ids("val")[0]
    with pytest.raises(SFTDataError, match=held_out):
        train_rows([TASKS[0], held_out])
    row = pd.read_parquet(sft_file).iloc[0].to_dict()
    leaked = SFTRow(**{**row, "task_id": split_ids("test")[0]})
    with pytest.raises(SFTDataError, match="outside the train split"):
        write_sft_parquet([leaked], tmp_path / "sft.parquet")
    assert not (tmp_path / "sft.parquet").exists()


def test_the_script_answers_help_and_refuses_a_folder_without_a_model(tmp_path, capsys):
    with pytest.raises(SystemExit) as done:
        prepare_sft.main(["--help"])
    assert done.value.code == 0 and "--tokenizer" in capsys.readouterr().out
    assert prepare_sft.main(["--tokenizer", str(tmp_path), "--out", str(tmp_path)]) == 1
    assert capsys.readouterr().err.count("\n") == 1 and not list(tmp_path.iterdir())
