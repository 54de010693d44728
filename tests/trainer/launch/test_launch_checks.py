"""What a dry run refuses before anything starts, each in one line naming the key and what is allowed:
values that cannot train (issue 31 item 4), a run length that `total_epochs` cuts short (issue 35), bad
overrides and experiment files, and a running service whose Ω is not the experiment's start.

Launches call `launcher.main` in-process. Composition is the slow part (seconds), so `composed_once`
composes each experiment once for the module and applies a case's `key=value` overrides to a copy of it
with OmegaConf, which is what Hydra does to an existing key; the cases whose point is composition (the
command of issue 35, files, deletions) compose for real. The module runs in one working folder, where the
composed output paths point.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf, open_dict
from torch.utils.data import DataLoader

from seal.env.omega_state import omega_digest
from seal.env.process import running_service
from seal.tocf import FailureProfile
from seal.tocf.labels import ARGUMENT_MISMATCH, RESPONSE_MISMATCH, STATE_MISMATCH
from seal.trainer import experiment
from seal.trainer.launch import command as launcher
from seal.trainer.launch.checks import check_verl_batches
from seal.trainer.launch.experiment_keys import check_experiment_keys
from seal.trainer.launch.run_length import RunLength
from tests.trainer.launch.test_launcher import plan_values

ROOT = Path(__file__).resolve().parents[3]
SEAL = str(ROOT / "exp" / "SEAL.yaml")
FULL_LOOP = str(ROOT / "exp" / "SEAL_full_loop.yaml")
REAL_COMPOSE = experiment.compose_experiment
COMPOSED: dict[str, DictConfig] = {}


@pytest.fixture(scope="module", autouse=True)
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One working folder for the module: the composed configs' run folders are in it."""
    folder = tmp_path_factory.mktemp("launches")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        yield folder
    COMPOSED.clear()


@pytest.fixture
def composed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """`compose_experiment` composing each experiment once; overrides of existing keys set on a copy."""

    def compose(conf: Path | str, overrides: tuple[str, ...] | list[str] = ()) -> DictConfig:
        key = str(Path(conf).resolve())
        if key not in COMPOSED:
            COMPOSED[key] = REAL_COMPOSE(conf)
        config = copy.deepcopy(COMPOSED[key])
        with open_dict(config):
            for override in OverridesParser.create().parse_overrides(list(overrides)):
                OmegaConf.update(config, override.key_or_group, override.value(), force_add=True)
        return config

    monkeypatch.setattr(experiment, "compose_experiment", compose)


def refusal(argv: list[str], capsys: pytest.CaptureFixture[str], status: int = 2) -> str:
    """The one line `launcher.main(argv)` refuses with (exit `status`); verl's import warnings aside, the
    launcher writes nothing else to stderr, and a config refused (status 2) meets no environment."""
    assert launcher.main(argv) == status
    captured = capsys.readouterr()
    (line,) = [
        line for line in captured.err.splitlines() if "Warning" not in line and "warnings.warn" not in line
    ]
    assert line.startswith("launcher: ") and "Traceback" not in captured.err
    assert status != 2 or "environment" not in captured.out
    return line.removeprefix("launcher: ")


