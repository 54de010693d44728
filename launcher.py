"""Launch a SEAL experiment: compose and check its config, bring up the environment service, train, test.

    python launcher.py --conf exp/SEAL.yaml             # train (GPUs); starts the environment service
    python launcher.py --conf exp/SEAL.yaml --dry-run   # everything up to the first GPU allocation (CPU)
    python launcher.py --conf exp/SEAL.yaml --test      # train, then test the best-val and last checkpoints
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
import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from seal.trainer.attention_setting import AttentionChoice
    from seal.trainer.settings import SealSettings

# Everything else is imported where it is used: verl, tensordict and the trainer take seconds to load,
# and `--help` or a mistyped path should be answered at once.

T = TypeVar("T")
BASE_CONFIG_DIR = Path(__file__).resolve().parent / "seal" / "config"
SERVICE_LOG = "env_service.log"
TRAINED_MARK = "trained.json"
"""Written into the run folder when training returned normally: `--test` on a finished run skips training."""


class LaunchError(Exception):
    """A launch that cannot go on: a one-line reason and the exit status."""

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
    from seal.trainer.test_protocol import evaluate_test

    return Entry(train=train, evaluate_test=evaluate_test)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="launcher.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
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
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, entry: Entry | None = None) -> int:
    args = parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        check_conf(args.conf)
        return launch(args, entry or verl_entry(), list(sys.argv if argv is None else argv))
    except LaunchError as exc:
        print(f"launcher: {exc}", file=sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        print("launcher: interrupted; the environment service (if started) is stopped", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


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
    from seal.trainer.launch_checks import check_test_protocol
    from seal.trainer.plan import format_plan, plan_rows
    from seal.trainer.preflight import PreflightError, check_data, data_files
    from seal.trainer.run_record import RECORD_ROOT, launch_stamp, write_record
    from seal.trainer.service_omega import omega_start
    from seal.trainer.sft_settings import is_sft
    from seal.trainer.val_test import TEST_FILE

    config = compose(args.conf, args.overrides)
    if is_sft(config):
        return launch_sft(args, config, entry, argv)
    attention = attention_of(config)
    if entry.needs_gpus and not args.dry_run:
        problem = gpu_problem(config) or attention.problem
        if problem is not None:
            raise LaunchError(problem)
    settings = validate(config)
    if args.test:
        checked(check_test_protocol, config)
    if settings.rollout.env_backend == "ray" and (args.with_bfcl or args.env_url):
        raise LaunchError(
            "--with-bfcl and --env-url name an HTTP service; seal.rollout.env_backend=ray uses none", 2
        )
    run_dir = Path(config.trainer.default_local_dir).parent
    try:
        for data in check_data(data_files(config, TEST_FILE if args.test else None)):
            print(f"data  {data.split:5s} {data.path}{'  (built)' if data.built else ''}")
    except PreflightError as exc:
        raise LaunchError(str(exc)) from exc
    stamp = launch_stamp()
    log = None if args.dry_run else run_dir / SERVICE_LOG
    url = args.env_url or settings.rollout.env_url
    with environment(args.with_bfcl, url, settings, config, log) as service:
        settings = preflight(config, service)
        start = checked(omega_start, config, settings, service, args.adopt_omega, status=1)
        print(format_plan(plan_rows(config, settings, service_row(service, url, args), start)))
        if args.dry_run:
            print("\ndry run: config, data and environment are ready; nothing was started on a GPU")
            return 0
        log_metrics_to(config, run_dir / "metrics" / f"{stamp}.jsonl")
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
            train(entry, config)
            mark_finished(run_dir, config)
        if args.test:
            print(json.dumps(entry.evaluate_test(config)["test"], indent=2))
    return 0


def train(entry: Entry, config: DictConfig) -> None:
    """Run the entry's training; a run stopped by its environment service ends in that one line."""
    from seal.trainer.env_failures import env_service_failure_in

    try:
        entry.train(config)
    except Exception as exc:
        failure = env_service_failure_in(exc)
        if failure is None:
            raise
        raise LaunchError(str(failure)) from exc


def service_row(service: dict[str, Any], asked: str, args: argparse.Namespace) -> str:
    """The plan's environment row: the service the run uses, and whether it outlives this command."""
    if service.get("backend") == "ray":
        return "none (seal.rollout.env_backend=ray: environment actors instead)"
    if not service["started_by_launcher"]:
        return f"{service['url']} (already running: used as it is)"
    why = "--with-bfcl" if args.with_bfcl else f"none answers at {asked}"
    if args.dry_run:
        return f"one the launch starts ({why}); the one this dry run checked is stopped"
    return f"{service['url']}, started for this launch ({why}), pid {service['pid']}; stopped with it"


