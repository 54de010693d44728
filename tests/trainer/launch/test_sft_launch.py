"""launcher.py on an SFT experiment (exp/sft_warmstart.yaml), on CPU: the dry run, a launch with a stand-in
trainer (data, record, model folder), the command verl's SFT entry point is given, and the refusals."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from omegaconf import DictConfig
from transformers import AutoTokenizer

from seal.bfcl.tasks import split_ids
from seal.trainer.experiment import compose_experiment, to_yaml
from seal.trainer.launch import command as launcher
from seal.trainer.launch import sft
from seal.trainer.sft.data import sft_rows as real_sft_rows
from tests.support.rollout_helpers import model_folder
from tests.support.untrained_rows import save_with_untrained_rows
from tests.trainer.launch.test_launcher import plan_values

ROOT = Path(__file__).resolve().parents[3]
SFT = str(ROOT / "exp" / "sft_warmstart.yaml")
TASKS = tuple(split_ids("train")[:2])
MARKERS = ["<tool_call>", "</tool_call>"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return model_folder(tmp_path_factory.mktemp("chatml"), TASKS)


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`folder`'s tokenizer with the call markers added, and a tiny Qwen2 whose markers' rows are the
    placeholder row past the vocabulary, as in Qwen2.5-Coder-1.5B-Instruct."""
    folder = model_folder(tmp_path_factory.mktemp("released"), TASKS)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.add_tokens(MARKERS)
    return save_with_untrained_rows(folder, tokenizer, MARKERS, MARKERS)


def stand_in_entry(calls: list[dict[str, Any]]) -> launcher.Entry:
    """verl's SFT trainer replaced by one that writes the checkpoint layout verl writes."""

    def train_sft(config: DictConfig, config_file: Path, metrics: Path | None) -> None:
        calls.append({"config_file": config_file, "metrics": metrics})
        checkpoints = Path(config.trainer.default_local_dir)
        model = checkpoints / "global_step_75" / "huggingface"
        model.mkdir(parents=True, exist_ok=True)
        (model / "config.json").write_text("{}")
        (model / "model.safetensors").write_bytes(b"")
        (checkpoints / "latest_checkpointed_iteration.txt").write_text("75")

    def refuse(config: DictConfig) -> Any:
        raise AssertionError("an SFT launch must not run the RL trainer")

    return launcher.Entry(train=refuse, evaluate_test=refuse, needs_gpus=False, train_sft=train_sft)


