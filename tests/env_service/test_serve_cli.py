"""`seal serve` and `python -m env_service` as commands: a busy port, bad flags, the help, the log."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from seal.env.process import running_service

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = {
    "seal serve": [sys.executable, "-m", "seal.cli", "serve"],
    "python -m env_service": [sys.executable, "-m", "env_service"],
}


def command(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMANDS[name], *args], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("name", COMMANDS)
def test_a_busy_port_is_one_line_before_anything_is_served(name):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = command(name, "--port", str(port))
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert f"port {port} on 127.0.0.1 is in use; choose another with --port" in line


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--port", "abc"], "argument --port: expected an integer, got 'abc'"),
        (["--ttl", "soon"], "argument --ttl: expected a number, got 'soon'"),
        (["--taxonomy", "mine"], "argument --taxonomy: invalid choice: 'mine'"),
    ],
)
def test_a_bad_flag_is_refused_in_plain_words(args, says):
    done = command("seal serve", *args)
    assert done.returncode == 2 and says in done.stderr.strip().splitlines()[-1]


def test_the_help_lists_the_choices_of_every_enum_flag():
    shown = command("seal serve", "--help").stdout
    for flag, choices in {
        "--log-level": "{debug,info,warning,error}",
        "--interface-preset": "{reference,full,none}",
        "--taxonomy": "{reference,paper}",
    }.items():
        assert f"{flag} {choices}" in shown


def test_every_line_the_service_logs_is_json_uvicorn_s_included(tmp_path):
    log = tmp_path / "service.log"
    with running_service(["--log-level", "info"], log_path=log):
        pass
    records = [json.loads(line) for line in log.read_text().splitlines()]
    loggers = {record.get("logger") for record in records}
    assert "env_service" in loggers and any(name and name.startswith("uvicorn") for name in loggers)
    assert any("Application startup complete" in record.get("message", "") for record in records)


def test_every_flag_of_every_seal_command_has_help():
    from seal.cli import COMMANDS, build_parser

    for name in COMMANDS:
        (commands,) = [action for action in build_parser([name])._actions if action.dest == "command"]
        parser = commands.choices[name]
        assert len(parser._actions) > 1, f"seal {name} has no options"
        for action in parser._actions:
            if action.option_strings and action.dest != "help":
                assert action.help, f"seal {name} {action.option_strings[0]}"