# -- values that cannot train (issue 31 item 4), and the run length (issue 35) ----------------------------
REFUSED = [
    ("data.train_batch_size=-3", "data.train_batch_size=-3: allowed: an integer >= 1"),
    ("data.train_batch_size=0", "data.train_batch_size=0: allowed: an integer >= 1"),
    ("data.train_batch_size=1e23", "data.train_batch_size=1e23: data.train_batch_size expects an integer"),
    (
        f"data.train_batch_size={10**23}",
        f"data.train_batch_size={10**23}: allowed: at most the 400 train rows",
    ),
    (
        "actor_rollout_ref.actor.ppo_mini_batch_size=64",
        "actor_rollout_ref.actor.ppo_mini_batch_size=64: allowed: at most data.train_batch_size (32)",
    ),
    (
        "trainer.n_gpus_per_node=3",
        "trainer.n_gpus_per_node=3: allowed: a GPU count that, times trainer.nnodes (1), divides a step's "
        "256 trajectories",
    ),
    ("trainer.n_gpus_per_node=-4", "trainer.n_gpus_per_node=-4: allowed: an integer >= 1"),
    ("trainer.n_gpus_per_node=0", "trainer.n_gpus_per_node=0: allowed: an integer >= 1"),
    ("actor_rollout_ref.rollout.n=-1", "actor_rollout_ref.rollout.n=-1: allowed: an integer >= 1"),
    ("actor_rollout_ref.rollout.n=0", "actor_rollout_ref.rollout.n=0: allowed: an integer >= 1"),
    ("data.max_response_length=-4096", "data.max_response_length=-4096: allowed: an integer >= 1"),
    (
        "actor_rollout_ref.rollout.gpu_memory_utilization=2.0",
        "actor_rollout_ref.rollout.gpu_memory_utilization=2.0: allowed: a number > 0 and <= 1",
    ),
    ("actor_rollout_ref.actor.optim.lr=-1", "actor_rollout_ref.actor.optim.lr=-1: allowed: a number > 0"),
    ("trainer.total_epochs=-3", "trainer.total_epochs=-3: allowed: an integer >= 1"),
    ("trainer.total_epochs=0", "trainer.total_epochs=0: allowed: an integer >= 1"),
    ("trainer.total_training_steps=0", "trainer.total_training_steps=0: allowed: an integer >= 1, or null"),
    (
        "data.train_max_samples=0",
        "data.train_max_samples=0: allowed: -1 (every train row) or an integer >= 1",
    ),
    (
        "+seal.apatch.rho.X=2",
        "seal.apatch.rho.X: A-Patch weighs no label 'X' under seal.taxonomy=reference; allowed: one of pass, "
        "correct_abstention, spurious_tool_call, empty_turn_model_response, instance_mismatch",
    ),
    (
        "++seal.apatch.rho.invalid_tool_call=3",  # a label of the paper taxonomy only
        "seal.apatch.rho.invalid_tool_call: A-Patch weighs no label 'invalid_tool_call' under seal.taxonomy",
    ),
    (
        "actor_rollout_ref.model.path=/no/such/model",
        "actor_rollout_ref.model.path=/no/such/model: allowed: a model folder (holding config.json) or a "
        "Hugging Face Hub id (owner/name)",
    ),
    (
        "actor_rollout_ref.rollout.max_model_len=4096",
        "data.max_response_length=4096: allowed: less than actor_rollout_ref.rollout.max_model_len (4096)",
    ),
    (
        "data.train_max_samples=16 data.train_batch_size=8 trainer.total_epochs=1 "
        "trainer.total_training_steps=10",
        "trainer.total_epochs=1 ends the run after 2 steps (2 per epoch: 16 train rows // "
        "data.train_batch_size 8), before trainer.total_training_steps=10: allowed: "
        "trainer.total_epochs >= 5, or fewer steps",
    ),
    ("=5", "=5: an override needs a key (key=value)"),
    (
        "actor_rollout_ref.model.lora_rank=64",
        "actor_rollout_ref.model.lora_rank with actor_rollout_ref.actor.fsdp_config.strategy=fsdp: "
        "under FSDP1 verl hands vLLM no adapter tensor",
    ),
    (
        "data.max_response_length=1152 actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8192",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8192: allowed: at least a whole trajectory, "
        "data.max_prompt_length (8192) + data.max_response_length (1152) = 9344 tokens",
    ),
    (
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=12000",
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=12000: allowed: at least a whole "
        "trajectory",
    ),
]


@pytest.mark.parametrize(("overrides", "says"), REFUSED, ids=[case[0] for case in REFUSED])
def test_the_dry_run_refuses_a_value_that_cannot_train_in_one_line(
    overrides, says, composed_once, capsys, workdir
):
    line = refusal(["--conf", SEAL, "--dry-run", "--", *overrides.split()], capsys)
    assert line.startswith(says)
    assert not (workdir / "experiments").exists() and not (workdir / "launcher_record").exists()


