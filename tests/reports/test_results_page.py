"""The results page generated from a model's result files (`compare_runs.py --results`): Table 1's means and
spreads, the paired SEAL − vanilla differences and the verdict follow from the lines; a stale page fails
`--check`; a bad line is one line naming the file and line, and nothing is written."""

from __future__ import annotations

import json
import math
import random
import statistics
from pathlib import Path

import pandas as pd
import pytest

from seal.bfcl.tasks import CATEGORIES, get_task, split_ids
from seal.env.interface import GUIDELINES
from seal.reports import results_page
from seal.reports import sitting as sitting_module
from seal.results.campaign import RUNS, CampaignError, read_campaign
from seal.results.tables import SHORT_NAMES
from tests.support.script_module import load_script

compare_runs = load_script("compare_runs")
make_docs_reference = load_script("make_docs_reference")
MODEL = "Tiny-Model"
PAGE = (
    f"# {MODEL}\n\nhand-written story\n\n{results_page.BEGIN}\n{results_page.END}\n\nhand-written commands\n"
)
README = (
    f"| model | before RL | + vanilla GRPO | + SEAL | where |\n|---|---|---|---|---|\n| {MODEL} | old |\n"
)


def by_category(rng: random.Random) -> dict[str, float]:
    return {c: rng.randrange(0, 26) / 25 for c in CATEGORIES}


def avg(rates: dict[str, float]) -> float:
    return statistics.fmean(rates.values())


def sitting(rng: random.Random, arm: str, seed: int, boost: float = 0.0) -> dict:
    """A result line with random per-category rates (`boost` added to test after) as the sitting writes it:
    the start's val is val before, its mixed share has no categories; its metrics written by the caller
    under files/."""
    line = {"arm": arm, "seed": seed, "card": "H200", "gpus": 2, "steps": 4, "sitting_s": 1200.0}
    for key in ("val_before", "val_after", "test_after"):
        rates = by_category(rng)
        if key == "test_after":
            rates = {c: min(1.0, r + boost) for c, r in rates.items()}
        line |= {key: avg(rates), f"{key}_by_category": rates}
    line |= {"sft_val": line["val_before"], "sft_val_by_category": line["val_before_by_category"]}
    line |= {"sft_mixed": rng.choice([0.25, 0.5]), "sft_mixed_by_category": None}
    return line | {
        "mixed_share_mean": 0.25,
        "date": "2026-11-29",
        "commit": "abc1234",
        "files": f"{arm}_s{seed}",
    }


def metrics(rng: random.Random, steps: int = 4) -> list[dict]:
    """verl's file-logger lines: val before training, then steps with reward, mixed share and A-Patch."""
    lines = [{"step": 0, "data": {results_page.VAL: 0.1}}]
    for step in range(1, steps + 1):
        data = {
            "timing_s/step": 30.0,
            results_page.REWARD: rng.random(),
            results_page.MIXED: rng.choice([0.0, 0.25, 0.5]),
            results_page.FACTOR_MIN: 0.8,
            results_page.FACTOR_MEAN: 1 + rng.random() / 10,
            results_page.FACTOR_MAX: 1.4,
        }
        if step == steps:
            data[results_page.VAL] = 0.2
        lines.append({"step": step, "data": data})
    return lines


def write_results(folder: Path, lines: list[dict], seed: int = 0) -> Path:
    """A results folder holding `lines` as runs.jsonl (with each one's metrics), a base model and two SFT
    starts, plus a page and a README that take the generated part."""
    rng = random.Random(seed)
    results = folder / "results"
    results.mkdir(parents=True)
    zeros = dict.fromkeys(CATEGORIES, 0.0)
    base = {"model": MODEL, "val": 0.0, "val_by_category": zeros, "test": 0.0, "test_by_category": zeros}
    (results / "base.json").write_text(json.dumps(base | {"note": "measured"}))
    starts = []
    for gpus, recipe in ((1, "exp/sft.yaml"), (2, "exp/sft.yaml"), (1, "exp/sft.yaml a=b")):
        val, test, mixed = by_category(rng), by_category(rng), by_category(rng)
        starts.append(
            {"recipe": recipe, "experiment": f"sft_g{gpus}", "card": "H200", "gpus": gpus, "steps": 60}
            | {"val": avg(val), "val_by_category": val, "test": avg(test), "test_by_category": test}
            | {"mixed": avg(mixed), "mixed_by_category": mixed, "pass_at_1": 0.3, "pass_at_8": 0.6}
            | {"train_s": 400.0, "score_s": None, "date": "2026-11-28", "commit": "fe9c781"}
        )
    (results / "sft_starts.jsonl").write_text("".join(json.dumps(s) + "\n" for s in starts))
    for line in lines:
        (results / line["files"] / "metrics").mkdir(parents=True)
        text = "".join(json.dumps(m) + "\n" for m in metrics(rng))
        (results / line["files"] / "metrics" / "20261129T000000Z.jsonl").write_text(text)
    (results / RUNS).write_text("".join(json.dumps(line) + "\n" for line in lines))
    (folder / "docs").mkdir()
    (folder / "docs" / "page.md").write_text(PAGE)
    (folder / "README.md").write_text(README)
    return results


