"""The sitting's result line, built from synthetic files in the layouts the trainer and the driver write:
the SFT start's val is the arm's first validation dump and its mixed share the first step's, val before and
after from the first and last dumps, test from the launch's test report, the mixed share from the step
metrics, the sitting's seconds as the sum of its phases."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from seal.bfcl.tasks import CATEGORIES, split_ids
from seal.reports import sitting
from seal.results.campaign import Sitting, parse_record, read_lines

VAL_PASSES = {0: 1, 16: 3}  # step -> tasks passed per category: every 25th task, from task 0 on
DRIVER = Path(__file__).resolve().parents[2] / "gpu" / "gpu_qwen_compare.sh"


def write_dump(folder: Path, step: int, split: str, per_category: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for category in CATEGORIES:
        ids = [t for t in split_ids(split) if t.startswith(f"{category}_")]
        rows += [{"gts": t, "score": float(i < per_category), "step": step} for i, t in enumerate(ids)]
    (folder / f"{step}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def write_metrics(run: Path, mixed_by_step: dict[int, float | None]) -> None:
    """verl's file-logger lines: one per step (its mixed share where not None), then the test pass's own."""
    lines = []
    for step, mixed in mixed_by_step.items():
        data = {"timing_s/step": 30.0} | ({} if mixed is None else {sitting.MIXED_SHARE: mixed})
        lines.append({"step": step, "data": data})
    lines.append({"step": max(mixed_by_step), "data": {"test/seal/pass_rate_mean": 0.2}})
    (run / "metrics").mkdir(exist_ok=True)
    (run / "metrics" / "launch.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


@pytest.fixture
def run(tmp_path) -> Path:
    run = tmp_path / "learn_qwen_seal_s1"
    for step, passed in VAL_PASSES.items():
        write_dump(run / "validation", step, "val", passed)
    write_dump(run / "test" / "global_step_16", 16, "test", 15)
    report = {"selection": {"best_step": 16, "last_step": 16, "val_mean": {"16": 0.12}}, "test": {}}
    (run / "test_report.json").write_text(json.dumps(report))
    write_metrics(run, {s: s / 20 for s in range(1, 17)})
    return run


@pytest.fixture
def argv(run, tmp_path) -> list[str]:
    """The command's arguments for `run`, with a phases folder that holds a score phase's file left by an
    older driver beside the SFT's."""
    (tmp_path / "phases").mkdir()
    (tmp_path / "phases" / "sft").write_text("342\n")
    (tmp_path / "phases" / "sft_score").write_text("254\n")
    identity = ["--arm", "seal", "--seed", "1", "--card", "H200", "--gpus", "2", "--commit", "c"]
    return [*identity, "--run", str(run), "--phases", str(tmp_path / "phases")]


def test_the_start_is_the_arm_before_it_trained_val_first_dump_mixed_first_step(run):
    phases = {"sft": 342, "arm_startup": 330, "arm_steps": 500, "test": 150}
    identity = {"arm": "seal", "seed": 1, "card": "NVIDIA H200", "gpus": 4, "date": "d", "commit": "c"}
    line = sitting.sitting_line(identity, run, phases)

    assert line["sft_val"] == line["val_before"] == pytest.approx(1 / 25)
    assert line["sft_val_by_category"] == line["val_before_by_category"] == {c: 1 / 25 for c in CATEGORIES}
    mean = sum(s / 20 for s in range(1, 17)) / 16
    assert line["sft_mixed"] == pytest.approx(1 / 20) and line["mixed_share_mean"] == pytest.approx(mean)
    assert line["sft_mixed_by_category"] is None
    assert line["val_after"] == pytest.approx(3 / 25)
    assert line["val_after_by_category"] == {c: pytest.approx(3 / 25) for c in CATEGORIES}
    assert line["test_after"] == pytest.approx(15 / 75)
    assert line["steps"] == 16
    assert line["sitting_s"] == sum(phases.values()) and line["phases"] == phases
    wanted = "arm seed card gpus sft_val sft_mixed val_before val_after test_after steps mixed_share_mean"
    assert set(wanted.split()) | {"sitting_s", "date", "commit", "phases"} <= set(line)


