"""launcher.py on CPU: dry runs of every experiment, refusals, the service lifecycle, the GPU check.

Launches call `launcher.main` in-process (a fresh interpreter pays seconds of imports per launch); the
lifecycle tests give it a stand-in trainer entry point (tests/launcher_stand_in.py). One dry run runs
`python launcher.py` as a real process, from the command line; `--help` and a mistyped path run in fresh
interpreters, which show what the launcher imports.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

from seal.bfcl.tasks import split_ids
from seal.dataset import parquet_bytes
from seal.env.process import ServiceStartError, free_port, is_healthy, running_service
from seal.trainer.experiment import compose_experiment
from seal.trainer.launch import command as launcher
from seal.trainer.launch.kernel import configure_attention
from seal.trainer.launch.model_need import model_key, needs_model
from seal.trainer.launch.override_types import OverrideTypeError, check_override_types
from seal.trainer.preflight import PreflightError, check_data
from seal.trainer.rl.finish_by import ENDED_EARLY
from tests.support.launcher_stand_in import ENV_FAILURE, stand_in_entry
from tests.support.service_thread import service_in_thread

ROOT = Path(__file__).resolve().parents[3]
PAPER_EXPERIMENTS = sorted(
    p for p in (ROOT / "exp").glob("*.yaml") if not p.stem.startswith(("smoke_", "sft_", "learn_"))
)  # the paper's RL experiments; tests/trainer/launch/test_sft_launch.py launches the SFT ones
EXPERIMENTS = sorted((ROOT / "exp").glob("*.yaml"))
CONFIG_SNAPSHOTS = ROOT / "tests" / "snapshots" / "data" / "configs"
SEAL = str(ROOT / "exp" / "SEAL.yaml")

# The paper's Table 4 (docs/paper_results.md), as the plan prints each row.
TABLE_4 = {
    "base model": "Qwen/Qwen2.5-7B-Instruct",
    "method": "grpo, 8 rollouts per prompt",
    "actor learning rate": "1e-06",
    "train batch size": "32",
    "PPO mini-batch size": "8",
    "PPO micro-batch size per GPU": "packed up to 16384 tokens (the gradient of micro-batch 1)",
    "temperature": "1.0 training, 0.0 validation",
    "max prompt / response / model length": "8192 / 4096 / 16384",
    "multi-turn rollout": "at most 20 interaction steps",
    "tool prompt": "qwen_fc",
    "reward KL penalty": "off",
    "actor KL loss coefficient": "0.001 (low_var_kl)",
    "entropy coefficient": "0",
    "GPUs": "4 (1 node x 4), tensor parallel 1, vLLM async, GPU memory utilisation 0.6",
    "epochs": "6 (12 steps per epoch of 400 train rows, 16 unused each epoch; 72 steps)",
}

# The paper's 3B runs: batch 16, so 400 // 16 = 25 steps per epoch, every row used.
TABLE_4_3B = {
    **TABLE_4,
    "base model": "Qwen/Qwen2.5-3B-Instruct",
    "train batch size": "16",
    "epochs": "6 (25 steps per epoch of 400 train rows; 150 steps)",
}
TABLE_4_3B_1GPU = {
    **TABLE_4_3B,
    "GPUs": "1 (1 node x 1), tensor parallel 1, vLLM async, GPU memory utilisation 0.4",
}
TABLE_4_TOOLACE = {  # Table 4 with the backbone's own protocol and the prompt its tokenizer needs
    **TABLE_4,
    "base model": "Team-ACE/ToolACE-2-8B",
    "tool prompt": "python_list",
    "max prompt / response / model length": "9216 / 4096 / 16384",
}


def plan_lines(stdout: str) -> list[str]:
    """The plan's lines after its header and rule, up to the blank line that ends it."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("setting ")) + 2
    end = lines.index("", start)
    return lines[start:end]


def plan_values(stdout: str) -> dict[str, str]:
    """setting -> value: a row starts at the margin, its value may go on over indented lines, and the
    `(set by ...)` lines after it are left out."""
    rows: dict[str, list[str]] = {}
    for line in plan_lines(stdout):
        if not line.startswith(" "):
            setting, *value = line.split("  ", 1)
            rows[setting] = [part.strip() for part in value]
            in_keys = False
        else:
            in_keys = in_keys or line.strip().startswith("(set by ")
            if not in_keys:
                rows[setting].append(line.strip())
    return {setting: " ".join(parts) for setting, parts in rows.items()}


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