def args(folder: Path, *extra: str) -> list[str]:
    return [
        "--results",
        str(folder / "results"),
        "--page",
        str(folder / "docs" / "page.md"),
        "--readme",
        str(folder / "README.md"),
        *extra,
    ]


def pm(values: list[float]) -> str:
    return f"{100 * statistics.fmean(values):.1f} ± {100 * statistics.stdev(values):.1f}"


def campaign_lines(seeds: int = 3, boost: float = 0.0) -> list[dict]:
    rng = random.Random(7)
    return [
        sitting(rng, arm, seed, boost if arm == "seal" else 0.0)
        for arm in ("vanilla", "seal")
        for seed in range(1, seeds + 1)
    ]


def test_table1_gives_each_arm_its_mean_and_std_over_seeds_per_category_on_val_and_test(tmp_path):
    lines = campaign_lines()
    campaign = read_campaign(write_results(tmp_path, lines))
    rows = {(row["model"], row["split"]): row for row in results_page.table1_rows(campaign)}
    for arm, name in (("vanilla", "+ vanilla"), ("seal", "+ SEAL")):
        mine = [line for line in lines if line["arm"] == arm]
        for split, key in (("val", "val_after"), ("test", "test_after")):
            row = rows[name, split]
            assert row["Avg"] == pm([line[key] for line in mine])
            for category in CATEGORIES:
                assert row[SHORT_NAMES[category]] == pm(
                    [line[f"{key}_by_category"][category] for line in mine]
                )
    assert rows["base", "val"]["Avg"] == "0.0"


def test_table1s_sft_start_is_each_seeds_start_as_its_arms_scored_it_before_training(tmp_path):
    """One start a seed (its arms' mean, since each launch scores it once), on test only from the sittings
    that played the test split before training; the starts measured apart do not enter."""
    lines = campaign_lines()
    rng = random.Random(3)
    for line in lines:
        if line["seed"] != 3:
            rates = by_category(rng)
            line |= {"test_before": avg(rates), "test_before_by_category": rates}
    campaign = read_campaign(write_results(tmp_path, lines))
    rows = {(row["model"], row["split"]): row for row in results_page.table1_rows(campaign)}

    def per_seed(key: str, seeds: range, category: str | None = None) -> list[float]:
        def value(line: dict) -> float:
            return line[key] if category is None else line[f"{key}_by_category"][category]

        return [statistics.fmean(value(line) for line in lines if line["seed"] == seed) for seed in seeds]

    assert rows["SFT start", "val"]["Avg"] == pm(per_seed("val_before", range(1, 4)))
    assert rows["SFT start", "val"]["n"] == "3 start(s)"
    assert rows["SFT start", "test"]["Avg"] == pm(per_seed("test_before", range(1, 3)))
    assert rows["SFT start", "test"]["n"] == "2 start(s)"
    for category in CATEGORIES:
        expected = pm(per_seed("test_before", range(1, 3), category))
        assert rows["SFT start", "test"][SHORT_NAMES[category]] == expected


def test_without_a_sitting_table1_has_no_sft_start_to_show(tmp_path):
    rows = {
        (r["model"], r["split"]): r
        for r in results_page.table1_rows(read_campaign(write_results(tmp_path, [])))
    }
    assert rows["SFT start", "val"]["Avg"] == rows["SFT start", "test"]["Avg"] == "—"
    assert rows["SFT start", "val"]["n"] == "0 start(s)"