def test_a_run_that_seal_finish_by_ended_early_says_the_steps_planned_and_one_that_did_not_says_nothing(run):
    identity = {"arm": "seal", "seed": 1, "card": "H200", "gpus": 2, "date": "d", "commit": "c", "files": "f"}
    assert "planned_steps" not in sitting.sitting_line(identity, run, {"sft": 1})
    (run / "ended_early.json").write_text(json.dumps({"last_step": 16, "planned_steps": 20}) + "\n")
    line = sitting.sitting_line(identity, run, {"sft": 1})
    assert (line["steps"], line["planned_steps"]) == (16, 20)
    assert parse_record(Sitting, line, "the line").planned_steps == 20


def test_the_test_before_training_is_the_step_0_dump_and_null_where_the_launch_played_none(run, argv, capsys):
    identity = {"arm": "seal", "seed": 1, "card": "NVIDIA H200", "gpus": 4, "date": "d", "commit": "c"}
    line = sitting.sitting_line(identity, run, {})
    assert line["test_before"] is None and line["test_before_by_category"] is None
    write_dump(run / "test" / "global_step_0", 0, "test", 6)
    line = sitting.sitting_line(identity, run, {})
    assert line["test_before"] == pytest.approx(6 / 75) and line["test_after"] == pytest.approx(15 / 75)
    assert line["test_before_by_category"] == {c: pytest.approx(6 / 75) for c in CATEGORIES}
    assert sitting.main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["test_before"] == pytest.approx(6 / 75)


def test_the_task_scores_are_each_task_s_outcome_before_and_after_per_split(run, argv, tmp_path, capsys):
    write_dump(run / "test" / "global_step_0", 0, "test", 6)
    assert sitting.main([*argv, "--task-scores", str(tmp_path / "scores.csv")]) == 0
    scores = pd.read_csv(tmp_path / "scores.csv")
    passed = scores.groupby(["split", "when"])["score"].sum().to_dict()
    counts = scores.groupby(["split", "when"]).size().to_dict()
    assert passed == {
        ("test", "after"): 60,
        ("test", "before"): 24,
        ("val", "after"): 12,
        ("val", "before"): 4,
    }
    assert counts == {
        ("test", "after"): 300,
        ("test", "before"): 300,
        ("val", "after"): 100,
        ("val", "before"): 100,
    }
    test = scores[scores["split"] == "test"].pivot(index="task_id", columns="when", values="score")
    assert sorted(test.index) == sorted(split_ids("test"))
    assert ((test["before"] == 1) <= (test["after"] == 1)).all()  # the first 6 of a category pass, then 15
    assert json.loads(capsys.readouterr().out)["test_before"] == pytest.approx(24 / 300)


