"""scripts/stats_validation_bfcl.py on a run folder laid out as the trainer and the launcher write it."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from seal.reports.runs import REPORT_NAME
from seal.trainer.rl.closed_loop import ClosedLoop
from seal.trainer.settings import SealSettings
from tests.support.run_folders import trajectory, write_dump

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "stats_validation_bfcl.py"
SHORT = ("base", "miss_func", "miss_param", "long_context")

# Passing tasks per category (base, miss_func, miss_param, long_context) in each dump.
VAL_PASSES = {0: (5, 2, 3, 1), 10: (10, 5, 6, 4), 20: (8, 5, 6, 4)}  # of 25 per category
TEST_PASSES = {10: (30, 15, 18, 12), 20: (24, 15, 21, 12)}  # of 75 per category
# Labels of the training batches: step -> {label: turns}; step 2 is logged twice (a resumed run).
BATCHES = {
    1: {"pass": 30, "state_mismatch": 10, "checker_error": 4},
    2: {"pass": 35, "state_mismatch": 5},
    3: {"pass": 20, "state_mismatch": 10, "instance_mismatch": 10},
}


def write_steps(run: Path) -> None:
    """`seal_steps.jsonl` as SealPPOTrainer appends it: {"step", **ClosedLoop.to_json()} per step."""
    loop = ClosedLoop(SealSettings())
    lines = []
    for step, counts in BATCHES.items():
        batch = [
            trajectory("multi_turn_base_0", 1.0 if label == "pass" else 0.0, [label] * n)
            for label, n in counts.items()
        ]
        loop.step(batch, [0.0] * len(batch), step, epoch=0, groups=["uid0"] * len(batch))
        lines.append({"step": step, **loop.to_json()})
        if step == 2:
            lines.append({"step": step, **loop.to_json()})
    (run / "seal_steps.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("experiments") / "SEAL"
    for step, passes in VAL_PASSES.items():
        write_dump(run / "validation" / f"{step}.jsonl", "val", step, passes)
    for step, passes in TEST_PASSES.items():
        write_dump(run / "test" / f"global_step_{step}" / f"{step}.jsonl", "test", step, passes)
    report = {"selection": {"best_step": 10, "last_step": 20, "val_mean": {}}, "test": {}}
    (run / REPORT_NAME).write_text(json.dumps(report))
    write_steps(run)
    return run


def stats(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def expected_row(split: str, step: int, checkpoint: str, passes: tuple[int, ...], per: int) -> list[str]:
    rates = [100 * p / per for p in passes]
    return [split, str(step), checkpoint, *(f"{r:.2f}" for r in rates), f"{sum(rates) / 4:.2f}", str(4 * per)]


@pytest.fixture(scope="module")
def result(run: Path, tmp_path_factory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("stats")
    return stats("--run", str(run), "--out", str(out)), out


def test_prints_val_per_step_and_test_for_best_and_last_with_the_mean_as_avg(result):
    done, _ = result
    assert done.returncode == 0, done.stderr
    table = [line.split() for line in done.stdout.splitlines()]
    header = ["split", "step", "checkpoint", *SHORT, "Avg", "n"]
    assert header in table
    val_rows = [row for row in table if row and row[0] == "val"]
    assert val_rows == [
        [cell for cell in expected_row("val", step, "", passes, 25) if cell]
        for step, passes in VAL_PASSES.items()
    ]
    test_rows = [row for row in table if row and row[0] == "test"]
    assert test_rows == [
        expected_row("test", 10, "best", TEST_PASSES[10], 75),
        expected_row("test", 20, "last", TEST_PASSES[20], 75),
    ]
    # val Avg: step 0 11%, step 10 25%, step 20 23%: step 10 is the best.
    assert "best val: step 10 (Avg 25.00)" in done.stdout


def test_writes_the_csv_and_two_valid_pngs(result):
    done, out = result
    assert done.returncode == 0, done.stderr
    with (out / "pass_rates.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["split"], r["step"], r["checkpoint"]) for r in rows] == [
        ("val", "0", ""),
        ("val", "10", ""),
        ("val", "20", ""),
        ("test", "10", "best"),
        ("test", "20", "last"),
    ]
    assert float(rows[4]["miss_param"]) == pytest.approx(100 * 21 / 75, abs=0.01)
    assert float(rows[3]["Avg"]) == pytest.approx(100 * (30 + 15 + 18 + 12) / 300, abs=0.01)
    for name in ("val_curves.png", "label_shares.png"):
        with Image.open(out / name) as image:
            image.verify()
            assert image.format == "PNG" and image.size[0] > 300 and image.size[1] > 200


def test_label_shares_are_each_batch_s_turns_without_judge_failures(result):
    _, out = result
    with (out / "label_shares.csv").open() as handle:
        shares = {
            int(row.pop("step")): {k: float(v) for k, v in row.items()} for row in csv.DictReader(handle)
        }
    assert set(shares) == {1, 2, 3}
    assert shares[1] == {"instance_mismatch": 0.0, "pass": 0.75, "state_mismatch": 0.25}
    assert shares[2] == {"instance_mismatch": 0.0, "pass": 0.875, "state_mismatch": 0.125}
    assert shares[3] == {"instance_mismatch": 0.25, "pass": 0.5, "state_mismatch": 0.25}


def test_each_validation_step_says_how_its_episodes_ended_where_the_dump_carries_it(tmp_path):
    """Step 0's 100 episodes end quietly; at step 10 the first 20 repeat one call to the call limit and 10
    more end at it without a loop; an older dump at step 20, without action logs, gets no row."""
    run = tmp_path / "looping"
    for step in (0, 10, 20):
        write_dump(run / "validation" / f"{step}.jsonl", "val", step, (5, 5, 5, 5))
    call = '<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call>'
    path = run / "validation" / "10.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for index, row in enumerate(rows[:30]):
        looping = index < 20
        actions = [call] * 20 if looping else ["Done."] * 20
        log = {"task_id": row["task_id"], "protocol": "qwen_fc", "actions": actions}
        row |= {"llm_calls": 20, "cut": "calls", "action_log": json.dumps(log)}
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    older = run / "validation" / "20.jsonl"
    stripped = [json.loads(line) for line in older.read_text().splitlines()]
    older.write_text(
        "".join(json.dumps({k: v for k, v in row.items() if k != "action_log"}) + "\n" for row in stripped)
    )
    done = stats("--run", str(run), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    with (tmp_path / "out" / "val_endings.csv").open() as handle:
        ended = list(csv.DictReader(handle))
    assert [row["step"] for row in ended] == ["0", "10"]
    assert (ended[0]["loops"], ended[0]["call limit"], ended[0]["replies an episode"]) == (
        "0.0",
        "0.0",
        "3.0",
    )
    assert (ended[1]["loops"], ended[1]["call limit"]) == ("0.2", "0.3")
    assert float(ended[1]["replies an episode"]) == pytest.approx((30 * 20 + 70 * 3) / 100)
    assert "how the greedy val episodes ended" in done.stdout and " 20%" in done.stdout


def test_a_folder_without_validation_dumps_is_one_line_and_exit_1(tmp_path):
    (tmp_path / "empty").mkdir()
    done = stats("--run", str(tmp_path / "empty"))
    assert done.returncode == 1
    assert len(done.stderr.strip().splitlines()) == 1 and "validation" in done.stderr
    missing = stats("--run", str(tmp_path / "nothing"))
    assert missing.returncode == 1
    assert missing.stderr == f"stats_validation_bfcl: no such folder: {tmp_path / 'nothing'}\n"


def test_models_evaluated_on_their_own_are_shown_beside_the_run_per_split(run, tmp_path):
    """A validation-only launch of the SFT model on train and val in one pass, and one of the base model."""
    sft, base = tmp_path / "sft_eval", tmp_path / "base_eval"
    write_dump(tmp_path / "train.jsonl", "train", 0, (50, 20, 30, 10))
    write_dump(tmp_path / "val.jsonl", "val", 0, (10, 5, 6, 4))
    (sft / "validation").mkdir(parents=True)
    (sft / "validation" / "0.jsonl").write_text(
        (tmp_path / "train.jsonl").read_text() + (tmp_path / "val.jsonl").read_text()
    )
    write_dump(base / "validation" / "0.jsonl", "val", 0, (0, 0, 0, 0))
    done = stats("--run", str(run), "--out", str(tmp_path / "stats"), "--sft", str(sft), str(base))
    assert done.returncode == 0, done.stderr
    table = [line.split() for line in done.stdout.splitlines()]
    assert [row for row in table if row and row[2:3] in (["sft_eval"], ["base_eval"])] == [
        expected_row("train", 0, "sft_eval", (50, 20, 30, 10), 100),
        expected_row("val", 0, "sft_eval", (10, 5, 6, 4), 25),
        expected_row("val", 0, "base_eval", (0, 0, 0, 0), 25),
    ]
    with (tmp_path / "stats" / "pass_rates.csv").open() as handle:
        assert [r["checkpoint"] for r in csv.DictReader(handle)][-3:] == ["sft_eval", "sft_eval", "base_eval"]


def test_a_model_folder_without_a_dump_is_one_line_and_exit_1(run, tmp_path):
    done = stats("--run", str(run), "--out", str(tmp_path / "stats"), "--sft", str(tmp_path / "nothing"))
    assert done.returncode == 1
    assert len(done.stderr.strip().splitlines()) == 1 and "--sft" in done.stderr


def seal_report(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "seal.cli", "report", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_seal_report_is_the_same_view_as_the_script(result, run, tmp_path):
    """`seal report RUN --out DIR` prints and writes what `stats_validation_bfcl.py --run RUN` does."""
    script, script_out = result
    done = seal_report(str(run), "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.replace(str(tmp_path), "OUT") == script.stdout.replace(str(script_out), "OUT")
    for name in ("pass_rates.csv", "label_shares.csv"):
        assert (tmp_path / name).read_text() == (script_out / name).read_text()


def test_seal_report_of_two_runs_writes_each_into_its_own_folder(run, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "validation").symlink_to(run / "validation")
    done = seal_report(str(run), str(other), "--out", str(tmp_path / "both"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "both" / run.name / "pass_rates.csv").is_file()
    assert (tmp_path / "both" / "other" / "val_curves.png").is_file()
    assert done.stdout.count("best val: step 10 (Avg 25.00)") == 2


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (["nothing"], 1, "seal report: "),
        (["a", "b", "c"], 2, "give one run, or two to compare"),
        (["a", "--steps", "--out", "x"], 2, "--out and --sft belong to the pass-rate report"),
    ],
)
def test_seal_report_refuses_in_one_line(args, status, message, tmp_path):
    done = seal_report(*[str(tmp_path / a) if a[0] != "-" and a != "x" else a for a in args])
    assert done.returncode == status and message in done.stderr
    assert done.stderr.strip().splitlines()[-1].count(message) == 1