def launched(argv: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """The config a launch from `tmp_path` records for verl (data built from TASKS, stand-in trainer)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sft, "sft_rows", few_rows)
    calls: list[dict[str, Any]] = []
    assert launcher.main(["--conf", SFT, "--", *argv], stand_in_entry(calls)) == 0
    return yaml.safe_load(calls[0]["config_file"].read_text())


def few_rows(config: DictConfig, tasks: Any = None) -> Any:
    """The data build restricted to TASKS (all 400 take minutes)."""
    return real_sft_rows(config, tasks or TASKS)


def test_the_dry_run_plays_a_task_per_category_prints_the_plan_and_writes_nothing(
    folder, capsys, monkeypatch, tmp_path
):
    monkeypatch.chdir(tmp_path)
    assert launcher.main(["--conf", SFT, "--dry-run", "--", f"model.path={folder}"]) == 0
    out = capsys.readouterr().out
    plan = plan_values(out)
    assert plan["base model"] == str(folder) and plan["method"].startswith("SFT")
    assert plan["episodes replayed"].startswith("smoke_gpu.yaml: tool prompt qwen_fc, Ω preset reference")
    assert plan["epochs"] == "3 (at most 25 steps per epoch)"  # 400 train tasks, batch 16
    assert plan["loss"] == "token mean over the batch (verl's)"
    assert plan["untrained added tokens"] == "rows set to their pieces' mean, in a copy of the model"
    assert out.count("episode  multi_turn_") == 4
    assert list(tmp_path.iterdir()) == []


def test_a_launch_builds_the_train_rows_records_trains_and_names_the_model_folder(
    folder, capsys, monkeypatch, tmp_path
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sft, "sft_rows", few_rows)
    calls: list[dict[str, Any]] = []
    argv = ["--conf", SFT, "--", f"model.path={folder}"]
    assert launcher.main(argv, stand_in_entry(calls)) == 0
    out = capsys.readouterr().out
    run = tmp_path / "experiments" / "sft_warmstart"
    data = pd.read_parquet(run / "bfcl_sft_train.parquet")
    assert list(data.task_id) == list(TASKS) and "  (built)" in out
    recorded = yaml.safe_load(calls[0]["config_file"].read_text())
    assert recorded["model"]["path"] == str(folder) and recorded["data"]["train_files"] == str(
        run / "bfcl_sft_train.parquet"
    )
    assert calls[0]["metrics"].parent == run / "metrics"
    model = run / "checkpoints" / "global_step_75" / "huggingface"
    assert f"actor_rollout_ref.model.path={model}" in out
    assert json.loads((run / "trained.json").read_text())["length"]["total_epochs"] == 3


@pytest.mark.parametrize(
    ("weighting", "reader"), [("token", "PretokenizedSFTDataset"), ("row", "RowMeanSFTDataset")]
)
def test_the_loss_weighting_names_the_class_that_reads_the_rows_in_the_recorded_config(
    weighting, reader, folder, monkeypatch, tmp_path
):
    recorded = launched([f"model.path={folder}", f"sft.loss_weighting={weighting}"], monkeypatch, tmp_path)
    assert recorded["data"]["custom_cls"]["name"] == reader
    assert recorded["sft"]["loss_weighting"] == weighting


@pytest.mark.parametrize(
    ("setting", "written"),
    [
        ("sdpa", ("sdpa", False, False, "seal.trainer.logprobs")),
        ("torch_varlen", ("torch_varlen", True, False, ["seal.trainer.logprobs", "seal.trainer.attention"])),
    ],
)
def test_the_attention_setting_reaches_the_plan_and_the_model_verl_loads(
    setting, written, folder, capsys, monkeypatch, tmp_path
):
    """Packed rows for torch's varlen kernels, whose module every rank imports; verl's log-prob loop chunked
    either way (its SFT trainer has no fused kernels)."""
    recorded = launched([f"model.path={folder}", f"sft.attention={setting}"], monkeypatch, tmp_path)
    model = recorded["model"]
    keys = ("use_remove_padding", "use_fused_kernels", "external_lib")
    assert (model["override_config"]["attn_implementation"], *(model[k] for k in keys)) == written
    attention = plan_values(capsys.readouterr().out)["attention"]
    assert attention.startswith(f"{setting} (sft.attention={setting}")
    assert f"remove padding {written[1]}" in attention and ("in chunks" in attention) is written[1]


@pytest.mark.parametrize(("handling", "starts_from_copy"), [("split", True), ("keep", False)])
def test_split_markers_reach_the_rows_and_the_trainer_as_their_pieces(
    handling, starts_from_copy, released, capsys, monkeypatch, tmp_path
):
    recorded = launched([f"model.path={released}", f"sft.untrained_tokens={handling}"], monkeypatch, tmp_path)
    run = tmp_path / "experiments" / "sft_warmstart"
    assert recorded["model"]["path"] == str(run / "start_model" if starts_from_copy else released)
    marker_ids = set(AutoTokenizer.from_pretrained(released).convert_tokens_to_ids(MARKERS))
    rows = pd.read_parquet(run / "bfcl_sft_train.parquet")
    written = {int(i) for ids in rows.input_ids for i in ids}
    assert written.isdisjoint(marker_ids) == starts_from_copy
    assert ("<tool_call> (id" in capsys.readouterr().out) == starts_from_copy


def test_another_model_rebuilds_the_rows(folder, monkeypatch, tmp_path):
    config = compose_experiment(SFT, [f"model.path={folder}", f"data.train_files={tmp_path / 'sft.parquet'}"])
    settings = sft.validate_sft(config)
    monkeypatch.setattr(sft, "sft_rows", few_rows)
    assert sft.ensure_sft_data(config, settings) is True
    assert sft.ensure_sft_data(config, settings) is False
    config.model.path = str(shutil.copytree(folder, tmp_path / "another"))
    assert sft.ensure_sft_data(config, settings) is True


def test_verls_sft_entry_point_reads_the_recorded_config(folder, tmp_path):
    """Hydra's `--cfg job` prints the config verl's SFT main would run with, without running it."""
    config = compose_experiment(SFT, [f"model.path={folder}"])
    record = tmp_path / "record"
    record.mkdir()
    (record / "config.yaml").write_text(to_yaml(config))
    command = sft.torchrun_command(config, record / "config.yaml")
    assert command[:8] == [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nnodes=1",
        "--nproc_per_node=1",
        "-m",
        "verl.trainer.sft_trainer",
    ]
    shown = subprocess.run(
        [sys.executable, "-m", "verl.trainer.sft_trainer", *command[8:], "--cfg", "job"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    seen = yaml.safe_load(shown.stdout)
    assert seen["data"]["custom_cls"] == {
        "path": "pkg://seal.trainer.sft.dataset",
        "name": "PretokenizedSFTDataset",
    }
    assert seen["model"]["path"] == str(folder) and "hf_model" in seen["checkpoint"]["save_contents"]


@pytest.mark.parametrize(
    ("flags", "overrides", "message"),
    [
        (["--test"], ["model.path=MODEL"], "takes no --test"),
        ([], ["model.path=/nowhere"], "model.path: /nowhere is not a model folder"),
        ([], ["model.path=MODEL", "trainer.n_gpus_per_node=3"], "multiple of trainer.n_gpus_per_node"),
        (
            [],
            ["model.path=MODEL", "trainer.nnodes=2"],
            "trainer.nnodes=2: allowed: 1 (the launcher runs SFT on one",
        ),
        ([], ["model.path=MODEL", "sft.loss_weighting=sample"], "loss_weighting must be one of token, row"),
        (
            [],
            ["model.path=MODEL", "sft.untrained_tokens=drop"],
            "untrained_tokens must be one of initialise, split, keep",
        ),
        (
            [],
            ["model.path=MODEL", "data.custom_cls.name=RowMeanSFTDataset"],
            "follows sft.loss_weighting (token or row); set that instead",
        ),
        (
            [],
            ["model.path=MODEL", "sft.attention=flash"],
            "sft.attention must be one of ['auto', 'flash_attention_2', 'torch_varlen', 'sdpa'], got 'flash'",
        ),
        (
            [],
            [
                "model.path=MODEL",
                "sft.attention=torch_varlen",
                "+model.override_config.attn_implementation=sdpa",
            ],
            "model.override_config.attn_implementation=sdpa contradicts sft.attention=torch_varlen",
        ),
        (
            [],
            ["model.path=MODEL", "sft.attention=torch_varlen", "engine.ulysses_sequence_parallel_size=2"],
            "has no Ulysses sequence parallelism: set engine.ulysses_sequence_parallel_size=1",
        ),
    ],
)
def test_bad_sft_launches_are_refused_in_one_line(
    flags, overrides, message, folder, capsys, monkeypatch, tmp_path
):
    monkeypatch.chdir(tmp_path)
    overrides = [override.replace("MODEL", str(folder)) for override in overrides]
    assert launcher.main(["--conf", SFT, "--dry-run", *flags, "--", *overrides]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_without_gpus_an_sft_launch_exits_with_one_line(folder, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert launcher.main(["--conf", SFT, "--", f"model.path={folder}"]) == 1
    assert capsys.readouterr().err.startswith("launcher: no GPU on this machine")
    assert launcher.main(["--conf", SFT, "--", f"model.path={folder}", "trainer.nnodes=2"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()  # the config's refusal before the GPU check
    assert line.startswith("launcher: trainer.nnodes=2: allowed: 1")


def test_a_model_whose_tokens_cannot_be_split_is_refused_in_one_line(released, capsys, monkeypatch, tmp_path):
    from seal.trainer.sft import untrained_tokens

    monkeypatch.setattr(untrained_tokens, "_retire", lambda folder, tokens: None)
    monkeypatch.chdir(tmp_path)
    argv = ["--conf", SFT, "--", f"model.path={released}", "sft.untrained_tokens=split"]
    assert launcher.main(argv, stand_in_entry([])) == 1
    err = capsys.readouterr().err
    assert "still writes <tool_call>" in err and err.count("\n") == 1
    assert not (tmp_path / "experiments" / "sft_warmstart" / "start_model").exists()
