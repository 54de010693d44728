"""Build examples/ with the project's own code: action logs to diagnose and a tiny finished run to read.

    python scripts/make_examples.py            # (re)write examples/
    python scripts/make_examples.py --check    # rebuild in a temporary folder; exit 1 if examples/ differs

examples/actions.jsonl   action logs of eight episodes (`seal diagnose --input examples/actions.jsonl`): the
                         ground truth of the first val task of each category, and four deliberately wrong
                         plays (`example` says which)
examples/run/            a run folder as the trainer and `launcher.py --test` leave it, at toy size
                         (`python scripts/stats_validation_bfcl.py --run examples/run`): four training steps
                         of 4 prompts x 2 rollouts, val on 8 tasks at steps 0, 2 and 4, checkpoints at steps
                         2 and 4 (seal_state.json only), test on 8 tasks for the best-val and the last one

Every episode is played through an `EpisodeStore` (training episodes under Ω, which Evolve updates after
each step, as the service does), every row and record is written by the classes the trainer uses
(`TrajectoryFields`, `ClosedLoop`, `evaluate_test`). A scripted policy stands in for the model: at each
step it plays the ground truth of some tasks and one of the wrong plays on the others, better over time.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from seal.bfcl.calls import ToolCall
from seal.bfcl.ground_truth import ground_truth_calls
from seal.bfcl.tasks import CATEGORIES, category_of, get_task, split_ids
from seal.env.store import EpisodeStore, StoreSettings
from seal.protocol import DEFAULT_PROTOCOL
from seal.protocol.ground_truth import actions_for_calls
from seal.trainer.launch.holdout import evaluate_test
from seal.trainer.rl.closed_loop import ClosedLoop
from seal.trainer.rl.trajectory import TrajectoryFields
from seal.trainer.settings import SealSettings

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
Turns = list[list[ToolCall]]


def altered_argument(turns: Turns) -> Turns:
    """The first string argument of the first call that has one, with `_old` appended."""
    changed = [list(calls) for calls in turns]
    for calls in changed:
        for index, call in enumerate(calls):
            key = next((k for k, v in call.arguments.items() if isinstance(v, str)), None)
            if key is not None:
                calls[index] = ToolCall(call.name, {**call.arguments, key: call.arguments[key] + "_old"})
                return changed
    return changed


PLAYS: dict[str, Callable[[Turns], Turns]] = {
    "ground truth": lambda turns: turns,
    "wrong argument (the first text argument of the first call altered)": altered_argument,
    "stops after the first turn (no calls in the turns after it)": lambda turns: (
        [turns[0]] + [[] for _ in turns[1:]]
    ),
    "no tool call in any turn": lambda turns: [[] for _ in turns],
}
GROUND_TRUTH, *WRONG = PLAYS
TRAIN_PASSES = {1: 2, 2: 3, 3: 5, 4: 6}
"""Training step -> how many of the batch's 8 trajectories the policy plays right."""
EVAL_PASSES = {0: 2, 2: 5, 4: 4}
"""Policy at step N -> how many of 8 val (or test) tasks it plays right: step 2 is the best on val."""
ROLLOUTS = 2
CHECKPOINTS = (2, 4)


def first_tasks(split: str, per_category: int) -> list[str]:
    """The split's first `per_category` tasks of each category, categories interleaved."""
    by_category = [[t for t in split_ids(split) if category_of(t) == c][:per_category] for c in CATEGORIES]
    return [task for rank in range(per_category) for task in (tasks[rank] for tasks in by_category)]


def play_name(position: int, passes: int, step: int) -> str:
    """The scripted policy: the first `passes` positions right, the others one of the wrong plays."""
    return GROUND_TRUTH if position < passes else WRONG[(position + step) % len(WRONG)]


def actions(task_id: str, play: str) -> list[str]:
    return actions_for_calls(PLAYS[play](ground_truth_calls(get_task(task_id))), DEFAULT_PROTOCOL)


def play_episode(store: EpisodeStore, task_id: str, mode: str, play: str, split: str) -> TrajectoryFields:
    """One episode through the store, as the agent loop records it."""
    sent = actions(task_id, play)
    created = store.create(task_id, mode, DEFAULT_PROTOCOL)
    played = []
    for action in sent:
        played.append(action)
        if store.step(created.episode_id, action)["done"]:
            break
    result = store.finish(created.episode_id, True)
    return TrajectoryFields(
        task_id=task_id,
        category=result.category,
        mode=mode,
        labels=list(result.labels),
        taxonomy=result.taxonomy,
        interface_version=result.interface_version,
        reward=result.reward,
        llm_calls=len(played),
        truncated=result.truncated,
        env_error="",
        env_seconds=0.0,
        gen_seconds=0.0,
        actions=played,
        protocol=DEFAULT_PROTOCOL,
        split=split,
    )