def test_a_start_scored_on_val_alone_shows_dashes_for_what_was_not_sampled(tmp_path):
    results = write_results(tmp_path, campaign_lines())
    val = dict.fromkeys(CATEGORIES, 0.5)
    checkpoint = {"recipe": "exp/sft.yaml", "experiment": "sft_curve", "card": "H200", "gpus": 2, "steps": 60}
    checkpoint |= {"val": 0.5, "val_by_category": val, "train_s": 534, "score_s": 136}
    checkpoint |= {"date": "2026-11-28", "commit": "55e0737"}
    sampled = checkpoint | {"val_samples": 8, "val_pass_at_1": 0.375, "val_pass_at_n": 0.75}
    sampled |= {"val_turns_passing": 0.4125}
    with (results / "sft_starts.jsonl").open("a") as file:
        file.write(json.dumps(sampled) + "\n" + json.dumps(checkpoint) + "\n")
    campaign = read_campaign(results)
    row = results_page.start_rows(campaign)[-1]
    shown = (row["val"], row["mixed"], row["pass@1"], row["pass@8"], row["test"], row["val pass@1 (T=1)"])
    assert shown == ("50.0", "—", "—", "—", "—", "—") and row["val turns passing"] == "—"
    before = results_page.start_rows(campaign)[-2]
    assert (before["val pass@1 (T=1)"], before["val turns passing"]) == ("37.5", "0.41")


def test_sampled_values_taken_with_one_seed_a_draw_are_marked_and_the_mark_explained(tmp_path):
    results = write_results(tmp_path, campaign_lines())
    assert results_page.SEED_PER_DRAW_NOTE not in results_page.starts_section(read_campaign(results))
    lines = (results / "sft_starts.jsonl").read_text().splitlines()
    marked = json.loads(lines[0]) | {"seed_per_draw": True}
    (results / "sft_starts.jsonl").write_text("\n".join([json.dumps(marked), *lines[1:]]) + "\n")
    campaign = read_campaign(results)
    first, second = results_page.start_rows(campaign)[:2]
    sampled = ("mixed", "pass@1", "pass@8")
    assert [first[key] for key in sampled] == [f"{marked['mixed']:.2f}†", "30.0†", "60.0†"]
    assert first["val"] == f"{100 * marked['val']:.1f}" and first["val pass@1 (T=1)"] == "—"
    assert [second[key] for key in sampled] == [f"{campaign.starts[1].mixed:.2f}", "30.0", "60.0"]
    assert results_page.starts_section(campaign).endswith(f"\n\n{results_page.SEED_PER_DRAW_NOTE}")


def test_the_paired_differences_are_seal_minus_vanilla_seed_by_seed(tmp_path):
    lines = campaign_lines()
    campaign = read_campaign(write_results(tmp_path, lines))
    rows = results_page.paired_rows(campaign.sittings)
    for key, column in (("val_after", "val after"), ("test_after", "test after")):
        differences = [seal[key] - vanilla[key] for vanilla, seal in zip(lines[:3], lines[3:], strict=True)]
        assert [row[column] for row in rows[:3]] == [f"{100 * d:+.1f}" for d in differences]
        assert rows[3][column] == pm(differences)


def test_the_verdict_says_whether_seal_beat_vanilla_and_rl_the_start_from_the_numbers(tmp_path):
    lines = campaign_lines(boost=0.3)
    for line in lines:
        line["val_after"] = line["val_before"] + 0.05 + 0.01 * line["seed"]
    campaign = read_campaign(write_results(tmp_path, lines))
    differences = [s["test_after"] - v["test_after"] for v, s in zip(lines[:3], lines[3:], strict=True)]
    sentence = results_page.verdict(campaign.sittings)
    beat = statistics.fmean(differences) > statistics.stdev(differences)
    assert sentence.startswith("SEAL beat vanilla" if beat else "SEAL did not beat vanilla")
    assert f"SEAL − vanilla on test {pm(differences)} points over 3 seed(s)" in sentence
    assert "RL beat the SFT start in every arm" in sentence and "not enough seeds" not in sentence


