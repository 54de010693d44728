"""`gpu/gpu_compare_arms.sh` as a command line: the SFT start once (or one carried in), then both arms
of each seed together (CONCURRENT at a time, a seed per GPU), runs already trained skipped, a failed one
named, the background driver, status, the comparison, the pack and the SFT start's parts. A stand-in
`PYTHON` records each launch (its start, its GPU and its end) in a copy of the script whose project is a
temporary folder, and leaves `trained.json` where the launcher would; no GPU."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from seal.trainer.launch import command as launcher

ROOT = Path(__file__).resolve().parents[2]
SFT_MODEL = "/runs/sft_learn/huggingface"
STAND_IN = f"""#!{sys.executable}
import os, sys, time
from pathlib import Path
args = sys.argv[1:]
record = Path(os.environ["RECORD"])
sft_done = Path("experiments/sft_learn/done")
if args[0] == "-c":  # the script's look-ups: the SFT model's folder, a run's step count
    if "sft_model_path" in args[1]:
        sys.exit(0 if sft_done.exists() and print("{SFT_MODEL}") is None else 1)
    print(24 if Path(args[2], "trained.json").exists() else 0)
    sys.exit(0)
with record.open("a") as handle:
    handle.write("start " + " ".join(args) + "\\n")
    handle.write("gpu " + os.environ.get("CUDA_VISIBLE_DEVICES", "-") + " " + " ".join(args) + "\\n")
name = next((a.split("=", 1)[1] for a in args if a.startswith("seed=")), None)
if args[0] == "launcher.py" and "sft_learn" in args[2]:
    sft_done.parent.mkdir(parents=True, exist_ok=True)
    sft_done.touch()
elif args[0] == "launcher.py":
    run = Path("experiments", Path(args[2]).stem + "_s" + name)
    time.sleep(float(os.environ.get("SECONDS_S" + name, "0.3")))
    (run / "metrics").mkdir(parents=True, exist_ok=True)
    if run.name == os.environ.get("FAIL_RUN"):
        sys.exit(1)
    (run / "trained.json").write_text("{{}}")
    (run / "checkpoints").mkdir(exist_ok=True)
    (run / "checkpoints" / "big.pt").write_text("weights")
with record.open("a") as handle:
    handle.write("end " + " ".join(args) + "\\n")
"""


def project(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A copy of the script in a temporary project, the stand-in's record file and the environment."""
    work = tmp_path / "work"
    (work / "gpu").mkdir(parents=True)
    for name in ("gpu_compare_arms.sh", "gpu_mode_cli.sh"):  # the script and the start it sources
        shutil.copy(ROOT / "gpu" / name, work / "gpu")
    python = tmp_path / "python"
    python.write_text(STAND_IN)
    python.chmod(0o755)
    record = tmp_path / "commands.txt"
    return work, record, {**os.environ, "PYTHON": str(python), "RECORD": str(record), "NODE_GIB": "1024"}


