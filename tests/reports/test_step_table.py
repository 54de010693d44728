"""scripts/step_table.py: the per-step table of a run and SEAL-vs-vanilla medians, from verl's metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import verl

from seal.reports import steps as step_table
from tests.support.run_folders import write_launch, write_training


def write_run(run: Path, launches: list[dict[int, dict[str, float]]]) -> Path:
    """One metrics file per launch, as the launcher lays them out; validation-only lines have no step time."""
    (run / "metrics").mkdir(parents=True)
    for i, steps in enumerate(launches):
        lines = [{"step": 0, "data": {"val-core/seal/pass_rate_mean": 0.0}}]
        lines += [{"step": step, "data": data} for step, data in steps.items()]
        (run / "metrics" / f"launch{i}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return run


def step(total: float, gen: float, apatch: float, **extra: float) -> dict[str, float]:
    return {"timing_s/step": total, "timing_s/gen": gen, "timing_s/seal_apatch": apatch, **extra}


def test_a_resumed_step_replaces_the_first_record_and_labels_are_listed(tmp_path):
    shares = {"seal/label_share/pass": 0.25, "seal/label_share/state_mismatch": 0.75}
    run = write_run(
        tmp_path / "seal",
        [
            {1: step(40, 10, 0.02, **shares)},
            {1: step(50, 12, 0.03), 2: step(44, 11, 0.04, **shares, **{"seal/interface/version": 3.0})},
        ],
    )
    table = step_table.step_table(step_table.read_steps(run))
    assert list(table.index) == [1, 2]
    assert table.loc[1, "step s"] == 50 and table.loc[2, "Ω version"] == 3.0
    assert table.loc[1, "labels"] == ""  # the resumed launch's record of step 1 has no label shares
    assert table.loc[2, "labels"] == "pass=0.25 state_mismatch=0.75"
    assert table.loc[2, "gen"] == 11


def test_two_runs_compare_medians_after_the_first_step(tmp_path, capsys):
    seal = write_run(tmp_path / "seal", [{1: step(90, 30, 0.1), 2: step(40, 10, 0.2), 3: step(50, 12, 0.4)}])
    vanilla = write_run(
        tmp_path / "vanilla", [{1: step(80, 30, 0.1), 2: step(45, 10, 0.1), 3: step(45, 14, 0.1)}]
    )
    assert step_table.main([str(seal), str(vanilla)]) == 0
    out = capsys.readouterr().out
    medians = step_table.compare(
        step_table.step_table(step_table.read_steps(seal)),
        step_table.step_table(step_table.read_steps(vanilla)),
        ("seal", "vanilla"),
    )
    assert medians.loc["step s", "seal"] == 45 and medians.loc["step s", "vanilla"] == 45
    assert medians.loc["gen", "seal / vanilla"] == 11 / 12
    assert "0.67% of a step" in out  # median seal_apatch 0.3 s of a 45 s median step


def test_a_run_without_metrics_is_one_line_and_exit_1(tmp_path, capsys):
    assert step_table.main([str(tmp_path)]) == 1
    assert capsys.readouterr().err.count("\n") == 1


def learning(
    reward: float, mixed: float, scales: tuple[float, float, float], **rho: float
) -> dict[str, float]:
    names = ("seal/apatch/scale_min", "seal/apatch/scale_mean", "seal/apatch/scale_max")
    return {
        "seal/reward/mean": reward,
        "seal/groups/mixed_share": mixed,
        **dict(zip(names, scales, strict=True)),
        **{f"seal/rho/{label}": weight for label, weight in rho.items()},
    }


def test_a_learning_run_shows_reward_mixed_groups_apatch_spread_and_rho_per_step(tmp_path):
    run = write_run(
        tmp_path / "seal",
        [
            {
                1: step(40, 10, 0.02, **learning(0.0, 0.0, (1.0, 1.0, 1.0), pass_=1.0)),
                2: step(
                    41, 10, 0.02, **learning(0.25, 0.5, (0.5, 1.125, 2.0), pass_=0.9, state_mismatch=1.5)
                ),
            }
        ],
    )
    table = step_table.step_table(step_table.read_steps(run))
    assert table.loc[2, ["reward", "mixed groups"]].tolist() == [0.25, 0.5]
    assert table.loc[2, ["apatch min", "apatch mean", "apatch max"]].tolist() == [0.5, 1.125, 2.0]
    assert table.loc[1, "ρ"] == "pass_=1.000"
    assert table.loc[2, "ρ"] == "pass_=0.900 state_mismatch=1.500"


def test_two_runs_show_their_reward_and_mixed_share_side_by_side(tmp_path, capsys):
    seal = write_run(tmp_path / "seal", [{1: step(9, 3, 0.1, **learning(0.25, 0.5, (1, 1, 1)))}])
    vanilla = write_run(
        tmp_path / "vanilla",
        [
            {
                1: step(8, 3, 0.1, **learning(0.5, 0.25, (1, 1, 1))),
                2: step(8, 3, 0.1, **learning(0.75, 0, (1, 1, 1))),
            }
        ],
    )
    tables = [step_table.step_table(step_table.read_steps(run)) for run in (seal, vanilla)]
    both = step_table.side_by_side(*tables, ("seal", "vanilla"))
    assert both.loc[1].tolist() == [0.25, 0.5, 0.5, 0.25]
    assert both.loc[2, ("vanilla", "reward")] == 0.75 and pd.isna(both.loc[2, ("seal", "reward")])
    assert step_table.main([str(seal), str(vanilla)]) == 0
    assert "reward and mixed-group share, step by step" in capsys.readouterr().out


def test_seal_report_steps_prints_what_the_script_prints(tmp_path, capsys):
    from seal.cli import main

    seal = write_run(tmp_path / "seal", [{1: step(90, 30, 0.1), 2: step(40, 10, 0.2), 3: step(50, 12, 0.4)}])
    vanilla = write_run(tmp_path / "vanilla", [{1: step(80, 30, 0.1), 2: step(45, 10, 0.1)}])
    assert step_table.main([str(seal), str(vanilla)]) == 0
    script = capsys.readouterr().out
    assert main(["report", str(seal), str(vanilla), "--steps"]) == 0
    assert capsys.readouterr().out == script
    assert main(["report", str(tmp_path / "nothing"), "--steps"]) == 1
    assert capsys.readouterr().err.startswith("seal report: ")


def test_a_run_s_health_columns_come_from_verl_s_and_seal_s_metrics_and_main_prints_them(tmp_path, capsys):
    """A metrics file as a launch writes it (SEAL's metrics from a real ClosedLoop, verl's keys beside them):
    the rollout-vs-trainer agreement, entropy, grad norm, cut shares and clip share, per step."""
    run, config = write_launch(tmp_path, "learn_seal", ["seed=1"])
    write_training(run, config, [[1.0, 0.0, 0.0, 0.0] * 2, [1.0] * 4 + [0.0] * 4])
    health = step_table.health_table(step_table.read_steps(run))
    (metrics,) = (run / "metrics").glob("*.jsonl")
    lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    for step in (1, 2):
        logged = lines[step]["data"]
        assert health.loc[step].to_dict() == {name: logged[key] for name, key in step_table.HEALTH.items()}
    assert health.loc[2, "mixed groups"] == 0.0 and health.loc[1, "mixed groups"] == 1.0
    assert step_table.main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "does it learn" in out and "probs diff" in out and "cut context" in out


def test_the_health_columns_name_keys_verl_0_9_1_logs():
    """Each verl key of the table is in verl's source as it is built there (the `rollout_corr/` prefix and
    the actor's `actor/` prefix are added where the metrics are gathered)."""
    source = Path(verl.__file__).parent
    texts = {
        "training/": (source / "utils" / "debug" / "metrics.py").read_text(),
        "rollout_corr/": (source / "trainer" / "ppo" / "rollout_corr_helper.py").read_text(),
        "actor/": (source / "trainer" / "ppo" / "v1" / "trainer_base.py").read_text()
        + (source / "workers" / "engine_workers.py").read_text(),
        "response_length/": (source / "trainer" / "ppo" / "metric_utils.py").read_text(),
    }
    for key in step_table.HEALTH.values():
        prefix = next((p for p in texts if key.startswith(p)), None)
        if prefix is None:
            assert key.startswith("seal/")
            continue
        assert f'"{key}"' in texts[prefix] or f'"{key.removeprefix(prefix)}"' in texts[prefix], key
