"""The training and evaluation parquet files, built from the bfcl-eval package data, deterministically.

Rows follow the layout verl's RLHF dataset reads: `prompt` (chat messages: the raw qwen_fc system
prompt and the first user turn), `data_source` (the BFCL category), `agent_name` (the training or
the validation agent loop), `reward_model` and `extra_info` (task id, category, split). The agent
loop rebuilds the prompt from the environment, so `prompt` serves length filtering and reading.

    python scripts/prepare_data.py            # write data/bfcl_{train,val,test}.parquet (also: seal data)
    python scripts/prepare_data.py --check    # verify split, counts and that the files match a rebuild
"""

from __future__ import annotations

import argparse
import io
import sys
from collections import Counter
from collections.abc import Collection
from pathlib import Path

from seal.bfcl.tasks import CATEGORIES, SPLITS, get_task, split_ids
from seal.env.episode import Episode

DATA_DIR = Path(__file__).resolve().parents[1] / "data"  # the repository's data/ (editable install)
TEST_FILE = DATA_DIR / "bfcl_test.parquet"
"""The test split's 300 tasks: `launcher.py --test` and `seal.test_after` evaluate on it."""
TRAIN_AGENT = "seal_agent"
EVAL_AGENT = "seal_eval_agent"
PER_CATEGORY = {"train": 100, "val": 25, "test": 75}


def rows(split: str, tasks: Collection[str] | None = None) -> list[dict]:
    """The split's rows in split order, or only those of `tasks` (a prompt takes milliseconds to build,
    the whole split seconds); each row's index is its place in the split."""
    out = []
    for index, task_id in enumerate(split_ids(split)):
        if tasks is not None and task_id not in tasks:
            continue
        task = get_task(task_id)
        out.append(
            {
                "prompt": Episode(task, mode="eval").reset(),
                "data_source": task.category,
                "agent_name": TRAIN_AGENT if split == "train" else EVAL_AGENT,
                "reward_model": {"style": "rule", "ground_truth": task_id},
                "extra_info": {"task_id": task_id, "category": task.category, "split": split, "index": index},
            }
        )
    return out


def parquet_bytes(split: str) -> bytes:
    buffer = io.BytesIO()
    import pandas as pd  # here: `DATA_DIR` and the project root are read by commands that never write data

    pd.DataFrame(rows(split)).to_parquet(buffer, index=False, engine="pyarrow", compression="zstd")
    return buffer.getvalue()


def split_problems() -> list[str]:
    """Everything wrong with the split: counts, per-category counts, overlaps, scenario leaks."""
    problems = []
    scenarios: dict[str, set[str]] = {}
    for split in SPLITS:
        ids = split_ids(split)
        by_category = Counter(task_id.rsplit("_", 1)[0] for task_id in ids)
        expected = {category: PER_CATEGORY[split] for category in CATEGORIES}
        if dict(by_category) != expected:
            problems.append(f"{split}: per-category counts {dict(by_category)} != {expected}")
        if len(set(ids)) != len(ids):
            problems.append(f"{split}: duplicate ids")
        scenarios[split] = {task_id.rsplit("_", 1)[1] for task_id in ids}
        for category in CATEGORIES:
            indices = {t.rsplit("_", 1)[1] for t in ids if t.startswith(category + "_")}
            if indices != scenarios[split]:
                problems.append(f"{split}: {category} uses other scenario indices than the rest")
    for a, b in (("train", "val"), ("train", "test"), ("val", "test")):
        shared = scenarios[a] & scenarios[b]
        if shared:
            problems.append(f"scenarios in both {a} and {b}: {sorted(shared)[:5]}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="verify instead of writing")
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="folder of the parquet files")
    args = parser.parse_args(argv)
    problems = split_problems()
    for split in SPLITS:
        path = args.out / f"bfcl_{split}.parquet"
        data = parquet_bytes(split)
        if args.check:
            if not path.exists():
                problems.append(f"{path} is missing (run scripts/prepare_data.py)")
            elif path.read_bytes() != data:
                problems.append(f"{path} differs from a fresh build")
        else:
            args.out.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        print(f"{split:5s} {len(split_ids(split)):4d} tasks  {path}")
    if problems:
        for problem in problems:
            print(f"FAIL: {problem}", file=sys.stderr)
        return 1
    print("split ok: train 400 / val 100 / test 300, 100 / 25 / 75 per category, no shared scenario")
    return 0
