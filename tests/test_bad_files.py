"""Bad files handed to the tools: every one is a single line naming the file (and line), a non-zero exit
status, and nothing half-written — never a traceback or a silent miscount."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seal.cli import main
from tests.support.run_folders import write_dump
from tests.support.script_module import load_script

CASES = Path(__file__).parent / "data" / "diagnosis_cases.jsonl"
GOOD = CASES.read_text().splitlines()[0]
BAD_LINES = {
    "invalid UTF-8": (b'{"task_id": "multi_turn_base_0", "actions": ["\xff"]}', "not UTF-8 text (byte 0xff"),
    "deep JSON": (b"[" * 100_000 + b"]" * 100_000, "not readable JSON (nested too deeply)"),
    "huge integer": (
        b'{"task_id": ' + b"9" * 5000 + b"}",
        "not readable JSON (Exceeds the limit (4300 digits)",
    ),
    "protocol a list": (
        b'{"task_id": "multi_turn_base_0", "protocol": ["qwen_fc"], "actions": []}',
        "'protocol' must be one of qwen_fc, qwen_fc_strict_tags, llama3_json, python_list, not a JSON list",
    ),
    "protocol an object": (
        b'{"task_id": "multi_turn_base_0", "protocol": {}, "actions": []}',
        "'protocol' must be one of",
    ),
    "an array": (b"[1, 2]", "expected a JSON object"),
    "a long task id": (b'{"task_id": "' + b"x" * 5000 + b'", "actions": []}', "is 5,000 characters long"),
}


@pytest.mark.parametrize("command", ["diagnose", "replay"])
@pytest.mark.parametrize("case", list(BAD_LINES), ids=lambda case: case.replace(" ", "_"))
def test_a_bad_action_log_line_is_one_line_naming_file_and_line(command, case, tmp_path, capsys):
    line, message = BAD_LINES[case]
    logs = tmp_path / "actions.jsonl"
    logs.write_bytes(GOOD.encode() + b"\n\n" + line + b"\n")
    out = tmp_path / ("report" if command == "diagnose" else "replayed.jsonl")
    assert main([command, "--input", str(logs), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"seal: {logs}:3: ") and message in err, err[:300]
    assert not out.exists()


def test_hostile_actions_in_a_log_replay_and_the_outputs_read_back(tmp_path):
    actions = [
        '<tool_call>\n{"name": "ls", "arguments": {"a": ' + "9" * 5000 + "}}\n</tool_call>",
        "[" + "x." * 2000 + "f()]",
        "Done \ud800.",
    ]
    logs = tmp_path / "actions.jsonl"
    log = {"task_id": "multi_turn_base_0", "protocol": "qwen_fc", "actions": actions}
    logs.write_text(json.dumps(log) + "\n", encoding="utf-8")
    assert main(["diagnose", "--input", str(logs), "--out", str(tmp_path / "report")]) == 0
    (episode,) = [
        json.loads(line) for line in (tmp_path / "report" / "episodes.jsonl").read_bytes().splitlines()
    ]
    assert episode["reward"] == 0.0 and episode["evidence"][0]["rejected_messages"] == 1


def test_diagnose_refuses_an_out_that_is_a_file_and_leaves_it_alone(tmp_path, capsys):
    out = tmp_path / "report"
    out.write_text("mine")
    assert main(["diagnose", "--input", str(CASES), "--out", str(out)]) == 2
    assert (
        capsys.readouterr().err == f"seal: --out {out} is a file; name a folder to write the diagnosis into\n"
    )
    assert out.read_text() == "mine"


def test_replay_refuses_an_out_that_is_a_folder(tmp_path, capsys):
    assert main(["replay", "--input", str(CASES), "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"seal: --out {tmp_path} is a folder; name the JSONL file to write\n"


def stats(run: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = load_script("stats_validation_bfcl").main(["--run", str(run), "--out", str(out)])
    printed = capsys.readouterr()
    return code, printed.out, printed.err


def dump_lines(tmp_path: Path) -> tuple[Path, list[str]]:
    dump = tmp_path / "run" / "validation" / "0.jsonl"
    write_dump(dump, "val", 0, (5, 2, 3, 1))
    return dump, dump.read_text().splitlines()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda rows: [*rows[:3], "[1, 2]", *rows[3:]],
            "0.jsonl:4: expected a JSON object, got a JSON array",
        ),
        (lambda rows: [*rows[:3], "{not json", *rows[3:]], "0.jsonl:4: not JSON (Expecting property name"),
        (
            lambda rows: [*rows[:3], rows[3].replace('"score": 1.0', '"score": NaN'), *rows[4:]],
            "not a finite number",
        ),
        (lambda rows: [*rows, rows[2]], f"0.jsonl:{101}: a second row for"),
        (
            lambda rows: [
                *rows[:3],
                rows[3].replace('"gts"', '"gtz"').replace('"task_id"', '"tid"'),
                *rows[4:],
            ],
            "0.jsonl:4: a dump row needs a task id",
        ),
    ],
    ids=["array", "not-json", "nan-score", "duplicate", "no-task-id"],
)
def test_a_bad_validation_dump_line_is_one_line_naming_file_and_line_and_writes_nothing(
    change, message, tmp_path, capsys
):
    dump, rows = dump_lines(tmp_path)
    dump.write_text("\n".join(change(rows)) + "\n")
    code, out, err = stats(tmp_path / "run", tmp_path / "stats", capsys)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and str(dump) in err and message in err, err
    assert not (tmp_path / "stats").exists()


def test_a_bad_step_log_line_is_named_before_anything_is_written(tmp_path, capsys):
    dump_lines(tmp_path)
    (tmp_path / "run" / "seal_steps.jsonl").write_text('{"step": 1, "profile": {}}\n')
    code, _, err = stats(tmp_path / "run", tmp_path / "stats", capsys)
    assert code == 1 and "seal_steps.jsonl:1: not a step record" in err
    assert not (tmp_path / "stats").exists()
