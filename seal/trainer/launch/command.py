"""Launch a SEAL experiment: compose and check its config, bring up the environment service, train, test.

    python launcher.py --conf exp/SEAL.yaml             # train (GPUs); starts the environment service
    python launcher.py --conf exp/SEAL.yaml --dry-run   # everything up to the first GPU allocation (CPU)
    python launcher.py --conf exp/SEAL.yaml --test      # train, then test the best-val and last checkpoints
    python launcher.py --conf exp/SEAL.yaml -- seal.test_after=true  # train; test the last step in the launch
    python launcher.py --conf exp/SEAL.yaml -- actor_rollout_ref.model.path=/models/Qwen2.5-3B-Instruct
    python launcher.py --conf exp/sft_warmstart.yaml -- model.path=/models/SmolLM2-135M-Instruct   # SFT

A value that cannot train (a batch larger than the train rows, `trainer.total_epochs` that would end the
run before `trainer.total_training_steps`, ...) is refused in one line naming the key and what is allowed.

The service: `--env-url URL` (or `seal.rollout.env_url`) is used when it answers `/healthz`; otherwise, or
with `--with-bfcl`, the launcher starts one with the config's taxonomy and interface, logs it to the run
folder and stops it on every way out. With `seal.rollout.env_backend=ray` no service is started: the trainer
places environment actors on every node of the Ray cluster (`seal.rollout.env_actors_per_node` each).
Each launch is recorded in `launcher_record/<experiment>/<UTC time>/`.
An SFT experiment (composed from seal_sft) needs no service: its rows are built in-process when missing, then
verl's SFT trainer runs under torchrun on the recorded config and the model folder it saved is printed.
Exit status: 0 done, 1 a check or the run failed, 2 a bad command line or config, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from seal.trainer.rl.finish_by import ENDED_EARLY

if TYPE_CHECKING:
    from omegaconf import DictConfig

# Everything else is imported where it is used: verl, tensordict and the trainer take seconds to load,
# and `--help` or a mistyped path should be answered at once.

BASE_CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"
"""The packaged base configs (seal_trainer.yaml, seal_sft.yaml): experiments compose them; they are none."""
PROG = "launcher.py"
HELP = "train an experiment (exp/*.yaml): check it, bring up its environment, train, test"
SERVICE_LOG = "env_service.log"
TRAINED_MARK = "trained.json"
"""Written into the run folder when training returned normally: `--test` on a finished run skips training."""


class LaunchError(Exception):
    """A launch that cannot go on for a reason the launcher itself finds: a one-line reason and the exit
    status. The other one-line errors are the checks' own (`refusal_of`)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Entry:
    """What the launcher runs once the service is up: verl's trainer, or a stand-in in the tests."""

    train: Callable[[DictConfig], None]
    evaluate_test: Callable[[DictConfig], dict[str, Any]]
    needs_gpus: bool = True
    train_sft: Callable[[DictConfig, Path, Path | None], None] | None = None
    """An SFT experiment's trainer (config, recorded config file, metrics file); None: verl's, by torchrun."""


def verl_entry() -> Entry:
    from seal.trainer.experiment import train
    from seal.trainer.launch.holdout import evaluate_test

    return Entry(train=train, evaluate_test=evaluate_test)


def make_parser(subparsers: Any = None) -> argparse.ArgumentParser:
    """The launcher's parser: `launcher.py`'s own, or `seal train`'s when `subparsers` is `seal`'s."""
    from seal.flags import command_parser

    parser = command_parser(subparsers, "train", prog=PROG, help=HELP, description=__doc__)
    parser.add_argument("--conf", type=Path, required=True, help="experiment config, e.g. exp/SEAL.yaml")
    service = parser.add_mutually_exclusive_group()
    service.add_argument(
        "--with-bfcl", action="store_true", help="always start a fresh environment service for this run"
    )
    service.add_argument("--env-url", help="a running environment service (default: seal.rollout.env_url)")
    parser.add_argument(
        "--dry-run", action="store_true", help="compose, validate, check data and environment, print the plan"
    )
    parser.add_argument(
        "--test",
        action="store_true",
        help="after training (skipped on a finished run): test the best-val and the last checkpoint",
    )
    parser.add_argument(
        "--adopt-omega",
        action="store_true",
        help="train from the interface Ω a running environment service holds, though it is not the "
        "experiment's start (version 0 of seal.interface.preset); without it such a service is refused",
    )
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, key=value (after --)")
    parser.set_defaults(handler=run)
    return parser


