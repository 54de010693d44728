"""`seal diagnose` and `seal replay` on the labelled example action logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seal.cli import main

CASES = Path(__file__).parent / "data" / "diagnosis_cases.jsonl"


def load_cases() -> list[dict]:
    return [json.loads(line) for line in CASES.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("taxonomy", ["reference", "paper"])
def test_diagnose_reproduces_every_labelled_case(taxonomy, tmp_path):
    out = tmp_path / taxonomy
    assert main(["diagnose", "--input", str(CASES), "--out", str(out), "--taxonomy", taxonomy]) == 0
    episodes = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    cases = load_cases()
    assert len(episodes) == len(cases)
    mismatches = [
        (case["case"], episode["reward"], episode["labels"])
        for case, episode in zip(cases, episodes, strict=True)
        if episode["reward"] != case["expected"]["reward"] or episode["labels"] != case["expected"][taxonomy]
    ]
    assert mismatches == []
    for episode in episodes:
        assert episode["taxonomy"] == taxonomy
        assert len(episode["evidence"]) == len(episode["labels"])
        assert abs(sum(episode["profile"].values()) - 1.0) < 1e-9
    summary = (out / "summary.md").read_text()
    assert "| base |" in summary and "pass rate" in summary
    assert (out / "labels.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_each_label_comes_with_evidence_a_person_can_read(tmp_path):
    main(["diagnose", "--input", str(CASES), "--out", str(tmp_path), "--taxonomy", "paper"])
    episodes = {
        json.loads(line)["task_id"]: json.loads(line) for line in (tmp_path / "episodes.jsonl").open()
    }
    argument = episodes["multi_turn_base_43"]["evidence"][3]
    assert argument["label"] == "argument_mismatch"
    assert any(
        "verbose" in violation for call in argument["calls"] for violation in call["schema_violations"]
    )


def test_diagnose_refuses_to_overwrite_and_rejects_bad_input(tmp_path, capsys):
    assert main(["diagnose", "--input", str(CASES), "--out", str(tmp_path)]) == 0
    before = (tmp_path / "episodes.jsonl").read_bytes()
    assert main(["diagnose", "--input", str(CASES), "--out", str(tmp_path)]) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        CASES.read_text().splitlines()[0] + "\n" + '{"task_id": "multi_turn_base_999", "actions": []}\n'
    )
    assert main(["diagnose", "--input", str(bad), "--out", str(tmp_path / "new")]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "bad.jsonl:2" in error and "multi_turn_base_999" in error
    assert not (tmp_path / "new").exists()
    assert (tmp_path / "episodes.jsonl").read_bytes() == before


def test_replay_writes_one_line_per_episode_in_input_order(tmp_path):
    out = tmp_path / "replay.jsonl"
    assert main(["replay", "--input", str(CASES), "--out", str(out)]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["task_id"] for line in lines] == [case["task_id"] for case in load_cases()]
    assert "labels" not in lines[0] and set(lines[0]) == {"task_id", "reward", "taxonomy", "truncated"}
    assert [line["reward"] for line in lines] == [case["expected"]["reward"] for case in load_cases()]


def test_a_folder_given_as_input_is_named_as_a_folder(tmp_path, capsys):
    (tmp_path / "actions.jsonl").write_text(CASES.read_text())
    assert main(["diagnose", "--input", str(tmp_path), "--out", str(tmp_path / "report")]) == 2
    error = capsys.readouterr().err.strip()
    assert error == (
        f"seal: {tmp_path} is a folder, not a JSONL file of action logs; "
        f"did you mean {tmp_path / 'actions.jsonl'} (what seal eval writes)?"
    )
    assert not (tmp_path / "report").exists()


@pytest.mark.parametrize(
    ("relative", "run"), [("qwen_eval/actions.jsonl", "qwen_eval"), ("logs_a.jsonl", "logs_a")]
)
def test_the_label_chart_is_titled_by_the_run_not_by_the_file(relative, run, tmp_path, monkeypatch):
    import seal.results.tables as tables

    titles = []
    monkeypatch.setattr(tables, "plot_label_shares", lambda summary, path, title: titles.append(title))
    logs = tmp_path / relative
    logs.parent.mkdir(parents=True, exist_ok=True)
    logs.write_text(CASES.read_text())
    assert main(["diagnose", "--input", str(logs), "--out", str(tmp_path / "out")]) == 0
    (title,) = titles
    assert title.endswith(f"— {run}") and "actions.jsonl" not in title


def test_diagnose_help_lists_every_label_with_its_meaning(capsys):
    from seal.tocf.labels import ALL_LABELS, LABEL_MEANINGS

    with pytest.raises(SystemExit) as exit:
        main(["diagnose", "--help"])
    assert exit.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    for label in ALL_LABELS:
        (line,) = [line for line in lines if line.strip().startswith(f"{label} (")]
        assert line.endswith(LABEL_MEANINGS[label])


def test_every_rule_a_label_names_reads_as_words(tmp_path):
    from seal.tocf.diagnosis import RULE_WORDS

    rules = set()
    for taxonomy in ("reference", "paper"):
        out = tmp_path / taxonomy
        assert main(["diagnose", "--input", str(CASES), "--out", str(out), "--taxonomy", taxonomy]) == 0
        for line in (out / "episodes.jsonl").read_text().splitlines():
            rules |= {turn["why"]["rule"] for turn in json.loads(line)["evidence"]}
    assert len(rules) >= 8 and rules <= set(RULE_WORDS)