def test_issue_35s_command_is_refused_in_one_line_saying_the_batch_and_the_rows(capsys):
    """Composed for real: SEAL's batch of 32 is more than the 16 rows `train_max_samples` leaves."""
    overrides = ["data.train_max_samples=16", "trainer.total_epochs=1", "trainer.total_training_steps=10"]
    line = refusal(["--conf", SEAL, "--dry-run", "--", *overrides], capsys)
    assert line == (
        "data.train_batch_size=32: allowed: at most the 16 train rows (data.train_max_samples=16 of 400), "
        "or an epoch has no step"
    )


def test_a_deleted_key_that_verl_reads_is_refused_before_composition(capsys):
    line = refusal(["--conf", SEAL, "--dry-run", "--", "~trainer.test_freq"], capsys)
    assert line.startswith(
        "~trainer.test_freq: verl or SEAL reads trainer.test_freq, which cannot be deleted"
    )


def test_test_needs_checkpoints_with_val_results(composed_once, capsys):
    argv = ["--conf", SEAL, "--dry-run", "--test", "--"]
    line = refusal([*argv, "trainer.save_freq=7", "trainer.test_freq=5"], capsys)
    assert line.startswith("trainer.save_freq=7: with --test, allowed: a multiple of trainer.test_freq (5)")
    assert refusal([*argv, "trainer.test_freq=-1"], capsys).startswith("trainer.test_freq=-1: --test selects")


@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        ({"actor_rollout_ref.actor.ppo_mini_batch_size": 64}, r"train_batch_size \(32\) must be >= .*\(64\)"),
        ({"trainer.n_gpus_per_node": 3}, r"real_train_batch_size \(256\) must be divisible by .* \(3\)"),
    ],
)
def test_verl_s_batch_checks_run_whatever_the_micro_batching(
    overrides, says, packed, composed_once, monkeypatch
):
    """SEAL's own checks refuse these first; without them, verl's still do, packed or not."""
    monkeypatch.setattr("seal.trainer.launch.rules.check_launch_config", lambda *args: None)
    config = experiment.compose_experiment(SEAL)
    for key, value in {**overrides, "actor_rollout_ref.actor.use_dynamic_bsz": packed}.items():
        OmegaConf.update(config, key, value)
    with pytest.raises(experiment.ExperimentError, match=f"^verl rejects the config.*{says}"):
        experiment.validate_experiment(config, check_data=False)
    if packed:
        with pytest.raises((AssertionError, ValueError), match=says):
            check_verl_batches(config, use_reference_policy=True, use_critic=False)


# -- the plan's run length ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("rows", "batch", "epochs", "asked", "steps"),
    [
        (400, 32, 6, None, 72),
        (16, 8, 5, 10, 10),
        (16, 8, 6, 10, 10),
        (20, 8, 3, None, 6),
        (400, 16, 6, 40, 40),
    ],
)
def test_the_run_length_counts_as_verl_s_dataloader_and_loop(rows, batch, epochs, asked, steps):
    length = RunLength(all_rows=400, rows=rows, batch=batch, epochs=epochs, asked_steps=asked)
    assert length.steps_per_epoch == len(DataLoader(range(rows), batch_size=batch, drop_last=True))
    assert length.unused_rows == rows - length.steps_per_epoch * batch
    assert length.steps == steps


def a_checkpoint(folder: Path, step: int = 4) -> Path:
    """A run folder's checkpoints as verl's tracker file names them (what `resume_mode=auto` finds)."""
    (folder / f"global_step_{step}").mkdir(parents=True)
    (folder / "latest_checkpointed_iteration.txt").write_text(str(step))
    return folder


def test_the_dry_run_plans_the_steps_the_run_will_do(composed_once, capsys, workdir):
    ray = ["seal.rollout.env_backend=ray"]
    assert launcher.main(["--conf", SEAL, "--dry-run", "--", *ray]) == 0
    plan = plan_values(capsys.readouterr().out)
    assert plan["epochs"] == "6 (12 steps per epoch of 400 train rows, 16 unused each epoch; 72 steps)"
    assert plan["Ω at the first step"] == "v0 of preset reference (a fresh environment)"
    small = ["data.train_max_samples=16", "data.train_batch_size=8", "trainer.total_training_steps=10"]
    assert launcher.main(["--conf", SEAL, "--dry-run", "--", *ray, *small, "trainer.total_epochs=5"]) == 0
    assert plan_values(capsys.readouterr().out)["epochs"] == (
        "5 (2 steps per epoch of 16 train rows (data.train_max_samples of 400); 10 steps: "
        "trainer.total_training_steps)"
    )
    resumed = f"trainer.default_local_dir={a_checkpoint(workdir / 'ray_run' / 'checkpoints')}"
    assert launcher.main(["--conf", SEAL, "--dry-run", "--", *ray, resumed]) == 0
    start = plan_values(capsys.readouterr().out)["Ω at the first step"]
    assert start == "the checkpoint's (global_step_4), sent to the environment on resume"


