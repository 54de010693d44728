"""The sitting's result line, built from synthetic files in the layouts the trainer, `seal eval` and the
driver write: val before and after from the first and last validation dumps, test from the launch's test
report, the mixed share from the step metrics, the sitting's seconds as the sum of its phases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seal.bfcl.tasks import CATEGORIES, split_ids
from seal.reports import sitting
from seal.results.campaign import Sitting, read_lines

VAL_PASSES = {0: 1, 16: 3}  # step -> tasks passed per category: every 25th task, from task 0 on


def write_dump(folder: Path, step: int, split: str, per_category: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for category in CATEGORIES:
        ids = [t for t in split_ids(split) if t.startswith(f"{category}_")]
        rows += [{"gts": t, "score": float(i < per_category), "step": step} for i, t in enumerate(ids)]
    (folder / f"{step}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def summary(key: str, values: dict[str, float]) -> dict:
    return {key: sum(values.values()) / len(values), "by_category": {c: {key: v} for c, v in values.items()}}


@pytest.fixture
def run(tmp_path) -> Path:
    run = tmp_path / "learn_qwen_seal_s1"
    for step, passed in VAL_PASSES.items():
        write_dump(run / "validation", step, "val", passed)
    write_dump(run / "test" / "global_step_16", 16, "test", 15)
    report = {"selection": {"best_step": 16, "last_step": 16, "val_mean": {"16": 0.12}}, "test": {}}
    (run / "test_report.json").write_text(json.dumps(report))
    (run / "metrics").mkdir()
    lines = [{"step": s, "data": {"timing_s/step": 30.0, sitting.MIXED_SHARE: s / 20}} for s in range(1, 17)]
    lines.append({"step": 16, "data": {"test/seal/pass_rate_mean": 0.2}})  # the test pass's own line
    (run / "metrics" / "launch.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run


def test_the_line_holds_every_key_the_issue_names_with_its_categories(run, tmp_path):
    sft_val = summary("pass_rate", dict(zip(CATEGORIES, (0.2, 0.16, 0.2, 0.12), strict=True)))
    sft_mixed = summary("mixed_share", dict(zip(CATEGORIES, (0.75, 0.7, 0.6, 0.5), strict=True)))
    phases = {"sft": 342, "sft_score": 254, "arm_startup": 330, "arm_steps": 500, "test": 150}
    identity = {"arm": "seal", "seed": 1, "card": "NVIDIA H200", "gpus": 4, "date": "d", "commit": "c"}
    line = sitting.sitting_line(identity, sft_val, sft_mixed, run, phases)

    assert line["sft_val"] == pytest.approx(0.17) and line["sft_mixed"] == pytest.approx(0.6375)
    assert line["sft_mixed_by_category"]["multi_turn_base"] == 0.75
    assert line["val_before"] == pytest.approx(1 / 25) and line["val_after"] == pytest.approx(3 / 25)
    assert line["val_after_by_category"] == {c: pytest.approx(3 / 25) for c in CATEGORIES}
    assert line["test_after"] == pytest.approx(15 / 75)
    assert line["steps"] == 16
    assert line["mixed_share_mean"] == pytest.approx(sum(s / 20 for s in range(1, 17)) / 16)
    assert line["sitting_s"] == sum(phases.values()) and line["phases"] == phases
    wanted = "arm seed card gpus sft_val sft_mixed val_before val_after test_after steps mixed_share_mean"
    assert set(wanted.split()) | {"sitting_s", "date", "commit", "phases"} <= set(line)


def test_the_command_prints_one_line_and_refuses_a_run_without_its_test_pass(run, tmp_path, capsys):
    for name, key in (("sft_val", "pass_rate"), ("sft_mixed", "mixed_share")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(
            json.dumps(summary(key, dict.fromkeys(CATEGORIES, 0.5)))
        )
    (tmp_path / "phases").mkdir()
    (tmp_path / "phases" / "sft").write_text("342\n")
    argv = ["--arm", "seal", "--seed", "1", "--card", "H200", "--gpus", "2", "--commit", "c"]
    argv += ["--sft-val", str(tmp_path / "sft_val"), "--sft-mixed", str(tmp_path / "sft_mixed")]
    argv += ["--run", str(run), "--phases", str(tmp_path / "phases")]
    assert sitting.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and json.loads(out[0])["sitting_s"] == 342
    (tmp_path / "runs.jsonl").write_text(out[0] + "\n")  # the page generator reads the line as printed
    (record,) = read_lines(tmp_path / "runs.jsonl", Sitting)
    assert record.files.startswith("seal_s1_")

    (run / "test_report.json").unlink()
    assert sitting.main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("sitting: ") and "seal.test_after" in err and len(err.splitlines()) == 1
