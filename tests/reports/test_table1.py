"""`scripts/compare_runs.py RUN... --baseline NAME=DIR`: the paper's Table 1 from `seal eval` folders (the
base model, the SFT start) above the arms' run folders (mean ± std across seeds, val after training and the
test of the best-val checkpoint); a malformed or unreadable baseline is one line and writes nothing."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
from pathlib import Path

import pytest

from seal.bfcl.tasks import CATEGORIES, category_of, split_ids
from seal.evaluation.command import add_eval_arguments, run_eval_command
from seal.results.tables import SHORT_NAMES
from tests.support.run_folders import write_dump, write_launch, write_training
from tests.support.script_module import load_script
from tests.support.scripted_endpoint import Script, serve

compare_runs = load_script("compare_runs")
pytestmark = pytest.mark.heavy_setup  # `project`: four composed and trained runs, three seal eval folders
VAL_TASKS = [
    "multi_turn_base_4",
    "multi_turn_base_9",
    "multi_turn_miss_func_9",
    "multi_turn_miss_func_21",
    "multi_turn_miss_param_29",
    "multi_turn_miss_param_34",
    "multi_turn_long_context_48",
    "multi_turn_long_context_77",
]
"""Two val tasks per category, each opening with its own question (the scripted oracle tells them apart)."""
TEST_TASKS = [
    "multi_turn_base_1",
    "multi_turn_miss_func_6",
    "multi_turn_miss_param_7",
    "multi_turn_long_context_8",
]
STUCK = {  # baseline -> the tasks its model repeats itself on (and fails); the oracle passes the others
    "base": ["multi_turn_base_4", "multi_turn_miss_func_9", "multi_turn_miss_func_21"],
    "SFT": ["multi_turn_miss_param_34"],
    "base_test": ["multi_turn_miss_func_6"],
}
STEPS = 4
AFTER = {
    ("seal", 1): (9, 6, 7, 4),
    ("seal", 2): (11, 5, 8, 3),
    ("vanilla", 1): (5, 3, 4, 1),
    ("vanilla", 2): (6, 2, 4, 2),
}
"""(arm, seed) -> passing val tasks per category after training."""
TESTED = {("seal", 1): (20, 9, 14, 5), ("seal", 2): (24, 12, 13, 8), ("vanilla", 1): (12, 6, 7, 3)}
"""(arm, seed) -> passing test tasks per category of the best-val checkpoint; vanilla's seed 2 is untested."""


def evaluate(out: Path, split: str, tasks: list[str], stuck: list[str]) -> Path:
    parser = argparse.ArgumentParser()
    add_eval_arguments(parser)
    with serve(Script(tasks, repeats=dict.fromkeys(stuck, "Let me think."))) as url:
        argv = ["--base-url", url, "--model", "oracle", "--out", str(out), "--tasks", ",".join(tasks)]
        assert run_eval_command(parser.parse_args([*argv, "--split", split, "--max-llm-calls", "12"])) == 0
    return out


def build_run(root: Path, arm: str, seed: int) -> Path:
    run, config = write_launch(root, f"learn_{arm}", [f"seed={seed}", "actor_rollout_ref.model.path=/m"])
    write_training(run, config, [[1.0, 0.0, 0.0, 0.0]] * STEPS)
    write_dump(run / "validation" / "0.jsonl", "val", 0, (2, 1, 1, 0))
    write_dump(run / "validation" / f"{STEPS}.jsonl", "val", STEPS, AFTER[(arm, seed)])
    if (arm, seed) in TESTED:
        write_dump(
            run / "test" / f"global_step_{STEPS}" / f"{STEPS}.jsonl", "test", STEPS, TESTED[(arm, seed)]
        )
        selection = {"best_step": STEPS, "last_step": STEPS, "val_mean": {}}
        (run / "test_report.json").write_text(json.dumps({"selection": selection, "test": {}}))
    return run


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("project")
    for arm, seed in AFTER:
        build_run(root, arm, seed)
    evaluate(root / "eval_base_val", "val", VAL_TASKS, STUCK["base"])
    evaluate(root / "eval_sft_val", "val", VAL_TASKS, STUCK["SFT"])
    evaluate(root / "eval_base_test", "test", TEST_TASKS, STUCK["base_test"])
    return root


def runs(root: Path) -> list[str]:
    return [str(root / "experiments" / f"learn_{arm}_s{seed}") for arm, seed in AFTER]


def table1(text: str) -> list[dict[str, str]]:
    title = "### Table 1: pass rate (%) per category, mean ± std across seeds\n\n"
    lines = text.split(title, 1)[1].split("\n\n", 1)[0].splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    return [
        dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True)) for line in lines[2:]
    ]