def main(argv: Sequence[str] | None = None, entry: Entry | None = None) -> int:
    """`python launcher.py ...`."""
    args = make_parser().parse_args(argv)
    return run(args, entry, list(sys.argv if argv is None else argv))


def run(args: argparse.Namespace, entry: Entry | None = None, argv: list[str] | None = None) -> int:
    """Launch `args` (`launcher.py`'s or `seal train`'s): the one place a launch's errors become a line and an
    exit status. A check's or the run's one-line error exits 1 or 2 (`refusal_of`); Ctrl-C or SIGTERM 130,
    with the service stopped; any other error goes on, with its traceback."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        check_conf(args.conf)
        return launch(args, entry or verl_entry(), list(sys.argv) if argv is None else argv)
    except KeyboardInterrupt:
        print("launcher: interrupted; the environment service (if started) is stopped", file=sys.stderr)
        return 130
    except Exception as exc:
        refusal = refusal_of(exc)
        if refusal is None:
            raise
        message, status = refusal
        print(f"launcher: {message}", file=sys.stderr)
        return status
    finally:
        signal.signal(signal.SIGTERM, previous)


def refusal_of(exc: BaseException) -> tuple[str, int] | None:
    """The line and exit status of an error that ends a launch without a traceback: 2 for a bad command line
    or config, 1 for a failed check, a service that would not start, or a run its environment stopped
    (`EnvServiceFailure`, also when Ray hands it over wrapped) or Ray's memory monitor killed
    (`RayMemoryKill`); None for any other error."""
    if isinstance(exc, LaunchError):
        return str(exc), exc.status
    from seal.trainer.experiment import ExperimentError
    from seal.trainer.launch.experiment_keys import ExperimentKeyError
    from seal.trainer.launch.kernel import AttentionError
    from seal.trainer.launch.override_keys import OverrideKeyError
    from seal.trainer.launch.override_types import OverrideTypeError
    from seal.trainer.launch.rules import LaunchCheckError

    bad_config = (ExperimentError, ExperimentKeyError, LaunchCheckError, OverrideKeyError, OverrideTypeError)
    if isinstance(
        exc, (*bad_config, AttentionError)
    ):  # before the trainer's errors, which take seconds to import
        return str(exc), 2
    from seal.env.process import ServiceStartError
    from seal.trainer.launch.sft import SFTRunError
    from seal.trainer.preflight import PreflightError
    from seal.trainer.rl.env_failures import env_service_failure_in
    from seal.trainer.rl.oom_watch import RayMemoryKill
    from seal.trainer.sft.data import SFTDataError
    from seal.trainer.sft.untrained_tokens import UntrainedTokenError

    failure = env_service_failure_in(exc)
    if failure is not None:
        return str(failure), 1
    if isinstance(
        exc,
        PreflightError | ServiceStartError | SFTDataError | SFTRunError | UntrainedTokenError | RayMemoryKill,
    ):
        return str(exc), 1
    return None


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM (a scheduler cancelling the job) unwinds like Ctrl-C, so the service is stopped too."""
    raise KeyboardInterrupt


def check_conf(conf: Path) -> None:
    """The experiment file exists, checked before anything slow is imported."""
    if not conf.is_file() or conf.suffix != ".yaml":
        raise LaunchError(f"no experiment file {conf.absolute()} (expected an exp/*.yaml)", status=2)
    if conf.resolve().parent == BASE_CONFIG_DIR:
        raise LaunchError(
            f"{conf} is a base config that experiments compose, not an experiment (expected an exp/*.yaml)",
            status=2,
        )