# -- dry runs ---------------------------------------------------------------------------------------
def test_dry_run_of_seal_from_the_command_line_prints_table_4(tmp_path, refused_port):
    silent = f"http://127.0.0.1:{refused_port}"  # nothing answers there: the launcher starts a service
    done = subprocess.run(
        [sys.executable, str(ROOT / "launcher.py"), "--conf", SEAL, "--dry-run", "--env-url", silent],
        cwd=tmp_path,
        env=env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    plan = plan_values(done.stdout)
    assert {key: plan.get(key) for key in TABLE_4} == TABLE_4
    assert plan["diagnosis taxonomy"] == "reference" and plan["A-Patch"].startswith(
        "dynamic, weight clip [0.5, 2.0]"
    )
    assert f"no service answers at {silent}: starting one" in done.stdout
    assert plan["environment service"].startswith(f"one the launch starts (none answers at {silent})")
    assert "dry run" in done.stdout
    assert "Disabled critic" not in done.stderr  # GRPO: the config says there is no critic
    output = done.stdout + done.stderr  # verl's notices of engines it lacks and of no GPU are kept out
    assert "engine is not available" not in output and "accelerator" not in output
    assert all(len(line) <= 100 or len(line.split()) == 1 for line in plan_lines(done.stdout))
    assert not (tmp_path / "launcher_record").exists() and not (tmp_path / "experiments").exists()


def test_a_ray_backend_dry_run_starts_no_service_and_plans_the_actors_per_node(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    overrides = ["seal.rollout.env_backend=ray", "seal.rollout.env_actors_per_node=3", "trainer.nnodes=2"]
    assert launcher.main(["--conf", SEAL, "--dry-run", "--", *overrides]) == 0
    out = capsys.readouterr().out
    plan = plan_values(out)
    assert plan["environment actors"].startswith("2 node(s) x 3 = 6 Ray actors (node 1: 3, node 2: 3)")
    assert plan["environment service"].startswith("none (seal.rollout.env_backend=ray")
    assert plan["GPUs"].startswith("8 (2 nodes x 4), tensor parallel 1")
    assert plan["rollout replicas"] == "8"
    assert plan["where it runs"].startswith(
        "node 1 (this one, Ray's head): the launcher; each of the 2 nodes: 4 GPU worker(s) (actor and "
        "reference shards), 4 vLLM replica(s), 3 environment actor(s); 8 agent-loop workers round robin"
    )
    assert "started pid" not in out and out.count("): reward 1,") == 8  # on an in-process store
    assert launcher.main(["--conf", SEAL, "--dry-run", "--with-bfcl", "--", *overrides]) == 2
    assert "seal.rollout.env_backend=ray uses none" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (
            [],
            "with the environment service at http://127.0.0.1:8082, an address the rollout workers on the "
            "other nodes cannot reach",
        ),
        (["--env-url", "http://localhost:9000"], "at http://localhost:9000, an address"),
        (["--env-url", "http://0.0.0.0:9000"], "at http://0.0.0.0:9000, an address"),
        (
            ["--with-bfcl"],
            "with --with-bfcl: the service the launcher starts listens on this node's loopback",
        ),
    ],
)
def test_several_nodes_with_a_service_on_loopback_are_refused_in_one_line_naming_the_fix(
    flags, says, capsys, monkeypatch, tmp_path
):
    monkeypatch.chdir(tmp_path)
    for dry_run in (["--dry-run"], []):  # refused before the GPU check, the data and the service
        assert launcher.main(["--conf", SEAL, *dry_run, *flags, "--", "trainer.nnodes=2"]) == 2
        captured = capsys.readouterr()
        (line,) = captured.err.strip().splitlines()
        assert line.startswith("launcher: trainer.nnodes=2") and says in line
        assert "seal.rollout.env_backend=ray" in line and "--env-url" in line and "SEAL_ENV_TOKEN" in line
        assert captured.out == "" and list(tmp_path.iterdir()) == []


def test_several_nodes_take_a_service_beyond_loopback_only_where_one_answers(monkeypatch):
    from seal.trainer.launch import environment

    remote = "http://10.0.0.5:8082"
    monkeypatch.setattr(environment, "is_healthy", lambda url: False)
    problem = environment.multi_node_problem(2, "http", remote, fresh=False)
    assert problem.startswith("trainer.nnodes=2: no environment service answers at http://10.0.0.5:8082")
    monkeypatch.setattr(environment, "is_healthy", lambda url: url == remote)
    assert environment.multi_node_problem(2, "http", remote, fresh=False) is None
    assert environment.multi_node_problem(2, "http", "http://env-node:8082", fresh=False) is not None
    assert environment.multi_node_problem(1, "http", "http://127.0.0.1:8082", fresh=True) is None
    assert environment.multi_node_problem(3, "ray", "http://127.0.0.1:8082", fresh=False) is None


