"""Landing a node's results (`python -m seal.results.landing`): a sitting's archive unpacked and its line put
in runs.jsonl, replacing the same arm and seed; its start's line, derived from the sitting or taken from
`starts` with the sitting's test pass; landing twice changes nothing; bad input is one line and leaves the
folder as it was."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from seal.bfcl.tasks import CATEGORIES
from seal.results import landing
from seal.results.campaign import RUNS, SFT_STARTS, SftStart, Sitting, read_lines

MODEL = "tiny_model"
COMMIT = "abc1234"


def rates(value: float) -> dict[str, float]:
    return dict.fromkeys(CATEGORIES, value)


def sitting_line(arm: str, seed: int, date: str = "2026-11-30", test_before: float | None = 0.12) -> dict:
    """A result line as `seal.reports.sitting` writes it, phases included."""
    line = {
        "arm": arm,
        "seed": seed,
        "card": "H200",
        "gpus": 2,
        "sft_gpus": 2,
        "date": date,
        "commit": COMMIT,
    }
    line |= {"files": f"{arm}_s{seed}_{date}", "steps": 16, "mixed_share_mean": 0.25, "sitting_s": 1153}
    for key, value in (("sft_val", 0.2), ("val_before", 0.2), ("val_after", 0.04), ("test_after", 0.08)):
        line |= {key: value, f"{key}_by_category": rates(value)}
    line |= {"sft_mixed": 0.375, "sft_mixed_by_category": None, "phases": {"install": 65, "sft": 231}}
    if test_before is not None:
        line |= {"test_before": test_before, "test_before_by_category": rates(test_before)}
    return line


def archive(
    folder: Path, line: dict, sft_steps: int = 60, model: str = MODEL, extra: dict | None = None
) -> Path:
    """The sitting's archive as `pack_sitting` makes it: results/<model>/<files>/ with its small files."""
    files = {
        "result.json": json.dumps(line).encode(),
        "metrics/arm.jsonl": b'{"step": 1, "data": {"seal/groups/mixed_share": 0.25}}\n',
        "sft_metrics.jsonl": "".join(
            json.dumps({"step": s}) + "\n" for s in range(1, sft_steps + 1)
        ).encode(),
        "task_scores.csv": b"split,when,task_id,score\n",
    } | (extra or {})
    path = folder / f"sitting_{line['arm']}_s{line['seed']}_{line['date']}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            member = tarfile.TarInfo(f"results/{model}/{line['files']}/{name}")
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    return path


def scored_start(seed: int = 1, gpus: int = 2) -> dict:
    """A line as `starts` writes it for a sitting's start scored after its arms."""
    return (
        {"recipe": "exp/sft_qwen.yaml", "experiment": f"sft_qwen_s{seed}", "card": "H200", "gpus": gpus}
        | {"steps": 60, "val": 0.21, "val_by_category": rates(0.21), "train_s": 231, "score_s": 239}
        | {"mixed": 0.47, "mixed_by_category": rates(0.47), "pass_at_1": 0.12, "pass_at_8": 0.47}
        | {"mixed_tasks_seed": seed, "date": "2026-11-30", "commit": COMMIT}
    )


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A project with the SFT recipe and a results folder holding one earlier sitting and one start."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp/sft_qwen.yaml").write_text("trainer:\n  total_training_steps: 60\n")
    results = tmp_path / "results" / MODEL
    earlier = sitting_line("vanilla", 1, date="2026-11-28")
    (results / earlier["files"] / "metrics").mkdir(parents=True)
    (results / earlier["files"] / "metrics/arm.jsonl").write_text('{"step": 1, "data": {}}\n')
    (results / RUNS).write_text(json.dumps(earlier) + "\n")
    first = scored_start(seed=9) | {"date": "2026-11-28", "commit": "0000000"}
    (results / SFT_STARTS).write_text(json.dumps(first) + "\n")
    return results


def run(results: Path, *argv: str) -> int:
    return landing.main(["--results", str(results), *argv])


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_sitting_lands_its_files_its_line_and_a_line_for_its_start(project, tmp_path, capsys):
    line = sitting_line("full_loop", 1)
    path = archive(tmp_path, line)
    assert run(project, str(path)) == 0
    folder = project / line["files"]
    with tarfile.open(path) as tar:
        for member in tar.getmembers():
            assert (tmp_path / member.name).read_bytes() == tar.extractfile(member).read()
    runs = [json.loads(text) for text in (project / RUNS).read_text().splitlines()]
    assert [(r["arm"], r["seed"]) for r in runs] == [("vanilla", 1), ("full_loop", 1)]
    assert runs[1] == line  # as the sitting wrote it, phases included
    assert len(read_lines(project / RUNS, Sitting)) == 2
    starts = read_lines(project / SFT_STARTS, SftStart)
    assert len(starts) == 2
    start = starts[1]
    assert (start.experiment, start.recipe, start.gpus, start.steps) == (
        "sft_qwen_s1",
        "exp/sft_qwen.yaml",
        2,
        60,
    )
    assert (start.val, start.test, start.train_s, start.score_s, start.mixed) == (0.2, 0.12, 231, None, None)
    assert (start.date, start.commit) == (line["date"], COMMIT)
    assert folder.is_dir()
    out = capsys.readouterr().out
    assert "runs.jsonl: added full_loop seed 1" in out and "mixed not measured" in out