def launch_sft(args: argparse.Namespace, config: DictConfig, entry: Entry, argv: list[str]) -> int:
    """Check, preflight and plan an SFT experiment; unless a dry run: build its rows, record, train, and
    print the model folder that `actor_rollout_ref.model.path` takes."""
    from seal.trainer.experiment import ExperimentError
    from seal.trainer.plan import format_plan
    from seal.trainer.run_record import RECORD_ROOT, launch_stamp, write_record
    from seal.trainer.sft import (
        ensure_sft_data,
        preflight_sft,
        sft_model_path,
        sft_plan_rows,
        train_sft,
        validate_sft,
    )
    from seal.trainer.sft_data import SFTDataError

    if args.test or args.with_bfcl or args.env_url or args.adopt_omega:
        raise LaunchError(
            "an SFT experiment takes no --test, --with-bfcl, --env-url or --adopt-omega", status=2
        )
    if entry.needs_gpus and not args.dry_run:
        problem = gpu_problem(config)
        if problem is not None:
            raise LaunchError(problem)
    try:
        settings = validate_sft(config)
    except ExperimentError as exc:
        raise LaunchError(str(exc), status=2) from exc
    try:
        for row in preflight_sft(config, settings):
            print(
                f"episode  {row.task_id}: {row.tokens} tokens, {row.trained} trained, reward {row.reward:g}"
            )
        print(format_plan(sft_plan_rows(config, settings)))
        if args.dry_run:
            print("\ndry run: config and rows are ready; nothing was written or started on a GPU")
            return 0
        built = ensure_sft_data(config, settings)
    except SFTDataError as exc:
        raise LaunchError(str(exc)) from exc
    print(f"data  train {config.data.train_files}{'  (built)' if built else ''}")
    run_dir = Path(config.trainer.default_local_dir).parent
    stamp = launch_stamp()
    metrics = run_dir / "metrics" / f"{stamp}.jsonl" if "file" in config.trainer.logger else None
    if metrics is not None:
        metrics.parent.mkdir(parents=True, exist_ok=True)
    record = write_record(
        RECORD_ROOT / str(config.trainer.experiment_name) / stamp, config, args.conf, args.overrides, argv, {}
    )
    print(f"\nlaunch recorded in {record}")
    try:
        (entry.train_sft or train_sft)(config, record / "config.yaml", metrics)
        model = sft_model_path(config)
    except (RuntimeError, FileNotFoundError) as exc:
        raise LaunchError(str(exc)) from exc
    mark_finished(run_dir, config)
    print(f"SFT model: {model}\n(for RL: -- actor_rollout_ref.model.path={model})")
    return 0


def preflight(config: DictConfig, service: dict[str, Any]) -> SealSettings:
    """Point the run at its service and check that service with the run's settings. With the `ray` backend
    no actor exists yet: the episodes run on an in-process store built as each actor's is (the trainer
    plays them again through every node's actors once it has placed them)."""
    from seal.env.client import InProcessEnvClient
    from seal.env.store import EpisodeStore
    from seal.trainer.env_actors import store_settings
    from seal.trainer.preflight import PreflightError, check_environment, check_service, preflight_tasks
    from seal.trainer.settings import settings_from_config

    ray_backend = service.get("backend") == "ray"
    if not ray_backend:
        use_service(config, service["url"])
    settings = settings_from_config(config)
    try:
        if ray_backend:
            store = EpisodeStore(store_settings(settings, config))
            where = "an in-process store as each environment actor holds"
            check = check_environment(InProcessEnvClient(store), where, settings, preflight_tasks())
        else:
            check = check_service(service["url"], settings, preflight_tasks())
        report = asyncio.run(check)
    except PreflightError as exc:
        raise LaunchError(str(exc)) from exc
    through = "an in-process store" if ray_backend else "the service"
    print(f"preflight: ground-truth episodes through {through}, then A-Patch and Evolve on a synthetic batch")
    for episode in report.episodes:
        print(f"episode  {episode.task_id} ({episode.mode}): reward {episode.reward:g}, {episode.labels}")
    print(f"A-Patch  {report.apatch}\nEvolve   {report.evolve}\n")
    return settings


def compose(conf: Path, overrides: Sequence[str]) -> DictConfig:
    """The experiment with its overrides, each override's type checked against the value it replaces
    and its key against the keys something reads."""
    from seal.trainer.experiment import ExperimentError, compose_experiment
    from seal.trainer.experiment_keys import ExperimentKeyError, check_experiment_keys
    from seal.trainer.override_keys import OverrideKeyError, check_override_keys
    from seal.trainer.override_types import OverrideTypeError, check_override_types

    try:
        defaults = compose_experiment(conf)
        check_experiment_keys(conf)
        if not overrides:
            return defaults
        check_override_types(defaults, overrides)
        check_override_keys(defaults, overrides)
        return compose_experiment(conf, overrides)
    except (ExperimentError, ExperimentKeyError, OverrideTypeError, OverrideKeyError) as exc:
        raise LaunchError(str(exc), status=2) from exc