def test_rl_against_the_start_is_judged_on_test_where_every_sitting_of_the_arm_tested_before(tmp_path):
    lines = campaign_lines()
    for line in lines:  # val says RL lost; test, measured before and after, says it won
        line["val_after"] = line["val_before"] - 0.05 - 0.01 * line["seed"]
        before = {
            c: max(0.0, r - 0.1 - 0.01 * line["seed"]) for c, r in line["test_after_by_category"].items()
        }
        line |= {"test_before": avg(before), "test_before_by_category": before}
    del lines[0]["test_before"], lines[0]["test_before_by_category"]  # vanilla seed 1: an older sitting
    campaign = read_campaign(write_results(tmp_path, lines))
    sentence = results_page.verdict(campaign.sittings)
    gains = [line["test_after"] - line["test_before"] for line in lines[3:]]
    assert "RL beat the SFT start in SEAL only" in sentence
    assert f"SEAL {pm(gains)} on test" in sentence and "vanilla -" in sentence and "on val" in sentence
    rows = {row["arm"]: row for row in results_page.arm_rows(campaign.sittings)}
    assert rows["SEAL"]["test gain (points)"] == pm(gains)
    assert rows["SEAL"]["test before"] == pm([line["test_before"] for line in lines[3:]])
    vanilla = [line["test_after"] - line["test_before"] for line in lines[1:3]]
    assert rows["vanilla"]["test gain (points)"] == pm(vanilla)
    shown = {
        (row["arm"], row["seed"]): row["test before"] for row in results_page.sitting_rows(campaign.sittings)
    }
    assert shown["vanilla", "1"] == "—" and shown["SEAL", "1"] == f"{100 * lines[3]['test_before']:.1f}"


def write_task_scores(results: Path, line: dict, before: list[int], after: list[int]) -> None:
    """A sitting's task_scores.csv with those test outcomes (one per test task, in order) and val rows."""
    tasks = split_ids("test")[: len(before)]
    rows = [("test", "before", t, b) for t, b in zip(tasks, before, strict=True)]
    rows += [("test", "after", t, a) for t, a in zip(tasks, after, strict=True)]
    rows += [("val", when, split_ids("val")[0], 1.0) for when in ("before", "after")]
    frame = pd.DataFrame(rows, columns=["split", "when", "task_id", "score"])
    frame.to_csv(results / line["files"] / "task_scores.csv", index=False)


def test_task_by_task_each_arm_sums_its_sittings_flips_per_split_with_a_sign_test(tmp_path):
    lines = campaign_lines()
    results = write_results(tmp_path, lines)
    for line in lines[3:]:  # SEAL: 5 gained, 1 lost, 4 unchanged a seed
        write_task_scores(results, line, [0] * 5 + [1] + [1, 0, 1, 0], [1] * 5 + [0] + [1, 0, 1, 0])
    write_task_scores(results, lines[0], [1, 1], [1, 0])  # vanilla seed 1 only; seeds 2 and 3 hold none
    campaign = read_campaign(results)
    rows = {(row["arm"], row["split"]): row for row in results_page.flip_rows(campaign)}
    assert [(row["arm"], row["split"]) for row in results_page.flip_rows(campaign)] == [
        ("vanilla", "val"),
        ("vanilla", "test"),
        ("SEAL", "val"),
        ("SEAL", "test"),
    ]
    assert rows["SEAL", "val"]["unchanged"] == "3" and rows["SEAL", "val"]["sign test p"] == "1.000"
    assert [results_page.p_value(results_page.sign_test(g, 0)) for g in (10, 12)] == ["0.002", "< 0.001"]
    assert rows["SEAL", "test"] == {
        "arm": "SEAL",
        "split": "test",
        "sittings": "3",
        "gained (fail → pass)": "15",
        "lost (pass → fail)": "3",
        "unchanged": "12",
        "sign test p": f"{2 * sum(math.comb(18, i) for i in range(4)) / 2**18:.3f}",
    }
    vanilla = rows["vanilla", "test"]
    assert (vanilla["sittings"], vanilla["lost (pass → fail)"], vanilla["sign test p"]) == ("1", "1", "1.000")
    assert "| SEAL | test | 3 | 15 | 3 | 12 |" in results_page.render(campaign, [], "f.png")


def test_a_task_scores_file_without_a_test_before_counts_no_flips_and_a_broken_one_is_named(tmp_path):
    lines = campaign_lines()
    results = write_results(tmp_path, lines)
    pd.DataFrame({"split": ["test"], "when": ["after"], "task_id": ["t"], "score": [1.0]}).to_csv(
        results / lines[0]["files"] / "task_scores.csv", index=False
    )
    assert results_page.flip_rows(read_campaign(results)) == []
    (results / lines[1]["files"] / "task_scores.csv").write_text("not,a\nscores,file\n")
    with pytest.raises(CampaignError, match=r"task_scores.csv: not a task-scores file"):
        results_page.flip_rows(read_campaign(results))


