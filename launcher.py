"""Launch a SEAL experiment: `python launcher.py --conf exp/SEAL.yaml [--dry-run] [-- overrides]`, the same
launch as `seal train` (seal/trainer/launch/command.py; `--help` describes it)."""

import sys

from seal.trainer.launch.command import main

if __name__ == "__main__":
    sys.exit(main())