def validate(config: DictConfig) -> SealSettings:
    """verl's and SEAL's checks of the config and its model path (the data files are checked, and built,
    separately)."""
    from seal.trainer.experiment import ExperimentError, validate_experiment
    from seal.trainer.launch_checks import check_model_path

    try:
        settings = validate_experiment(config, check_data=False)
    except ExperimentError as exc:
        raise LaunchError(str(exc), status=2) from exc
    checked(check_model_path, config)
    return settings


def checked(check: Callable[..., T], *args: Any, status: int = 2) -> T:
    """`check(*args)`, its LaunchCheckError (seal/trainer/launch_checks.py) a LaunchError."""
    from seal.trainer.launch_checks import LaunchCheckError

    try:
        return check(*args)
    except LaunchCheckError as exc:
        raise LaunchError(str(exc), status) from exc


def attention_of(config: DictConfig) -> AttentionChoice:
    """Resolve `seal.attention` on this machine into the model's verl keys, before Ray starts (a kernel the
    workers could not load would fail there, minutes into the launch)."""
    from seal.trainer.attention_setting import AttentionError, configure_attention

    try:
        return configure_attention(config)
    except AttentionError as exc:
        raise LaunchError(str(exc), status=2) from exc


def gpu_problem(config: DictConfig) -> str | None:
    """Why this machine cannot train the config (checked before Ray starts), or None."""
    import torch

    wanted, found = config.trainer.n_gpus_per_node, torch.cuda.device_count()
    if found == 0:
        return (
            f"no GPU on this machine: training needs {wanted} per node (trainer.n_gpus_per_node); "
            "--dry-run checks a config without one"
        )
    if config.trainer.nnodes == 1 and found < wanted:
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


def use_service(config: DictConfig, url: str) -> None:
    """Point the agent loops and the trainer's Evolve (both read `seal.rollout.env_url`) at the service."""
    config.seal.rollout.env_url = url


def service_flags(settings: SealSettings, config: DictConfig) -> list[str]:
    """The service options that must agree with the config: taxonomy, priority, interface, capacity."""
    flags = ["--taxonomy", settings.taxonomy, "--interface-preset", settings.interface.preset]
    if settings.taxonomy == "paper":
        flags += ["--priority", ",".join(settings.priority)]
    from seal.trainer.env_actors import episode_capacity

    return [*flags, "--max-episodes", str(episode_capacity(config)), "--log-level", "warning"]


@contextlib.contextmanager
def environment(
    fresh: bool, url: str, settings: SealSettings, config: DictConfig, log: Path | None
) -> Iterator[dict[str, Any]]:
    """The service the run uses: `url` when it answers and no fresh one is asked for, else a child
    process that lives exactly as long as this block."""
    from env_service.process import ServiceStartError, is_healthy, running_service

    if settings.rollout.env_backend == "ray":
        print("environment  Ray actors on every node, placed when training starts: no service to start")
        yield {"backend": "ray", "started_by_launcher": False}
        return
    if not fresh and is_healthy(url):
        print(f"environment  using the running service at {url}")
        yield {"url": url, "started_by_launcher": False}
        return
    if not fresh:
        print(f"environment  no service answers at {url}: starting one")
    flags = service_flags(settings, config)
    try:
        with running_service(flags, log_path=log) as service:
            where = f", log {log}" if log else ""
            print(f"environment  started pid {service.pid} at {service.url}{where}")
            yield {"url": service.url, "started_by_launcher": True, "pid": service.pid, "flags": flags}
    except ServiceStartError as exc:
        raise LaunchError(str(exc)) from exc


def _training_length(config: DictConfig) -> dict[str, Any]:
    trainer = config.trainer
    return {"total_epochs": trainer.total_epochs, "total_training_steps": trainer.total_training_steps}


def finished(run_dir: Path, config: DictConfig) -> bool:
    """Whether training of this length already returned normally in `run_dir`."""
    mark = run_dir / TRAINED_MARK
    return mark.is_file() and json.loads(mark.read_text())["length"] == _training_length(config)


def mark_finished(run_dir: Path, config: DictConfig) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / TRAINED_MARK).write_text(json.dumps({"length": _training_length(config)}) + "\n")


if __name__ == "__main__":
    sys.exit(main())