def test_the_plan_says_what_trains_and_how_loras_base_reaches_vllm(composed_once):
    """verl's default `load_format: dummy` makes LoRA's first sync gather the whole model on the host (the
    H200 run Ray killed); the plan says so and names the setting that avoids it."""
    full = dict(plan_weights(SEAL, []))
    assert full["trained weights"] == "all (full fine-tuning)"
    lora = ["actor_rollout_ref.model.lora_rank=64", "actor_rollout_ref.model.lora_alpha=128"]
    dummy = plan_weights(SEAL, lora)[0][1]
    assert dummy.startswith("LoRA rank 64, alpha 128; vLLM starts without the base (load_format dummy)")
    assert "load_format=safetensors" in dummy
    read = plan_weights(SEAL, [*lora, "actor_rollout_ref.rollout.load_format=safetensors"])[0][1]
    assert read == "LoRA rank 64, alpha 128; vLLM reads the base (safetensors); only the adapters are synced"


FSDP2_LORA = [
    "actor_rollout_ref.model.lora_rank=64",
    "actor_rollout_ref.actor.strategy=fsdp2",
    "actor_rollout_ref.actor.fsdp_config.strategy=fsdp2",
    "actor_rollout_ref.ref.fsdp_config.strategy=fsdp2",
]


def test_a_lora_dry_run_passes_where_vllm_is_not_installed(composed_once, capsys, monkeypatch):
    """verl's LoRA-rank check imports its vLLM rollout, which fails without vLLM ("vllm version None not
    supported") for any LoRA config: where vLLM is missing it runs on a copy without the adapter."""
    from seal.trainer.launch import vllm_absent

    monkeypatch.setattr(vllm_absent, "vllm_installed", lambda: False)
    assert launcher.main(["--conf", SEAL, "--dry-run", "--", *FSDP2_LORA]) == 0
    assert plan_values(capsys.readouterr().out)["trained weights"].startswith("LoRA rank 64")
    config = experiment.compose_experiment(SEAL, FSDP2_LORA)
    assert vllm_absent.for_verl_checks(config).actor_rollout_ref.model.lora_rank == 0
    assert config.actor_rollout_ref.model.lora_rank == 64  # the launch's own config keeps its adapter
    monkeypatch.setattr(vllm_absent, "vllm_installed", lambda: True)
    assert vllm_absent.for_verl_checks(config) is config  # verl checks the rank against vLLM itself


def plan_weights(conf: str, overrides: list[str]) -> list[tuple[str, str]]:
    from seal.trainer.launch.plan import trained_weights_row

    what, value, keys = trained_weights_row(experiment.compose_experiment(conf, overrides))
    assert keys.startswith("actor_rollout_ref.model.lora_rank")
    return [(what, value)]


# -- files ------------------------------------------------------------------------------------------------
def test_a_base_config_is_refused_as_an_experiment(capsys):
    line = refusal(["--conf", str(ROOT / "seal" / "config" / "seal_trainer.yaml"), "--dry-run"], capsys)
    assert "seal_trainer.yaml is a base config that experiments compose, not an experiment" in line