def write_scored_episodes(results: Path, line: dict, rows: list[tuple]) -> None:
    """A sitting's task_scores.csv of those rows, in the columns a sitting writes (endings included)."""
    frame = pd.DataFrame(rows, columns=sitting_module.TASK_SCORE_COLUMNS)
    frame.to_csv(results / line["files"] / "task_scores.csv", index=False)


def unscored_campaign(folder: Path) -> tuple[list[dict], Path, str]:
    """A campaign whose sittings kept no task_scores.csv: its lines, its results folder and its page."""
    lines = campaign_lines()
    results = write_results(folder, lines)
    return lines, results, results_page.render(read_campaign(results), [], "f.png")


def assert_vanilla_then_seal(results: Path, vanilla: str, seal: str, gone: str) -> None:
    """The page of `results` shows vanilla's row, then SEAL's, and no longer the text `gone`."""
    page = results_page.render(read_campaign(results), [], "f.png")
    assert vanilla in page and seal in page and page.index(vanilla) < page.index(seal)
    assert gone not in page


def test_the_endings_section_reads_each_sitting_s_task_scores_in_the_arms_order(tmp_path):
    lines, results, empty = unscored_campaign(tmp_path)
    assert "## How the greedy episodes ended, before → after training" in empty
    assert "None yet: no sitting's `task_scores.csv` records how its episodes ended." in empty
    for line, looped_after in ((lines[3], [True, False]), (lines[0], [True, True])):  # SEAL 1, vanilla 1
        rows = [("val", "before", t, 0.0, 5, False, False, None) for t in split_ids("val")[:2]]
        rows += [
            ("val", "after", t, 0.0, 20 if looped else 4, looped, looped, "[ls()]" if looped else None)
            for t, looped in zip(split_ids("val")[:2], looped_after, strict=True)
        ]
        write_scored_episodes(results, line, rows)
    assert_vanilla_then_seal(
        results,
        "| vanilla | 1 | val (2) | 0% → 100% | 0% → 100% | 5.0 → 20.0 |",
        "| SEAL | 1 | val (2) | 0% → 50% | 0% → 50% | 5.0 → 12.0 |",
        gone="None yet: no sitting's",
    )


def test_the_loops_section_sorts_each_sitting_s_looping_messages_in_the_arms_order(tmp_path):
    lines, results, empty = unscored_campaign(tmp_path)
    assert "## What the loops resend" in empty
    assert "None yet: no sitting's `task_scores.csv` keeps a looping episode's message." in empty
    call = '<tool_call>\n{"name": "%s", "arguments": {}}\n</tool_call>'
    tasks = split_ids("val")[:2]
    offered = [get_task(t).functions[0]["name"] for t in tasks]
    for line, messages in (
        (lines[3], [call % offered[0] + "</tool_call>", call % "no_such_function"]),  # SEAL 1
        (lines[0], [call % offered[0], call % offered[1]]),  # vanilla 1
    ):
        rows = [("val", "after", t, 0.0, 20, True, True, m) for t, m in zip(tasks, messages, strict=True)]
        write_scored_episodes(results, line, rows)
    assert_vanilla_then_seal(
        results,
        "| vanilla | 1 | 2 val | 0 | 0 | 0 | 2 |",
        "| SEAL | 1 | 2 val | 1 | 0 | 1 | 0 |",
        gone="keeps a looping episode's message",
    )


