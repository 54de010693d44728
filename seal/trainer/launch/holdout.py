"""The test half of the paper's protocol: select on val, then test the best-val and the last checkpoint.

`evaluate_test` sits above the trainer (the launcher calls it after training): it chooses the checkpoints
from the val dumps alone (`seal.reports.pass_rate.select_checkpoints`), runs verl's `val_only` pass on the
300 test tasks for each (`resume_mode=resume_path`) through `train`, each into its own folder under
`<run>/test/`, which selection never reads: test numbers cannot influence the choice.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from seal.reports.pass_rate import (
    CHECKPOINT_PREFIX,
    REPORT_NAME,
    TEST_FILE,
    SplitScore,
    read_dump,
    select_checkpoints,
    test_config,
)
from seal.trainer.experiment import train


def evaluate_test(
    config: DictConfig,
    run: Callable[[DictConfig], None] = train,
    test_files: Path = TEST_FILE,
) -> dict[str, Any]:
    """Select on val, evaluate the best-val and the last checkpoint on test, write and return the report.

    `config` is the training run's composed config; `run` executes one config. The report lands in
    `{checkpoints}/../test_report.json` (with each pass's `missing_task_ids`) and each pass's dump in
    `test/global_step_N/`.
    """
    checkpoint_dir = Path(config.trainer.default_local_dir)
    run_dir = checkpoint_dir.parent
    selection = select_checkpoints(Path(config.trainer.validation_data_dir), checkpoint_dir)
    scores: dict[int, SplitScore] = {}
    for step in sorted({selection.best_step, selection.last_step}):
        out_dir = run_dir / "test" / f"{CHECKPOINT_PREFIX}{step}"
        run(test_config(config, checkpoint_dir / f"{CHECKPOINT_PREFIX}{step}", out_dir, test_files))
        scores[step] = read_dump(out_dir / f"{step}.jsonl")
    report = {
        "selection": {
            "rule": "best val mean over saved checkpoints (earliest on a tie)",
            "best_step": selection.best_step,
            "last_step": selection.last_step,
            "val_mean": {str(step): mean for step, mean in selection.val_mean.items()},
        },
        "test": {
            "best": asdict(scores[selection.best_step]),
            "last": asdict(scores[selection.last_step]),
        },
    }
    (run_dir / REPORT_NAME).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report
