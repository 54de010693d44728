"""The docs' shell blocks cannot lie: every ```bash block of README.md and docs/ parses (`bash -n`), names
only repository files that exist and gives `seal`, `launcher.py`, `python -m env_service` and the Python
scripts only flags their parsers take; a block marked `<!-- runnable -->` runs on a CPU, in a temporary copy
of the repository, and exits 0 (`<!-- gpu -->` marks a block that needs a GPU node: checked, not run)."""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNNABLE, GPU = "<!-- runnable -->", "<!-- gpu -->"
REPO_PATH = re.compile(
    r"(?:^|(?<=[\s='\"\[,(]))((?:exp|scripts|examples|seal|env_service|tests|docs|data)/[\w./<>{}*-]*[\w>}*]"
    r"|launcher\.py|install\.sh|requirements[\w-]*\.txt|mkdocs\.yml)"
)
OPERATORS = {"&&", "||", ";", "|", "&", "(", ")"}


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    marker: str | None
    text: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks() -> list[Block]:
    found = []
    for path in pages():
        lines = path.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            if lines[i].strip() == "```bash":
                end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
                before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
                marker = before if before in (RUNNABLE, GPU) else None
                name = str(path.relative_to(ROOT))
                found.append(Block(name, i + 1, marker, "\n".join(lines[i + 1 : end])))
                i = end
            i += 1
    return found


BLOCKS = blocks()


def commands(text: str) -> list[list[str]]:
    """The block's simple commands as words, continuation lines joined, comments and operators dropped."""
    out: list[list[str]] = []
    for line in text.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        out.append([])
        for word in lexer:
            if word in OPERATORS:
                out.append([])
            else:
                out[-1].append(word)
    return [words for words in out if words]


def _subparser(argv: list[str]):
    import argparse

    from seal.cli import build_parser

    (sub,) = [a for a in build_parser(argv)._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices[argv[0]]


def _seal_options(argv: list[str]) -> set[str] | None:
    from seal.cli import COMMANDS

    if not argv or argv[0] not in COMMANDS:
        return None
    return {option for action in _subparser(argv)._actions for option in action.option_strings}


def _script_options(script: Path) -> set[str]:
    """Every `--flag` string in the script and in the project modules it imports (scripts delegate their
    parsers to seal's modules), read statically: importing a script can take seconds."""
    options: set[str] = set()
    sources = [script]
    for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "seal":
            module = ROOT / Path(*node.module.split("."))
            sources += [p for p in (module.with_suffix(".py"), module / "__init__.py") if p.is_file()]
    for source in sources:
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("--"):
                options.add(node.value)
    return options


def options_of(words: list[str]) -> tuple[str, set[str], list[str]] | None:
    """(what runs, the options it takes, the words after it) of a command this test knows the parser of."""
    while words and re.match(r"^\w+=", words[0]):
        words = words[1:]  # VAR=value before the command
    if not words:
        return None
    if words[0] == "seal" and len(words) > 1:
        options = _seal_options(words[1:])
        return None if options is None else (f"seal {words[1]}", options, words[2:])
    if words[0] in ("python", "python3") and len(words) > 1:
        if words[1:3] == ["-m", "seal.cli"]:
            return options_of(["seal", *words[3:]])
        if words[1:3] == ["-m", "env_service"]:
            return "python -m env_service", _seal_options(["serve"]) or set(), words[3:]
        if words[1] == "launcher.py":
            return "launcher.py", _seal_options(["train"]) or set(), words[2:]
        if words[1].startswith("scripts/") and words[1].endswith(".py") and (ROOT / words[1]).is_file():
            return words[1], _script_options(ROOT / words[1]) | {"-h", "--help"}, words[2:]
    return None


def unknown_flags(text: str) -> list[str]:
    problems = []
    for words in commands(text):
        known = options_of(words)
        if known is None:
            continue
        name, options, rest = known
        for word in rest:
            if word == "--":
                break  # Hydra overrides follow
            flag = word.split("=", 1)[0]
            if flag.startswith("-") and flag != "-" and flag not in options:
                problems.append(f"{name} has no option {flag}")
    return problems


def missing_paths(text: str) -> list[str]:
    named = {m.group(1).rstrip(".") for m in REPO_PATH.finditer(text)}
    named = {path for path in named if not any(c in path for c in "*{}<>")}
    absent = sorted(path for path in named if not (ROOT / path).exists())
    if not absent:
        return []
    ignored = subprocess.run(
        ["git", "check-ignore", "--stdin"], cwd=ROOT, input="\n".join(absent), capture_output=True, text=True
    ).stdout.split()
    return [path for path in absent if path not in ignored]  # outputs a command writes are git-ignored


def test_the_docs_have_runnable_and_gpu_blocks():
    marked = {block.marker for block in BLOCKS}
    assert {RUNNABLE, GPU} <= marked
    assert any(b.page == "README.md" and b.marker == RUNNABLE for b in BLOCKS)


@pytest.mark.parametrize("block", BLOCKS, ids=str)
def test_a_block_parses_names_existing_files_and_known_flags(block: Block):
    syntax = subprocess.run(["bash", "-n"], input=block.text, capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr
    assert missing_paths(block.text) == []
    assert unknown_flags(block.text) == []


def test_the_checks_catch_a_wrong_flag_a_missing_file_and_bad_syntax():
    assert unknown_flags("seal eval --base-url U --model M --splits val") == [
        "seal eval has no option --splits"
    ]
    assert unknown_flags("python launcher.py --conf exp/SEAL.yaml --dryrun") == [
        "launcher.py has no option --dryrun"
    ]
    assert unknown_flags("python launcher.py --conf exp/SEAL.yaml -- +trainer.x=1 --y") == []
    assert missing_paths("python launcher.py --conf exp/NOPE.yaml") == ["exp/NOPE.yaml"]
    assert missing_paths("seal diagnose --input examples/actions.jsonl --out outputs/x") == []
    assert subprocess.run(["bash", "-n"], input="if then", capture_output=True, text=True).returncode != 0


def repository_copy(target: Path) -> Path:
    """The working tree's files (tracked, and new ones git does not ignore) copied into `target`."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A copy of the repository and an environment whose `seal` and `python` run the copy's code."""
    copy = repository_copy(tmp_path_factory.mktemp("repo"))
    bin_dir = tmp_path_factory.mktemp("bin")
    for name, target in (("seal", f'"{sys.executable}" -m seal.cli'), ("python", f'"{sys.executable}"')):
        (bin_dir / name).write_text(f'#!/usr/bin/env bash\nexec {target} "$@"\n')
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(copy)}
    return copy, env


RUNNABLE_BLOCKS = list({b.text: b for b in reversed(BLOCKS) if b.marker == RUNNABLE}.values())[::-1]
"""Each runnable block once: a page may repeat another's (the README's tour is the quickstart's)."""


@pytest.mark.parametrize("block", RUNNABLE_BLOCKS, ids=str)
def test_a_runnable_block_runs_on_a_cpu(block: Block, sandbox):
    copy, env = sandbox
    started = time.monotonic()
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block.text],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{block} exited {done.returncode}:\n{done.stderr[-3000:]}"
    print(f"{block}: {time.monotonic() - started:.1f} s")