def test_the_guidelines_section_shows_each_closed_loop_sitting_s_changes_and_their_text(tmp_path):
    lines = campaign_lines(seeds=1)
    closed = sitting(random.Random(3), "full_loop", 1) | {"files": "full_loop_s1"}
    results = write_results(tmp_path, [*lines, closed])
    campaign = read_campaign(results)
    before = results_page.render(campaign, results_page.read_curves(campaign), "f.png")
    assert "## What Evolve told the model" in before
    assert "None: no sitting's training-time interface had guidelines." in before
    records = [{"step": 1, "interface": {"guidelines": ["Recover"]}}]
    records += [{"step": 2, "interface": {"guidelines": ["Active-respond", "Recover"]}}]
    (results / "full_loop_s1" / "seal_steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (results / lines[1]["files"] / "seal_steps.jsonl").write_text(
        '{"step": 1, "interface": {"guidelines": []}}\n'
    )
    page = results_page.render(campaign, results_page.read_curves(campaign), "f.png")
    assert "| full loop | 1 | Recover | step 2: + Active-respond |" in page
    assert "| SEAL | 1 |" not in page.split("## What Evolve told the model")[1].split("## ")[0]
    assert f"- {GUIDELINES['Active-respond']}" in page and "None: no sitting's training" not in page


def test_the_verdict_waits_for_three_seeds_and_says_when_the_arms_do_not_separate(tmp_path):
    lines = campaign_lines(seeds=2)
    for line in lines:
        line["val_after"] = line["val_before"]
    campaign = read_campaign(write_results(tmp_path, lines))
    differences = [s["test_after"] - v["test_after"] for v, s in zip(lines[:2], lines[2:], strict=True)]
    mean, std = statistics.fmean(differences), statistics.stdev(differences)
    expected = "SEAL beat" if mean > std else "vanilla beat SEAL" if mean < -std else "SEAL did not beat"
    sentence = results_page.verdict(campaign.sittings)
    assert sentence.startswith(expected)
    assert "RL did not beat the SFT start in any arm" in sentence
    assert sentence.endswith("not enough seeds yet (2 of 3).")


def test_the_mean_factor_on_mixed_groups_is_derived_from_the_batch_mean_and_the_mixed_share(tmp_path):
    campaign = read_campaign(write_results(tmp_path, campaign_lines()))
    curve = next(c for c in results_page.read_curves(campaign) if c.sitting.arm == "seal")
    steps = curve.steps[curve.steps[results_page.MIXED] > 0]
    expected = 1 + (steps[results_page.FACTOR_MEAN] - 1) / steps[results_page.MIXED]
    assert results_page.mixed_group_factors(curve.steps).tolist() == pytest.approx(expected.tolist())
    row = results_page.apatch_rows([curve])[0]
    assert row["steps with mixed groups"] == f"{len(steps)} of {len(curve.steps)}"


def test_the_page_is_generated_between_its_markers_and_a_stale_one_fails_check(tmp_path, capsys):
    results = write_results(tmp_path, campaign_lines())
    page, readme = tmp_path / "docs" / "page.md", tmp_path / "README.md"
    assert compare_runs.main(args(tmp_path, "--check")) == 1
    assert compare_runs.main(args(tmp_path)) == 0
    text = page.read_text()
    assert text.startswith(f"# {MODEL}\n\nhand-written story") and text.endswith("hand-written commands\n")
    assert (
        "## Verdict" in text and (page.parent / "images" / "page_curves.png").read_bytes()[:4] == b"\x89PNG"
    )
    vanilla = pm([line["test_after"] for line in campaign_lines()[:3]])
    assert f"| {MODEL} (base 0.0) after an SFT start, 4 steps, 3 seed(s) | " in readme.read_text()
    assert f"| {vanilla} |" in readme.read_text()
    capsys.readouterr()
    assert compare_runs.main(args(tmp_path, "--check")) == 0

    lines = (results / RUNS).read_text().splitlines()
    changed = json.loads(lines[0]) | {"test_after": 0.5}
    (results / RUNS).write_text("\n".join([json.dumps(changed), *lines[1:]]) + "\n")
    assert compare_runs.main(args(tmp_path, "--check")) == 1
    assert f"{page} is stale" in capsys.readouterr().err
    assert page.read_text() == text


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda line: line | {"val_after": "0.5"}, "val_after: Input should be a valid number"),
        (
            lambda line: line | {"arm": "grpo"},
            "arm: Input should be 'vanilla', 'seal', 'full_loop', 'full_loop_skip', ",
        ),
        (lambda line: {k: v for k, v in line.items() if k != "test_after"}, "test_after: Field required"),
        (
            lambda line: line | {"seed": 1, "arm": "vanilla"},
            "a second line for vanilla seed 1 (the first is ",
        ),
        (lambda line: line | {"files": "absent"}, "files: "),
        (lambda line: line | {"val_before_by_category": None}, "val_before_by_category: "),
        (
            lambda line: line | {"sft_mixed_by_category": dict.fromkeys(CATEGORIES[:3], 0.5)},
            "sft_mixed_by_category: Value error, needs exactly the categories",
        ),
    ],
)
def test_a_bad_line_is_one_line_naming_the_file_and_line_and_nothing_is_written(
    tmp_path, capsys, change, message
):
    results = write_results(tmp_path, campaign_lines())
    lines = (results / RUNS).read_text().splitlines()
    lines[1] = json.dumps(change(json.loads(lines[1])))
    (results / RUNS).write_text("\n".join(lines) + "\n")
    assert compare_runs.main(args(tmp_path)) == 1
    error = capsys.readouterr().err
    assert error.startswith(f"compare_runs: {results / RUNS}:2: ") and message in error
    assert error.count("\n") == 1
    assert (tmp_path / "docs" / "page.md").read_text() == PAGE and (
        tmp_path / "README.md"
    ).read_text() == README


