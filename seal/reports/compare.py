"""Several training runs side by side, grouped by arm across seeds: does one arm learn more than the other?

A run is a folder `experiments/<name>/` as the trainer and the launcher leave it (docs/guides/results.md):
`metrics/*.jsonl` (verl's file logger, one file per launch), `validation/{step}.jsonl` (the greedy val passes)
and the launch records `launcher_record/<name>/<UTC time>/` beside `experiments/` (`config.yaml`, the resolved
config; `record.json`, the command). The arm and the seed come from the recorded config, never from the folder
name: the arm from what SEAL changes (Ω preset, Evolve, A-Patch mode), the seed from `seed` (the learning
recipe's one seed, exp/learn_seal.yaml) or verl's `data.seed`. Runs of one arm must differ in their seed only;
any other setting that differs is named in a warning.

Per arm, across its seeds: the train reward per step (mean and sample standard deviation), the greedy val pass
rate per category before training (the first validation) and after (the last), with their mean as the paper's
Avg, the share of GRPO groups with mixed rewards, the A-Patch factor's range and Ω's last version; what
tells why an arm learns or not (entropy, grad norm, rollout-vs-trainer agreement, the shares of episodes each
limit cut, A-Patch's mean factor, environment errors) and the share of each turn label. One line
says whether the arms' val Avg after training differ by more than the seeds spread them: by more than the sum
of the two arms' standard deviations, i.e. their ±1 std bands do not overlap.
"""

from __future__ import annotations

import json
import math
import statistics
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
from omegaconf import OmegaConf

from seal.bfcl.tasks import CATEGORIES, category_of
from seal.jsonl import JsonLinesError, json_objects
from seal.reports.eval_folder import is_eval_folder, read_episodes
from seal.reports.runs import RunError, dump_rows, split_of, test_scores
from seal.results.files import RUN
from seal.results.pass_rate import PassRates, SplitScore, pass_rates, score_rows
from seal.results.tables import SHORT_NAMES
from seal.urls import masked_text, masked_values

RECORDS = "launcher_record"
REFERENCE_ARM = "vanilla"
"""The arm the others are measured against, when it is among the runs (else the first arm)."""
SEED_KEYS = ("seed", "data.seed")
SAME_WITHIN_ARM_EXCEPT = (
    "seed",
    "data.seed",
    "actor_rollout_ref.rollout.seed",
    "actor_rollout_ref.actor.data_loader_seed",
    "ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH",
    "seal.rollout.env_url",
)
"""Keys that differ between the seeds of one arm by design: the seeds, the launch's metrics file and the
service's port (values that hold the run's own name, such as its folders, are compared without it)."""
REWARD = "seal/reward/mean"
MIXED = "seal/groups/mixed_share"
FACTOR_MIN, FACTOR_MAX = "seal/apatch/scale_min", "seal/apatch/scale_max"
OMEGA_VERSION = "seal/interface/version"
DYNAMICS = {
    "entropy": "actor/entropy",
    "grad norm": "actor/grad_norm",
    "rollout-trainer probs diff": "training/rollout_probs_diff_mean",
    "response clipped": "response_length/clip_ratio",
    "cut by the window": "seal/cut_share/context",
    "cut by the call limit": "seal/cut_share/calls",
    "cut by the generation limit": "seal/cut_share/generation",
    "A-Patch mean factor": "seal/apatch/scale_mean",
}
"""What says why an arm learns or does not, each a run's mean over its steps: how much the policy still
explores (verl's entropy), how large its updates are, whether the trained tokens are the sampled ones, how
many episodes a limit cut, and how far A-Patch moved the advantages on average."""
PandasT = TypeVar("PandasT", pd.Series, pd.DataFrame)
ENV_ERRORS = "seal/env_error_count"
LABEL_SHARE = "seal/label_share/"


class ComparisonError(ValueError):
    """A folder that is not a readable run, or runs that cannot be compared; the message is one line."""