def test_a_scored_start_takes_its_sitting_s_test_pass_and_no_second_line_is_derived(project, tmp_path):
    starts_file = tmp_path / "starts.jsonl"
    starts_file.write_text(json.dumps(scored_start()) + "\n")
    assert (
        run(project, str(archive(tmp_path, sitting_line("full_loop", 1))), "--starts", str(starts_file)) == 0
    )
    lines = [json.loads(text) for text in (project / SFT_STARTS).read_text().splitlines()]
    assert len(lines) == 2
    assert lines[1] == scored_start() | {"test": 0.12, "test_by_category": rates(0.12)}


def test_landing_twice_changes_nothing_and_a_sitting_run_again_replaces_its_line(project, tmp_path, capsys):
    path = archive(tmp_path, sitting_line("seal", 2))
    assert run(project, str(path)) == 0
    once = snapshot(project)
    assert run(project, str(path)) == 0
    assert snapshot(project) == once
    again = sitting_line("seal", 2, date="2026-12-01")
    assert run(project, str(archive(tmp_path, again))) == 0
    runs = read_lines(project / RUNS, Sitting)
    assert [(r.arm, r.seed, r.date) for r in runs] == [
        ("vanilla", 1, "2026-11-28"),
        ("seal", 2, "2026-12-01"),
    ]
    assert (project / "seal_s2_2026-11-30" / "result.json").is_file()  # the earlier run's files are kept
    assert "runs.jsonl: replaced seal seed 2" in capsys.readouterr().out


def test_a_pair_of_arms_from_one_start_gives_that_start_one_line(project, tmp_path):
    pair = [archive(tmp_path, sitting_line(arm, 3)) for arm in ("vanilla", "seal")]
    assert run(project, *map(str, pair)) == 0
    starts = read_lines(project / SFT_STARTS, SftStart)
    assert [s.experiment for s in starts] == ["sft_qwen_s9", "sft_qwen_s3"]


def test_a_start_of_another_length_says_so_in_its_recipe(project, tmp_path):
    assert run(project, str(archive(tmp_path, sitting_line("seal", 4), sft_steps=90))) == 0
    start = read_lines(project / SFT_STARTS, SftStart)[-1]
    assert (start.recipe, start.steps) == ("exp/sft_qwen.yaml trainer.total_training_steps=90", 90)


def test_a_start_scored_alone_lands_as_written(project, tmp_path):
    starts_file = tmp_path / "starts.jsonl"
    starts_file.write_text(json.dumps(scored_start(seed=5, gpus=1)) + "\n")
    assert run(project, "--starts", str(starts_file)) == 0
    assert json.loads((project / SFT_STARTS).read_text().splitlines()[-1]) == scored_start(seed=5, gpus=1)


def outside(tmp_path: Path) -> Path:
    """A whole sitting plus one member whose path climbs out of its folder, to the project's root."""
    return archive(tmp_path, sitting_line("seal", 1), extra={"../../../escape.txt": b"x"})


def not_gzip(tmp_path: Path) -> Path:
    path = tmp_path / "plain.tar.gz"
    path.write_text("not an archive")
    return path


BAD = {
    "a member outside the project": lambda tmp: [str(outside(tmp))],
    "another model's archive": lambda tmp: [str(archive(tmp, sitting_line("seal", 1), model="other_model"))],
    "a line without its test after": lambda tmp: [
        str(archive(tmp, {k: v for k, v in sitting_line("seal", 1).items() if k != "test_after"}))
    ],
    "no archive at all": lambda tmp: [str(not_gzip(tmp))],
    "an arm named twice": lambda tmp: [
        str(archive(tmp, sitting_line("seal", 1))),
        str(archive(tmp, sitting_line("seal", 1, date="2026-12-02"))),
    ],
    "a starts line without its commit": lambda tmp: [
        str(archive(tmp, sitting_line("seal", 1))),
        "--starts",
        str(write(tmp / "starts.jsonl", {k: v for k, v in scored_start().items() if k != "commit"})),
    ],
    "a file there with other bytes": lambda tmp: [
        str(archive(tmp, sitting_line("vanilla", 1, date="2026-11-28"), extra={"metrics/arm.jsonl": b"{}\n"}))
    ],
}


def write(path: Path, line: dict) -> Path:
    path.write_text(json.dumps(line) + "\n")
    return path


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_and_leaves_the_folder_as_it_was(project, tmp_path, capsys, case):
    before = snapshot(project)
    argv = BAD[case](tmp_path)
    assert run(project, *argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("landing: ") and err.count("\n") == 1, err
    assert snapshot(project) == before
    assert not (tmp_path / "escape.txt").exists()


def test_nothing_to_land_is_a_usage_error(project):
    with pytest.raises(SystemExit) as stop:
        run(project)
    assert stop.value.code == 2
