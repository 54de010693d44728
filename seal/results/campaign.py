"""The committed result files of a model's campaign (results/<model>/), one typed record per line, so the
drivers that write them and the page generator that reads them (seal/reports/results_page.py) share one
contract. Every problem is one line naming the file and the line (`CampaignError`).

    results/<model>/base.json          BaseModel: the released model, greedy, measured once
    results/<model>/sft_starts.jsonl   SftStart: one line per SFT start measured
    results/<model>/runs.jsonl         Sitting: one line per sitting (one arm x one seed)
    results/<model>/<files>/metrics/*.jsonl   a sitting's per-step metrics (`Sitting.files`)

Pass rates are shares in [0, 1] (the page prints %); `*_by_category` maps each of BFCL's four multi-turn
categories to its share, and the mean beside it is their unweighted mean (the paper's Avg). Keys beyond a
record's fields are allowed and ignored, so a driver may record more than the page shows.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, field_validator
from pydantic.dataclasses import dataclass

from seal.bfcl.tasks import CATEGORIES
from seal.jsonl import JsonLinesError, json_objects

BASE = "base.json"
SFT_STARTS = "sft_starts.jsonl"
RUNS = "runs.jsonl"
METRICS = "metrics"
"""In a sitting's `files` folder: verl's file-logger lines (`{"step": int, "data": {...}}`), one file per
launch, as a run folder's `metrics/` holds them."""
ARMS = (
    "vanilla",
    "seal",
    "full_loop",
    "full_loop_skip",
    "no_reweighting",
    "seal_n16",
    "vanilla_released_parse",
    "seal_released_parse",
)
"""The campaign's arms, in the order the page shows them."""

Rate = Annotated[float, Field(strict=True, ge=0.0, le=1.0)]
"""Each field strict: a number written as a string or a boolean is an error, not a number."""
Count = Annotated[int, Field(strict=True, ge=0)]
Seconds = Annotated[float, Field(strict=True, ge=0.0)]
Text = Annotated[str, Field(strict=True, min_length=1)]
ByCategory = dict[str, Rate]
CONFIG = ConfigDict(extra="ignore")


class CampaignError(ValueError):
    """A result file that does not hold the records it should; the message is one line naming the file
    (and line)."""


def _four_categories(value: dict[str, float]) -> dict[str, float]:
    if sorted(value) != sorted(CATEGORIES):
        raise ValueError(f"needs exactly the categories {', '.join(CATEGORIES)}, got {', '.join(value)}")
    return value


@dataclass(frozen=True, config=CONFIG)
class BaseModel:
    """`base.json`: the released model's greedy pass rates on val (100 tasks) and test (300), measured once
    with `seal eval`; `model` is its name as the README's result table shows it, `note` says when and
    how it was measured."""

    model: Text
    val: Rate
    val_by_category: ByCategory
    test: Rate
    test_by_category: ByCategory
    note: Text

    @field_validator("val_by_category", "test_by_category")
    @classmethod
    def _categories(cls, value: dict[str, float]) -> dict[str, float]:
        return _four_categories(value)


