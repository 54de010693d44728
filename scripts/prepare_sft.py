"""Write the behaviour-cloning data: each train task's ground truth as the tokens of a SEAL rollout.

    python scripts/prepare_sft.py --tokenizer MODEL_DIR                         # data/bfcl_sft_train.parquet
    python scripts/prepare_sft.py --tokenizer MODEL_DIR --conf exp/smoke_gpu.yaml --out DIR -- KEY=VALUE ...

The episodes follow the RL experiment `--conf` (protocol, interface Ω, lengths; Hydra overrides after --)
with the tokenizer of MODEL_DIR; only the 400 train tasks are played (see seal.trainer.sft.data). verl's
SFT trainer reads the file through `seal.trainer.sft.dataset` (exp/sft_warmstart.yaml). Exit 1 on a bad
config or model folder, with one line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from seal.dataset import DATA_DIR

if TYPE_CHECKING:  # pandas, and verl under seal.trainer, are imported after --help has been answered
    import pandas as pd

SFT_FILE = "bfcl_sft_train.parquet"


def summary(rows: pd.DataFrame) -> str:
    """Per category: rows, tokens (mean, max), trained tokens (mean), ground truth passing, cut rows."""
    rows = rows.assign(tokens=rows.input_ids.map(len), trained=rows.loss_mask.map(sum))
    table = rows.groupby("category").agg(
        rows=("task_id", "size"),
        tokens_mean=("tokens", "mean"),
        tokens_max=("tokens", "max"),
        trained_mean=("trained", "mean"),
        reward_1=("reward", lambda r: int((r == 1.0).sum())),
        truncated=("truncated", "sum"),
    )
    return table.to_string(float_format=lambda x: f"{x:.0f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="prepare_sft.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokenizer", type=Path, required=True, help="model folder whose tokenizer is used")
    parser.add_argument(
        "--conf", type=Path, default=DATA_DIR.parent / "exp" / "SEAL.yaml", help="the RL experiment to replay"
    )
    parser.add_argument("--out", type=Path, default=DATA_DIR, help=f"folder of {SFT_FILE}")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of the RL experiment (after --)")
    args = parser.parse_args(argv)
    if not (args.tokenizer / "config.json").is_file():
        print(f"prepare_sft: {args.tokenizer} is not a model folder (no config.json)", file=sys.stderr)
        return 1
    import pandas as pd

    from seal.trainer.experiment import ExperimentError
    from seal.trainer.sft.data import SFTDataError, episode_config, sft_rows, write_sft_parquet

    try:
        rows = sft_rows(episode_config(args.conf, args.tokenizer.resolve(), args.overrides))
        path = args.out / SFT_FILE
        write_sft_parquet(rows, path)
    except (ExperimentError, SFTDataError) as exc:
        print(f"prepare_sft: {exc}", file=sys.stderr)
        return 1
    written = pd.read_parquet(path)
    print(summary(written))
    print(f"{len(written)} of {len(rows)} train tasks written (a row needs a trained token) to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