def test_the_metrics_the_page_reads_are_ones_the_trainer_logs():
    logged = {name for table in make_docs_reference.metric_tables().values() for name in table}
    read = (results_page.REWARD, results_page.MIXED, results_page.VAL)
    assert set(read) | {results_page.FACTOR_MIN, results_page.FACTOR_MEAN, results_page.FACTOR_MAX} <= logged


def test_a_sitting_whose_start_trained_on_more_gpus_than_its_arm_says_so_in_its_row(tmp_path):
    lines = campaign_lines()
    lines[0]["sft_gpus"] = 4  # vanilla seed 1: its start trained on a node of 4, its arm on 2 of them
    lines[1]["sft_gpus"] = 2  # vanilla seed 2: the same count, nothing to add
    campaign = read_campaign(write_results(tmp_path, lines))
    shown = {(row["arm"], row["seed"]): row["GPUs"] for row in results_page.sitting_rows(campaign.sittings)}
    assert shown["vanilla", "1"] == "2 × H200 (start on 4)"
    assert shown["vanilla", "2"] == shown["vanilla", "3"] == shown["SEAL", "1"] == "2 × H200"


@pytest.mark.parametrize(
    ("arm", "name", "steps"),
    [
        ("no_reweighting", "SEAL w/o reweighting", 4),
        ("seal_n16", "SEAL, 16 rollouts", 4),
        ("seal_released_parse", "SEAL, released parsing", 2),  # a shorter run: not in the README row's steps
    ],
)
def test_a_variant_arm_has_its_rows_and_leaves_the_verdict_as_it_was(tmp_path, arm, name, steps):
    lines = campaign_lines()
    variant = sitting(random.Random(5), arm, 2) | {"steps": steps}
    plain = read_campaign(write_results(tmp_path / "plain", lines))
    campaign = read_campaign(write_results(tmp_path / "varied", [*lines, variant]))
    rows = {(row["model"], row["split"]): row for row in results_page.table1_rows(campaign)}
    assert rows[f"+ {name}", "test"]["Avg"] == f"{100 * variant['test_after']:.1f} ± —"
    assert rows[f"+ {name}", "val"]["n"] == f"1 seed(s), {steps} steps"
    assert rows["+ SEAL", "val"]["n"] == f"3 seed(s), {lines[0]['steps']} steps"
    assert all(row["model"] != f"+ {name}" for row in results_page.table1_rows(plain))
    assert variant["val_before"] != lines[1]["val_before"]  # its start, trained again, scored apart
    starts = [row for row in results_page.table1_rows(campaign) if row["model"] == "SFT start"]
    assert starts == [row for row in results_page.table1_rows(plain) if row["model"] == "SFT start"]
    assert results_page.readme_row(campaign) == results_page.readme_row(plain)
    assert "3 seed(s)" in results_page.readme_row(campaign)
    assert results_page.verdict(campaign.sittings) == results_page.verdict(plain.sittings)
    assert "not enough seeds" not in results_page.verdict(campaign.sittings)  # 3 seeds of each campaign arm
    shown = [(row["arm"], row["seed"]) for row in results_page.sitting_rows(campaign.sittings)]
    assert (name, "2") in shown


