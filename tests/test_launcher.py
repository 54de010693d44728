"""launcher.py on CPU: dry runs of every experiment, refusals, the service lifecycle, the GPU check.

The lifecycle tests run the real launcher in a subprocess with a stand-in trainer entry point
(tests/launcher_stand_in.py), so a normal return, a trainer error and a signal are all real exits.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from hydra import compose, initialize_config_module

import launcher
from env_service.process import ServiceStartError, free_port, is_healthy, running_service
from seal.bfcl.tasks import split_ids
from seal.dataset import parquet_bytes
from seal.trainer.experiment import compose_experiment
from seal.trainer.override_types import OverrideTypeError, check_override_types
from seal.trainer.preflight import PreflightError, check_data

ROOT = Path(__file__).resolve().parents[1]
PAPER_EXPERIMENTS = sorted(
    p for p in (ROOT / "exp").glob("*.yaml") if not p.stem.startswith(("smoke_", "sft_"))
)  # the RL experiments; tests/test_sft_launch.py launches the SFT ones
STAND_IN = ROOT / "tests" / "launcher_stand_in.py"
SEAL = str(ROOT / "exp" / "SEAL.yaml")

# The paper's Table 4 (docs/paper_results.md), as the plan prints each row.
TABLE_4 = {
    "base model": "Qwen/Qwen2.5-7B-Instruct",
    "method": "grpo, 8 rollouts per prompt",
    "actor learning rate": "1e-06",
    "train batch size": "32",
    "PPO mini-batch size": "8",
    "PPO micro-batch size per GPU": "1",
    "temperature": "1.0 training, 0.0 validation",
    "max prompt / response / model length": "8192 / 4096 / 16384",
    "multi-turn rollout": "at most 20 interaction steps",
    "tool prompt": "qwen_fc",
    "reward KL penalty": "off",
    "actor KL loss coefficient": "0.001 (low_var_kl)",
    "entropy coefficient": "0",
    "GPUs": "4 (1 node x 4), tensor parallel 1, vLLM async, GPU memory utilisation 0.6",
    "epochs": "6 (12 steps per epoch, 72 steps)",
}

# The paper's 3B runs: batch 16, so 400 // 16 = 25 steps per epoch.
TABLE_4_3B = {
    **TABLE_4,
    "base model": "Qwen/Qwen2.5-3B-Instruct",
    "train batch size": "16",
    "epochs": "6 (25 steps per epoch, 150 steps)",
}


def plan_values(stdout: str) -> dict[str, str]:
    """The plan table's rows: key and value columns, split on the column gaps."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("key ")) + 2
    rows = {}
    for line in lines[start:]:
        cells = [cell.strip() for cell in line.split("  ") if cell.strip()]
        if len(cells) < 2:
            break
        rows[cells[0]] = cells[1]
    return rows


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


