"""scripts/compare_runs.py (seal/reports/compare.py) on six run folders shaped as launches leave them: the
learning recipe's two arms x three seeds, arm and seed read from the launch records."""

from __future__ import annotations

import csv
import json
import shutil
import statistics
from pathlib import Path

import pytest
from PIL import Image

from seal.reports.compare import ComparisonError, compare, read_run
from tests.support.run_folders import GROUP, write_dump, write_launch, write_training
from tests.support.script_module import load_script

compare_runs = load_script("compare_runs")
pytestmark = pytest.mark.heavy_setup  # `root`: six composed and trained runs
SEEDS = (1, 2, 3)
STEPS = 24
BATCH = 16
BEFORE = (2, 1, 1, 0)  # passing val tasks per category (of 25) of the shared SFT start
AFTER = {  # (arm, seed) -> passing val tasks per category after training
    ("seal", 1): (7, 4, 5, 2),
    ("seal", 2): (8, 5, 4, 2),
    ("seal", 3): (7, 5, 5, 3),
    ("vanilla", 1): (3, 2, 2, 1),
    ("vanilla", 2): (4, 1, 2, 1),
    ("vanilla", 3): (3, 2, 3, 0),
}


def rewards(arm: str, seed: int) -> list[list[float]]:
    """Per step, the batch's rewards: the first k trajectories pass, k rising with the step."""
    batches = []
    for step in range(1, STEPS + 1):
        k = min(BATCH, (2 + step // 3 + seed) if arm == "seal" else (1 + step // 6 + seed % 2))
        batches.append([1.0] * k + [0.0] * (BATCH - k))
    return batches


def avg(passes: tuple[int, ...]) -> float:
    return 100 * statistics.fmean(p / 25 for p in passes)


def mixed_share(batch: list[float]) -> float:
    groups = [batch[i : i + GROUP] for i in range(0, len(batch), GROUP)]
    return sum(len(set(group)) > 1 for group in groups) / len(groups)


def build(root: Path, arm: str, seed: int, extra: tuple[str, ...] = ()) -> Path:
    run, config = write_launch(
        root, f"learn_{arm}", [f"seed={seed}", "actor_rollout_ref.model.path=/m", *extra]
    )
    write_training(run, config, rewards(arm, seed))
    write_dump(run / "validation" / "0.jsonl", "val", 0, BEFORE)
    write_dump(run / "validation" / f"{STEPS}.jsonl", "val", STEPS, AFTER.get((arm, seed), AFTER[(arm, 1)]))
    return run


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("project")
    for arm, seed in AFTER:
        build(root, arm, seed)
    return root


def runs(root: Path) -> list[Path]:
    return [root / "experiments" / f"learn_{arm}_s{seed}" for arm, seed in AFTER]


@pytest.fixture(scope="module")
def printed(root: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    out = tmp_path_factory.mktemp("comparison")
    capture = tmp_path_factory.mktemp("stdout") / "out.txt"
    import contextlib

    with capture.open("w") as handle, contextlib.redirect_stdout(handle):
        assert compare_runs.main([*map(str, runs(root)), "--out", str(out)]) == 0
    return capture.read_text(), out


def table(text: str, title: str) -> list[dict[str, str]]:
    """The markdown table under `### title` in `text`, as rows of cells by header."""
    lines = text.split(f"### {title}\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    return [
        dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")), strict=True))
        for line in lines[2:]
    ]


def pm(values: list[float], digits: int) -> str:
    return f"{statistics.fmean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def test_arm_and_seed_come_from_the_launch_record_not_the_folder_name(root, tmp_path):
    renamed = tmp_path / "experiments" / "whatever"
    shutil.copytree(root / "experiments" / "learn_vanilla_s2", renamed)
    shutil.copytree(root / "launcher_record" / "learn_vanilla_s2", tmp_path / "launcher_record" / "whatever")
    run = read_run(renamed)
    assert (run.arm, run.seed, run.planned_steps, len(run.steps)) == ("vanilla", 2, STEPS, STEPS)
    assert "--conf exp/learn_vanilla.yaml" in run.command and "seed=2" in run.command
    assert (read_run(root / "experiments" / "learn_seal_s3").arm, read_run(runs(root)[2]).seed) == ("SEAL", 3)


def test_six_runs_print_the_per_arm_table_with_the_spread_across_seeds(printed):
    text, _ = printed
    summary = {row["arm"]: row for row in table(text, "Per arm, across seeds (mean ± sample std)")}
    assert "warning:" not in text  # the seeds of an arm differ in their seed only
    assert list(summary) == ["SEAL", "vanilla"]
    for arm, name in (("seal", "SEAL"), ("vanilla", "vanilla")):
        row = summary[name]
        assert (row["seeds"], row["steps"], row["of"]) == ("1, 2, 3", str(STEPS), str(STEPS))
        after = [avg(AFTER[(arm, seed)]) for seed in SEEDS]
        assert row["val Avg after (%)"] == pm(after, 1)
        assert row["val Avg before (%)"] == f"{avg(BEFORE):.1f} ± 0.0"
        assert row["gain (points)"] == pm([a - avg(BEFORE) for a in after], 1)
        shares = [statistics.fmean(mixed_share(b) for b in rewards(arm, seed)) for seed in SEEDS]
        assert row["mixed groups"] == pm(shares, 3)
        last = [
            statistics.fmean(statistics.fmean(b) for b in rewards(arm, seed)[-STEPS // 4 :]) for seed in SEEDS
        ]
        assert row["train reward, last quarter"] == pm(last, 3)
    low, high = map(float, summary["SEAL"]["A-Patch factors"].split("–"))
    assert 0.5 <= low <= 1.0 < high <= 2.0  # dynamic A-Patch scaled some advantages up
    assert summary["vanilla"]["A-Patch factors"] == "1.00–1.00"
    assert (summary["SEAL"]["Ω version"], summary["vanilla"]["Ω version"]) == (str(STEPS), "—")


def test_the_category_table_and_the_reward_per_step_are_means_across_seeds(printed):
    text, out = printed
    categories = table(text, "Greedy val pass rate (%) per category, before and after training")
    after = next(row for row in categories if (row["arm"], row["val"]) == ("SEAL", "after"))
    assert after["miss_func"] == pm([100 * AFTER[("seal", s)][1] / 25 for s in SEEDS], 1)
    assert after["Avg"] == pm([avg(AFTER[("seal", s)]) for s in SEEDS], 1)
    steps = table(text, "Train reward per step (mean ± std across seeds)")
    assert len(steps) == STEPS
    for arm, name in (("seal", "SEAL"), ("vanilla", "vanilla")):
        means = [statistics.fmean(rewards(arm, seed)[9]) for seed in SEEDS]
        assert steps[9][name] == pm(means, 3)
    with (out / "reward_curves.csv").open() as handle:
        assert len(list(csv.reader(handle))) == STEPS + 3  # two header lines (arm, statistic), step label


def test_what_the_runs_did_and_their_label_shares_are_per_step_means_across_seeds(printed):
    text, _ = printed
    dynamics = {
        row["arm"]: row for row in table(text, "What the runs did: per-step means (mean ± std across seeds)")
    }
    steps = range(1, STEPS + 1)
    for name in ("SEAL", "vanilla"):  # verl's keys, the same in every run (tests/support/run_folders.py)
        row = dynamics[name]
        assert row["entropy"] == f"{statistics.fmean(0.6 - s / 100 for s in steps):.3f} ± 0.000"
        assert row["grad norm"] == f"{statistics.fmean(0.3 + s / 50 for s in steps):.3f} ± 0.000"
        assert (row["response clipped"], row["environment errors"]) == ("0.250 ± 0.000", "0.0 ± 0.0")
        assert row["cut by the window"] == "0.000 ± 0.000"  # no synthetic episode hit a limit
    assert float(dynamics["SEAL"]["A-Patch mean factor"].split(" ± ")[0]) > 1.0
    labels = {
        row["arm"]: row
        for row in table(text, "Turn labels: share of the train batches' labels (mean ± std across seeds)")
    }
    for arm, name in (("seal", "SEAL"), ("vanilla", "vanilla")):
        passing = [statistics.fmean(statistics.fmean(b) for b in rewards(arm, seed)) for seed in SEEDS]
        assert labels[name]["pass"] == pm(passing, 3)
        mean, std = map(float, labels[name]["empty_turn_model_response"].split(" ± "))
        failing = [1 - p for p in passing]  # the other label of the synthetic runs
        assert (mean, std) == pytest.approx((statistics.fmean(failing), statistics.stdev(failing)), abs=1e-3)


def test_a_metric_no_run_logged_is_a_dash_not_a_zero(root, tmp_path):
    shutil.copytree(
        root / "launcher_record" / "learn_seal_s1", tmp_path / "launcher_record" / "learn_seal_s1"
    )
    run = tmp_path / "experiments" / "learn_seal_s1"
    shutil.copytree(root / "experiments" / "learn_seal_s1", run)
    for path in (run / "metrics").glob("*.jsonl"):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        for line in lines:
            line["data"].pop("seal/env_error_count", None)
            line["data"].pop("actor/entropy", None)
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    (row,) = table(
        compare([run], tmp_path / "out").text, "What the runs did: per-step means (mean ± std across seeds)"
    )
    assert (row["entropy"], row["environment errors"]) == ("—", "—")
    assert row["grad norm"].endswith(" ± —")  # logged, one seed: no spread


def test_one_line_says_the_difference_is_larger_than_the_spread_and_the_plot_is_written(printed):
    text, out = printed
    (line,) = table_lines(text, "Verdict")
    gap = statistics.fmean(avg(AFTER[("seal", s)]) for s in SEEDS) - statistics.fmean(
        avg(AFTER[("vanilla", s)]) for s in SEEDS
    )
    assert line.startswith(
        f"- SEAL against vanilla: val Avg after training differs by {gap:+.1f} points, larger"
    )
    assert (out / "comparison.md").read_text() in text
    with Image.open(out / "learning_curves.png") as image:
        image.verify()
        assert image.format == "PNG" and image.size[0] > 600 and image.size[1] > 300


def table_lines(text: str, title: str) -> list[str]:
    return text.split(f"### {title}\n\n", 1)[1].split("\n\n", 1)[0].strip().splitlines()


def test_arms_whose_seeds_overlap_are_not_called_different(root, tmp_path):
    close = tmp_path / "close"
    shutil.copytree(root, close)
    for seed, passes in zip(SEEDS, ((4, 2, 2, 1), (3, 2, 2, 1), (4, 3, 3, 1)), strict=True):
        write_dump(
            close / "experiments" / f"learn_seal_s{seed}" / "validation" / f"{STEPS}.jsonl",
            "val",
            STEPS,
            passes,
        )
    result = compare(runs(close), tmp_path / "out")
    (line,) = table_lines(result.text, "Verdict")
    assert "not larger than the spread across seeds" in line


def test_seeds_of_one_arm_differing_in_more_than_the_seed_are_named(root, tmp_path):
    other = build(tmp_path, "seal", 4, ("actor_rollout_ref.actor.optim.lr=2e-5",))
    with pytest.warns(UserWarning, match=r"learn_seal_s4 differs .* actor_rollout_ref\.actor\.optim\.lr"):
        shutil.copytree(root / "experiments", tmp_path / "experiments", dirs_exist_ok=True)
        shutil.copytree(root / "launcher_record", tmp_path / "launcher_record", dirs_exist_ok=True)
        compare([*runs(tmp_path), other], tmp_path / "out")


def test_unreadable_runs_are_one_line_and_exit_1(root, tmp_path, capsys):
    bare = tmp_path / "experiments" / "bare"
    shutil.copytree(root / "experiments" / "learn_seal_s1", bare)
    assert compare_runs.main([str(bare), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no launch record" in err
    assert compare_runs.main([str(tmp_path / "nothing")]) == 1
    assert "no such run folder" in capsys.readouterr().err
    test_split = tmp_path / "test_split"
    shutil.copytree(root, test_split)
    write_dump(
        test_split / "experiments" / "learn_seal_s1" / "validation" / f"{STEPS}.jsonl",
        "test",
        STEPS,
        (1, 1, 1, 1),
    )
    with pytest.raises(ComparisonError, match="outside the val split"):
        compare(runs(test_split), tmp_path / "out")
    twice = [root / "experiments" / "learn_seal_s1"] * 2
    with pytest.raises(ComparisonError, match="same seed"):
        compare(twice, tmp_path / "out")


def test_a_record_written_before_credentials_were_masked_is_read_masked(tmp_path):
    run = build(tmp_path, "vanilla", 1)
    (record,) = (tmp_path / "launcher_record" / run.name).iterdir()
    secret = "pw-SENTINEL-0b4f"
    saved = json.loads((record / "record.json").read_text())
    saved["command"] += ["--env-url", f"http://user:{secret}@h:8"]
    (record / "record.json").write_text(json.dumps(saved))
    config = (record / "config.yaml").read_text()
    (record / "config.yaml").write_text(config.replace("env_url: ", f"env_url: http://user:{secret}@h:9 #"))
    read = read_run(run)
    assert read.command.endswith("--env-url http://***@h:8")
    assert read.config["seal.rollout.env_url"] == "http://***@h:9"


@pytest.mark.parametrize(
    ("file", "line", "says"),
    [
        ("validation/0.jsonl", "[1, 2]", "expected a JSON object, got a JSON array"),
        ("validation/0.jsonl", '{"task_id": "multi_turn_base_0", "score": NaN}', "not a finite number"),
        ("validation/0.jsonl", "{not json", "not JSON"),
        ("metrics/20260101T000000Z.jsonl", '{"step": "x", "data": {}}', "a metrics line is"),
    ],
)
def test_a_bad_line_in_a_run_is_one_error_naming_its_file_and_line(tmp_path, file, line, says):
    run = build(tmp_path, "vanilla", 1)
    path = run / file
    count = len(path.read_text().splitlines())
    path.write_text(path.read_text() + line + "\n")
    with pytest.raises(ComparisonError) as raised:
        read_run(run)
    assert str(raised.value).startswith(f"{path}:{count + 1}: ") and says in str(raised.value)