def test_the_task_scores_say_how_each_episode_ended_from_its_dump_row(run, argv, tmp_path):
    """A row's ending comes from its own fields: the replies it took, whether a limit stopped it, and whether
    its action log ends in five identical calls; a row without them (an older dump) leaves them empty."""
    call = '<tool_call>\n{"name": "cd", "arguments": {"folder": "x"}}\n</tool_call>'
    looping, val = [call] * 6, split_ids("val")
    rows = [
        {
            "gts": val[0],
            "score": 0.0,
            "llm_calls": 20,
            "cut": "none",
            "truncated": True,
            "action_log": json.dumps({"task_id": val[0], "protocol": "qwen_fc", "actions": looping}),
        },
        {
            "gts": val[1],
            "score": 0.0,
            "llm_calls": 6,
            "cut": "calls",
            "truncated": True,
            "action_log": json.dumps({"task_id": val[1], "protocol": "qwen_fc", "actions": ["Done."] * 6}),
        },
        {
            "gts": val[2],
            "score": 1.0,
            "llm_calls": 3,
            "cut": "none",
            "truncated": False,
            "action_log": json.dumps({"task_id": val[2], "protocol": "qwen_fc", "actions": [call, "Done."]}),
        },
    ]
    (run / "validation" / "16.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert sitting.main([*argv, "--task-scores", str(tmp_path / "scores.csv")]) == 0
    scores = pd.read_csv(tmp_path / "scores.csv")
    assert list(scores.columns) == sitting.TASK_SCORE_COLUMNS
    after = scores[(scores["split"] == "val") & (scores["when"] == "after")].set_index("task_id")
    assert after.loc[val[0], ["llm_calls", "call_limit", "looped"]].tolist() == [20, True, True]
    assert after.loc[val[1], ["llm_calls", "call_limit", "looped"]].tolist() == [6, True, False]
    assert after.loc[val[2], ["llm_calls", "call_limit", "looped"]].tolist() == [3, False, False]
    assert after.loc[val[0], "repeated"] == call  # what the loop resends, read back from the CSV
    assert after.loc[[val[1], val[2]], "repeated"].isna().all()  # a repeated answer is no loop
    before = scores[(scores["split"] == "val") & (scores["when"] == "before")]
    assert len(before) == 100 and before[["llm_calls", "call_limit", "looped", "repeated"]].isna().all().all()


def test_an_action_log_that_is_not_one_refuses_the_task_scores_in_one_line(run, argv, tmp_path, capsys):
    row = {"gts": split_ids("val")[0], "score": 0.0, "action_log": '{"task_id": "nowhere_1", "actions": []}'}
    (run / "validation" / "16.jsonl").write_text(json.dumps(row) + "\n")
    assert sitting.main([*argv, "--task-scores", str(tmp_path / "scores.csv")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("sitting: ") and "16.jsonl" in err and err.count("\n") == 1
    assert not (tmp_path / "scores.csv").exists()


def test_the_command_prints_one_line_the_page_reads_and_no_score_phase(argv, tmp_path, capsys):
    assert sitting.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert (
        len(out) == 1 and json.loads(out[0])["sitting_s"] == 342
    )  # the old score phase's file is not summed
    (tmp_path / "runs.jsonl").write_text(out[0] + "\n")  # the page generator reads the line as printed
    (record,) = read_lines(tmp_path / "runs.jsonl", Sitting)
    assert record.files.startswith("seal_s1_") and record.sft_mixed_by_category is None
    assert record.sft_val == record.val_before


def test_the_start_s_gpu_count_is_in_the_line_where_the_driver_recorded_it(argv, capsys):
    assert sitting.main([*argv, "--sft-gpus", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["sft_gpus"] == 2
    assert sitting.main([*argv, "--sft-gpus", ""]) == 0  # a start trained before the driver recorded it
    assert "sft_gpus" not in json.loads(capsys.readouterr().out)
    with pytest.raises(SystemExit):
        sitting.main([*argv, "--sft-gpus", "0"])
    captured = capsys.readouterr()
    assert captured.out == "" and "'0' is not a count of GPUs" in captured.err


def test_the_driver_calls_the_command_with_exactly_its_flags(tmp_path, capsys):
    """The flags of the driver's call (gpu_qwen_compare.sh) are the command's: none unknown, none missing
    (the command then fails on the missing run folder, not on its arguments)."""
    call = DRIVER.read_text().split("-m seal.reports.sitting", 1)[1].split("/line.json.partial")[0]
    flags = re.findall(r'(--[a-z-]+) "', call)  # each flag's value is quoted
    assert "--run" in flags and "--sft-val" not in flags
    argv = [part for flag in flags for part in (flag, "1")]
    argv[argv.index("--run") + 1] = str(tmp_path / "no_run")
    argv[argv.index("--arm") + 1] = "seal"
    assert sitting.main(argv) == 1
    assert "no_run" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("spoil", "named"),
    [
        (lambda run: (run / "test_report.json").unlink(), "seal.test_after"),
        (lambda run: write_metrics(run, {1: None, 2: 0.5}), "at step 1"),
        (lambda run: write_metrics(run, {2: 0.5, 3: 0.5}), "at step 1"),
        (lambda run: (run / "validation" / "0.jsonl").rename(run / "validation" / "8.jsonl"), "step 8"),
    ],
    ids=["no test pass", "no mixed share at step 1", "no step 1", "no val before training"],
)
def test_a_run_that_cannot_give_the_line_is_refused_in_one_line(argv, run, spoil, named, capsys):
    spoil(run)
    assert sitting.main(argv) == 1
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert captured.out == "" and err.startswith("sitting: ") and named in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("arm", ["no_reweighting", "seal_n16"])
def test_a_variant_arm_s_line_is_one_the_page_reads(argv, tmp_path, capsys, arm):
    argv[argv.index("--arm") + 1] = arm
    assert sitting.main(argv) == 0
    (tmp_path / "runs.jsonl").write_text(capsys.readouterr().out)
    (record,) = read_lines(tmp_path / "runs.jsonl", Sitting)
    assert record.arm == arm and record.files.startswith(f"{arm}_s1_")