def test_malformed_yaml_is_refused_in_one_line_naming_the_file(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("defaults:\n  - seal_trainer\ntrainer:\n  experiment_name: [oops\n")
    line = refusal(["--conf", str(bad), "--dry-run"], capsys)
    assert line.startswith("bad.yaml: while parsing a flow sequence") and "line 4" in line


def test_a_misspelt_key_in_an_experiment_file_is_refused_as_on_the_command_line(tmp_path, capsys):
    (tmp_path / "SEAL.yaml").write_text((ROOT / "exp" / "SEAL.yaml").read_text())
    misspelt = tmp_path / "misspelt.yaml"
    misspelt.write_text("defaults:\n  - SEAL\n  - _self_\n\ntrainer:\n  tset_freq: 5\n")
    line = refusal(["--conf", str(misspelt), "--dry-run"], capsys)
    assert line == (
        "misspelt.yaml: trainer.tset_freq: nothing reads trainer.tset_freq (not a setting of verl's "
        "config or the experiment); did you mean `trainer.test_freq`?"
    )
    (tmp_path / "SEAL.yaml").write_text("defaults:\n  - seal_trainer\n  - _self_\ndata:\n  shufle: false\n")
    misspelt.write_text("defaults:\n  - SEAL\n  - _self_\n")  # the key is in the file it composes
    with pytest.raises(ValueError, match=r"^SEAL\.yaml: data\.shufle: .*did you mean `data\.shuffle`\?$"):
        check_experiment_keys(misspelt)


def test_a_top_level_variable_is_read_by_the_interpolations_that_name_it(tmp_path):
    (tmp_path / "SEAL.yaml").write_text((ROOT / "exp" / "SEAL.yaml").read_text())
    seeded = tmp_path / "seeded.yaml"
    seeded.write_text("defaults:\n  - SEAL\n  - _self_\nseed: 3\ndata:\n  seed: ${seed}\n")
    check_experiment_keys(seeded)
    seeded.write_text("defaults:\n  - SEAL\n  - _self_\nseed: 3\n")  # nothing interpolates it
    with pytest.raises(ValueError, match=r"^seeded\.yaml: seed: nothing reads seed"):
        check_experiment_keys(seeded)


@pytest.mark.parametrize("conf", sorted((ROOT / "exp").glob("*.yaml")), ids=lambda path: path.stem)
def test_every_shipped_experiment_sets_only_keys_something_reads(conf):
    check_experiment_keys(conf)


# -- a running service's Ω --------------------------------------------------------------------------------
def evolve_three_times(url: str) -> dict:
    """Ω v3 with three guidelines, as a service that served another run holds it."""
    profile = FailureProfile()
    for label in (STATE_MISMATCH, RESPONSE_MISMATCH, ARGUMENT_MISMATCH):
        for _ in range(10):
            profile.observe([label], 0.0, "multi_turn_base")
    for _ in range(3):
        served = httpx.put(f"{url}/interface/profile", json={"profile": profile.to_json()}).json()
    return served


def test_a_running_service_holding_another_omega_is_refused_unless_adopted_or_resumed(
    composed_once, capsys, workdir
):
    flags = ["--taxonomy", "paper", "--interface-preset", "full", "--log-level", "warning"]
    with running_service(flags) as service:
        held = evolve_three_times(service.url)
        assert held["version"] == 3 and len(held["guidelines"]) == 3
        argv = ["--conf", FULL_LOOP, "--dry-run", "--env-url", service.url]
        line = refusal(argv, capsys, status=1)
        assert (
            f"the environment service at {service.url} holds Ω v3, guidelines [State-aware, Format, Schema]"
            in line
        )
        assert "not the experiment's start (v0 of preset full)" in line and "--adopt-omega" in line

        assert launcher.main([*argv, "--adopt-omega"]) == 0
        start = plan_values(capsys.readouterr().out)["Ω at the first step"]
        assert start.startswith("the running service's Ω v3, guidelines [State-aware, Format, Schema]")
        assert start.endswith("adopted (--adopt-omega) instead of v0 of preset full")

        checkpoints = a_checkpoint(workdir / "resumed" / "checkpoints")
        assert launcher.main([*argv, "--", f"trainer.default_local_dir={checkpoints}"]) == 0
        start = plan_values(capsys.readouterr().out)["Ω at the first step"]
        assert start.startswith("the checkpoint's (global_step_4), sent to the environment on resume; ")
        assert start.endswith(
            "the service holds Ω v3, guidelines [State-aware, Format, Schema], digest " + omega_digest(held)
        )
        assert json.loads(httpx.get(f"{service.url}/interface").text) == held  # a dry run changes nothing