def dump_rows(store: EpisodeStore, split: str, step: int, policy_step: int) -> list[dict[str, Any]]:
    """A validation dump as verl's `_validate` writes it (prompt and response texts left out)."""
    rows = []
    for position, task_id in enumerate(first_tasks(split, 2)):
        play = play_name(position, EVAL_PASSES[policy_step], policy_step)
        fields = play_episode(store, task_id, "eval", play, split)
        rows.append(
            {
                "input": f"(the prompt of {task_id}, left out of the example)",
                "output": f"({fields.llm_calls} assistant messages: the action_log)",
                "gts": task_id,
                "score": fields.reward,
                "step": step,
                **fields.reward_extra_info(),
            }
        )
    return rows


def write_jsonl(path: Path, records: Sequence[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")


def write_action_logs(out: Path) -> None:
    tasks = first_tasks("val", 1)
    logs = [(task, GROUND_TRUTH) for task in tasks] + list(zip(tasks, [WRONG[0], *WRONG], strict=True))
    write_jsonl(
        out / "actions.jsonl",
        [
            {"task_id": task, "protocol": DEFAULT_PROTOCOL, "actions": actions(task, play), "example": play}
            for task, play in logs
        ],
    )


def train(store: EpisodeStore, run: Path) -> None:
    """Four GRPO steps' worth of C_t, ρ and Ω: seal_steps.jsonl and the checkpoints' seal_state.json."""
    loop = ClosedLoop(SealSettings())
    records = []
    prompts = first_tasks("train", 1)
    for step, passes in TRAIN_PASSES.items():
        batch = [
            play_episode(store, task_id, "train", play_name(ROLLOUTS * i + r, passes, step), "train")
            for i, task_id in enumerate(prompts)
            for r in range(ROLLOUTS)
        ]
        signs = []
        for start in range(0, len(batch), ROLLOUTS):
            group = [fields.reward for fields in batch[start : start + ROLLOUTS]]
            signs += [reward - sum(group) / len(group) for reward in group]
        groups = [f"{task_id}/{step}" for task_id in prompts for _ in range(ROLLOUTS)]
        loop.step(batch, signs, step, epoch=0, groups=groups)
        loop.interface = store.update_profile(loop.profile.to_json())
        records.append({"step": step, **loop.to_json()})
        if step in CHECKPOINTS:
            state = run / "checkpoints" / f"global_step_{step}" / "seal_state.json"
            state.parent.mkdir(parents=True, exist_ok=True)
            state.write_text(json.dumps(loop.to_json(), indent=1) + "\n", encoding="utf-8")
    write_jsonl(run / "seal_steps.jsonl", records)


def write_run(store: EpisodeStore, run: Path) -> None:
    train(store, run)
    for step in EVAL_PASSES:
        write_jsonl(run / "validation" / f"{step}.jsonl", dump_rows(store, "val", step, step))

    def test_pass(config: DictConfig) -> None:
        step = int(Path(config.trainer.resume_from_path).name.removeprefix("global_step_"))
        out = Path(config.trainer.validation_data_dir)
        write_jsonl(out / f"{step}.jsonl", dump_rows(store, "test", step, step))

    config = OmegaConf.create(
        {
            "trainer": {
                "default_local_dir": str(run / "checkpoints"),
                "validation_data_dir": str(run / "validation"),
            },
            "data": {"val_files": []},
            "seal": {"interface": {"adapt": True}},
        }
    )
    evaluate_test(config, run=test_pass)


def build(out: Path) -> None:
    store = EpisodeStore(StoreSettings())
    write_action_logs(out)
    write_run(store, out / "run")


def differences(built: Path, kept: Path) -> list[str]:
    """Built files that differ from the kept ones, or exist on one side only (relative paths)."""
    found = []
    names = {p.relative_to(built) for p in built.rglob("*") if p.is_file()}
    names |= {p.relative_to(kept) for p in (kept / "run").rglob("*") if p.is_file()}
    names.add(Path("actions.jsonl"))
    for name in sorted(names):
        both = (built / name).is_file() and (kept / name).is_file()
        if not both or not filecmp.cmp(built / name, kept / name, shallow=False):
            found.append(str(name))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="compare a fresh build with examples/")
    parser.add_argument("--out", type=Path, default=EXAMPLES, help="where to build (default: examples/)")
    args = parser.parse_args(argv)
    if not args.check:
        shutil.rmtree(args.out / "run", ignore_errors=True)
        build(args.out)
        print(f"wrote {args.out}")
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        build(Path(scratch))
        changed = differences(Path(scratch), args.out)
    if changed:
        print(f"make_examples: {args.out} differs from a fresh build: {', '.join(changed)}", file=sys.stderr)
        return 1
    print(f"{args.out} is what scripts/make_examples.py builds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
