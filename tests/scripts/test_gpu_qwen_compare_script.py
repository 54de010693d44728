"""`gpu/gpu_qwen_compare.sh` as a command line: SFT starts trained side by side and each saved checkpoint
served and scored (dealt over its start's GPUs, the last one also sampled) into one `starts.jsonl` line
each, the evaluation of one model folder, the sitting's phases, and the one-line stop where vLLM or verl
are not importable. A stand-in `PYTHON` records each call (its arguments and its GPUs) in a copy of the
script whose project is a temporary folder: the launcher leaves the checkpoints and `trained.json` verl
would, `-m vllm...api_server` answers `/v1/models` on its port until killed, `seal eval` asks the served
model and writes a `summary.json` shaped like seal eval's, and the script's own `python -c` / `python -`
snippets run on the real interpreter. `nvidia-smi` and a shortened `sleep` (the serve loop's 1 s polls)
stand in on PATH; no GPU."""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tarfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from seal.bfcl.tasks import CATEGORIES, split_ids
from seal.results.campaign import SftStart, read_lines

ROOT = Path(__file__).resolve().parents[2]
CARD = "NVIDIA Stand-in 141GB"
STAND_IN = f"""#!{sys.executable}
import json, os, sys, threading, time, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
args = sys.argv[1:]


def together(name="BARRIER"):
    \"\"\"Waits until $name launches (SFT starts with BARRIER, arms with ARM_BARRIER) have started (or 10 s):
    whether they ran at once.\"\"\"
    folder, count = Path(os.environ["BARRIER_DIR"]) / name, int(os.environ[name])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / str(os.getpid())).touch()
    deadline = time.monotonic() + 10
    while len(list(folder.iterdir())) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    return len(list(folder.iterdir())) >= count


if args[0] == "-c" and "find_spec" in args[1]:  # need_stack's look-up of vLLM and verl
    sys.exit(1 if os.environ.get("NO_STACK") else 0)
if args[0] in ("-c", "-"):  # the script's own snippets: the real interpreter (stdin is passed on)
    os.execv(sys.executable, [sys.executable, *args])
call = {{"argv": args, "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"), "pid": os.getpid(),
        "alloc": os.environ.get("PYTORCH_CUDA_ALLOC_CONF")}}
descriptor = os.open(os.environ["RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
os.write(descriptor, (json.dumps(call) + "\\n").encode())
os.close(descriptor)
options = dict(zip(args, args[1:]))
overrides = dict(a.split("=", 1) for a in args[args.index("--") + 1 :]) if "--" in args else {{}}


def train_sft():
    import yaml
    trainer = yaml.safe_load(open(options["--conf"]))["trainer"]
    total = int(overrides.get("trainer.total_training_steps", trainer["total_training_steps"]))
    every = int(overrides.get("trainer.save_freq", trainer["save_freq"]))
    keep = overrides.get("trainer.max_ckpt_to_keep", trainer["max_ckpt_to_keep"])
    steps = sorted({{*range(every, total + 1, every), total}})
    run = Path("experiments", overrides["trainer.experiment_name"])
    for step in steps[-int(keep) :] if keep not in (None, "null") else steps:
        folder = run / "checkpoints" / f"global_step_{{step}}" / "huggingface"
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{{}}")
    at_once = "BARRIER" not in os.environ or together()
    (run / "metrics").mkdir(exist_ok=True)
    (run / "metrics" / "sft.jsonl").write_text(json.dumps({{"step": 1, "data": {{"run": run.name}}}}) + "\\n")
    (run / "trained.json").write_text(json.dumps({{"together": at_once}}))


def train_arm():
    run = Path("experiments", overrides["trainer.experiment_name"])
    (run / "metrics").mkdir(parents=True)
    lines = [{{"step": 1, "data": {{"timing_s/step": 2.0}}}}, {{"step": 2, "data": {{"timing_s/test": 3.0}}}}]
    (run / "metrics" / "launch.jsonl").write_text("".join(json.dumps(line) + "\\n" for line in lines))
    (run / "test_report.json").write_text("{{}}")
    at_once = "ARM_BARRIER" not in os.environ or together("ARM_BARRIER")
    (run / "trained.json").write_text(json.dumps({{"together": at_once}}))


def serve():
    model = {{"id": options["--served-model-name"], "root": options["--model"]}}
    served = {{"object": "list", "data": [model]}}

    class Models(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps(served).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass

    threading.Timer(60, os._exit, [0]).start()  # never outlives a test that failed before killing it
    ThreadingHTTPServer(("127.0.0.1", int(options["--port"])), Models).serve_forever()


def evaluate():
    with urllib.request.urlopen(options["--base-url"] + "/models", timeout=5) as answer:
        (model,) = json.load(answer)["data"]
    assert model["id"] == options["--model"], model
    step = int(model["root"].split("global_step_")[1].split("/")[0]) if "global_step_" in model["root"] else 7
    rate = round(step / 1000 + {{"val": 0.0, "train": 0.001, "test": 0.002}}[options["--split"]], 4)
    categories = {list(CATEGORIES)}
    if "--samples" in options:
        row = {{"n": 25, "pass_at_1": rate, "pass_at_n": 2 * rate, "mixed_share": 3 * rate}}
        summary = {{"split": options["--split"], "samples": int(options["--samples"]), "n": 100, **row,
                   "pass_rate": rate, "by_category": {{c: {{**row, "pass_at_1": rate + i / 100}}
                   for i, c in enumerate(categories)}}}}
    else:
        rows = {{c: {{"n": 25, "pass_rate": rate + i / 100,
                     "labels": {{"pass": 0.3 + rate + i / 100, "state_mismatch": 0.7 - rate - i / 100}}}}
                 for i, c in enumerate(categories)}}
        summary = {{"split": options["--split"], "n": 100, "pass_rate": rate, "truncated": 0}}
        summary["by_category"] = rows
    Path(options["--out"]).mkdir(parents=True)
    Path(options["--out"], "summary.json").write_text(json.dumps(summary))


if args[0] == "launcher.py" and "sft_qwen" in options["--conf"]:
    train_sft()
elif args[0] == "launcher.py":
    train_arm()
elif args[:2] == ["-m", "vllm.entrypoints.openai.api_server"]:
    serve()
elif args[:3] == ["-m", "seal.cli", "eval"]:
    evaluate()
elif args[:2] == ["-m", "seal.reports.sitting"]:
    print(json.dumps({{"arm": options["--arm"], "sitting_s": 12}}))
"""
NVIDIA_SMI = f"""#!/bin/sh
case "$*" in
  *--query-gpu=name*) echo "{CARD}" ;;
  -L) for i in 0 1 2 3; do echo "GPU $i: {CARD} (UUID: GPU-$i)"; done ;;
esac
"""