def launch(args: argparse.Namespace, entry: Entry, argv: list[str]) -> int:
    """Compose, resolve the attention kernel and build the settings once, check the data, bring up the
    environment and preflight it, print the plan; unless a dry run: record, train, test."""
    from seal.trainer.launch.engine_notices import quiet_engine_notices, quiet_workers

    quiet_engine_notices()
    config = compose(args.conf, args.overrides)  # before the imports below: a wrong value answers at once
    from seal.trainer.experiment import validate_experiment
    from seal.trainer.launch.checks import check_model_path, check_test_protocol
    from seal.trainer.launch.environment import environment, multi_node_problem, preflight, service_row
    from seal.trainer.launch.holdout import TEST_FILE
    from seal.trainer.launch.kernel import configure_attention
    from seal.trainer.launch.liger import liger_problem
    from seal.trainer.launch.model_need import missing_model
    from seal.trainer.launch.plan import format_plan, plan_rows
    from seal.trainer.launch.record import RECORD_ROOT, launch_stamp, write_record
    from seal.trainer.launch.service_omega import omega_start
    from seal.trainer.preflight import check_data, data_files
    from seal.trainer.sft_settings import is_sft

    missing = missing_model(args.conf, config)
    if missing is not None:
        raise LaunchError(missing, status=2)
    if is_sft(config):
        return launch_sft(args, config, entry, argv)
    attention = configure_attention(config)
    rollout = config.seal.rollout
    url = args.env_url or rollout.env_url
    problem = multi_node_problem(config.trainer.nnodes, rollout.env_backend, url, args.with_bfcl)
    if problem is not None:
        raise LaunchError(problem, status=2)
    if entry.needs_gpus and not args.dry_run:
        problem = gpu_problem(config) or attention.problem or liger_problem(config)
        if problem is not None:
            raise LaunchError(problem)
    check_model_path(config)
    settings = validate_experiment(config, check_data=False)
    if args.test:
        check_test_protocol(config)
    if settings.rollout.env_backend == "ray" and (args.with_bfcl or args.env_url):
        raise LaunchError(
            "--with-bfcl and --env-url name an HTTP service; seal.rollout.env_backend=ray uses none", 2
        )
    run_dir = Path(config.trainer.default_local_dir).parent
    tests = args.test or settings.test_after or settings.test_before
    for data in check_data(data_files(config, TEST_FILE if tests else None)):
        print(f"data  {data.split:5s} {data.path}{'  (built)' if data.built else ''}")
    stamp = launch_stamp()
    log = None if args.dry_run else run_dir / SERVICE_LOG
    with environment(args.with_bfcl, url, settings, config, log) as service:
        preflight(config, settings, service)
        start = omega_start(config, settings, service, args.adopt_omega)
        print(format_plan(plan_rows(config, settings, attention, service_row(service, url, args), start)))
        if args.dry_run:
            print("\ndry run: config, data and environment are ready; nothing was started on a GPU")
            return 0
        log_metrics_to(config, run_dir / "metrics" / f"{stamp}.jsonl")
        quiet_workers(config)
        record = write_record(
            RECORD_ROOT / str(config.trainer.experiment_name) / stamp,
            config,
            args.conf,
            args.overrides,
            argv,
            service,
        )
        print(f"\nlaunch recorded in {record}")
        if args.test and finished(run_dir, config):
            print(f"{run_dir} holds a finished run: training skipped")
        else:
            (run_dir / ENDED_EARLY).unlink(missing_ok=True)  # this launch trains on to its own last step
            entry.train(config)
            mark_finished(run_dir, config)
        if args.test:
            print(json.dumps(entry.evaluate_test(config)["test"], indent=2))
        elif settings.test_after:
            print(json.dumps(tested_in_launch(run_dir)["test"], indent=2))
    return 0


def tested_in_launch(run_dir: Path) -> dict[str, Any]:
    """The test report the trainer wrote after its last step (`seal.test_after`)."""
    from seal.reports.runs import REPORT_NAME

    path = run_dir / REPORT_NAME
    if not path.is_file():
        raise LaunchError(
            f"{path} is missing: the training launch ended without its test pass (seal.test_after)"
        )
    return json.loads(path.read_text(encoding="utf-8"))


def launch_sft(args: argparse.Namespace, config: DictConfig, entry: Entry, argv: list[str]) -> int:
    """Check, preflight and plan an SFT experiment; unless a dry run: build its rows, record, train, and
    print the model folder that `actor_rollout_ref.model.path` takes."""
    from seal.trainer.launch.kernel import configure_sft_attention
    from seal.trainer.launch.plan import format_plan
    from seal.trainer.launch.record import RECORD_ROOT, launch_stamp, write_record
    from seal.trainer.launch.sft import (
        ensure_sft_data,
        preflight_sft,
        sft_model_path,
        sft_plan_rows,
        start_model,
        train_sft,
        validate_sft,
    )

    if args.test or args.with_bfcl or args.env_url or args.adopt_omega:
        raise LaunchError(
            "an SFT experiment takes no --test, --with-bfcl, --env-url or --adopt-omega", status=2
        )
    attention = configure_sft_attention(config)
    settings = validate_sft(config)
    if entry.needs_gpus and not args.dry_run:
        problem = gpu_problem(config) or attention.problem
        if problem is not None:
            raise LaunchError(problem)
    for row in preflight_sft(config, settings):
        print(f"episode  {row.task_id}: {row.tokens} tokens, {row.trained} trained, reward {row.reward:g}")
    print(format_plan(sft_plan_rows(config, settings, attention)))
    if args.dry_run:
        print("\ndry run: config and rows are ready; nothing was written or started on a GPU")
        return 0
    run_dir = Path(config.trainer.default_local_dir).parent
    if settings.untrained_tokens != "keep":
        start_model(config, run_dir, settings.untrained_tokens)
    built = ensure_sft_data(config, settings)
    print(f"data  train {config.data.train_files}{'  (built)' if built else ''}")
    stamp = launch_stamp()
    metrics = run_dir / "metrics" / f"{stamp}.jsonl" if "file" in config.trainer.logger else None
    if metrics is not None:
        metrics.parent.mkdir(parents=True, exist_ok=True)
    record = write_record(
        RECORD_ROOT / str(config.trainer.experiment_name) / stamp, config, args.conf, args.overrides, argv, {}
    )
    print(f"\nlaunch recorded in {record}")
    (entry.train_sft or train_sft)(config, record / "config.yaml", metrics)
    model = sft_model_path(config)
    mark_finished(run_dir, config)
    print(f"SFT model: {model}\n(for RL: -- actor_rollout_ref.model.path={model})")
    return 0


