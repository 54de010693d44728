"""Credentials in an environment service URL (`http://user:pw@host`) reach no output of a launch: not the
plan, not a refusal, not the launch record; the trainer itself still gets the URL it needs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seal.trainer.launch import command as launcher
from seal.urls import masked_text, masked_values
from tests.support.launcher_stand_in import stand_in_entry
from tests.support.service_thread import service_in_thread

ROOT = Path(__file__).resolve().parents[3]
SEAL = str(ROOT / "exp" / "SEAL.yaml")
SECRET = "pw-SENTINEL-5c7e"


def keyed(url: str) -> str:
    return url.replace("http://", f"http://user:{SECRET}@")


def written_text(folder: Path) -> str:
    return "".join(path.read_text(encoding="utf-8") for path in folder.rglob("*") if path.is_file())


def test_urls_in_text_and_in_nested_values_are_masked():
    line = f"--env-url {keyed('http://h:1/')} seal.rollout.env_url={keyed('http://h:2')} x=http://h/?token=t1"
    assert (
        masked_text(line)
        == "--env-url http://***@h:1/ seal.rollout.env_url=http://***@h:2 x=http://h/?token=***"
    )
    value = {"a": [keyed("http://h:3"), 3, None], "b": "plain text, no URL"}
    assert masked_values(value) == {"a": ["http://***@h:3", 3, None], "b": "plain text, no URL"}


def test_a_dry_run_that_starts_its_own_service_never_prints_the_password(
    capsys, monkeypatch, tmp_path, refused_port
):
    monkeypatch.chdir(tmp_path)
    silent = keyed(f"http://127.0.0.1:{refused_port}/")
    assert launcher.main(["--conf", SEAL, "--dry-run", "--env-url", silent]) == 0
    printed = capsys.readouterr()
    assert SECRET not in printed.out + printed.err
    assert f"no service answers at {silent.replace(f'user:{SECRET}', '***')}: starting one" in printed.out
    assert list(tmp_path.iterdir()) == []


def test_a_credentialed_running_service_is_used_and_shown_and_recorded_masked(capsys, monkeypatch, tmp_path):
    launch_dir = tmp_path / "launch"
    launch_dir.mkdir()
    monkeypatch.chdir(launch_dir)
    report = tmp_path / "stand_in.json"  # the stand-in's own report, outside what the launch writes
    with service_in_thread() as served:
        url = keyed(served)
        assert launcher.main(["--conf", SEAL, "--dry-run", "--env-url", url]) == 0
        dry = capsys.readouterr()
        status = launcher.main(
            ["--conf", SEAL, "--env-url", url, "--", f"seal.rollout.env_url={url}"],
            stand_in_entry("return", report),
        )
        run = capsys.readouterr()
    assert status == 0
    seen = json.loads(report.read_text())
    assert seen["url"] == url and seen["healthy"]  # the trainer gets the URL with its credentials
    masked = served.replace("http://", "http://***@")
    assert f"{masked} (already running: used as it is)" in dry.out
    assert SECRET not in dry.out + dry.err + run.out + run.err
    (record,) = (launch_dir / "launcher_record" / "SEAL").iterdir()
    assert SECRET not in written_text(launch_dir)
    assert json.loads((record / "record.json").read_text())["environment_service"]["url"] == masked
    assert f"env_url: {masked}" in (record / "config.yaml").read_text()


def test_a_refusal_naming_a_credentialed_service_masks_it(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    with service_in_thread() as served:  # the reference interface
        conf = str(ROOT / "exp" / "SEAL_full_loop.yaml")
        assert launcher.main(["--conf", conf, "--dry-run", "--env-url", keyed(served)]) == 1
    err = capsys.readouterr().err
    assert "environment service at http://***@127.0.0.1:" in err and SECRET not in err
    assert len(err.strip().splitlines()) == 1


class TrackerStarted(Exception):
    """Raised by the stand-in tracker once it has the config verl gives it: the rest of fit needs GPUs."""


def test_the_trackers_verl_starts_never_receive_the_password(monkeypatch):
    from verl.trainer.ppo.v1 import trainer_base

    from seal.trainer.experiment import PROJECT_ROOT, compose_experiment
    from seal.trainer.rl.trainer import SealPPOTrainer
    from seal.trainer.settings import settings_from_config

    url = "http://seal:secret@127.0.0.1:8082"
    config = compose_experiment(PROJECT_ROOT / "exp" / "SEAL.yaml", [f"seal.rollout.env_url={url}"])
    trainer = object.__new__(SealPPOTrainer)
    trainer.config = config
    trainer.seal_settings = settings_from_config(config)
    given = []

    def tracker(**kwargs):
        given.append(kwargs["config"])
        raise TrackerStarted

    monkeypatch.setattr(trainer_base, "Tracking", tracker)
    with pytest.raises(TrackerStarted):
        trainer.fit(agent_loop_manager=None)
    assert given and "secret" not in json.dumps(given[0])
    assert given[0]["seal"]["rollout"]["env_url"] == "http://***@127.0.0.1:8082"
    assert trainer.seal_settings.rollout.env().url == url  # Evolve and resume still reach the service