@dataclass(frozen=True, config=CONFIG)
class SftStart:
    """One line of `sft_starts.jsonl`: an SFT start trained and measured.

    `recipe` is the config and the overrides that train the start with the config's values of today
    (`exp/sft_qwen.yaml`, or `exp/sft_qwen.yaml KEY=VALUE`): a change of the config's values rewrites the
    older lines' recipes (a start at lr 1e-5 from before the config's lr became 5e-6 says
    `optim.lr=1e-5`), so a recipe without overrides is the one shipped; `commit` says what code ran it.
    `experiment` is the run's name, `card` and `gpus` where it trained, `steps` its length. A checkpoint
    saved at step N of a longer run is the start of `trainer.total_training_steps=N` (the learning rate is
    constant), and its recipe says so. `val` is the
    greedy pass rate on the 100 val tasks, `test` on the 300 test tasks; `mixed` the share of the arms' train
    tasks whose 8 samples at T=1 are mixed (some pass, some fail), `pass_at_1` the mean over those samples and
    `pass_at_8` the share of tasks with a passing sample (each of these absent where not measured), over
    the 64 train tasks that the arms of seed `mixed_tasks_seed` draw (1 where absent: every line before seed
    2's start).
    `val_pass_at_1` and `val_pass_at_n` are the val tasks' pass@1 and pass@N over `val_samples` samples at T=1
    each: 100 x N episodes, a steadier measure than 100 greedy ones for telling close starts apart (absent
    where not measured). `val_turns_passing` is the share of the greedy val episodes' ground-truth turns
    labelled `pass`, the mean over the four categories: the val split's 406 turns, where the pass rate counts
    100 episodes that pass only if all their turns do (absent where not measured). `train_s` (the whole run
    that saved it) and `score_s` are seconds (`score_s` null where not timed), `date` ISO, `commit` the
    project's commit (`-dirty` after it where tracked files differed from it). `gpu_shared_by` counts the
    starts that trained at once on the same GPUs (absent for a start alone on its GPUs): its seconds are then
    not those of a start alone. `seed_per_draw` marks sampled measures taken when `seal eval` sent one seed
    with every request of a draw (before commit 66f9b74): vLLM then gave every reply of the draw the same
    noise, so a draw's episodes passed or failed together and the spread over draws is the seeds'.
    """

    recipe: Text
    experiment: Text
    card: Text
    gpus: Count
    steps: Count
    val: Rate
    val_by_category: ByCategory
    train_s: Seconds
    score_s: Seconds | None
    date: Text
    commit: Text
    mixed: Rate | None = None
    mixed_by_category: ByCategory | None = None
    pass_at_1: Rate | None = None
    pass_at_8: Rate | None = None
    mixed_tasks_seed: Count = 1
    test: Rate | None = None
    test_by_category: ByCategory | None = None
    val_samples: Count | None = None
    val_pass_at_1: Rate | None = None
    val_pass_at_n: Rate | None = None
    val_turns_passing: Rate | None = None
    gpu_shared_by: Count | None = None
    seed_per_draw: Annotated[bool, Field(strict=True)] = False

    @field_validator("val_by_category", "mixed_by_category", "test_by_category")
    @classmethod
    def _categories(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        return value if value is None else _four_categories(value)


@dataclass(frozen=True, config=CONFIG)
class Sitting:
    """One line of `runs.jsonl`: one sitting, one arm trained with one seed from that seed's SFT start
    (the same start for every arm of the seed, so that SEAL − vanilla is paired).

    - `arm`: `vanilla`, `seal`, `full_loop`, `full_loop_skip` (the closed loop leaving the actor alone in a
      step without a mixed group), `no_reweighting` (SEAL without A-Patch, the paper's ablation)
      `seal_n16` (SEAL with 16 rollouts a group, issue 57's one recipe change), `vanilla_released_parse` or
      `seal_released_parse` (the pair with tool calls parsed as the released code parses them):
      exp/learn_qwen_ARM.yaml;
      `seed`: the seed of the SFT start and of the arm's draws.
    - `card`, `gpus`: the accelerator and how many the arm ran on (the arms of one seed on one count);
      `sft_gpus`: how many the seed's SFT start trained on (a node of 2 trains it on both, then runs two
      arms at once on one each), absent in lines that did not record it (the first sittings, 2026-11-28,
      whose start trained on the same GPUs as their arms).
    - `sft_val`, `sft_mixed`: the sitting's SFT start, measured in the arm's launch, not apart: its greedy
      val is the arm's val before its first step (so `sft_val` equals `val_before`), its mixed share the
      share of mixed groups in the arm's first step (8 samples at T=1 of each of 8 train tasks, 16 in
      `seal_n16`, under the arm's interface), step 1's `seal/groups/mixed_share`, not the mean over steps.
    - `val_before`, `val_after`: greedy val (100 tasks) in the arm's launch before its first step and after
      its last; `test_after`: the 300 test tasks after the last step, in the same launch; `test_before`: the
      300 test tasks before the first step (`seal.test_before`), null in sittings that did not play it.
    - `*_by_category` beside each of those six: the four categories' shares; `sft_mixed_by_category` is
      null, since the step metrics hold no mixed share per category.
    - `steps`: GRPO steps run; `planned_steps`: those planned, where `seal.finish_by` ended the run before
      them (its `ended_early.json`), absent where every planned step ran; `mixed_share_mean`: the mean over
      steps of the share of groups whose rewards are mixed (`seal/groups/mixed_share`); `sitting_s`: seconds
      from a bare node to the results.
    - `date` (ISO), `commit` (the project's commit the sitting ran, `-dirty` after it where tracked files
      differed from it).
    - `files`: a folder under results/<model>/ with the sitting's small files: `metrics/*.jsonl`, the
      trainer's per-step metrics as verl's file logger writes them (the run folder's `metrics/` copied:
      `seal/reward/mean`, `seal/groups/mixed_share`, `seal/apatch/scale_{min,mean,max}`,
      `val-core/seal/pass_rate_mean`, ...), and, kept for reading, the line (`result.json`), the SFT's
      metrics, `test_report.json` and `seal_steps.jsonl` (the phase times are the line's `phases`).
    """

    arm: Literal[ARMS]
    seed: Annotated[int, Field(strict=True)]
    card: Text
    gpus: Count
    sft_val: Rate
    sft_val_by_category: ByCategory
    sft_mixed: Rate
    sft_mixed_by_category: ByCategory | None
    val_before: Rate
    val_before_by_category: ByCategory
    val_after: Rate
    val_after_by_category: ByCategory
    test_after: Rate
    test_after_by_category: ByCategory
    steps: Count
    mixed_share_mean: Rate
    sitting_s: Seconds
    date: Text
    commit: Text
    files: Text
    test_before: Rate | None = None
    test_before_by_category: ByCategory | None = None
    sft_gpus: Count | None = None
    planned_steps: Count | None = None

    @field_validator(
        "sft_val_by_category",
        "sft_mixed_by_category",
        "val_before_by_category",
        "val_after_by_category",
        "test_after_by_category",
        "test_before_by_category",
    )
    @classmethod
    def _categories(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        return value if value is None else _four_categories(value)


Record = TypeVar("Record", BaseModel, SftStart, Sitting)


def parse_record(kind: type[Record], value: Any, where: str) -> Record:
    """`value` as a `kind`, or `CampaignError` naming `where` and the first field at fault."""
    try:
        return TypeAdapter(kind).validate_python(value)
    except ValidationError as exc:
        errors = exc.errors()
        field = ".".join(str(part) for part in errors[0]["loc"]) or "the line"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise CampaignError(f"{where}: {field}: {errors[0]['msg']}{more}") from None


def located_lines(path: Path, kind: type[Record]) -> list[tuple[str, Record]]:
    """`("FILE:LINE", record)` for every line of the JSON Lines file `path`; a missing file is no line."""
    if not path.exists():
        return []
    try:
        return [(where, parse_record(kind, value, where)) for where, value in json_objects(path)]
    except JsonLinesError as exc:
        raise CampaignError(str(exc)) from None


def read_lines(path: Path, kind: type[Record]) -> list[Record]:
    """Every line of the JSON Lines file `path` as a `kind`; a missing file is no line."""
    return [record for _, record in located_lines(path, kind)]


def read_base(path: Path) -> BaseModel:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CampaignError(f"{path}: no such file (the base model's measured pass rates)") from None
    except (OSError, ValueError) as exc:
        raise CampaignError(f"{path}: not a JSON file ({' '.join(str(exc).split())})") from None
    return parse_record(BaseModel, value, str(path))


def read_sittings(folder: Path) -> list[Sitting]:
    """`runs.jsonl`'s sittings, each checked against the folder: one line per arm and seed, and its
    `files` folder present with its metrics."""
    located = located_lines(folder / RUNS, Sitting)
    first: dict[tuple[str, int], str] = {}
    for where, sitting in located:
        key = (sitting.arm, sitting.seed)
        if key in first:
            raise CampaignError(
                f"{where}: a second line for {sitting.arm} seed {sitting.seed} (the first is {first[key]}); "
                "a sitting run again replaces its line"
            )
        first[key] = where
        if Path(sitting.files).is_absolute() or ".." in Path(sitting.files).parts:
            raise CampaignError(f"{where}: files must name a folder under {folder}")
        metrics = folder / sitting.files / METRICS
        if not any(metrics.glob("*.jsonl")):
            raise CampaignError(f"{where}: files: {metrics}/*.jsonl holds no metrics file")
    return [sitting for _, sitting in located]


@dataclasses.dataclass(frozen=True)
class Campaign:
    """A results folder as read: the base model, the SFT starts and the sittings."""

    folder: Path
    base: BaseModel
    starts: Sequence[SftStart]
    sittings: Sequence[Sitting]


def read_campaign(folder: Path) -> Campaign:
    if not folder.is_dir():
        raise CampaignError(f"{folder}: no such results folder")
    return Campaign(
        folder, read_base(folder / BASE), read_lines(folder / SFT_STARTS, SftStart), read_sittings(folder)
    )