def test_lines_from_a_start_below_the_bar_are_listed_marked_and_kept_out_of_the_comparison(tmp_path):
    lines = campaign_lines()
    weak = [sitting(random.Random(9), arm, 4) for arm in ("vanilla", "seal")]
    for line in weak:  # seed 4's start scored 8.0: below the 15 % a start needs
        line |= {"sft_val": 0.08, "val_before": 0.08, "test_after": 1.0}
    plain = read_campaign(write_results(tmp_path / "plain", lines))
    campaign = read_campaign(write_results(tmp_path / "weak", [*lines, *weak]))
    assert results_page.table1_rows(campaign) == results_page.table1_rows(plain)
    assert results_page.paired_rows(campaign.sittings) == results_page.paired_rows(plain.sittings)
    assert results_page.arm_rows(campaign.sittings) == results_page.arm_rows(plain.sittings)
    assert results_page.verdict(campaign.sittings) == results_page.verdict(plain.sittings)
    assert results_page.readme_row(campaign) == results_page.readme_row(plain)
    rows = {(row["arm"], row["seed"]): row["SFT val"] for row in results_page.sitting_rows(campaign.sittings)}
    assert rows["vanilla", "4"] == rows["SEAL", "4"] == "8.0 (below the bar)"
    assert "(below the bar)" not in rows["vanilla", "1"]
    generated = results_page.render(campaign, [], "curves.png")
    assert (
        "Left out of the comparison until their seed runs again: vanilla seed 4 (8.0), SEAL seed 4 (8.0)"
        in (generated)
    )
    assert "Left out" not in results_page.render(plain, [], "curves.png")


def test_with_every_line_below_the_bar_there_is_no_verdict_and_it_says_why(tmp_path):
    lines = campaign_lines(seeds=1)
    for line in lines:
        line["sft_val"] = 0.1
    campaign = read_campaign(write_results(tmp_path, lines))
    assert results_page.verdict(campaign.sittings) == (
        "No sitting has landed yet from a start of 15 % or more, so there is no verdict; "
        "not enough seeds yet (0 of 3)."
    )


def test_the_page_shows_each_sitting_s_update_signals_in_the_arms_order(tmp_path):
    lines = campaign_lines(seeds=2)
    campaign = read_campaign(write_results(tmp_path, [lines[2], lines[0], lines[3], lines[1]]))
    generated = results_page.render(campaign, results_page.read_curves(campaign), "curves.png")
    section = generated.split("## How the updates went, first steps → last")[1].split("## ")[0]
    rows = [
        line.split(" | ")[:3] for line in section.splitlines() if line.startswith("| ") and "---" not in line
    ]
    assert rows[1:] == [
        ["| vanilla", "1", "1 → 4"],
        ["| vanilla", "2", "1 → 4"],
        ["| SEAL", "1", "1 → 4"],
        ["| SEAL", "2", "1 → 4"],
    ]


def test_the_starts_section_sets_the_shipped_recipes_starts_side_by_side_before_every_start(tmp_path):
    campaign = read_campaign(write_results(tmp_path, campaign_lines()))
    shipped, every = results_page.starts_section(campaign).split("Every start measured:")
    assert "`exp/sft.yaml`, 2 starts:" in shipped and "a=b" not in shipped
    assert [row.split(" | ")[:2] for row in shipped.splitlines() if row[2:3].isdigit()] == [
        ["| 1", "1"],
        ["| 2", "1"],
    ]
    assert every.count("| `exp/sft.yaml") == 3


def test_step_counts_name_each_length_once_in_numeric_order(tmp_path):
    lines = [
        sitting(random.Random(seed), "seal", seed) | {"steps": steps}
        for seed, steps in ((1, 16), (2, 8), (3, 16))
    ]
    campaign = read_campaign(write_results(tmp_path, lines))
    assert results_page.step_counts(campaign.sittings) == "8/16"
    assert results_page.step_counts(campaign.sittings[::2]) == "16"


def test_a_sitting_that_ended_early_shows_the_steps_it_ran_of_those_planned(tmp_path):
    lines = [sitting(random.Random(seed), "full_loop", seed) for seed in (1, 2)]
    lines[1] |= {"steps": 3, "planned_steps": 4}  # seal.finish_by made step 3 the last of 4
    campaign = read_campaign(write_results(tmp_path, lines))
    shown = {row["seed"]: row["steps"] for row in results_page.sitting_rows(campaign.sittings)}
    assert shown == {"1": "4", "2": "3 of 4"}
    assert results_page.step_counts(campaign.sittings) == "3/4"
