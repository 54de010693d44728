"""Per-step table of a training run; the code is `seal.reports.steps`.

python scripts/step_table.py experiments/smoke_gpu [experiments/smoke_gpu_vanilla]
"""

import sys

from seal.reports.steps import main

if __name__ == "__main__":
    sys.exit(main())
