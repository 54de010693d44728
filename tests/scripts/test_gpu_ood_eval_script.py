"""`gpu/gpu_ood_eval.sh` as a command line: the server it starts, the suites it runs, its Table 2.

A stand-in `PYTHON` records every command (its vLLM "server" just waits); a scripted endpoint on `PORT`
answers the script's readiness probe, so no GPU, vLLM or model is involved.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

from tests.support.ood_endpoint import ScriptedServer
from tests.support.scripted_endpoint import serve

ROOT = Path(__file__).resolve().parents[2]
STAND_IN = """#!/bin/sh
echo "$@" >> "$RECORD"
case "$*" in *vllm.entrypoints*) exec sleep 30 ;; esac
exit 0
"""


def test_the_script_serves_the_checkpoint_then_runs_each_suite_and_table_2(tmp_path):
    python = tmp_path / "python"
    python.write_text(STAND_IN)
    python.chmod(0o755)
    record = tmp_path / "commands.txt"
    out = tmp_path / "ood"
    with serve(ScriptedServer()) as url:
        port = str(urlsplit(url).port)
        env = {**os.environ, "PYTHON": str(python), "RECORD": str(record), "PORT": port, "GPU_MEMORY": "0.3"}
        done = subprocess.run(
            ["bash", str(ROOT / "gpu" / "gpu_ood_eval.sh"), "/models/smollm2", str(out), "3"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    commands = [line.split() for line in record.read_text().splitlines()]
    # the stand-in server runs in the background: its line may come after the first suite's
    (server,) = [c for c in commands if "vllm.entrypoints.openai.api_server" in c]
    evals = [c for c in commands if "seal.cli" in c]
    (table,) = [c for c in commands if "scripts/stats_validation_bfcl.py" in c]
    assert server[:2] == ["-m", "vllm.entrypoints.openai.api_server"] and "/models/smollm2" in server
    assert {"--enable-auto-tool-choice", "--tool-call-parser"} <= set(server)
    kv = server[server.index("--kv-cache-memory-bytes") + 1]  # GPU_MEMORY=0.3: 24 GB less 4 GiB, outright
    assert server[server.index("--gpu-memory-utilization") + 1] == "0.3" and kv == str(20 * 2**30)
    assert [e[e.index("--suite") + 1] for e in evals] == ["bfcl_v4_memory", "tau2", "bfcl_v4_web_search"]
    for command in evals:
        assert command[:3] == ["-m", "seal.cli", "eval"]
        assert f"http://127.0.0.1:{port}/v1" in command and command[command.index("--limit") + 1] == "3"
    assert table == ["scripts/stats_validation_bfcl.py", "--ood", f"smollm2={out}", "--out", str(out)]


def test_without_a_model_dir_the_script_says_how_to_call_it():
    done = subprocess.run(["bash", str(ROOT / "gpu" / "gpu_ood_eval.sh")], capture_output=True, text=True)
    assert done.returncode != 0 and "usage: gpu_ood_eval.sh MODEL_DIR" in done.stderr
