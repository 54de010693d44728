"""The fact behind refusing LoRA on FSDP1 (seal/trainer/launch/engine_limits.py): with the verl and peft
this project installs, verl's `collect_lora_params` finds no adapter tensor of an FSDP1 model and every one
of an FSDP2 model. Should a later peft or verl fix FSDP1, this test fails and the refusal can go."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from seal.env.process import free_port

SCRIPT = Path(__file__).parents[2] / "support" / "lora_collection.py"


def test_verl_hands_vllm_no_adapter_under_fsdp1_and_every_adapter_under_fsdp2():
    root = Path(__file__).parents[3]
    done = subprocess.run(
        [sys.executable, str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
        env={**os.environ, "MASTER_PORT": str(free_port()), "PYTHONPATH": str(root)},
        check=True,
    )
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert counts["adapters"] == 28  # 2 layers x 7 linear layers x (lora_A, lora_B)
    assert counts["fsdp"] == 0
    assert counts["fsdp2"] == counts["adapters"]
