"""Launch a SEAL experiment: compose and check its config, bring up the environment service, train, test.

    python launcher.py --conf exp/SEAL.yaml             # train (GPUs); starts the environment service
    python launcher.py --conf exp/SEAL.yaml --dry-run   # everything up to the first GPU allocation (CPU)
    python launcher.py --conf exp/SEAL.yaml --test      # train, then test the best-val and last checkpoints
    python launcher.py --conf exp/SEAL.yaml -- actor_rollout_ref.model.path=/models/Qwen2.5-3B-Instruct
    python launcher.py --conf exp/sft_warmstart.yaml -- model.path=/models/SmolLM2-135M-Instruct   # SFT

The service: `--env-url URL` (or `seal.rollout.env_url`) is used when it answers `/healthz`; otherwise, or
with `--with-bfcl`, the launcher starts one with the config's taxonomy and interface, logs it to the run
folder and stops it on every way out. With `seal.rollout.env_backend=ray` no service is started: the trainer
places environment actors on every node of the Ray cluster (`seal.rollout.env_actors_per_node` each).
Each launch is recorded in `launcher_record/<experiment>/<UTC time>/`.
An SFT experiment (composed from seal_sft) needs no service: its rows are built in-process when missing, then
verl's SFT trainer runs under torchrun on the recorded config and the model folder it saved is printed.
Exit status: 0 done, 1 a check or the run failed, 2 a bad command line or config, 130 interrupted.
"""

import sys

from seal.trainer.launch.command import main

if __name__ == "__main__":
    sys.exit(main())