# -- dry runs ---------------------------------------------------------------------------------------
def test_dry_run_of_seal_from_the_command_line_prints_table_4(tmp_path):
    silent = f"http://127.0.0.1:{free_port()}"  # nothing answers there: the launcher starts a service
    done = subprocess.run(
        [sys.executable, str(ROOT / "launcher.py"), "--conf", SEAL, "--dry-run", "--env-url", silent],
        cwd=tmp_path,
        env=env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    plan = plan_values(done.stdout)
    assert {key: plan.get(key) for key in TABLE_4} == TABLE_4
    assert plan["diagnosis taxonomy"] == "reference" and plan["A-Patch"].startswith(
        "dynamic, weight clip [0.5, 2.0]"
    )
    assert f"no service answers at {silent}: starting one" in done.stdout
    assert plan["environment service"] != silent and "dry run" in done.stdout
    assert not (tmp_path / "launcher_record").exists() and not (tmp_path / "experiments").exists()


EXPECTED_SEAL_PARTS = {
    "SEAL": ("reference", "preset reference, Evolve on", "dynamic"),
    "SEAL_3B": ("reference", "preset reference, Evolve on", "dynamic"),
    "SEAL_full_loop": ("paper", "preset full, Evolve on", "dynamic"),
    "ablation_no_env_adaptation": ("reference", "preset none, Evolve off", "dynamic"),
    "ablation_no_reweighting": ("reference", "preset reference, Evolve on", "off"),
    "ablation_static_weights": ("reference", "preset reference, Evolve on", "static"),
    "vanilla_grpo": ("reference", "preset none, Evolve off", "off"),
}


@pytest.mark.parametrize("conf", PAPER_EXPERIMENTS, ids=lambda path: path.stem)
def test_every_experiment_dry_runs_with_its_own_service(conf, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert launcher.main(["--conf", str(conf), "--dry-run", "--with-bfcl"]) == 0
    out = capsys.readouterr().out
    plan = plan_values(out)
    table = TABLE_4_3B if conf.stem == "SEAL_3B" else TABLE_4
    assert {key: plan.get(key) for key in table} == table
    taxonomy, interface, apatch = EXPECTED_SEAL_PARTS[conf.stem]
    assert plan["diagnosis taxonomy"] == taxonomy
    assert plan["interface Ω"] == interface
    assert plan["A-Patch"].split(",")[0] == apatch
    assert out.count("): reward 1,") == 8  # four categories, train and eval mode
    url = plan["environment service"]
    assert not is_healthy(url)  # stopped on the way out


@pytest.mark.parametrize(("name", "gpus"), [("smoke_gpu", 1), ("smoke_gpu_vanilla", 1), ("smoke_gpu", 2)])
def test_the_gpu_smoke_runs_dry_run_with_one_rollout_replica_per_gpu(
    name, gpus, capsys, monkeypatch, tmp_path
):
    monkeypatch.chdir(tmp_path)
    conf = str(ROOT / "exp" / f"{name}.yaml")
    overrides = ["actor_rollout_ref.model.path=/m", f"trainer.n_gpus_per_node={gpus}"]
    assert launcher.main(["--conf", conf, "--dry-run", "--with-bfcl", "--", *overrides]) == 0
    plan = plan_values(capsys.readouterr().out)
    assert plan["base model"] == "/m"
    assert plan["GPUs"].startswith(f"{gpus} (1 node x {gpus}), tensor parallel 1")
    assert plan["rollout replicas"] == str(gpus)  # verl's default TP 2 would leave one GPU without a replica
    assert plan["max prompt / response / model length"] == "7680 / 512 / 8192"
    assert plan["A-Patch"].split(",")[0] == ("off" if name.endswith("vanilla") else "dynamic")


@pytest.mark.parametrize(
    ("override", "says"),
    [
        ("trainer.no_such_key=1", "trainer.no_such_key"),
        ("trainer.test_freq=abc", "trainer.test_freq expects an integer"),
        ("actor_rollout_ref.actor.optim.lr=fast", "expects a number"),
        ("seal.apatch.mode=sometimes", "seal.apatch.mode"),
        ("seal.apatch.w_min=abc", "seal.apatch.w_min expects a number (default 0.5)"),
    ],
)
def test_an_unknown_key_or_a_wrong_type_is_refused_in_one_line_before_anything_starts(
    override, says, capsys, monkeypatch, tmp_path
):
    monkeypatch.chdir(tmp_path)
    assert launcher.main(["--conf", SEAL, "--dry-run", "--", override]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("launcher: ") and says in captured.err
    assert len(captured.err.strip().splitlines()) == 1
    assert "environment" not in captured.out and list(tmp_path.iterdir()) == []


def test_a_service_with_another_taxonomy_or_interface_is_refused(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    with running_service(["--log-level", "warning"]) as service:  # reference taxonomy and interface
        conf = str(ROOT / "exp" / "SEAL_full_loop.yaml")
        assert launcher.main(["--conf", conf, "--dry-run", "--env-url", service.url]) == 1
        err = capsys.readouterr().err
        assert "--interface-preset full" in err and len(err.strip().splitlines()) == 1
        assert is_healthy(service.url)  # someone else's service is used, never stopped


# -- override types -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def verl_defaults():
    with initialize_config_module("verl.trainer.config", version_base=None):
        return compose("ppo_trainer")


@pytest.mark.parametrize(
    "override",
    [
        "trainer.test_freq=5",
        "trainer.test_freq=null",
        "actor_rollout_ref.actor.optim.lr=3",
        "actor_rollout_ref.actor.optim.lr=1e-6",
        "trainer.val_before_train=false",
        "trainer.logger=[console,file]",
        "trainer.experiment_name=run_7",
        "data.max_response_length=${data.max_prompt_length}",
        "+trainer.brand_new=abc",
        "~trainer.rollout_data_dir",
    ],
)
def test_overrides_that_fit_their_default_pass(verl_defaults, override):
    check_override_types(verl_defaults, [override])


@pytest.mark.parametrize(
    ("override", "says"),
    [
        ("trainer.test_freq=abc", "expects an integer (default -1), got str 'abc'"),
        ("trainer.test_freq=2.5", "expects an integer"),
        ("trainer.test_freq='5'", "expects an integer"),
        ("trainer.val_before_train=1", "expects a boolean"),
        ("actor_rollout_ref.actor.optim.lr=[1,2]", "expects a number"),
        ("trainer.test_freq=1,2", "sweeps are not supported"),
    ],
)
def test_overrides_of_the_wrong_type_are_refused(verl_defaults, override, says):
    with pytest.raises(
        OverrideTypeError, match=says.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
    ):
        check_override_types(verl_defaults, [override])


# -- metrics file ------------------------------------------------------------------------------------
@pytest.mark.parametrize("loggers", [["console"], ["console", "file"]])
def test_verl_s_file_logger_writes_one_file_per_launch_into_the_run_folder(loggers, tmp_path):
    config = launcher.compose(Path(SEAL), [f"trainer.logger=[{','.join(loggers)}]"])
    launcher.log_metrics_to(config, tmp_path / "metrics" / "20260101T000000Z.jsonl")
    env_vars = config.ray_kwargs.ray_init.runtime_env.get("env_vars") or {}
    if "file" in loggers:
        assert env_vars["VERL_FILE_LOGGER_PATH"] == str(tmp_path / "metrics" / "20260101T000000Z.jsonl")
        assert (tmp_path / "metrics").is_dir()  # verl's FileLogger opens the file but makes no folder
    else:
        assert "VERL_FILE_LOGGER_PATH" not in env_vars


# -- data ---------------------------------------------------------------------------------------------
def test_a_missing_data_file_is_built_and_a_wrong_one_refused(tmp_path):
    target = tmp_path / "data" / "val.parquet"
    (checked,) = check_data({"val": [target]})
    assert checked.built and target.read_bytes() == parquet_bytes("val")
    (again,) = check_data({"val": [target]})
    assert not again.built
    with pytest.raises(PreflightError, match=f"do not match the {len(split_ids('test'))}-task test split"):
        check_data({"test": [target]})


# -- the service lifecycle ------------------------------------------------------------------------
def launch_stand_in(mode: str, tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], Path]:
    report = tmp_path / f"{mode}.json"
    process = subprocess.Popen(
        [sys.executable, str(STAND_IN), mode, str(report), "--conf", SEAL, "--with-bfcl", *args],
        cwd=tmp_path,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return process, report


def assert_gone(pids: list[int]) -> None:
    for pid in pids:
        assert not psutil.pid_exists(pid), f"service process {pid} left behind"


def test_a_normal_exit_trains_tests_records_and_stops_the_service(tmp_path):
    process, report_path = launch_stand_in("return", tmp_path, "--test", "--", "trainer.total_epochs=2")
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-2000:]
    report = json.loads(report_path.read_text())
    assert report["healthy"] and report["train_calls"] == 1 and report["test_calls"] == 1
    assert len(report["service_pids"]) == 1
    assert_gone(report["service_pids"])
    assert not is_healthy(report["url"])
    run = tmp_path / "experiments" / "SEAL"
    assert (run / "env_service.log").is_file()
    (record,) = (tmp_path / "launcher_record" / "SEAL").iterdir()
    saved = json.loads((record / "record.json").read_text())
    assert saved["overrides"] == ["trainer.total_epochs=2"]
    assert saved["environment_service"]["pid"] == report["service_pids"][0]
    assert saved["packages"]["verl"] == "0.9.1" and "commit" in saved["git"]
    assert "total_epochs: 2" in (record / "config.yaml").read_text()
    assert (record / "overrides.txt").read_text() == "trainer.total_epochs=2\n"

    again, again_report = launch_stand_in("return", tmp_path, "--test", "--", "trainer.total_epochs=2")
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err[-2000:]
    assert "training skipped" in out
    assert json.loads(again_report.read_text())["train_calls"] == 0


def test_an_error_in_the_trainer_stops_the_service_and_exits_non_zero(tmp_path):
    process, report_path = launch_stand_in("raise", tmp_path)
    _, err = process.communicate(timeout=300)
    assert process.returncode == 1
    assert "stand-in trainer failed" in err
    report = json.loads(report_path.read_text())
    assert report["healthy"]
    assert_gone(report["service_pids"])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_training_stops_the_service(tmp_path, sig):
    process, report_path = launch_stand_in("wait", tmp_path)
    deadline = time.monotonic() + 240
    while not report_path.exists():
        assert process.poll() is None, process.communicate()[1][-2000:]
        assert time.monotonic() < deadline, "the stand-in trainer never started"
        time.sleep(0.2)
    report = json.loads(report_path.read_text())
    assert report["healthy"]
    process.send_signal(sig)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "interrupted" in err
    assert_gone(report["service_pids"])


def test_a_service_that_cannot_start_says_why_in_one_line_and_leaves_nothing(tmp_path):
    log = tmp_path / "service.log"
    with pytest.raises(ServiceStartError) as failed, running_service(["--taxonomy", "nope"], log_path=log):
        pass
    message = str(failed.value)
    assert "exited with code 2" in message and "nope" in message and str(log) in message
    assert "\n" not in message


def test_the_helper_serves_on_the_port_asked_for_and_frees_it(tmp_path):
    port = free_port()
    with running_service(["--log-level", "warning"], port=port) as service:
        assert service.url == f"http://127.0.0.1:{port}" and is_healthy(service.url)
        pid = service.pid
    assert_gone([pid])
    with running_service(["--log-level", "warning"], port=port) as service:  # the port is free again
        assert is_healthy(service.url)


# -- no GPU ---------------------------------------------------------------------------------------------
@pytest.fixture
def no_flash_attn(monkeypatch):
    """This machine without the flash-attn package, whatever it has."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "flash_attn" else find_spec(name, *a)
    )


def test_a_gpu_node_without_flash_attn_is_told_in_one_line_before_anything_starts(
    no_flash_attn, monkeypatch, capsys, tmp_path
):
    import torch

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert launcher.main(["--conf", SEAL]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert (
        line.startswith("launcher: the model loads with flash_attention_2")
        and "attn_implementation=sdpa" in line
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("conf", "overrides"),
    [
        ("smoke_gpu", []),
        ("SEAL", ["+actor_rollout_ref.model.override_config.attn_implementation=sdpa"]),
    ],
)
def test_a_config_that_names_another_attention_kernel_needs_no_flash_attn(no_flash_attn, conf, overrides):
    config = compose_experiment(ROOT / "exp" / f"{conf}.yaml", overrides)
    assert launcher.attention_problem(config) is None


def test_with_flash_attn_installed_the_default_kernel_is_fine(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
    assert launcher.attention_problem(compose_experiment(ROOT / "exp" / "SEAL.yaml")) is None


def test_without_gpus_training_exits_non_zero_with_one_line_before_ray(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "launcher.py"), "--conf", SEAL],
        cwd=tmp_path,
        env=env(CUDA_VISIBLE_DEVICES=""),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("launcher: no GPU on this machine")
    assert list(tmp_path.iterdir()) == []  # no service log, no record, no Ray session