def compose(conf: Path, overrides: Sequence[str]) -> DictConfig:
    """The experiment with its overrides, checked cheapest first (seal/trainer/launch/rules.py): each
    override's type against the value it replaces and its key against the keys something reads, then an RL
    experiment's values, then the experiment file's keys (which may import verl's section dataclasses)."""
    from seal.trainer.experiment import check_values, compose_experiment
    from seal.trainer.launch.experiment_keys import check_experiment_keys
    from seal.trainer.launch.model_need import needs_model
    from seal.trainer.launch.override_keys import check_override_keys
    from seal.trainer.launch.override_types import check_override_types
    from seal.trainer.sft_settings import is_sft

    defaults = compose_experiment(conf)
    if overrides:  # the command line's keys first: a key under a verl dataclass imports verl, for seconds
        check_override_types(defaults, overrides)
        check_override_keys(defaults, overrides)
    config = compose_experiment(conf, overrides) if overrides else defaults
    if not is_sft(config) and not needs_model(config):
        check_values(config)
    check_experiment_keys(conf)
    return config


def gpu_problem(config: DictConfig) -> str | None:
    """Why this machine cannot train the config (checked before Ray starts), or None. Over several nodes
    this machine's own GPUs say nothing (it may have none): the running Ray cluster's nodes are checked
    (seal/trainer/launch/cluster.py)."""
    import torch

    if config.trainer.nnodes > 1:
        from seal.trainer.launch.cluster import cluster_problem

        return cluster_problem(config)
    wanted, found = config.trainer.n_gpus_per_node, torch.cuda.device_count()
    if found == 0:
        return (
            f"no GPU on this machine: training needs {wanted} per node (trainer.n_gpus_per_node); "
            "--dry-run checks a config without one"
        )
    if found < wanted:
        return f"{found} GPU(s) visible but trainer.n_gpus_per_node={wanted}"
    return None


def log_metrics_to(config: DictConfig, path: Path) -> None:
    """With verl's `file` logger, write this launch's metrics to `path` (one file per launch: the logger
    truncates its file, so a resumed run would otherwise lose the earlier steps). The variable reaches the
    trainer's Ray actor through `ray_kwargs.ray_init.runtime_env`; the logger does not create the folder."""
    from omegaconf import open_dict

    loggers = config.trainer.logger
    if "file" not in ([loggers] if isinstance(loggers, str) else loggers):
        return
    with open_dict(config):
        runtime_env = config.ray_kwargs.ray_init.runtime_env
        if runtime_env.get("env_vars") is None:
            runtime_env.env_vars = {}
        if "VERL_FILE_LOGGER_PATH" not in runtime_env.env_vars:
            runtime_env.env_vars.VERL_FILE_LOGGER_PATH = str(path.absolute())
    path.parent.mkdir(parents=True, exist_ok=True)


def _training_length(config: DictConfig) -> dict[str, Any]:
    trainer = config.trainer
    return {"total_epochs": trainer.total_epochs, "total_training_steps": trainer.total_training_steps}


def finished(run_dir: Path, config: DictConfig) -> bool:
    """Whether training of this length already returned normally in `run_dir`, every planned step run (not
    ended early by `seal.finish_by`)."""
    mark = run_dir / TRAINED_MARK
    complete = not (run_dir / ENDED_EARLY).is_file()
    return complete and mark.is_file() and json.loads(mark.read_text())["length"] == _training_length(config)


def mark_finished(run_dir: Path, config: DictConfig) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / TRAINED_MARK).write_text(json.dumps({"length": _training_length(config)}) + "\n")