def script(work: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = ["bash", str(work / "gpu" / "gpu_compare_arms.sh"), *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def events(record: Path) -> list[tuple[str, list[str]]]:
    return [(line.split()[0], line.split()[1:]) for line in record.read_text().splitlines()]


def name_of(command: list[str]) -> str:
    seed = next(a for a in command if a.startswith("seed=")).split("=")[1]
    return f"{Path(command[2]).stem}_s{seed}"


def test_the_sft_start_then_each_seed_s_two_arms_together_then_the_comparison(tmp_path):
    work, record, env = project(tmp_path)
    done = script(work, env, "run", "/models/m", "1", "2")
    assert done.returncode == 0, done.stderr
    trace = events(record)
    launches = [command for what, command in trace if what == "start" and command[0] == "launcher.py"]
    assert launches[0] == ["launcher.py", "--conf", "exp/sft_learn.yaml", "--", "model.path=/models/m"]
    runs = launches[1:]
    names = [name_of(c) for c in runs]  # a seed's two arms start together, so either may log first
    assert [set(names[:2]), set(names[2:])] == [
        {"learn_seal_s1", "learn_vanilla_s1"},
        {"learn_seal_s2", "learn_vanilla_s2"},
    ]
    for command in runs:
        overrides = command[command.index("--") + 1 :]
        assert command[3] == "--with-bfcl" and f"actor_rollout_ref.model.path={SFT_MODEL}" in overrides
        assert "actor_rollout_ref.rollout.gpu_memory_utilization=0.30" in overrides
        kv = f"+actor_rollout_ref.rollout.engine_kwargs.vllm.kv_cache_memory_bytes={20 * 2**30}"
        assert kv in overrides  # set outright: no engine measures the GPU beside its neighbour
    for command in runs[:2]:  # one launch per arm composes: its keys exist and its values fit
        launcher.compose(ROOT / command[2], command[command.index("--") + 1 :])
    running, most = set(), 0
    for what, command in trace:
        if command[0] == "launcher.py" and "sft_learn" not in command[2]:
            (running.add if what == "start" else running.discard)(name_of(command))
            most = max(most, len(running))
    assert most == 2  # CONCURRENT=2: one seed's arms side by side, never more
    starts = [
        name_of(c)
        for what, c in trace
        if what == "start" and c[0] == "launcher.py" and "seed=" in " ".join(c)
    ]
    ends = [
        name_of(c) for what, c in trace if what == "end" and c[0] == "launcher.py" and "seed=" in " ".join(c)
    ]
    assert set(starts[:2]) == {"learn_seal_s1", "learn_vanilla_s1"} and ends.index("learn_seal_s1") < 3
    compare = [c for what, c in trace if what == "start" and c[0] == "scripts/compare_runs.py"][-1]
    assert sorted(compare[1:5]) == sorted(f"experiments/{n}" for n in map(name_of, runs))
    assert compare[5:] == ["--out", "experiments/comparison"]


def test_a_second_call_skips_what_is_done_and_a_failed_run_is_named(tmp_path):
    work, record, env = project(tmp_path)
    assert script(work, env, "run", "/models/m", "1").returncode == 0
    record.unlink()
    failed = script(work, {**env, "FAIL_RUN": "learn_vanilla_s2"}, "run", "/models/m", "1", "2")
    assert failed.returncode == 1 and "learn_vanilla_s2: not done" in failed.stderr
    launched = [name_of(c) for what, c in events(record) if what == "start" and c[0] == "launcher.py"]
    # no second SFT, no second seed 1; the two arms start together, so either may log first
    assert sorted(launched) == ["learn_seal_s2", "learn_vanilla_s2"]
    assert "learn_seal_s1: done already" in failed.stdout
    status = script(work, env, "status").stdout.splitlines()
    assert "learn_seal_s2: done (24 steps)" in status
    assert "learn_vanilla_s2: failed, exit 1 (experiments/arms/learn_vanilla_s2.log)" in status


@pytest.mark.parametrize(
    ("concurrent", "share", "kv_gib", "workers"),
    [("2", "0.30", 20.0, 4), ("3", "0.23", 14.4, 2), ("4", "0.16", 8.8, 2), ("6", "0.08", 2.4, 2)],
)
def test_the_memory_share_and_workers_are_sized_for_the_runs_at_once(
    tmp_path, concurrent, share, kv_gib, workers
):
    work, record, env = project(tmp_path)
    assert script(work, {**env, "CONCURRENT": concurrent}, "run", "/models/m", "7").returncode == 0
    runs = [c for what, c in events(record) if what == "start" and "seed=7" in c]
    assert (
        all(f"actor_rollout_ref.rollout.gpu_memory_utilization={share}" in c for c in runs) and len(runs) == 2
    )
    kv = f"+actor_rollout_ref.rollout.engine_kwargs.vllm.kv_cache_memory_bytes={int(kv_gib * 1024) * 2**20}"
    assert all(kv in c for c in runs)
    keys = ("actor_rollout_ref.rollout.agent.num_workers", "reward.num_workers")
    keys += ("transfer_queue.backend.SimpleStorage.num_data_storage_units",)
    assert all(f"{key}={workers}" in c for c in runs for key in keys)


def test_workers_sets_the_worker_count_outright(tmp_path):
    work, record, env = project(tmp_path)
    assert script(work, {**env, "CONCURRENT": "4", "WORKERS": "8"}, "run", "/models/m", "7").returncode == 0
    runs = [c for what, c in events(record) if what == "start" and "seed=7" in c]
    assert len(runs) == 2 and all("actor_rollout_ref.rollout.agent.num_workers=8" in c for c in runs)


def test_more_launches_than_the_node_s_memory_holds_are_refused_in_one_line(tmp_path):
    """Six at once went over Ray's line on a 125.9 GiB node; four ran."""
    work, record, env = project(tmp_path)
    h200_node = {**env, "NODE_GIB": "125.9"}
    for mode in ("start", "run"):
        refused = script(work, {**h200_node, "CONCURRENT": "6"}, mode, "/models/m", "1", "2", "3")
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1
        assert "CONCURRENT=6" in refused.stderr and "holds 4 below Ray's 95% line" in refused.stderr
    assert not record.exists() and not (work / "experiments").exists()
    assert script(work, {**h200_node, "CONCURRENT": "4"}, "run", "/models/m", "1").returncode == 0


def test_start_returns_at_once_and_the_driver_goes_on_in_its_own_session(tmp_path):
    work, _, env = project(tmp_path)
    began = time.monotonic()
    started = script(work, env, "start", "/models/m", "3")
    assert started.returncode == 0 and time.monotonic() - began < 5
    pid_file = work / "experiments" / "arms" / "driver.pid"
    deadline = time.monotonic() + 30
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = int(pid_file.read_text())
    assert os.getsid(pid) == pid  # setsid: the launch outlives the shell that started it
    while (work / "experiments" / "learn_vanilla_s3" / "trained.json").exists() is False:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    while subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert "learn_vanilla_s3: started" in (work / "experiments" / "arms" / "driver.log").read_text()
    assert script(work, env, "status").stdout.splitlines()[:3] == [
        "driver: not running (start again to resume)",
        "learn_seal_s3: done (24 steps)",
        "learn_vanilla_s3: done (24 steps)",
    ]


def test_wait_returns_when_the_driver_ends_and_not_before(tmp_path):
    work, _, env = project(tmp_path)
    env = {**env, "WAIT_POLL": "1", "SECONDS_S4": "3"}
    assert script(work, env, "start", "/models/m", "4").returncode == 0
    time.sleep(1)
    short = script(work, env, "wait", "1")
    assert short.stdout.splitlines()[0].endswith("the driver still runs: wait again")
    assert "learn_seal_s4: running" in short.stdout
    waited = script(work, env, "wait", "30")
    assert waited.returncode == 0
    assert waited.stdout.splitlines()[0].endswith("the driver has ended")
    assert "learn_seal_s4: done (24 steps)" in waited.stdout
    refused = script(work, env, "wait", "soon").stderr.strip()
    assert refused == "gpu_compare_arms.sh: wait [SECONDS], a whole number"


def test_pack_holds_the_results_without_checkpoints(tmp_path):
    work, _, env = project(tmp_path)
    assert script(work, env, "run", "/models/m", "1").returncode == 0
    (work / "launcher_record" / "learn_seal_s1" / "t").mkdir(parents=True)
    (work / "launcher_record" / "learn_seal_s1" / "t" / "config.yaml").write_text("seed: 1\n")
    packed = script(work, env, "pack", str(tmp_path / "results.tar.gz"))
    assert packed.returncode == 0, packed.stderr
    with tarfile.open(tmp_path / "results.tar.gz") as archive:
        names = archive.getnames()
    assert "launcher_record/learn_seal_s1/t/config.yaml" in names
    assert "experiments/learn_seal_s1/trained.json" in names and "experiments/arms/learn_seal_s1.log" in names
    assert not [name for name in names if "checkpoints" in name]


def test_bad_calls_are_refused_with_their_usage(tmp_path):
    work, record, env = project(tmp_path)
    assert script(work, env, "start").returncode == 2
    assert "no mode 'train'" in script(work, env, "train").stderr
    assert (
        script(work, env, "status").stdout.strip()
        == "nothing started yet (experiments/arms/seeds is missing)"
    )
    assert not record.exists()


def test_a_carried_sft_start_is_used_and_nothing_is_trained_again(tmp_path):
    work, record, env = project(tmp_path)
    carried = tmp_path / "sft"
    carried.mkdir()
    (carried / "config.json").write_text("{}")
    assert script(work, {**env, "SFT_MODEL": str(carried)}, "run", "/models/m", "1").returncode == 0
    launches = [c for what, c in events(record) if what == "start" and c[0] == "launcher.py"]
    assert [name_of(c) for c in launches] and not [c for c in launches if "sft_learn" in c[2]]
    assert all(f"actor_rollout_ref.model.path={carried}" in c for c in launches)
    record.unlink()
    empty = tmp_path / "empty"
    empty.mkdir()
    refused = script(work, {**env, "SFT_MODEL": str(empty)}, "run", "/models/m", "2")
    assert refused.returncode == 2 and f"SFT_MODEL={empty} holds no config.json" in refused.stderr
    assert not record.exists()


def test_two_gpus_take_a_seed_each_within_the_devices_the_node_gives(tmp_path):
    work, record, env = project(tmp_path)
    env = {**env, "GPUS": "2", "CUDA_VISIBLE_DEVICES": "4,6"}
    assert script(work, env, "run", "/models/m", "1", "2", "3").returncode == 0
    sft = [c for what, c in events(record) if what == "start" and "exp/sft_learn.yaml" in c]
    assert sft == [
        [
            "launcher.py",
            "--conf",
            "exp/sft_learn.yaml",
            "--",
            "model.path=/models/m",
            "trainer.n_gpus_per_node=2",
        ]
    ]
    placed = placements(record)
    assert placed["learn_seal_s1"] == placed["learn_vanilla_s1"] == "4"
    assert placed["learn_seal_s2"] == placed["learn_vanilla_s2"] == "6"
    assert placed["learn_seal_s3"] == placed["learn_vanilla_s3"]
    runs = [c for what, c in events(record) if what == "start" and "seed=" in " ".join(c)]
    assert all("actor_rollout_ref.rollout.gpu_memory_utilization=0.30" in c for c in runs)  # 2 runs a GPU
    assert most_at_once(record, placed) == (4, 2)


def test_a_seed_waiting_for_a_gpu_takes_the_one_that_freed_up(tmp_path):
    """Seed 2 ends long before seed 1: seed 3 goes to seed 2's GPU, never a third launch beside seed 1's."""
    work, record, env = project(tmp_path)
    env = {**env, "GPUS": "2", "CUDA_VISIBLE_DEVICES": "4,6", "SECONDS_S1": "2", "SECONDS_S2": "0.1"}
    assert script(work, env, "run", "/models/m", "1", "2", "3").returncode == 0
    placed = placements(record)
    assert placed["learn_seal_s3"] == placed["learn_vanilla_s3"] == "6"
    assert most_at_once(record, placed) == (4, 2)


def placements(record: Path) -> dict[str, str]:
    """Each learning launch's GPU, as CUDA_VISIBLE_DEVICES gave it."""
    return {name_of(c[1:]): c[0] for what, c in events(record) if what == "gpu" and "seed=" in " ".join(c)}


def most_at_once(record: Path, placed: dict[str, str]) -> tuple[int, int]:
    """The most learning launches running at once on the node, and on any one GPU."""
    running: set[str] = set()
    most = most_on_a_gpu = 0
    for what, command in events(record):
        if what in ("start", "end") and command[0] == "launcher.py" and "seed=" in " ".join(command):
            (running.add if what == "start" else running.discard)(name_of(command))
            most = max(most, len(running))
            on_gpus = [placed[name] for name in running]
            most_on_a_gpu = max([most_on_a_gpu, *(on_gpus.count(gpu) for gpu in set(on_gpus))])
    return most, most_on_a_gpu


def test_pack_sft_splits_the_start_into_parts_that_rebuild_it(tmp_path):
    work, _, env = project(tmp_path)
    carried = tmp_path / "sft"
    carried.mkdir()
    (carried / "config.json").write_text("{}")
    (carried / "model.safetensors").write_bytes(os.urandom(40 * 2**20))
    packed = script(work, {**env, "SFT_MODEL": str(carried)}, "pack-sft", str(tmp_path / "parts"))
    assert packed.returncode == 0, packed.stderr
    parts = sorted((tmp_path / "parts").iterdir())
    assert [p.name for p in parts] == ["sft.tar.00", "sft.tar.01", "sft.tar.02"]
    assert all(p.stat().st_size <= 15 * 2**20 for p in parts)
    rebuilt = tmp_path / "rebuilt"
    rebuilt.mkdir()
    subprocess.run(f"cat {tmp_path}/parts/sft.tar.* | tar -x -C {rebuilt}", shell=True, check=True)
    assert (rebuilt / "model.safetensors").read_bytes() == (carried / "model.safetensors").read_bytes()
    assert script(work, env, "pack-sft", str(tmp_path / "none")).returncode == 1