EXPECTED_SEAL_PARTS = {
    "SEAL": ("reference", "preset reference, Evolve on", "dynamic"),
    "SEAL_3B": ("reference", "preset reference, Evolve on", "dynamic"),
    "SEAL_3B_1gpu": ("reference", "preset reference, Evolve on", "dynamic"),
    "SEAL_full_loop": ("paper", "preset full, Evolve on", "dynamic"),
    "SEAL_ToolACE": ("reference", "preset reference, Evolve on", "dynamic"),
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
    tables = {"SEAL_3B": TABLE_4_3B, "SEAL_3B_1gpu": TABLE_4_3B_1GPU, "SEAL_ToolACE": TABLE_4_TOOLACE}
    table = tables.get(conf.stem, TABLE_4)
    assert {key: plan.get(key) for key in table} == table
    taxonomy, interface, apatch = EXPECTED_SEAL_PARTS[conf.stem]
    assert plan["diagnosis taxonomy"] == taxonomy
    assert plan["interface Ω"] == interface
    assert plan["Ω at the first step"] == f"v0 of {interface.split(',')[0]} (a fresh environment)"
    assert plan["A-Patch"].split(",")[0] == apatch
    assert out.count("): reward 1,") == 8  # four categories, train and eval mode
    assert plan["environment service"].startswith("one the launch starts (--with-bfcl)")
    (url,) = re.findall(r"environment  started pid \d+ at (\S+)", out)
    assert not is_healthy(url)  # stopped on the way out


@pytest.mark.parametrize("conf", EXPERIMENTS, ids=lambda path: path.stem)
def test_every_shipped_experiment_dry_runs_or_is_refused_with_the_one_line_that_gives_it_a_model(
    conf, capsys, monkeypatch, tmp_path
):
    """As shipped, an experiment either dry-runs (the paper's: the test above) or names its model's key.
    Its composed config is read from its snapshot (tests/snapshots/test_configs.py keeps it current)."""
    monkeypatch.chdir(tmp_path)
    config = OmegaConf.create(json.loads((CONFIG_SNAPSHOTS / f"{conf.stem}.json").read_text()))
    if conf in PAPER_EXPERIMENTS:
        assert not needs_model(config)
        return
    assert needs_model(config)
    assert launcher.main(["--conf", str(conf), "--dry-run", "--with-bfcl"]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith(f"launcher: {conf} needs a model: add `-- {model_key(config)}=DIR` (")
    assert "scripts/make_smoke_model.py" in line
    assert captured.out == "" and list(tmp_path.iterdir()) == []  # refused before verl's "checks passed"


@pytest.mark.parametrize(("name", "gpus"), [("smoke_gpu", 1), ("smoke_gpu_vanilla", 1), ("smoke_gpu", 2)])
def test_the_gpu_smoke_runs_dry_run_with_one_rollout_replica_per_gpu(
    name, gpus, capsys, monkeypatch, tmp_path
):
    monkeypatch.chdir(tmp_path)
    conf = str(ROOT / "exp" / f"{name}.yaml")
    model = tmp_path / "m"  # the dry run loads no weights: a folder with a model config will do
    model.mkdir()
    (model / "config.json").write_text("{}")
    overrides = [f"actor_rollout_ref.model.path={model}", f"trainer.n_gpus_per_node={gpus}"]
    assert launcher.main(["--conf", conf, "--dry-run", "--with-bfcl", "--", *overrides]) == 0
    plan = plan_values(capsys.readouterr().out)
    assert plan["base model"] == str(model)
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
        ("+trainer.tset_freq=5", "nothing reads trainer.tset_freq"),
        ("+seal.taxnomy=paper", "did you mean `seal.taxonomy`?"),
        ("trainer.tset_freq=5", "did you mean `trainer.test_freq`?"),
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
        "actor_rollout_ref.actor.entropy_coeff=0.01",  # verl writes 0; its ActorConfig declares a float
        "actor_rollout_ref.rollout.top_p=0.95",  # verl writes 1; RolloutConfig declares a float
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
        ("actor_rollout_ref.actor.ppo_mini_batch_size=2.5", "expects an integer"),  # declared an int
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


@pytest.mark.parametrize(
    ("overrides", "disabled"),
    [([], "0"), (["ray_kwargs.ray_init.runtime_env.env_vars.VLLM_DISABLE_COMPILE_CACHE='1'"], "1")],
)
def test_vllm_s_compile_cache_is_on_unless_a_launch_turns_it_off(overrides, disabled, monkeypatch):
    monkeypatch.delenv("VLLM_DISABLE_COMPILE_CACHE", raising=False)  # verl leaves out what the shell sets
    config = launcher.compose(Path(SEAL), overrides)
    verl_env = get_ppo_ray_runtime_env(config)
    assert verl_env["env_vars"]["VLLM_DISABLE_COMPILE_CACHE"] == "1"  # verl's own default: off
    ray_env = OmegaConf.merge(verl_env, config.ray_kwargs.ray_init.runtime_env)
    assert ray_env["env_vars"]["VLLM_DISABLE_COMPILE_CACHE"] == disabled


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


def test_val_files_may_hold_whole_splits_for_a_validation_only_pass(tmp_path):
    files = {name: tmp_path / f"{name}.parquet" for name in ("train", "val", "test")}
    for name, path in files.items():
        path.write_bytes(parquet_bytes(name))
    assert len(check_data({"val": [files["train"], files["val"]]})) == 2
    with pytest.raises(PreflightError, match="do not match the 100-task val split"):
        check_data({"val": [files["val"], files["val"]]})  # a split twice is not whole splits
    with pytest.raises(PreflightError, match="do not match the 400-task train split"):
        check_data({"train": [files["train"], files["val"]]})  # training reads its own split only


# -- the service lifecycle ------------------------------------------------------------------------
def launch_stand_in(mode: str, tmp_path: Path, *args: str) -> tuple[int, Path]:
    """launcher.main in `tmp_path` with the stand-in trainer: its exit status and the stand-in's report."""
    report = tmp_path / f"{mode}.json"
    return launcher.main(["--conf", SEAL, "--with-bfcl", *args], stand_in_entry(mode, report)), report


def assert_gone(pids: list[int]) -> None:
    for pid in pids:
        assert not psutil.pid_exists(pid), f"service process {pid} left behind"


def test_a_normal_exit_trains_tests_records_and_stops_the_service(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    status, report_path = launch_stand_in("return", tmp_path, "--test", "--", "trainer.total_epochs=2")
    assert status == 0
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
    capsys.readouterr()

    status, again_report = launch_stand_in("return", tmp_path, "--test", "--", "trainer.total_epochs=2")
    assert status == 0
    assert "training skipped" in capsys.readouterr().out
    assert json.loads(again_report.read_text())["train_calls"] == 0


def test_a_run_that_ended_early_trains_again_under_test_and_loses_the_mark(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert launch_stand_in("return", tmp_path, "--test")[0] == 0
    run = tmp_path / "experiments" / "SEAL"
    (run / ENDED_EARLY).write_text(json.dumps({"last_step": 7, "planned_steps": 16}) + "\n")
    status, report = launch_stand_in("return", tmp_path, "--test")
    assert status == 0 and "training skipped" not in capsys.readouterr().out
    assert json.loads(report.read_text())["train_calls"] == 1
    assert not (run / ENDED_EARLY).exists()


def test_an_error_in_the_trainer_stops_the_service_and_leaves_the_launcher_with_it(monkeypatch, tmp_path):
    """The error goes on out of main: `python launcher.py` ends with its traceback and exit status 1."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RuntimeError, match="stand-in trainer failed"):
        launch_stand_in("raise", tmp_path)
    report = json.loads((tmp_path / "raise.json").read_text())
    assert report["healthy"]
    assert_gone(report["service_pids"])


def test_a_run_stopped_by_its_environment_service_ends_in_one_line_without_a_traceback(
    capsys, monkeypatch, tmp_path
):
    monkeypatch.chdir(tmp_path)
    status, report_path = launch_stand_in("env_failure", tmp_path)
    assert status == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == f"launcher: {ENV_FAILURE}"
    assert "Traceback" not in err
    assert_gone(json.loads(report_path.read_text())["service_pids"])


@pytest.fixture
def ctrl_c_interrupts():
    """SIGINT raises KeyboardInterrupt, as in a terminal (a shell starts background jobs ignoring it)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("mode", ["sigint", "sigterm"])
def test_a_signal_during_training_stops_the_service(mode, ctrl_c_interrupts, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    status, report_path = launch_stand_in(mode, tmp_path)
    assert status == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "Traceback" not in err
    report = json.loads(report_path.read_text())
    assert report["healthy"]
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
    """This machine without the flash-attn package, whatever it has: importing it fails."""
    monkeypatch.setitem(sys.modules, "flash_attn", None)


@pytest.fixture
def four_gpus(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)


def test_a_gpu_node_without_flash_attn_is_refused_in_one_line_when_the_config_asks_for_it(
    no_flash_attn, four_gpus, capsys, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    assert launcher.main(["--conf", SEAL, "--", "seal.attention=flash_attention_2"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("launcher: seal.attention=flash_attention_2 but flash-attn does not import")
    assert "seal.attention=auto" in line
    assert list(tmp_path.iterdir()) == []


def test_without_flash_attn_the_default_trains_packed_on_torch_varlen(no_flash_attn, four_gpus):
    config = compose_experiment(SEAL)
    choice = configure_attention(config)
    assert (choice.kernel, choice.problem, launcher.gpu_problem(config)) == ("torch_varlen", None, None)
    model = config.actor_rollout_ref.model
    assert model.override_config.attn_implementation == "torch_varlen"
    assert model.use_remove_padding and model.use_fused_kernels
    assert model.external_lib == "seal.trainer.attention"


def test_a_kernel_named_beside_seal_attention_that_contradicts_it_is_a_bad_config(no_flash_attn, capsys):
    override = "+actor_rollout_ref.model.override_config.attn_implementation=flash_attention_2"
    assert launcher.main(["--conf", SEAL, "--dry-run", "--", override]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "attn_implementation=flash_attention_2 contradicts seal.attention=auto (torch_varlen)" in line


def test_without_gpus_training_exits_non_zero_with_one_line_before_ray(capsys, monkeypatch, tmp_path):
    import ray
    import torch

    def no_ray(*args: object, **kwargs: object) -> None:
        raise AssertionError("Ray was started")

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.setattr(ray, "init", no_ray)
    monkeypatch.chdir(tmp_path)
    assert launcher.main(["--conf", SEAL]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("launcher: no GPU on this machine")
    assert list(tmp_path.iterdir()) == []  # no service log, no record, no Ray session


class FakeCluster:
    """`ray.init`, `ray.nodes` and `ray.shutdown` of a running cluster with these GPUs per node (None: no
    cluster answers), recording the address asked for and whether the connection was dropped again."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, gpus: list[int] | None) -> None:
        import ray

        self.gpus, self.addresses, self.connected = gpus, [], False
        monkeypatch.setattr(ray, "init", self.init)
        monkeypatch.setattr(ray, "nodes", self.nodes)
        monkeypatch.setattr(ray, "shutdown", self.shutdown)

    def init(self, address: str, **kwargs: object) -> None:
        self.addresses.append(address)
        if self.gpus is None:
            raise ConnectionError("Could not find any running Ray instance.")
        self.connected = True

    def nodes(self) -> list[dict[str, object]]:
        alive = [{"Alive": True, "Resources": {"CPU": 16.0, **({"GPU": g} if g else {})}} for g in self.gpus]
        return [*alive, {"Alive": False, "Resources": {"CPU": 16.0, "GPU": 4.0}}]

    def shutdown(self) -> None:
        self.connected = False


@pytest.mark.parametrize(
    ("gpus", "overrides", "address", "says"),
    [
        ([0, 4, 4], [], "auto", None),  # a head without GPUs and two GPU nodes: fits
        ([4, 4, 2], [], "auto", None),
        ([4, 2], [], "auto", "the Ray cluster has 2 alive node(s) with 4, 2 GPU(s), 1 with 4 or more"),
        (
            None,
            [],
            "auto",
            "no running Ray cluster joined (Could not find any running Ray instance); start Ray on every",
        ),
        (
            None,
            ["+ray_kwargs.ray_init.address=head:6379"],
            "head:6379",
            "no running Ray cluster joined at head:6379",
        ),
    ],
)
def test_several_nodes_are_checked_against_the_gpus_ray_reports_per_node(
    gpus, overrides, address, says, monkeypatch
):
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)  # this node's own GPUs do not count
    cluster = FakeCluster(monkeypatch, gpus)
    config = compose_experiment(SEAL, ["trainer.nnodes=2", *overrides])
    problem = launcher.gpu_problem(config)
    assert cluster.addresses == [address] and not cluster.connected
    if says is None:
        assert problem is None
    else:
        assert problem.startswith("trainer.nnodes=2") and says in problem and "multi-node.md" in problem


def test_a_multi_node_launch_without_a_cluster_exits_in_one_line_before_training(
    capsys, monkeypatch, tmp_path
):
    FakeCluster(monkeypatch, None)
    monkeypatch.chdir(tmp_path)
    overrides = ["trainer.nnodes=2", "seal.rollout.env_backend=ray"]
    assert launcher.main(["--conf", SEAL, "--", *overrides]) == 1
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("launcher: trainer.nnodes=2: no running Ray cluster joined")
    assert "ray start --head --port=6379 --num-gpus=4" in line and "ray start --address=HEAD:6379" in line
    assert list(tmp_path.iterdir()) == []


# -- answers before anything slow is imported ------------------------------------------------------------
SLOW_TO_IMPORT = ("verl", "tensordict", "torch", "hydra", "seal.trainer.experiment")


def launcher_in_a_fresh_interpreter(*argv: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """launcher.main(argv) in a new interpreter, and which slow modules it had imported on return."""
    script = (
        "import json, sys, launcher\n"
        f"try:\n    code = launcher.main({list(argv)!r})\nexcept SystemExit as exit:\n    code = exit.code\n"
        f"print(json.dumps([m for m in {SLOW_TO_IMPORT!r} if m in sys.modules]))\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env(), capture_output=True, text=True, timeout=120
    )
    return done, json.loads(done.stdout.splitlines()[-1])


def test_help_is_answered_without_importing_the_trainer():
    done, imported = launcher_in_a_fresh_interpreter("--help")
    assert done.returncode == 0 and "--conf" in done.stdout and "--dry-run" in done.stdout
    assert imported == []


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--conf", "exp/SEAL_typo.yaml", "--dry-run"], "no experiment file"),
        (["--conf", "README.md"], "expected an exp/*.yaml"),
    ],
)
def test_a_missing_experiment_file_is_refused_in_one_line_without_importing_the_trainer(argv, says):
    done, imported = launcher_in_a_fresh_interpreter(*argv)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("launcher: ") and says in line
    assert imported == []


def test_a_misspelt_override_is_refused_without_importing_verl_or_torch():
    """Composition finds verl's configs on disk, and the command line's keys are checked first: the refusal
    needs neither verl nor torch (seconds to import)."""
    done, imported = launcher_in_a_fresh_interpreter("--conf", SEAL, "--dry-run", "--", "trainer.tset_freq=5")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("launcher: trainer.tset_freq=5: ") and "did you mean `trainer.test_freq`?" in line
    assert not {"verl", "torch", "tensordict"} & set(imported)


# -- seal train: the same launch under the `seal` command ---------------------------------------------------
def test_seal_train_prints_the_plan_launcher_py_prints(capsys, monkeypatch, tmp_path):
    """`seal train` and `python launcher.py` are one launch: same lines, same plan, same exit status."""
    from seal.cli import main as seal

    monkeypatch.chdir(tmp_path)
    with service_in_thread() as url:
        argv = ["--conf", SEAL, "--dry-run", "--env-url", url]
        assert launcher.main(argv) == 0
        by_launcher = capsys.readouterr()
        assert seal(["train", *argv]) == 0
        by_seal = capsys.readouterr()
    assert by_seal.out == by_launcher.out and "dry run:" in by_seal.out
    assert plan_values(by_seal.out)["environment service"] == f"{url} (already running: used as it is)"
    assert (
        seal(["train", "--conf", "exp/SEAL_typo.yaml"])
        == launcher.main(["--conf", "exp/SEAL_typo.yaml"])
        == 2
    )
    assert capsys.readouterr().err.count("launcher: no experiment file") == 2


def test_seal_train_help_is_answered_without_importing_the_trainer():
    script = (
        "import json, sys\nfrom seal.cli import main\n"
        "try:\n    main(['train', '--help'])\nexcept SystemExit as exit:\n    code = exit.code\n"
        f"print(json.dumps([m for m in {SLOW_TO_IMPORT!r} + ('fastapi',) if m in sys.modules]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env(), capture_output=True, text=True, timeout=120
    )
    assert "--conf" in done.stdout and "usage: seal train" in done.stdout
    assert json.loads(done.stdout.splitlines()[-1]) == []
