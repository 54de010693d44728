"""Per-category pass rates of a training run, step by step; the code is `seal.reports.runs`.

python scripts/stats_validation_bfcl.py --run experiments/SEAL [--out DIR] [--sft FOLDER ...]
"""

import sys

from seal.reports.runs import main

if __name__ == "__main__":
    sys.exit(main())