def free_base_port(count: int) -> int:
    """A base port whose `count` ports from it are free now (the copy serves there, not at 8100)."""
    while True:
        base = random.randrange(20000, 60000)
        try:
            for port in range(base, base + count):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base


def project(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A copy of the script in a temporary project, the stand-in's record file and the environment. The
    copy serves at a free base port instead of 8100 (+GPU), so a port another process holds on the test
    machine can neither fail the serve nor answer for it."""
    work = tmp_path / "work"
    (work / "gpu").mkdir(parents=True)
    (work / "exp").mkdir()
    driver = (ROOT / "gpu" / "gpu_qwen_compare.sh").read_text()
    assert driver.count("8100 + ") == 1  # every vLLM port: serve's, its readiness check's, seal eval's
    (work / "gpu" / "gpu_qwen_compare.sh").write_text(driver.replace("8100 + ", f"{free_base_port(4)} + "))
    shutil.copy(ROOT / "gpu" / "gpu_mode_cli.sh", work / "gpu")
    for name in ("sft_qwen.yaml", "learn_qwen_seal.yaml", "learn_qwen_vanilla.yaml"):
        shutil.copy(ROOT / "exp" / name, work / "exp")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (
        ("python", STAND_IN),
        ("nvidia-smi", NVIDIA_SMI),
        ("sleep", f"#!/bin/sh\nexec {shutil.which('sleep')} 0.05\n"),
    ):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    env = {
        **os.environ,
        "PYTHON": str(bin_dir / "python"),
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "RECORD": str(tmp_path / "calls.jsonl"),
        "BARRIER_DIR": str(tmp_path / "barrier"),
        "PYTHONUNBUFFERED": "1",  # as gpu/gpu_node_install.sh exports it: each print is its own write
    }
    for name in (
        "SFT_STEPS",
        "SFT_SAVE",
        "VAL_SAMPLES",
        "DRAW_SEED",
        "MIXED",
        "KIT",
        "NGPUS",
        "CUDA_VISIBLE_DEVICES",
        "PYTORCH_CUDA_ALLOC_CONF",
    ):
        env.pop(name, None)
    return work, tmp_path / "calls.jsonl", env


def script(work: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = ["bash", str(work / "gpu" / "gpu_qwen_compare.sh"), *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def calls(record: Path) -> list[dict]:
    return [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []


def value(argv: list[str], option: str) -> str:
    return argv[argv.index(option) + 1]


def experiment(argv: list[str]) -> str:
    return next(a for a in argv if a.startswith("trainer.experiment_name=")).split("=", 1)[1]


def launches(record: Path) -> list[dict]:
    return [c for c in calls(record) if c["argv"][0] == "launcher.py"]


def servers(record: Path) -> dict[str, dict]:
    """Each served model folder's call."""
    return {
        value(c["argv"], "--model"): c
        for c in calls(record)
        if "vllm.entrypoints.openai.api_server" in c["argv"]
    }


def evals(record: Path) -> dict[str, list[str]]:
    """Each `seal eval` call by its --out folder."""
    return {
        value(c["argv"], "--out"): c["argv"]
        for c in calls(record)
        if c["argv"][:3] == ["-m", "seal.cli", "eval"]
    }


def summary(work: Path, dest: str) -> dict:
    return json.loads((work / dest / "summary.json").read_text())


def start_lines(work: Path) -> dict[tuple[str, int], dict]:
    """starts.jsonl's lines by experiment and step."""
    lines = [json.loads(line) for line in (work / "experiments/qwen/starts.jsonl").read_text().splitlines()]
    return {(line["experiment"], line["steps"]): line for line in lines}


def checkpoint(exp: str, step: int) -> str:
    return f"experiments/{exp}/checkpoints/global_step_{step}/huggingface"


def assert_greedy_val(work: Path, line: dict, exp: str, step: int) -> None:
    greedy = summary(work, f"experiments/qwen/eval_{exp}_step{step}_val")
    assert line["val"] == greedy["pass_rate"]
    assert line["val_by_category"] == {c: v["pass_rate"] for c, v in greedy["by_category"].items()}
    turns = [v["labels"]["pass"] for v in greedy["by_category"].values()]
    assert line["val_turns_passing"] == pytest.approx(sum(turns) / 4)
    assert line["val_turns_passing"] != pytest.approx(line["val"])  # the turns, not the episodes


def assert_servers_ended(record: Path) -> None:
    for call in servers(record).values():
        with pytest.raises(ProcessLookupError):
            os.kill(call["pid"], 0)


def test_a_length_curve_on_two_gpus_scores_every_saved_checkpoint(tmp_path):
    work, record, env = project(tmp_path)
    model = str(tmp_path / "model")
    done = script(work, {**env, "SFT_STEPS": "120", "SFT_SAVE": "30"}, "starts", model, "g2@0,1")
    assert done.returncode == 0, done.stderr
    (launch,) = launches(record)
    assert launch["gpus"] == "0,1" and launch["argv"][:4] == [
        "launcher.py",
        "--conf",
        "exp/sft_qwen.yaml",
        "--",
    ]
    overrides = launch["argv"][4:]
    assert overrides[:3] == [
        f"model.path={model}",
        "trainer.experiment_name=sft_qwen_g2",
        "trainer.n_gpus_per_node=2",
    ]
    assert sorted(overrides[3:]) == sorted(
        [
            "trainer.total_training_steps=120",
            "trainer.save_freq=30",
            "trainer.max_ckpt_to_keep=null",
            "checkpoint.save_contents=[hf_model]",
        ]
    )
    served = servers(record)
    assert {folder: call["gpus"] for folder, call in served.items()} == {
        checkpoint("sft_qwen_g2", 30): "0",
        checkpoint("sft_qwen_g2", 60): "1",
        checkpoint("sft_qwen_g2", 90): "0",
        checkpoint("sft_qwen_g2", 120): "1",
    }
    assert all(value(c["argv"], "--served-model-name") == "sft_qwen_g2" for c in served.values())
    assert_servers_ended(record)
    scored = evals(record)
    dest = "experiments/qwen/eval_sft_qwen_g2_step"
    assert sorted(scored) == sorted([*(f"{dest}{s}_val" for s in (30, 60, 90, 120)), f"{dest}120_mixed"])
    for step in (30, 60, 90, 120):
        greedy = scored[f"{dest}{step}_val"]
        assert value(greedy, "--split") == "val" and "--samples" not in greedy
        assert value(greedy, "--tokenizer") == checkpoint("sft_qwen_g2", step)
    mixed = scored[f"{dest}120_mixed"]
    assert (value(mixed, "--split"), value(mixed, "--samples"), value(mixed, "--temperature")) == (
        "train",
        "8",
        "1",
    )
    drawn = value(mixed, "--tasks").split(",")
    assert len(set(drawn)) == 64 and set(drawn) <= set(split_ids("train"))

    lines = start_lines(work)
    assert sorted(lines) == [("sft_qwen_g2", step) for step in (30, 60, 90, 120)]
    for (exp, step), line in lines.items():
        shipped = step == 60  # exp/sft_qwen.yaml's own length
        assert line["recipe"] == (
            "exp/sft_qwen.yaml" if shipped else f"exp/sft_qwen.yaml trainer.total_training_steps={step}"
        )
        assert (line["card"], line["gpus"]) == (CARD, 2)
        assert line["train_s"] == int((work / "experiments/qwen/sft_qwen_g2.train_s").read_text())
        assert_greedy_val(work, line, exp, step)
        assert ("mixed" in line) == (step == 120) and "val_samples" not in line
    sampled = summary(work, f"{dest}120_mixed")
    assert (
        lines["sft_qwen_g2", 120]
        | {
            "mixed": sampled["mixed_share"],
            "mixed_by_category": {c: v["mixed_share"] for c, v in sampled["by_category"].items()},
            "pass_at_1": sampled["pass_at_1"],
            "pass_at_8": sampled["pass_at_n"],
            "mixed_tasks_seed": 1,
        }
        == lines["sft_qwen_g2", 120]
    )
    today = datetime.now(UTC).date()
    days = {today.isoformat(), (today - timedelta(days=1)).isoformat()}  # a run across midnight UTC
    assert {line["date"] in days for line in lines.values()} == {True}
    assert {line["commit"] for line in lines.values()} == {"unknown"}  # the copy is no git repository
    records = read_lines(work / "experiments/qwen/starts.jsonl", SftStart)  # whole lines, as landed
    assert sorted((r.steps, r.recipe) for r in records) == sorted(
        (s, lines["sft_qwen_g2", s]["recipe"]) for s in (30, 60, 90, 120)
    )


def test_val_samples_samples_the_last_checkpoint_s_val_tasks(tmp_path):
    work, record, env = project(tmp_path)
    settings = {**env, "SFT_STEPS": "60", "SFT_SAVE": "30", "VAL_SAMPLES": "8"}
    done = script(work, settings, "starts", str(tmp_path / "model"), "g1@0")
    assert done.returncode == 0, done.stderr
    dest = "experiments/qwen/eval_sft_qwen_g1_step"
    scored = evals(record)
    assert sorted(scored) == sorted(
        [f"{dest}30_val", f"{dest}60_val", f"{dest}60_mixed", f"{dest}60_val_sampled"]
    )
    sampled = scored[f"{dest}60_val_sampled"]
    assert (value(sampled, "--split"), value(sampled, "--samples"), value(sampled, "--temperature")) == (
        "val",
        "8",
        "1",
    )
    lines = start_lines(work)
    assert "val_samples" not in lines["sft_qwen_g1", 30]
    last, measured = lines["sft_qwen_g1", 60], summary(work, f"{dest}60_val_sampled")
    assert (last["val_samples"], last["val_pass_at_1"], last["val_pass_at_n"]) == (
        8,
        measured["pass_at_1"],
        measured["pass_at_n"],
    )
    assert last["val_pass_at_1"] != last["pass_at_1"]  # the val tasks' samples, not the train draw's


def test_draw_seed_samples_the_train_tasks_that_seed_s_arms_draw_and_the_line_names_it(tmp_path):
    work, record, env = project(tmp_path)
    drawn = {}
    for seed in ("1", "2"):
        shutil.rmtree(work / "experiments", ignore_errors=True)
        done = script(work, {**env, "DRAW_SEED": seed}, "starts", str(tmp_path / "model"), "g1@0")
        assert done.returncode == 0, done.stderr
        mixed = evals(record)["experiments/qwen/eval_sft_qwen_g1_step60_mixed"]
        drawn[seed] = set(value(mixed, "--tasks").split(","))
        assert start_lines(work)["sft_qwen_g1", 60]["mixed_tasks_seed"] == int(seed)
    assert len(drawn["2"]) == 64 and drawn["1"] != drawn["2"]


def test_mixed_0_scores_the_last_checkpoint_greedily_alone_and_its_line_has_no_mixed_share(tmp_path):
    work, record, env = project(tmp_path)
    done = script(work, {**env, "MIXED": "0"}, "starts", str(tmp_path / "model"), "g1@0")
    assert done.returncode == 0, done.stderr
    assert sorted(evals(record)) == ["experiments/qwen/eval_sft_qwen_g1_step60_val"]
    line = start_lines(work)["sft_qwen_g1", 60]
    assert "mixed" not in line and "pass_at_1" not in line
    assert line["val"] == summary(work, "experiments/qwen/eval_sft_qwen_g1_step60_val")["pass_rate"]


def test_two_specs_train_at_once_each_on_its_gpu_with_its_overrides(tmp_path):
    work, record, env = project(tmp_path)
    done = script(
        work,
        {**env, "BARRIER": "2"},
        "starts",
        str(tmp_path / "model"),
        "g1@0",
        "g1b@1+sft.extra_episodes=[]",
        "g90@2+trainer.total_epochs=1+trainer.total_training_steps=90+trainer.save_freq=90",
    )
    assert done.returncode == 0, done.stderr
    named = {experiment(c["argv"]): c for c in launches(record)}
    assert sorted(named) == ["sft_qwen_g1", "sft_qwen_g1b", "sft_qwen_g90"]
    # a spec that sets its own length is recorded with it once
    assert start_lines(work)["sft_qwen_g90", 90]["recipe"] == (
        "exp/sft_qwen.yaml trainer.total_epochs=1 trainer.total_training_steps=90 trainer.save_freq=90"
    )
    named.pop("sft_qwen_g90")
    plain, extra = named["sft_qwen_g1"], named["sft_qwen_g1b"]
    assert (plain["gpus"], extra["gpus"]) == ("0", "1")
    assert "sft.extra_episodes=[]" not in plain["argv"] and extra["argv"][-1] == "sft.extra_episodes=[]"
    for exp in ("sft_qwen_g1", "sft_qwen_g1b"):
        assert json.loads((work / "experiments" / exp / "trained.json").read_text()) == {"together": True}
    lines = start_lines(work)
    assert sorted(lines) == [("sft_qwen_g1", 60), ("sft_qwen_g1b", 60), ("sft_qwen_g90", 90)]
    assert lines["sft_qwen_g1", 60]["recipe"] == "exp/sft_qwen.yaml"
    assert lines["sft_qwen_g1b", 60]["recipe"] == "exp/sft_qwen.yaml sft.extra_episodes=[]"
    assert {folder: call["gpus"] for folder, call in servers(record).items()} == {
        checkpoint("sft_qwen_g1", 60): "0",
        checkpoint("sft_qwen_g1b", 60): "1",
        checkpoint("sft_qwen_g90", 90): "2",
    }


def test_starts_that_share_a_gpu_split_its_memory_serve_on_their_own_ports_and_say_so(tmp_path):
    work, record, env = project(tmp_path)
    done = script(
        work, {**env, "BARRIER": "2"}, "starts", str(tmp_path / "model"), "a@0", "b@0+optim.lr=2e-5"
    )
    assert done.returncode == 0, done.stderr
    trained = {experiment(c["argv"]): c for c in launches(record)}
    assert {exp: (c["gpus"], c["alloc"]) for exp, c in trained.items()} == {
        "sft_qwen_a": ("0", "expandable_segments:True"),
        "sft_qwen_b": ("0", "expandable_segments:True"),
    }
    for exp in trained:  # trained at once
        assert json.loads((work / "experiments" / exp / "trained.json").read_text()) == {"together": True}
    served = servers(record)
    assert len({value(c["argv"], "--port") for c in served.values()}) == 2
    assert {value(c["argv"], "--gpu-memory-utilization") for c in served.values()} == {"0.425"}
    for out, argv in evals(record).items():  # each start is asked at its own server
        start = "sft_qwen_a" if "sft_qwen_a_" in out else "sft_qwen_b"
        port = value(served[checkpoint(start, 60)]["argv"], "--port")
        assert value(argv, "--base-url").endswith(f":{port}/v1")
    lines = start_lines(work)
    assert {exp: line["gpu_shared_by"] for (exp, _), line in lines.items()} == {
        "sft_qwen_a": 2,
        "sft_qwen_b": 2,
    }
    assert TypeAdapter(SftStart).validate_python(lines["sft_qwen_a", 60]).gpu_shared_by == 2


def test_a_start_alone_on_its_gpu_takes_its_memory_and_says_nothing_of_sharing(tmp_path):
    work, record, env = project(tmp_path)
    done = script(work, env, "starts", str(tmp_path / "model"), "a@0", "b@1")
    assert done.returncode == 0, done.stderr
    assert {c["alloc"] for c in launches(record)} == {None}
    assert {value(c["argv"], "--gpu-memory-utilization") for c in servers(record).values()} == {"0.850"}
    assert all("gpu_shared_by" not in line for line in start_lines(work).values())


def test_evaluate_scores_one_served_folder_and_refuses_bad_calls(tmp_path):
    work, record, env = project(tmp_path)
    model = str(tmp_path / "model")
    empty = tmp_path / "empty"
    empty.mkdir()
    for bad in ([model, "base", "val"], [model, "base", "val", "1", "2"], [str(empty), "base", "val", "1"]):
        refused = script(work, env, "evaluate", *bad)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and refused.stdout == ""
    assert not record.exists() and not (work / "experiments").exists()
    done = script(work, env, "evaluate", model, "base", "val", "1")
    assert done.returncode == 0, done.stderr
    assert {folder: call["gpus"] for folder, call in servers(record).items()} == {model: "1"}
    (scored,) = evals(record).items()
    assert scored[0] == "experiments/qwen/eval_base_val" and value(scored[1], "--split") == "val"
    assert summary(work, scored[0])["split"] == "val" and "--samples" not in scored[1]
    assert value(scored[1], "--protocol") == "qwen_fc_strict_tags"  # as the recipe's arms read calls
    assert_servers_ended(record)
    record.unlink()
    again = script(work, env, "evaluate", model, "base", "val", "1")
    assert again.returncode == 0 and "done already" in again.stdout and not record.exists()


@pytest.mark.parametrize(
    "mode",
    [["start"], ["run"], ["starts", "g1@0"], ["evaluate", "base", "val", "0"], ["sitting", "seal", "1"]],
    ids=lambda mode: mode[0],
)
def test_without_vllm_and_verl_each_gpu_mode_stops_in_one_line(tmp_path, mode):
    work, record, env = project(tmp_path)
    refused = script(work, {**env, "NO_STACK": "1"}, mode[0], str(tmp_path / "model"), *mode[1:])
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "gpu_node_install.sh" in refused.stderr
    assert not record.exists() and not (work / "experiments").exists()


def test_a_sitting_trains_the_start_then_the_arm_with_its_test_and_writes_the_line(tmp_path):
    work, record, env = project(tmp_path)
    model = str(tmp_path / "model")
    done = script(work, {**env, "NGPUS": "2"}, "sitting", model, "seal", "1")  # nvidia-smi -L counts 4
    assert done.returncode == 0, done.stderr
    sft, arm = launches(record)
    assert sft["gpus"] == arm["gpus"] == "0,1"
    assert value(sft["argv"], "--conf") == "exp/sft_qwen.yaml" and "trainer.n_gpus_per_node=2" in sft["argv"]
    assert not [a for a in sft["argv"] if a.startswith(("trainer.total_training_steps", "trainer.save_freq"))]
    assert value(arm["argv"], "--conf") == "exp/learn_qwen_seal.yaml"
    assert experiment(sft["argv"]) == "sft_qwen_s1"
    folder = checkpoint("sft_qwen_s1", 60)
    expected = [
        f"actor_rollout_ref.model.path={folder}",
        "seed=1",
        "seal.test_before=true",
        "seal.test_after=true",
        "trainer.save_freq=-1",
        "+actor_rollout_ref.rollout.engine_kwargs.vllm.compilation_config={mode:0,cudagraph_mode:FULL_DECODE_ONLY}",
    ]
    assert set(expected) <= set(arm["argv"])
    assert "trainer.n_gpus_per_node=2" in arm["argv"]
    phases = work / "experiments/qwen/sitting_seal_s1/phases"
    assert sorted(p.name for p in phases.iterdir()) == ["arm", "arm_startup", "arm_steps", "sft", "test"]
    assert (phases / "arm_steps").read_text() == "2\n" and (phases / "test").read_text() == "3\n"
    order = [line.split()[2] for line in done.stdout.splitlines() if line.split()[1:2] == ["phase"]]
    assert order == ["sft:", "arm:"]
    (report,) = [c["argv"] for c in calls(record) if c["argv"][:2] == ["-m", "seal.reports.sitting"]]
    assert "--sft-val" not in report and "--sft-mixed" not in report
    assert (value(report, "--card"), value(report, "--gpus")) == (CARD, "2")
    assert value(report, "--run") == "experiments/learn_qwen_seal_s1_sitting"
    line = (work / "experiments/qwen/sitting_seal_s1/line.json").read_text()
    assert (work / "experiments/qwen/runs.jsonl").read_text() == line
    assert (work / "experiments/qwen/sitting_seal_s1.tar.gz").is_file()
    assert "phase arm:" in (work / "experiments/qwen/sitting_seal_s1/driver.log").read_text()
    assert int((work / "experiments/qwen/sitting_seal_s1/driver.pid").read_text()) > 0
    assert not (work / "experiments/qwen/driver.log").exists()
    assert not (work / "experiments/qwen/driver.pid").exists()
    record.unlink()
    again = script(work, {**env, "NGPUS": "2"}, "sitting", model, "seal", "1")
    assert again.returncode == 0 and not launches(record)
    assert (work / "experiments/qwen/runs.jsonl").read_text() == line


def test_test_before_0_plays_the_test_after_the_steps_alone(tmp_path):
    work, record, env = project(tmp_path)
    done = script(
        work, {**env, "NGPUS": "1", "TEST_BEFORE": "0"}, "sitting", str(tmp_path / "model"), "seal", "2"
    )
    assert done.returncode == 0, done.stderr
    _, arm = launches(record)
    assert "seal.test_before=false" in arm["argv"] and "seal.test_after=true" in arm["argv"]
    assert value(arm["argv"], "--conf") == "exp/learn_qwen_seal.yaml"


@pytest.mark.parametrize("finish_by", ["", "1900000000"], ids=["unset", "a job's end"])
def test_finish_by_reaches_the_arm_s_launch_as_seal_finish_by_and_nothing_without_it(tmp_path, finish_by):
    work, record, env = project(tmp_path)
    settings = {**env, "NGPUS": "1"} | ({"FINISH_BY": finish_by} if finish_by else {})
    done = script(work, settings, "sitting", str(tmp_path / "model"), "seal", "2")
    assert done.returncode == 0, done.stderr
    _, arm = launches(record)
    given = [arg for arg in arm["argv"] if arg.startswith("seal.finish_by")]
    assert given == ([f"seal.finish_by={finish_by}"] if finish_by else [])


@pytest.mark.parametrize("edited", [False, True], ids=["committed", "edited"])
def test_a_line_names_the_commit_it_ran_and_says_dirty_where_the_tree_differs(tmp_path, edited):
    work, record, env = project(tmp_path)
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t"]
    for step in (["init", "-q"], ["add", "gpu", "exp"], ["commit", "-qm", "recipe"]):
        subprocess.run([*git, *step], check=True)
    head = subprocess.run(
        [*git, "rev-parse", "--short=7", "HEAD"], check=True, capture_output=True, text=True
    )
    if edited:
        with (work / "exp" / "learn_qwen_seal.yaml").open("a") as recipe:
            recipe.write("# edited after the commit\n")
    done = script(work, {**env, "NGPUS": "1"}, "sitting", str(tmp_path / "model"), "seal", "1")
    assert done.returncode == 0, done.stderr
    (report,) = [c["argv"] for c in calls(record) if c["argv"][:2] == ["-m", "seal.reports.sitting"]]
    assert value(report, "--commit") == head.stdout.strip() + ("-dirty" if edited else "")


def test_a_sitting_s_start_scored_afterwards_on_one_gpu_keeps_the_count_it_trained_on(tmp_path):
    work, record, env = project(tmp_path)
    model = str(tmp_path / "model")
    done = script(work, {**env, "NGPUS": "2"}, "sitting", model, "seal", "3")
    assert done.returncode == 0, done.stderr
    trained_s = (work / "experiments/qwen/sft_qwen_s3.train_s").read_text().strip()
    record.unlink()
    scored = script(work, {**env, "DRAW_SEED": "3"}, "starts", model, "s3@1")
    assert scored.returncode == 0, scored.stderr
    assert not launches(record)  # found trained: not trained again
    assert "sft_qwen_s3: trained already" in scored.stdout
    assert servers(record)[checkpoint("sft_qwen_s3", 60)]["gpus"] == "1"
    line = start_lines(work)["sft_qwen_s3", 60]
    assert (line["gpus"], line["train_s"], line["mixed_tasks_seed"]) == (2, int(trained_s), 3)
    assert_servers_ended(record)


def test_score_start_scores_the_sitting_s_start_after_its_arms_once_and_outside_its_line(tmp_path):
    work, record, env = project(tmp_path)
    model, settings = str(tmp_path / "model"), {**env, "NGPUS": "2", "SCORE_START": "1"}
    done = script(work, settings, "sitting", model, "vanilla,seal", "2")
    assert done.returncode == 0, done.stderr
    assert servers(record)[checkpoint("sft_qwen_s2", 60)]["gpus"] == "0"
    scored = evals(record)
    mixed = scored["experiments/qwen/eval_sft_qwen_s2_step60_mixed"]
    assert value(mixed, "--temperature") == "1" and value(mixed, "--samples") == "8"
    drew = script(work, {**env, "DRAW_SEED": "2"}, "starts", model, "probe@0")  # seed 2's arms' draw
    assert drew.returncode == 0, drew.stderr
    drawn = evals(record)["experiments/qwen/eval_sft_qwen_probe_step60_mixed"]
    assert value(mixed, "--tasks") == value(drawn, "--tasks")
    line = start_lines(work)["sft_qwen_s2", 60]
    assert (line["gpus"], line["mixed_tasks_seed"]) == (2, 2) and "mixed" in line
    assert done.stdout.index("sitting seal seed 2") < done.stdout.index("sft_qwen_s2 step 60: scored")
    for arm in ("vanilla", "seal"):  # the scoring is no phase of the arms' lines
        phases = work / f"experiments/qwen/sitting_{arm}_s2/phases"
        assert sorted(p.name for p in phases.iterdir()) == ["arm", "arm_startup", "arm_steps", "sft", "test"]
    assert_servers_ended(record)
    record.unlink()
    again = script(work, settings, "sitting", model, "vanilla,seal", "2")
    assert again.returncode == 0, again.stderr
    assert not servers(record) and "sft_qwen_s2: scored already" in again.stdout


def archived(work: Path, name: str) -> dict[str, str]:
    """The small files of a sitting's archive, by their names under its results folder."""
    with tarfile.open(work / "experiments" / "qwen" / f"sitting_{name}.tar.gz") as archive:
        return {
            Path(member.name).name: archive.extractfile(member).read().decode()
            for member in archive.getmembers()
            if member.isfile()
        }


def test_sittings_at_once_on_one_disk_train_each_seed_s_start_once_and_keep_their_own_log(tmp_path):
    work, record, env = project(tmp_path)
    model, settings = str(tmp_path / "model"), {**env, "NGPUS": "2", "BARRIER": "2"}
    command = ["bash", str(work / "gpu" / "gpu_qwen_compare.sh"), "sitting", model]
    names = {"seal_s1": ["seal", "1"], "vanilla_s1": ["vanilla", "1"], "vanilla_s2": ["vanilla", "2"]}
    sittings = {
        name: subprocess.Popen(
            [*command, *args], env=settings, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for name, args in names.items()
    }
    for process in sittings.values():
        assert process.wait(timeout=60) == 0, process.stderr.read().decode()
    named = [experiment(c["argv"]) for c in launches(record)]
    assert sorted(named) == [
        "learn_qwen_seal_s1_sitting",
        "learn_qwen_vanilla_s1_sitting",
        "learn_qwen_vanilla_s2_sitting",
        "sft_qwen_s1",
        "sft_qwen_s2",
    ]
    for seed in "12":  # the two seeds' starts trained at the same time, each once, into its own experiment
        trained = json.loads((work / f"experiments/sft_qwen_s{seed}/trained.json").read_text())
        assert trained == {"together": True}
    for name in sittings:
        seed = name[-1]
        start = f"actor_rollout_ref.model.path={checkpoint(f'sft_qwen_s{seed}', 60)}"
        arm = next(c for c in launches(record) if experiment(c["argv"]) == f"learn_qwen_{name}_sitting")
        assert start in arm["argv"]
        log = (work / f"experiments/qwen/sitting_{name}/driver.log").read_text()
        others = [n.replace("_s", " seed ") for n in sittings if n != name]
        assert "phase arm:" in log and not [o for o in others if f"sitting {o}" in log]
        files = archived(work, name)
        assert json.loads(files["sft_metrics.jsonl"])["data"]["run"] == f"sft_qwen_s{seed}"
        # the archive's phases are the arm's own line's, never a log another sitting writes beside it
        assert "phases.log" not in files
        assert files["result.json"] == (work / f"experiments/qwen/sitting_{name}/line.json").read_text()
    lines = (work / "experiments/qwen/runs.jsonl").read_text().splitlines()
    own = {(work / f"experiments/qwen/sitting_{name}/line.json").read_text().strip() for name in sittings}
    assert set(lines) == own and len(lines) == 3
    assert not (work / "experiments/qwen/driver.pid").exists()


@pytest.mark.parametrize(
    ("settings", "gpus"),
    [
        ({"NGPUS": "4", "ARM_BARRIER": "2"}, ["0,1", "2,3"]),
        ({"NGPUS": "4", "ARMS_AT_ONCE": "0"}, ["0,1,2,3"] * 2),
        ({"NGPUS": "1"}, ["0"] * 2),
    ],
    ids=["at once, two GPUs each", "in turn, all four each", "in turn, a node of one"],
)
def test_a_sitting_of_two_arms_trains_one_start_then_the_arms_each_line_counting_it(tmp_path, settings, gpus):
    work, record, env = project(tmp_path)
    done = script(work, {**env, **settings}, "sitting", str(tmp_path / "model"), "vanilla,seal", "2")
    assert done.returncode == 0, done.stderr
    sft, *arms = launches(record)
    assert experiment(sft["argv"]) == "sft_qwen_s2" and sft["gpus"] == ",".join(
        map(str, range(int(settings["NGPUS"])))
    )
    assert f"trainer.n_gpus_per_node={settings['NGPUS']}" in sft["argv"]
    arms = {experiment(c["argv"]): c for c in arms}
    assert sorted(arms) == ["learn_qwen_seal_s2_sitting", "learn_qwen_vanilla_s2_sitting"]
    for arm, expected in zip(("vanilla", "seal"), gpus, strict=True):
        launch = arms[f"learn_qwen_{arm}_s2_sitting"]
        assert launch["gpus"] == expected
        assert f"trainer.n_gpus_per_node={expected.count(',') + 1}" in launch["argv"]
        trained = json.loads((work / f"experiments/learn_qwen_{arm}_s2_sitting/trained.json").read_text())
        assert trained == {"together": True}  # with ARM_BARRIER: both launches were running at once
    phases = {arm: work / f"experiments/qwen/sitting_{arm}_s2/phases" for arm in ("vanilla", "seal")}
    assert (phases["seal"] / "sft").read_text() == (phases["vanilla"] / "sft").read_text()
    for arm, folder in phases.items():
        assert sorted(p.name for p in folder.iterdir()) == ["arm", "arm_startup", "arm_steps", "sft", "test"]
        assert f"sitting {arm} seed 2:" in (folder.parent / "driver.log").read_text()
        assert (work / f"experiments/qwen/sitting_{arm}_s2.tar.gz").is_file()
    reports = [c["argv"] for c in calls(record) if c["argv"][:2] == ["-m", "seal.reports.sitting"]]
    assert sorted(value(r, "--gpus") for r in reports) == sorted(str(g.count(",") + 1) for g in gpus)
    assert {value(r, "--sft-gpus") for r in reports} == {settings["NGPUS"]}  # the start's count
    lines = [json.loads(line) for line in (work / "experiments/qwen/runs.jsonl").read_text().splitlines()]
    assert sorted(line["arm"] for line in lines) == ["seal", "vanilla"]


@pytest.mark.parametrize(
    ("settings", "shares"),
    [({"NGPUS": "2"}, (1, 1)), ({"NGPUS": "2", "ARMS_AT_ONCE": "0"}, (2, 1))],
    ids=["at once, each to the end", "in turn, the first half the time left"],
)
def test_arms_in_turn_split_the_time_to_finish_by_and_arms_at_once_share_it(tmp_path, settings, shares):
    work, record, env = project(tmp_path)
    finish_by = int(time.time()) + 10_000
    done = script(
        work,
        {**env, **settings, "FINISH_BY": str(finish_by)},
        "sitting",
        str(tmp_path / "model"),
        "vanilla,seal",
        "2",
    )
    assert done.returncode == 0, done.stderr
    _, first, second = launches(record)
    for launch, share in zip((first, second), shares, strict=True):
        (given,) = [int(arg.split("=")[1]) for arg in launch["argv"] if arg.startswith("seal.finish_by=")]
        assert abs(given - (finish_by - 10_000 + 10_000 // share)) <= 5  # the seconds the stand-ins took


def test_two_seeds_pairs_share_a_node_of_four_each_on_the_gpus_gpus_lists(tmp_path):
    work, record, env = project(tmp_path)
    settings = {**env, "BARRIER": "2", "ARM_BARRIER": "4"}  # nvidia-smi -L counts 4
    command = ["bash", str(work / "gpu" / "gpu_qwen_compare.sh"), "sitting", str(tmp_path / "model")]
    sittings = [
        subprocess.Popen(
            [*command, "vanilla,seal", seed],
            env={**settings, "GPUS": gpus},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for seed, gpus in (("3", "0,1"), ("1", "2,3"))
    ]
    for process in sittings:
        assert process.wait(timeout=60) == 0, process.stderr.read().decode()
    placed = {experiment(c["argv"]): c["gpus"] for c in launches(record)}
    assert placed == {
        "sft_qwen_s3": "0,1",
        "learn_qwen_vanilla_s3_sitting": "0",
        "learn_qwen_seal_s3_sitting": "1",
        "sft_qwen_s1": "2,3",
        "learn_qwen_vanilla_s1_sitting": "2",
        "learn_qwen_seal_s1_sitting": "3",
    }
    for run in placed:  # both starts at once, then the four arms at once
        assert json.loads((work / f"experiments/{run}/trained.json").read_text()) == {"together": True}
    reports = [c["argv"] for c in calls(record) if c["argv"][:2] == ["-m", "seal.reports.sitting"]]
    described = sorted(
        tuple(value(r, option) for option in ("--seed", "--arm", "--gpus", "--sft-gpus")) for r in reports
    )
    assert described == [
        ("1", "seal", "1", "2"),
        ("1", "vanilla", "1", "2"),
        ("3", "seal", "1", "2"),
        ("3", "vanilla", "1", "2"),
    ]
    assert len((work / "experiments/qwen/runs.jsonl").read_text().splitlines()) == 4


@pytest.mark.parametrize("gpus", ["2-3", "a", "1,,2", ""])
def test_a_sitting_refuses_a_gpus_that_is_not_a_list_of_numbers_in_one_line(tmp_path, gpus):
    work, record, env = project(tmp_path)
    done = script(work, {**env, "GPUS": gpus}, "sitting", str(tmp_path / "model"), "seal", "1")
    assert done.returncode == 2 and done.stdout == ""
    assert (
        done.stderr == f"gpu_qwen_compare.sh: GPUS lists GPU numbers with commas (GPUS=2,3), got '{gpus}'\n"
    )
    assert not record.exists() and not (work / "experiments").exists()


@pytest.mark.parametrize(
    ("arms", "says"),
    [
        ("seal,seal", "named twice"),
        ("seal,sideways", "no arm 'sideways'"),
        ("seal,,vanilla", "empty arm name"),
        ("", "names no arm"),
    ],
)
def test_a_sitting_refuses_a_bad_list_of_arms_in_one_line(tmp_path, arms, says):
    work, record, env = project(tmp_path)
    refused = script(work, env, "sitting", str(tmp_path / "model"), arms, "1")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and says in refused.stderr
    assert not record.exists() and not (work / "experiments").exists()


def test_a_resumed_sitting_sources_the_install_again_and_sets_a_stopped_arm_aside(tmp_path):
    work, record, env = project(tmp_path)
    installs = tmp_path / "installs.txt"
    (work / "gpu" / "gpu_node_install.sh").write_text(f'echo "$1" >> {installs}\n')
    phases = work / "experiments/qwen/sitting_seal_s1/phases"
    phases.mkdir(parents=True)
    (phases / "install").write_text("163\n")  # the first job's install, on another node
    stale = work / "experiments/learn_qwen_seal_s1_sitting/metrics/stopped.jsonl"
    stale.parent.mkdir(parents=True)
    stale.write_text(json.dumps({"step": 1, "data": {"timing_s/step": 900.0}}) + "\n")
    kit = str(tmp_path / "kit")
    done = script(work, {**env, "NGPUS": "2", "KIT": kit}, "sitting", str(tmp_path / "model"), "seal", "1")
    assert done.returncode == 0, done.stderr
    assert installs.read_text() == f"{kit}\n" and (phases / "install").read_text() == "163\n"
    assert (phases / "arm_steps").read_text() == "2\n" and not stale.exists()
    (kept,) = (work / "experiments").glob("learn_qwen_seal_s1_sitting.stopped_*")
    assert (kept / "metrics" / "stopped.jsonl").is_file()  # set aside, not deleted
    assert len(launches(record)) == 2


def test_stop_ends_a_sitting_by_its_own_pid_file_and_refuses_half_a_sitting(tmp_path):
    work, _, env = project(tmp_path)
    sitting = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    folder = work / "experiments/qwen/sitting_seal_s1"
    folder.mkdir(parents=True)
    (folder / "driver.pid").write_text(f"{sitting.pid}\n")
    assert script(work, env, "stop").stdout == "not running: the driver\n"
    refused = script(work, env, "stop", "seal")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and sitting.poll() is None
    done = script(work, env, "stop", "seal", "1")
    assert done.returncode == 0 and f"stopped sitting seal seed 1 (pid {sitting.pid})" in done.stdout
    assert sitting.wait(timeout=10) != 0