@dataclass(frozen=True)
class Run:
    """One run folder as read: its steps' metrics, its val passes and what its launch record says."""

    path: Path
    arm: str
    seed: int | None
    config: dict[str, Any]
    """The recorded resolved config of the run's latest launch, flattened to dotted keys."""
    command: str
    """The first launch's command line."""
    steps: pd.DataFrame
    """One row per training step, one column per metric (verl's and SEAL's)."""
    val: dict[int, SplitScore]
    test: SplitScore | None = None
    """The test pass of the best-val checkpoint (`test_report.json`), once `launcher.py --test` ran."""

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def planned_steps(self) -> int | None:
        return self.config.get("trainer.total_training_steps")


def metrics_lines(run: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """`(step, data)` of every line of every launch's `metrics/*.jsonl`, oldest launch first, each checked
    to be verl's file-logger line `{"step": int, "data": {...}}`."""
    files = sorted((run / "metrics").glob("*.jsonl"))
    if not files:
        raise FileNotFoundError(f"{run}/metrics/*.jsonl: no metrics (is 'file' in trainer.logger?)")
    for path in files:
        for where, record in json_objects(path):
            data, step = record.get("data"), record.get("step")
            if not isinstance(data, dict) or isinstance(step, bool) or not isinstance(step, int):
                raise JsonLinesError(f'{where}: a metrics line is {{"step": int, "data": {{...}}}}')
            yield step, data


def read_steps(run: Path) -> pd.DataFrame:
    """One row per training step from every launch's `metrics/*.jsonl` (a resumed launch's record of a step
    replaces the earlier one; validation-only lines carry no step time and are left out)."""
    rows = {step: data for step, data in metrics_lines(run) if "timing_s/step" in data}
    return pd.DataFrame.from_dict(rows, orient="index").sort_index()


def read_val(run: Path) -> dict[int, SplitScore]:
    """Every validation pass of the run, by step; a pass holding a task outside the val split is refused."""
    passes = {}
    for path in sorted((run / "validation").glob("*.jsonl")):
        if not path.stem.isdigit():
            continue
        rows = dump_rows(path)
        outside = sorted({str(t) for r in rows if split_of(t := r.get("task_id") or r.get("gts")) != "val"})
        if outside:
            raise ComparisonError(
                f"{path} holds {len(outside)} task(s) outside the val split, e.g. {outside[0]}"
            )
        passes[int(path.stem)] = score_rows(rows, int(path.stem))
    if not passes:
        raise ComparisonError(f"{run / 'validation'} holds no {{step}}.jsonl validation pass")
    return passes


def launch_records(run: Path, records: Path | None = None) -> list[Path]:
    """The run's launch record folders, oldest first: `records/<name>/*/`, where `records` defaults to the
    `launcher_record` folder beside the run's `experiments/` folder (the launch's working directory)."""
    root = records if records is not None else run.resolve().parent.parent / RECORDS
    found = sorted(p for p in (root / run.name).glob("*") if (p / "config.yaml").is_file())
    if not found:
        raise ComparisonError(
            f"{run}: no launch record {root / run.name}/<time>/config.yaml (the arm and seed come from it; "
            "--records DIR names another launcher_record folder)"
        )
    return found


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as {dotted key: leaf value}; lists stay leaves."""
    if not isinstance(node, Mapping):
        return {prefix[:-1]: node}
    out: dict[str, Any] = {}
    for key, value in node.items():
        out.update(flatten(value, f"{prefix}{key}."))
    return out


def arm_of(config: Mapping[str, Any]) -> str:
    """`SEAL` (Ω, Evolve and A-Patch on), `vanilla` (all three off), else what is on: an ablation."""
    preset = config.get("seal.interface.preset", "reference")
    adapt = bool(config.get("seal.interface.adapt", True))
    apatch = str(config.get("seal.apatch.mode", "dynamic"))
    if preset != "none" and adapt and apatch == "dynamic":
        return "SEAL"
    if preset == "none" and not adapt and apatch == "off":
        return REFERENCE_ARM
    return f"Ω {preset}{' + Evolve' if adapt else ''}, A-Patch {apatch}"


def seed_of(config: Mapping[str, Any]) -> int | None:
    return next((int(config[key]) for key in SEED_KEYS if config.get(key) is not None), None)


def read_run(run: Path, records: Path | None = None) -> Run:
    """The run folder `run` with its launch records; ComparisonError (one line) when something is missing."""
    if not run.is_dir():
        raise ComparisonError(f"{run}: no such run folder")
    found = launch_records(run, records)
    config = masked_values(flatten(OmegaConf.to_container(OmegaConf.load(found[-1] / "config.yaml"))))
    record = found[0] / "record.json"
    argv = json.loads(record.read_text(encoding="utf-8"))["command"] if record.is_file() else []
    argv = [masked_text(part) for part in argv]  # records written before credentials were masked
    command = " ".join(["python", *argv[1:]] if argv and Path(argv[0]).name.startswith("python") else argv)
    try:
        steps, val = read_steps(run), read_val(run)
        test = dict(test_scores(run)).get("best")
    except (FileNotFoundError, JsonLinesError, RunError) as exc:
        raise ComparisonError(str(exc)) from exc
    return Run(run, arm_of(config), seed_of(config), config, command, steps, val, test)


@dataclass(frozen=True)
class Baseline:
    """A model evaluated on its own (`seal eval`), shown above the arms: the base model, the SFT start."""

    name: str
    split: str
    rates: PassRates


def read_baseline(name: str, folder: Path) -> Baseline:
    """The pass rates of a `seal eval` output folder's scored episodes, on the split its run.json names."""
    if not folder.is_dir():
        raise ComparisonError(f"--baseline {name}: no such folder {folder}")
    if not is_eval_folder(folder):
        raise ComparisonError(f"--baseline {name}: {folder} is not a seal eval folder (no run.json/episodes)")
    try:
        split = json.loads((folder / RUN).read_text(encoding="utf-8")).get("split")
        episodes, _ = read_episodes(folder)
    except (ValueError, AttributeError, JsonLinesError) as exc:
        raise ComparisonError(f"--baseline {name}: {folder / RUN}: {exc}") from exc
    if split not in ("val", "test"):
        raise ComparisonError(f"--baseline {name}: {folder / RUN} names split {split!r}, not val or test")
    if not episodes:
        raise ComparisonError(f"--baseline {name}: {folder} holds no scored episode")
    return Baseline(name, split, pass_rates((category_of(e["task_id"]), e["reward"]) for e in episodes))


def group_by_arm(runs: Sequence[Run]) -> dict[str, list[Run]]:
    """Runs by arm, in the order arms first appear, seeds ascending; warns where runs of one arm differ in
    more than their seed, and refuses two runs of one arm with the same seed."""
    arms: dict[str, list[Run]] = {}
    for run in runs:
        arms.setdefault(run.arm, []).append(run)
    for arm, members in arms.items():
        members.sort(key=lambda r: (r.seed is None, r.seed or 0, r.name))
        seeds = [r.seed for r in members]
        if len(set(seeds)) < len(seeds):
            raise ComparisonError(f"arm {arm}: two runs with the same seed ({', '.join(map(str, seeds))})")
        first = settings_of(members[0])
        for other in members[1:]:
            theirs = settings_of(other)
            keys = sorted(k for k in first.keys() | theirs.keys() if first.get(k) != theirs.get(k))
            if keys:
                warnings.warn(
                    f"arm {arm}: {other.name} differs from {members[0].name} in more than the seed: "
                    f"{', '.join(keys[:5])}{' ...' if len(keys) > 5 else ''}",
                    stacklevel=2,
                )
    return arms


def settings_of(run: Run) -> dict[str, Any]:
    """The run's recorded settings less those that differ by design between seeds, its own name taken out of
    the values that hold it (output folders, trace names)."""
    name = str(run.config.get("trainer.experiment_name", run.name))
    return {
        key: value.replace(name, "<run>") if isinstance(value, str) else value
        for key, value in run.config.items()
        if key not in SAME_WITHIN_ARM_EXCEPT
    }


def mean_std(values: Iterable[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (NaN with fewer than two values) of the finite values."""
    kept = [v for v in values if v is not None and math.isfinite(v)]
    if not kept:
        return math.nan, math.nan
    return statistics.fmean(kept), statistics.stdev(kept) if len(kept) > 1 else math.nan


def pm(pair: tuple[float, float], scale: float = 1.0, digits: int = 1) -> str:
    """`mean ± std` (std `—` for one seed), scaled (100 for %)."""
    mean, std = pair
    if math.isnan(mean):
        return "—"
    spread = "—" if math.isnan(std) else f"{scale * std:.{digits}f}"
    return f"{scale * mean:.{digits}f} ± {spread}"


def before_after(run: Run) -> tuple[SplitScore, SplitScore | None]:
    """The first validation pass (before training, with `val_before_train`) and the last, if it is later."""
    steps = sorted(run.val)
    return run.val[steps[0]], run.val[steps[-1]] if steps[-1] > steps[0] else None


def column(run: Run, key: str) -> pd.Series:
    return run.steps[key] if key in run.steps else pd.Series(dtype=float)


def step_mean_across_seeds(runs: Sequence[Run], key: str) -> str:
    """`key`'s mean over each run's steps, as mean ± std across the runs (`—` where none logged it)."""
    return pm(mean_std(column(r, key).mean() for r in runs), digits=3)


def quarters(steps: PandasT) -> tuple[PandasT, PandasT]:
    """The first and the last quarter of the steps (at least one step each: one run of one step)."""
    size = max(1, len(steps) // 4)
    return steps.iloc[:size], steps.iloc[-size:]


def quarter_means(run: Run) -> tuple[float, float]:
    """The train reward's mean over the first and the last quarter of the run's steps."""
    reward = column(run, REWARD).dropna()
    if reward.empty:
        return math.nan, math.nan
    first, last = quarters(reward)
    return float(first.mean()), float(last.mean())


def summary_rows(arms: Mapping[str, Sequence[Run]]) -> list[dict[str, str]]:
    """One row per arm: seeds, steps, train reward, val Avg before/after and the gain, mixed groups,
    A-Patch factor range, Ω version."""
    rows = []
    for arm, runs in arms.items():
        scores = [before_after(run) for run in runs]
        after = [a.mean if a else math.nan for _, a in scores]
        gains = [a.mean - b.mean if a else math.nan for b, a in scores]
        factor_low = min((column(r, FACTOR_MIN).min() for r in runs), default=math.nan)
        factor_high = max((column(r, FACTOR_MAX).max() for r in runs), default=math.nan)
        versions = [column(r, OMEGA_VERSION).dropna() for r in runs]
        last_versions = [int(v.iloc[-1]) for v in versions if not v.empty]
        done = [len(r.steps) for r in runs]
        planned = {r.planned_steps for r in runs}
        rows.append(
            {
                "arm": arm,
                "seeds": ", ".join(str(r.seed) for r in runs),
                "steps": f"{min(done)}–{max(done)}" if min(done) != max(done) else str(done[0]),
                "of": "/".join(str(p) for p in sorted(planned, key=str)),
                "train reward, first quarter": pm(mean_std(quarter_means(r)[0] for r in runs), digits=3),
                "train reward, last quarter": pm(mean_std(quarter_means(r)[1] for r in runs), digits=3),
                "val Avg before (%)": pm(mean_std(b.mean for b, _ in scores), 100),
                "val Avg after (%)": pm(mean_std(after), 100),
                "gain (points)": pm(mean_std(gains), 100),
                "mixed groups": step_mean_across_seeds(runs, MIXED),
                "A-Patch factors": "—" if math.isnan(factor_low) else f"{factor_low:.2f}–{factor_high:.2f}",
                "Ω version": "—"
                if not last_versions
                else f"{min(last_versions)}–{max(last_versions)}"
                if min(last_versions) != max(last_versions)
                else str(last_versions[0]),
            }
        )
    return rows


def dynamics_rows(arms: Mapping[str, Sequence[Run]]) -> list[dict[str, str]]:
    """One row per arm: each of `DYNAMICS` (a run's mean over its steps) and the environment errors (a run's
    total), mean ± std across seeds; `—` where the runs never logged it."""
    rows = []
    for arm, runs in arms.items():
        row = {"arm": arm}
        for name, key in DYNAMICS.items():
            row[name] = step_mean_across_seeds(runs, key)
        totals = (column(r, ENV_ERRORS).sum(min_count=1) for r in runs)  # NaN, not 0, where never logged
        row["environment errors"] = pm(mean_std(totals), digits=1)
        rows.append(row)
    return rows


def label_rows(arms: Mapping[str, Sequence[Run]]) -> list[dict[str, str]]:
    """One row per arm: each turn label's share of the train batch's labels (a run's mean over its steps),
    mean ± std across seeds, for every label any run logged."""
    keys = sorted(
        {key for runs in arms.values() for r in runs for key in r.steps if key.startswith(LABEL_SHARE)}
    )
    rows = []
    for arm, runs in arms.items():
        row = {"arm": arm}
        for key in keys:
            row[key.removeprefix(LABEL_SHARE)] = step_mean_across_seeds(runs, key)
        rows.append(row)
    return rows


def category_rows(arms: Mapping[str, Sequence[Run]]) -> list[dict[str, str]]:
    """Per arm, before and after: each category's val pass rate and the Avg, mean ± std across seeds (%)."""
    rows = []
    for arm, runs in arms.items():
        scores = [before_after(run) for run in runs]
        for when, index in (("before", 0), ("after", 1)):
            chosen = [pair[index] for pair in scores if pair[index] is not None]
            row = {"arm": arm, "val": when}
            for category in CATEGORIES:
                row[SHORT_NAMES[category]] = pm(
                    mean_std(s.by_category.get(category, math.nan) for s in chosen), 100
                )
            row["Avg"] = pm(mean_std(s.mean for s in chosen), 100)
            rows.append(row)
    return rows


def read_baselines(baselines: Sequence[tuple[str, Path]]) -> list[Baseline]:
    """Each (name, folder) read; one name may stand for a val and a test folder, not for two of one split."""
    models = [read_baseline(name, Path(folder)) for name, folder in baselines]
    seen: set[tuple[str, str]] = set()
    for model in models:
        if (model.name, model.split) in seen:
            raise ComparisonError(f"--baseline {model.name}: two {model.split} folders under one name")
        seen.add((model.name, model.split))
    return models


def table1_rows(arms: Mapping[str, Sequence[Run]], baselines: Sequence[Baseline]) -> list[dict[str, str]]:
    """The paper's Table 1 (%): per split (val, then test), each baseline's pass rates, then each arm's
    mean ± std across seeds — on val after training, on test for the best-val checkpoint (runs with a test
    report only). A baseline goes to the rows of its own split, never beside another split's numbers."""
    rows = []
    for split in ("val", "test"):
        for baseline in (b for b in baselines if b.split == split):
            cells = {
                SHORT_NAMES[c]: _percent(baseline.rates.by_category.get(c, math.nan)) for c in CATEGORIES
            }
            rows.append(
                {"model": baseline.name, "split": split, **cells, "Avg": _percent(baseline.rates.mean)}
            )
        for arm, runs in arms.items():
            chosen = [before_after(r)[1] for r in runs] if split == "val" else [r.test for r in runs]
            scores = [s for s in chosen if s is not None]
            if not scores:
                continue
            row = {"model": f"+ {arm}", "split": split}
            for category in CATEGORIES:
                row[SHORT_NAMES[category]] = pm(
                    mean_std(s.by_category.get(category, math.nan) for s in scores), 100
                )
            rows.append({**row, "Avg": pm(mean_std(s.mean for s in scores), 100)})
    return rows


def _percent(rate: float) -> str:
    return "—" if math.isnan(rate) else f"{100 * rate:.1f}"


def reward_curves(arms: Mapping[str, Sequence[Run]]) -> pd.DataFrame:
    """Per step and arm: the train reward's mean, standard deviation and number of seeds."""
    frames = {}
    for arm, runs in arms.items():
        rewards = pd.concat({r.name: column(r, REWARD) for r in runs}, axis=1)
        frames[arm] = pd.DataFrame(
            {"mean": rewards.mean(axis=1), "std": rewards.std(axis=1, ddof=1), "seeds": rewards.count(axis=1)}
        )
    table = pd.concat(frames, axis=1).sort_index()
    table.index.name = "step"
    return table


def verdict(arms: Mapping[str, Sequence[Run]]) -> list[str]:
    """For each arm against the reference arm: is the difference of their mean val Avg after training larger
    than the spread across seeds (the sum of the two arms' standard deviations)?"""
    names = list(arms)
    if len(names) < 2:
        return [f"one arm only ({names[0]}): nothing to compare"]
    reference = REFERENCE_ARM if REFERENCE_ARM in arms else names[0]
    after = {
        arm: mean_std(a.mean for _, a in map(before_after, runs) if a is not None)
        for arm, runs in arms.items()
    }
    lines = []
    for arm in names:
        if arm == reference:
            continue
        (mine, my_std), (theirs, their_std) = after[arm], after[reference]
        if math.isnan(mine) or math.isnan(theirs):
            lines.append(f"{arm} against {reference}: a run has no validation after training")
            continue
        gap = 100 * (mine - theirs)
        if math.isnan(my_std) or math.isnan(their_std):
            lines.append(
                f"{arm} against {reference}: val Avg after training differs by {gap:+.1f} points; with one "
                "seed in an arm there is no spread to compare it with"
            )
            continue
        spread = 100 * (my_std + their_std)
        larger = abs(gap) > spread
        lines.append(
            f"{arm} against {reference}: val Avg after training differs by {gap:+.1f} points, "
            f"{'larger' if larger else 'not larger'} than the spread across seeds ({spread:.1f} points: "
            f"std {100 * my_std:.1f} + {100 * their_std:.1f})"
        )
    return lines


def markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """A list of same-keyed rows as a GitHub markdown table."""
    if not rows:
        return ""
    header = list(rows[0])
    lines = [f"| {' | '.join(header)} |", f"|{'---|' * len(header)}"]
    lines += [f"| {' | '.join(str(row[key]) for key in header)} |" for row in rows]
    return "\n".join(lines)


def curve_table(curves: pd.DataFrame) -> list[dict[str, str]]:
    """The reward curves as rows `step | <arm> | ...`, each cell `mean ± std`."""
    arms = list(dict.fromkeys(curves.columns.get_level_values(0)))
    return [
        {"step": str(step), **{arm: pm((row[(arm, "mean")], row[(arm, "std")]), digits=3) for arm in arms}}
        for step, row in curves.iterrows()
    ]


def run_rows(runs: Sequence[Run]) -> list[dict[str, str]]:
    return [
        {
            "run": r.name,
            "arm": r.arm,
            "seed": str(r.seed),
            "steps": str(len(r.steps)),
            "command": f"`{r.command}`",
        }
        for r in runs
    ]


def learning_curves_figure(arms: Mapping[str, Sequence[Run]], curves: pd.DataFrame) -> Any:
    """Left: the train reward per step, mean over seeds with a ±1 std band, per arm. Right: the val Avg
    before and after training, each seed a dot and the mean ± std a bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [2, 1]})
    for index, arm in enumerate(arms):
        colour = f"C{index}"
        mean, std = curves[(arm, "mean")], curves[(arm, "std")].fillna(0.0)
        left.plot(curves.index, mean, color=colour, label=f"{arm} ({len(arms[arm])} seeds)")
        left.fill_between(curves.index, mean - std, mean + std, color=colour, alpha=0.2, linewidth=0)
        for x in (0, 1):
            values = [100 * pair[x].mean for pair in map(before_after, arms[arm]) if pair[x] is not None]
            if not values:
                continue
            position = x + (index - (len(arms) - 1) / 2) * 0.15
            right.plot([position] * len(values), values, "o", color=colour, alpha=0.5, ms=4)
            centre, spread = mean_std(values)
            right.errorbar(
                position,
                centre,
                yerr=0 if math.isnan(spread) else spread,
                fmt="_",
                color=colour,
                ms=14,
                capsize=4,
            )
    left.xaxis.set_major_locator(MaxNLocator(integer=True))
    left.set_xlabel("training step")
    left.set_ylabel("train reward (sampled, mean of the batch)")
    left.set_title("train reward: mean over seeds ± 1 std")
    left.legend(fontsize=8)
    right.set_xticks([0, 1], ["before", "after"])
    right.set_xlim(-0.6, 1.6)
    right.set_ylabel("val Avg (%)")
    right.set_title("greedy val pass rate, Avg")
    fig.tight_layout()
    return fig


@dataclass(frozen=True)
class Comparison:
    """What `compare` printed and wrote."""

    text: str
    files: list[Path]


def compare(
    run_dirs: Sequence[Path],
    out: Path,
    records: Path | None = None,
    baselines: Sequence[tuple[str, Path]] = (),
) -> Comparison:
    """Read the runs and the `baselines` ((name, `seal eval` folder)), group the runs by arm, write
    `comparison.md` (the tables and the verdict, ready for a results page), `summary.csv`,
    `reward_curves.csv` and `learning_curves.png` into `out`; nothing is written when any is unreadable."""
    runs = [read_run(Path(run), records) for run in run_dirs]
    models = read_baselines(baselines)
    arms = group_by_arm(runs)
    curves = reward_curves(arms)
    table1 = [
        ("Table 1: pass rate (%) per category, mean ± std across seeds", markdown(table1_rows(arms, models)))
    ]
    sections = [
        *(table1 if models else []),
        ("Runs", markdown(run_rows([r for members in arms.values() for r in members]))),
        ("Per arm, across seeds (mean ± sample std)", markdown(summary_rows(arms))),
        ("Greedy val pass rate (%) per category, before and after training", markdown(category_rows(arms))),
        ("What the runs did: per-step means (mean ± std across seeds)", markdown(dynamics_rows(arms))),
        (
            "Turn labels: share of the train batches' labels (mean ± std across seeds)",
            markdown(label_rows(arms)),
        ),
        ("Train reward per step (mean ± std across seeds)", markdown(curve_table(curves))),
        ("Verdict", "\n".join(f"- {line}" for line in verdict(arms))),
    ]
    text = "\n\n".join(f"### {title}\n\n{body}" for title, body in sections) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    files = [
        out / "comparison.md",
        out / "summary.csv",
        out / "reward_curves.csv",
        out / "learning_curves.png",
    ]
    files[0].write_text(text, encoding="utf-8")
    pd.DataFrame(summary_rows(arms)).to_csv(files[1], index=False)
    curves.to_csv(files[2])
    import matplotlib.pyplot as plt

    figure = learning_curves_figure(arms, curves)
    figure.savefig(files[3], dpi=120)
    plt.close(figure)
    return Comparison(text, files)