def rates_from_episodes(folder: Path) -> dict[str, float]:
    """Per category the share of the folder's episodes with reward 1.0, in %, and their mean as "Avg"."""
    episodes = [json.loads(line) for line in (folder / "episodes.jsonl").read_text().splitlines()]
    rates = {
        SHORT_NAMES[c]: 100
        * statistics.fmean(e["reward"] == 1.0 for e in episodes if category_of(e["task_id"]) == c)
        for c in CATEGORIES
    }
    return {**rates, "Avg": statistics.fmean(rates.values())}


def arm_cells(passes: list[tuple[int, ...]], split: str) -> dict[str, str]:
    """Each category's and the Avg's mean ± std across seeds (%), from the dumps' passing task counts."""
    sizes = [sum(category_of(t) == c for t in split_ids(split)) for c in CATEGORIES]
    per_seed = [[100 * n / size for n, size in zip(seed, sizes, strict=True)] for seed in passes]
    columns = {SHORT_NAMES[c]: [rates[i] for rates in per_seed] for i, c in enumerate(CATEGORIES)}
    columns["Avg"] = [statistics.fmean(rates) for rates in per_seed]
    cell = {}
    for name, values in columns.items():
        spread = f"{statistics.stdev(values):.1f}" if len(values) > 1 else "—"
        cell[name] = f"{statistics.fmean(values):.1f} ± {spread}"
    return cell


def test_table1_shows_the_baselines_then_each_arm_per_split(project, tmp_path):
    out = tmp_path / "comparison"
    baselines = [
        f"{name}={project / folder}"
        for name, folder in (("base", "eval_base_val"), ("SFT", "eval_sft_val"), ("base", "eval_base_test"))
    ]
    argv = [*runs(project), "--out", str(out), "--baseline", baselines[0], "--baseline", baselines[1]]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert compare_runs.main([*argv, "--baseline", baselines[2]]) == 0
    rows = table1(printed.getvalue())
    assert [(row["model"], row["split"]) for row in rows] == [
        ("base", "val"),
        ("SFT", "val"),
        ("+ SEAL", "val"),
        ("+ vanilla", "val"),
        ("base", "test"),
        ("+ SEAL", "test"),
        ("+ vanilla", "test"),
    ]  # a test baseline sits with the test rows, never beside val numbers
    columns = ["base", "miss_func", "miss_param", "long_context", "Avg"]
    for row, folder in zip(rows, ("eval_base_val", "eval_sft_val"), strict=False):
        expected = rates_from_episodes(project / folder)
        assert 0 < expected["Avg"] < 100 and len(set(expected.values())) > 2  # the fixture is not all alike
        assert {k: row[k] for k in columns} == {k: f"{expected[k]:.1f}" for k in columns}
    test_base = rates_from_episodes(project / "eval_base_test")
    assert {k: rows[4][k] for k in columns} == {k: f"{test_base[k]:.1f}" for k in columns}
    for index, arm in ((2, "seal"), (3, "vanilla")):
        assert {k: rows[index][k] for k in columns} == arm_cells([AFTER[(arm, s)] for s in (1, 2)], "val")
    tested = {arm: [passes for (a, _), passes in TESTED.items() if a == arm] for arm in ("seal", "vanilla")}
    assert {k: rows[5][k] for k in columns} == arm_cells(tested["seal"], "test")
    assert {k: rows[6][k] for k in columns} == arm_cells(
        tested["vanilla"], "test"
    )  # one seed tested: no spread
    assert rows[6]["Avg"].endswith(" ± —")
    assert table1((out / "comparison.md").read_text()) == rows


def test_without_a_baseline_there_is_no_table1(project, tmp_path):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert compare_runs.main([*runs(project)[:2], "--out", str(tmp_path / "out")]) == 0
    assert "Table 1" not in printed.getvalue()


@pytest.mark.parametrize(
    ("baseline", "code", "says"),
    [
        ("eval_base_val", 2, "expected NAME=DIR"),
        ("base=", 2, "expected NAME=DIR"),
        ("base={root}/nowhere", 1, "--baseline base: no such folder"),
        (
            "SFT={root}/experiments/learn_seal_s1",
            1,
            "--baseline SFT: {root}/experiments/learn_seal_s1 is not a seal eval",
        ),
        (
            "base={root}/eval_base_val --baseline base={root}/eval_sft_val",
            1,
            "--baseline base: two val folders under one name",
        ),
    ],
)
def test_a_bad_baseline_is_one_line_and_writes_nothing(project, tmp_path, capsys, baseline, code, says):
    out = tmp_path / "out"
    argv = [*runs(project), "--out", str(out), "--baseline", *baseline.format(root=project).split(" ")]
    assert compare_runs.main(argv) == code
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and says.format(root=project) in captured.err
    assert captured.out == "" and not out.exists()
