#!/usr/bin/env bash
# Qwen2.5-Coder-1.5B-Instruct on a node of four GPUs: the base model's greedy val and test, the SFT start
# (exp/sft_qwen.yaml) and its greedy val at each saved length, then SEAL and vanilla GRPO from it (each arm on
# two GPUs, side by side) for the seeds asked, each with the test split for its best-val checkpoint (--test).
# Every stage already done is skipped, so a later node (the SFT start trained again, deterministically, and
# checked by its val score) adds seeds one by one.
#   bash gpu/gpu_qwen_compare.sh build WHEELS_DIR MODEL_DIR   # the model folder from the 22 downloaded wheels
#   bash gpu/gpu_qwen_compare.sh start MODEL_DIR [SEED ...]   # in the background (setsid nohup); returns
#   bash gpu/gpu_qwen_compare.sh run MODEL_DIR [SEED ...]     # the same in the foreground
#   bash gpu/gpu_qwen_compare.sh status                       # each stage: done, running, to do
#   bash gpu/gpu_qwen_compare.sh wait [S]                     # until the driver ends or S s (540) pass
#   bash gpu/gpu_qwen_compare.sh pack FILE                    # results without checkpoints, one .tar.gz
#   bash gpu/gpu_qwen_compare.sh stop [ARM SEED]              # end the driver (or that sitting) and what it started
#   bash gpu/gpu_qwen_compare.sh starts MODEL_DIR SPEC...     # SFT starts side by side, each then scored
# SPEC of `starts`: NAME@GPUS[+OVERRIDE...], e.g. `g2@0,1 g1@2 g1_split@3+sft.untrained_tokens=split`: the
# SFT start of exp/sft_qwen.yaml (experiment sft_qwen_NAME; SFT_STEPS steps when set, a checkpoint every
# SFT_SAVE steps when set, else the last alone) trained on those GPUs, all specs at once; then each saved
# checkpoint, served on one of its start's GPUs, gets its greedy val, the last one also 8 samples at temperature 1
# of the 64 train tasks the arms of seed DRAW_SEED (1) draw, the line's mixed_tasks_seed (MIXED=0: greedy val
# alone, about two minutes less a start; with VAL_SAMPLES=N also N samples at T=1 of the val tasks: a pass@1
# over 100 x N episodes, steadier than 100 greedy ones), and one line in experiments/qwen/starts.jsonl
# (val and its share of ground-truth turns passing, mixed share, pass@1, pass@8, per category, the card, the
# phases' seconds). A start already trained, such as a sitting's (`DRAW_SEED=SEED ... starts MODEL_DIR sSEED@0`),
# is scored without training it again, its line keeping the GPU count it trained on. Specs may share a GPU
# (`a@0 b@0+optim.lr=2e-5` on a node of one): they train at once, and
# their vLLM servers split its memory and start one at a time; their lines say `gpu_shared_by` (train_s is
# then not a start's alone). Two 1.5B starts fit one H200 at once; a third ran out of its memory (a packed
# start holds about 51 GB at its peak). A length curve on two GPUs:
#   SFT_STEPS=120 SFT_SAVE=30 bash gpu/gpu_qwen_compare.sh starts MODEL_DIR g2@0,1
#   bash gpu/gpu_qwen_compare.sh evaluate MODEL_DIR NAME SPLIT GPU  # greedy `seal eval` of one model folder
#                                                 # (e.g. a saved checkpoint) into experiments/qwen/eval_NAME_SPLIT
#   bash gpu/gpu_qwen_compare.sh sitting MODEL_DIR ARM[,ARM...] SEED  # arms x one seed on this node, one job
# `sitting` (docs/guides/gpu.md, "One arm, one seed, one job"), on all the node's GPUs (2 or 4; NGPUS, default
# nvidia-smi's count) or on those GPUS lists (GPUS=2,3: two seeds' sittings at once on a node of 4), each
# phase skipped when done and its seconds printed and kept in experiments/qwen/sitting_ARM_sSEED/phases/:
# install (only with KIT=FOLDER: gpu/gpu_node_install.sh, sourced again when resumed), sft (exp/sft_qwen.yaml
# as experiment sft_qwen_sSEED: the seed's start, which every arm of that seed starts from, so that SEAL -
# vanilla is paired; trained once under a lock when sittings of one seed start at once; its Hugging Face folder
# alone saved), arm_startup +
# arm_steps + test (one launch of exp/learn_qwen_ARM.yaml: STEPS steps (16), the batch of 8 x 8 on 2 or 4 GPUs,
# greedy val before (the start's val in the line) and after, the 300 test tasks before and after in the same
# launch, seal.test_before and seal.test_after (TEST_BEFORE=0: the test after alone, 20-30 s less on one GPU,
# for a seed whose start another line has tested; FINISH_BY=UNIX_TIME: seal.finish_by, the steps ended early
# enough for the last one's validation and test to be over by then, the line then saying the steps it ran: the
# job's end less what follows the launch, a minute or two, about 240 s more with SCORE_START; arms in turn
# each take an equal share of the time left); no checkpoint),
# then one line appended to experiments/qwen/runs.jsonl
# (seal/reports/sitting.py) and the small files in experiments/qwen/sitting_ARM_sSEED.tar.gz, laid out as
# results/qwen_coder_1_5b/ARM_sSEED_DATE/. Several arms (`vanilla,seal`) share the one install and start, each
# line counting those once, as a sitting of that arm alone would spend them; they run at once where the GPUs
# divide into one equal group an arm (2 + 2 on a node of 4), else in turn on all of them (or with
# ARMS_AT_ONCE=0). With SCORE_START=1 the seed's start is then scored on the first GPU as `starts` scores one,
# its line in experiments/qwen/starts.jsonl (about 240 s more, outside the lines' sitting_s). Time budget:
# docs/guides/gpu.md ("One arm, one seed, one job"). Where the results are committed, `python -m
# seal.results.landing --results results/qwen_coder_1_5b ARCHIVE... [--starts experiments/qwen/starts.jsonl]`
# lands the archives and the start lines.
# Sittings share no file but the seed's start and the append to runs.jsonl, so they run at once on the nodes of
# one shared disk (examples/slurm/qwen_sittings.sbatch); a sitting's log and pid: sitting_ARM_sSEED/driver.{log,pid}.
# SEEDS: none by default (base, SFT and its evaluation only). ARMS (default "seal vanilla"; add full_loop for
# exp/learn_qwen_full_loop.yaml) are trained two at a time, the first on GPUs 0-1, the second on GPUs 2-3.
# SFT_STEP picks the SFT checkpoint the arms start from (default: the saved step with the best greedy val,
# the shorter one on a tie). BASE=0 skips the base model's evaluations (measured once) and trains the SFT start
# on all four GPUs instead of two. State and logs: experiments/qwen/ (driver.log, <stage>.log, eval_<model>_<split>/).
source "$(dirname "${BASH_SOURCE[0]}")/gpu_mode_cli.sh"
mode=$1
shift
cd "$(dirname "$0")/.."
state=experiments/qwen
read -r -a arms <<< "${ARMS:-seal vanilla}"
window=16384  # Table 4's max_model_len: the evaluations read the window the arms train in

log() { echo "$(date -u +%H:%M:%S) $*"; }
gpu_count() { echo $(($(tr -cd , <<< "$1" | wc -c) + 1)); }  # gpu_count 0,1,2 -> 3
revision() {  # the commit a line ran, "-dirty" where tracked files differ from it: the line names the code it ran
  git describe --always --dirty --abbrev=7 --exclude='*' 2>/dev/null || echo unknown
}

port() {  # port GPU: the vLLM port of this start (slot, 0 unless starts share GPUs) on that GPU
  echo $((8100 + $1 + 16 * ${slot:-0}))
}

serve() {  # serve MODEL NAME GPU LOG: vLLM on that GPU at its port, as the arms' rollouts sample; sets `server`.
  # Starts that share a GPU (`share` > 1) each take their part of its memory, and start one at a time (a lock
  # a GPU), so that one vLLM's memory profile does not count another's allocation as its own
  local lock="$state/serve_gpu$3.lock" _
  mkdir -p "$state"
  exec 9> "$lock"
  flock 9
  CUDA_VISIBLE_DEVICES=$3 "$py" -m vllm.entrypoints.openai.api_server --model "$1" --served-model-name "$2" \
    --port "$(port "$3")" --gpu-memory-utilization "$(awk -v s="${share:-1}" 'BEGIN { printf "%.3f", 0.85 / s }')" \
    --max-model-len "$window" --seed 0 --generation-config vllm > "$4" 2>&1 9>&- &
  server=$!
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$(port "$3")/v1/models" > /dev/null && { exec 9>&-; return 0; }
    kill -0 $server 2>/dev/null || { log "$2: the vLLM server died ($4)"; exec 9>&-; return 1; }
    sleep 1
  done
  log "$2: the vLLM server did not answer in 600 s ($4)"
  kill $server 2>/dev/null
  exec 9>&-
  return 1
}

recipe_protocol() {  # the arms' seal.rollout.protocol: every score reads the calls as the arms' episodes do
  "$py" -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["seal"]["rollout"]["protocol"])' \
    exp/learn_qwen_seal.yaml
}

score() {  # score MODEL NAME GPU DEST [seal eval options]: `seal eval` of the model served on GPU into DEST
  local model=$1 name=$2 gpu=$3 dest=$4
  shift 4
  "$py" -m seal.cli eval --base-url "http://127.0.0.1:$(port "$gpu")/v1" --model "$name" --out "$dest" \
    --official --max-model-len "$window" --tokenizer "$model" --protocol "$(recipe_protocol)" "$@" \
    > "$dest.log" 2>&1
}

evaluate() {  # evaluate MODEL NAME SPLIT GPU: vLLM on that GPU, then `seal eval` greedy into $state/eval_NAME_SPLIT
  local model=$1 name=$2 split=$3 gpu=$4 dest="$state/eval_$2_$3" server status
  [ -f "$dest/summary.json" ] && { log "eval $name $split: done already"; return 0; }
  log "eval $name $split: vLLM on GPU $gpu (log $dest.vllm.log)"
  serve "$model" "$name" "$gpu" "$dest.vllm.log" || return 1
  score "$model" "$name" "$gpu" "$dest" --split "$split" --concurrency 50
  status=$?
  kill $server 2>/dev/null; wait $server 2>/dev/null
  log "eval $name $split: exit $status ($dest.log)"
  return $status
}

drawn_tasks() {  # drawn_tasks SEED: the 64 train tasks an arm of that seed trains on (verl's draw: data.shuffle,
  # data.train_max_samples 64, data.seed), comma-separated
  "$py" -c 'import sys, numpy as np; from seal.bfcl.tasks import split_ids; t = split_ids("train")
print(",".join(t[i] for i in sorted(np.random.default_rng(int(sys.argv[1])).choice(len(t), 64, replace=False))))' "$1"
}

train_start() {  # train_start NAME GPUS [OVERRIDE...]: exp/sft_qwen.yaml on those GPUs as experiment sft_qwen_NAME,
  # saving the Hugging Face folder alone (what is scored and what an arm starts from)
  local name=$1 gpus=$2 began=$SECONDS exp="sft_qwen_$1" steps=()
  shift 2
  [ -f "experiments/$exp/trained.json" ] && { log "$exp: trained already"; return 0; }
  [ -n "${SFT_STEPS:-}" ] && steps=(trainer.total_training_steps="$SFT_STEPS" trainer.save_freq="${SFT_SAVE:-$SFT_STEPS}")
  [ -n "${SFT_SAVE:-}" ] && steps+=(trainer.max_ckpt_to_keep=null)
  log "$exp: on GPUs $gpus (log $state/$exp.log)"
  CUDA_VISIBLE_DEVICES=$gpus "$py" launcher.py --conf exp/sft_qwen.yaml -- model.path="$model" \
    trainer.experiment_name="$exp" trainer.n_gpus_per_node=$(gpu_count "$gpus") \
    'checkpoint.save_contents=[hf_model]' "${steps[@]}" "$@" > "$state/$exp.log" 2>&1
  local status=$?
  echo $((SECONDS - began)) > "$state/$exp.train_s"
  gpu_count "$gpus" > "$state/$exp.gpus"  # how many it trained on, for the lines of arms from it
  log "$exp: exit $status after $((SECONDS - began)) s"
}

score_start() {  # score_start NAME GPUS [OVERRIDE...]: each saved checkpoint's greedy val, the checkpoints dealt
  # over GPUS (one vLLM a GPU at a time), and with the last one 8 samples at T=1 of the 64 train tasks seed
  # DRAW_SEED's (1) arms draw (not with MIXED=0); one line a checkpoint in starts.jsonl, with the GPU count the
  # start trained on
  # (a sitting's start scored afterwards on fewer GPUs than it trained on keeps its own count)
  local name=$1 exp="sft_qwen_$1" gpu_list folders g i pids=() status=0 trained_on
  IFS=, read -r -a gpu_list <<< "$2"
  trained_on=$(cat "$state/$exp.gpus" 2>/dev/null || echo ${#gpu_list[@]})
  shift 2
  mapfile -t folders < <(ls -d "experiments/$exp"/checkpoints/global_step_*/huggingface 2>/dev/null | sort -V)
  [ ${#folders[@]} -gt 0 ] || { log "$exp: no checkpoint to score ($state/$exp.log)"; return 1; }
  for ((g = 0; g < ${#gpu_list[@]} && g < ${#folders[@]}; g++)); do
    (
      for ((i = g; i < ${#folders[@]}; i += ${#gpu_list[@]})); do
        score_checkpoint "$exp" "${folders[$i]}" "${gpu_list[$g]}" "$trained_on" \
          $((i + 1 == ${#folders[@]} && ${MIXED:-1} == 1)) "$@" \
          || exit 1
      done
    ) & pids+=($!)
  done
  for g in "${pids[@]}"; do wait "$g" || status=1; done
  return $status
}

score_checkpoint() {  # score_checkpoint EXP FOLDER GPU TRAINED_ON MIXED [OVERRIDE...]: the checkpoint served on
  # GPU, its greedy val (and with MIXED=1 its 8 samples at T=1 beside it), then its line in starts.jsonl
  local exp=$1 folder=$2 gpu=$3 trained_on=$4 mixed=$5 began=$SECONDS step greedy status=0
  shift 5
  step=$(sed 's#.*global_step_\([0-9]*\)/.*#\1#' <<< "$folder")
  local dest="$state/eval_${exp}_step$step"
  serve "$folder" "$exp" "$gpu" "$dest.vllm.log" || return 1
  score "$folder" "$exp" "$gpu" "${dest}_val" --split val --concurrency 50 &
  greedy=$!
  local sampled=""
  if [ "$mixed" = 1 ] && [ -n "${VAL_SAMPLES:-}" ]; then
    score "$folder" "$exp" "$gpu" "${dest}_val_sampled" --split val --samples "$VAL_SAMPLES" --temperature 1 \
      --seed 0 --concurrency 64 &
    sampled=$!
  fi
  if [ "$mixed" = 1 ]; then
    score "$folder" "$exp" "$gpu" "${dest}_mixed" --split train --tasks "$(drawn_tasks "${DRAW_SEED:-1}")" \
      --samples 8 --temperature 1 --seed 0 --concurrency 64 || status=1
  fi
  wait $greedy || status=1
  [ -z "$sampled" ] || wait "$sampled" || status=1
  kill $server 2>/dev/null; wait $server 2>/dev/null
  log "$exp step $step: scored on GPU $gpu, exit $status after $((SECONDS - began)) s"
  [ $status = 0 ] || return 1
  "$py" - "$dest" "$exp" "$step" "$trained_on" "$(nvidia-smi --query-gpu=name --format=csv,noheader -i "$gpu")" \
    "$(cat "$state/$exp.train_s" 2>/dev/null || echo 0)" $((SECONDS - began)) "${share:-1}" "$*" \
    "$(revision)" >> "$state/starts.jsonl" <<'PY'
import datetime, json, os, pathlib, sys, yaml
dest, exp, step, gpus, card, train_s, score_s, share, overrides, commit = sys.argv[1:]
shipped = yaml.safe_load(open("exp/sft_qwen.yaml"))["trainer"]["total_training_steps"]
if int(step) != shipped and "trainer.total_training_steps=" not in overrides:
    overrides = f"trainer.total_training_steps={step} {overrides}".strip()  # the constant lr: step N is that run
val = json.load(open(f"{dest}_val/summary.json"))
def summary(name):
    path = pathlib.Path(f"{dest}_{name}/summary.json")
    return json.loads(path.read_text()) if path.is_file() else None
mixed, sampled = summary("mixed"), summary("val_sampled")
turns = [v["labels"].get("pass", 0.0) for v in val["by_category"].values() if v.get("labels")]
line = {
    "recipe": "exp/sft_qwen.yaml" + (f" {overrides}" if overrides else ""), "experiment": exp, "card": card,
    "gpus": int(gpus),
    "steps": int(step), "val": val["pass_rate"],
    "val_by_category": {c: v["pass_rate"] for c, v in val["by_category"].items()},
    "train_s": int(train_s), "score_s": int(score_s),
    "date": datetime.datetime.now(datetime.UTC).date().isoformat(), "commit": commit,
}
if int(share) > 1:
    line["gpu_shared_by"] = int(share)
if turns and len(turns) == len(val["by_category"]):  # the share of ground-truth turns passing, Avg
    line["val_turns_passing"] = sum(turns) / len(turns)
if mixed is not None:
    line |= {
        "mixed": mixed["mixed_share"],
        "mixed_by_category": {c: v["mixed_share"] for c, v in mixed["by_category"].items()},
        "pass_at_1": mixed["pass_at_1"], "pass_at_8": mixed["pass_at_n"],
        "mixed_tasks_seed": int(os.environ.get("DRAW_SEED") or 1),
    }
if sampled is not None:
    line |= {"val_samples": sampled["samples"], "val_pass_at_1": sampled["pass_at_1"],
             "val_pass_at_n": sampled["pass_at_n"]}
sys.stdout.write(json.dumps(line) + "\n")  # one write: two GPUs' lines may be appended at once (unbuffered)
PY
}

each_start() {  # each_start STAGE SPEC...: `STAGE NAME GPUS [OVERRIDE...]` for every spec at once (each its own
  # slot: its vLLM ports), then waits
  local stage=$1 spec name gpus pids=() extra slot=0
  shift
  for spec in "$@"; do
    name=${spec%%@*}; gpus=${spec#*@}; gpus=${gpus%%+*}
    read -r -a extra <<< "$(tr '+' ' ' <<< "${spec#*@}" | cut -s -d' ' -f2-)"
    "$stage" "$name" "$gpus" "${extra[@]}" & pids+=($!)
    slot=$((slot + 1))
  done
  wait "${pids[@]}"
}

drive_starts() {  # drive_starts SPEC...: every start of $model trained at once, then every start scored at once;
  # `share`, the most starts that name one GPU, divides that GPU's memory between their vLLM servers (and their
  # training allocates by expandable segments, so that two processes' cached blocks do not crowd each other out)
  mkdir -p "$state"
  echo $$ > "$state/driver.pid"
  share=$(for spec in "$@"; do gpus=${spec#*@}; tr , '\n' <<< "${gpus%%+*}"; done | sort | uniq -c | sort -rn \
    | awk 'NR == 1 { print $1 }')
  [ "$share" -gt 1 ] && export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  each_start train_start "$@"
  each_start score_start "$@"
  log "driver: done"
}

sft_checkpoints() {  # the SFT run's saved steps, ascending
  ls -d experiments/sft_qwen/checkpoints/global_step_*/huggingface 2>/dev/null | sed 's#.*global_step_\([0-9]*\)/.*#\1#' \
    | sort -n
}

sft_folder() { echo "experiments/sft_qwen/checkpoints/global_step_$1/huggingface"; }

val_mean() {  # val_mean EVAL_DIR: the pass rate (Avg over the categories) its summary reports
  "$py" -c 'import json, sys; print(json.load(open(sys.argv[1] + "/summary.json"))["pass_rate"])' "$1" 2>/dev/null
}

chosen_sft_step() {  # SFT_STEP, or the saved step with the best greedy val (the shorter on a tie)
  if [ -n "${SFT_STEP:-}" ]; then echo "$SFT_STEP"; return; fi
  local step best="" best_score=-1 score
  for step in $(sft_checkpoints); do
    score=$(val_mean "$state/eval_sft${step}_val") || continue
    awk -v s="$score" -v b="$best_score" 'BEGIN { exit !(s > b) }' && { best=$step; best_score=$score; }
  done
  [ -n "$best" ] && echo "$best"
}

train_arm() {  # train_arm ARM SEED SFT_FOLDER GPUS: one launch with the test pass, its exit status into <run>.exit
  local run="learn_qwen_$1_s$2"
  [ -f "experiments/$run/trained.json" ] && { log "$run: done already"; return 0; }
  log "$run: on GPUs $4 (log $state/$run.log)"
  CUDA_VISIBLE_DEVICES=$4 "$py" launcher.py --conf "exp/learn_qwen_$1.yaml" --with-bfcl --test -- \
    actor_rollout_ref.model.path="$3" seed="$2" > "$state/$run.log" 2>&1
  echo $? > "$state/$run.exit"
  log "$run: exit $(cat "$state/$run.exit")"
}

drive() {  # drive MODEL SEED...
  local model=$1 step sft pids=() i seed
  shift
  mkdir -p "$state"
  echo $$ > "$state/driver.pid"
  echo "$@" > "$state/seeds"
  local sft_gpus=0,1,2,3
  if [ "${BASE:-1}" != 0 ]; then
    sft_gpus=2,3
    evaluate "$model" base val 0 & pids+=($!)
    evaluate "$model" base test 1 & pids+=($!)
  fi
  if [ -z "$(sft_checkpoints)" ]; then
    log "sft: exp/sft_qwen.yaml on GPUs $sft_gpus (log $state/sft.log)"
    CUDA_VISIBLE_DEVICES=$sft_gpus "$py" launcher.py --conf exp/sft_qwen.yaml -- model.path="$model" \
      trainer.n_gpus_per_node=$(gpu_count "$sft_gpus") > "$state/sft.log" 2>&1
    log "sft: exit $?"
  fi
  wait "${pids[@]}"
  pids=()
  i=0
  for step in $(sft_checkpoints); do
    evaluate "$(sft_folder "$step")" "sft$step" val $((i % 4)) & pids+=($!)
    i=$((i + 1))
  done
  wait "${pids[@]}"
  step=$(chosen_sft_step) || { log "no SFT checkpoint was evaluated ($state/sft.log)"; return 1; }
  sft=$(sft_folder "$step")
  log "sft: the arms start from step $step ($sft)"
  for seed in "$@"; do
    for ((i = 0; i < ${#arms[@]}; i += 2)); do
      pids=()
      train_arm "${arms[$i]}" "$seed" "$sft" 0,1 & pids+=($!)
      [ $((i + 1)) -lt ${#arms[@]} ] && { train_arm "${arms[$((i + 1))]}" "$seed" "$sft" 2,3 & pids+=($!); }
      wait "${pids[@]}"
    done
  done
  log "driver: done"
}

timed() {  # timed DIR PHASE COMMAND...: the command unless DIR/PHASE holds its seconds; prints them
  local dir=$1 phase=$2 began=$SECONDS
  shift 2
  [ -f "$dir/$phase" ] && { log "phase $phase: done already ($(cat "$dir/$phase") s)"; return 0; }
  "$@" || { log "phase $phase: failed after $((SECONDS - began)) s"; return 1; }
  echo $((SECONDS - began)) > "$dir/$phase"
  log "phase $phase: $(cat "$dir/$phase") s"
}

arm_launch() {  # arm_launch ARM SEED SFT_FOLDER GPU_LIST RUN: the arm with val and test before and after;
  # vLLM without torch.compile (no_compile): a sitting's 16 steps do not earn back what compiling costs a bare node
  local steps=${STEPS:-16} test_before=true finish=()
  [ "${TEST_BEFORE:-1}" = 0 ] && test_before=false
  [ -n "${FINISH_BY:-}" ] && finish=(seal.finish_by="$FINISH_BY")
  [ -f "experiments/$5/trained.json" ] && return 0
  # a launch a job's limit stopped has no checkpoint to resume: it is set aside, so its metrics do not count
  [ -d "experiments/$5" ] && mv "experiments/$5" "experiments/$5.stopped_$(date -u +%Y%m%dT%H%M%SZ)"
  CUDA_VISIBLE_DEVICES=$4 "$py" launcher.py --conf "exp/learn_qwen_$1.yaml" --with-bfcl -- \
    actor_rollout_ref.model.path="$3" seed="$2" trainer.experiment_name="$5" \
    trainer.n_gpus_per_node=$(gpu_count "$4") \
    trainer.total_training_steps="$steps" trainer.total_epochs=$(((steps + 7) / 8)) trainer.test_freq="$steps" \
    trainer.save_freq=-1 seal.test_before="$test_before" seal.test_after=true 'trainer.logger=[console,file]' "$no_compile" \
    "${finish[@]}" > "$state/$5.log" 2>&1
}

split_arm_phases() {  # split_arm_phases RUN DIR: the launch's seconds into start-up, steps and test, from its metrics
  "$py" - "experiments/$1" "$2" <<'PY'
import json, pathlib, sys
run, phases = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
lines = [json.loads(l) for f in sorted((run / "metrics").glob("*.jsonl")) for l in f.read_text().splitlines() if l]
steps = sum(l["data"].get("timing_s/step", 0) for l in lines)
test = sum(l["data"].get("timing_s/test", 0) for l in lines)
whole = int((phases / "arm").read_text())
(phases / "arm_steps").write_text(f"{int(steps)}\n")
(phases / "test").write_text(f"{int(test)}\n")
(phases / "arm_startup").write_text(f"{max(0, whole - int(steps) - int(test))}\n")
PY
}

arm_finish_by() {  # arm_finish_by ARMS_LEFT: the next arm's share of the time to FINISH_BY (empty without it)
  [ -n "${FINISH_BY:-}" ] || return 0
  local now
  now=$(date +%s)
  echo $((now + (FINISH_BY - now) / $1))
}

shared_start() {  # shared_start SEED GPUS: the seed's SFT start, trained once however many sittings ask at once
  # (the lock on a shared disk: a second sitting of the seed waits, then finds it trained)
  ( flock 9 && train_start "s$1" "$2" 9>&- ) 9> "$state/sft_qwen_s$1.lock"
}

sitting() {  # sitting MODEL ARMS SEED: arms (comma-separated) x one seed on this node's GPUs from the seed's one
  # SFT start, each phase timed and skipped when done; each arm its own line
  local model=$1 seed=$3 sft="sft_qwen_s$3" folder card arm dir i list
  local -a names pids ids
  list=${GPUS:-$(seq -s, 0 $((${NGPUS:-$(nvidia-smi -L | wc -l)} - 1)))}
  IFS=, read -r -a ids <<< "$list"
  local gpus=${#ids[@]}
  IFS=, read -r -a names <<< "$2"
  local first="$state/sitting_${names[0]}_s$seed" n=${#names[@]}
  for arm in "${names[@]}"; do mkdir -p "$state/sitting_${arm}_s$seed/phases" && echo $$ > "$state/sitting_${arm}_s$seed/driver.pid"; done
  if [ -n "${KIT:-}" ]; then  # resumed (maybe on another node): the install again, its environment in this shell
    [ -f "$first/phases/install" ] && { source gpu/gpu_node_install.sh "$KIT" || return 1; }
    timed "$first/phases" install source gpu/gpu_node_install.sh "$KIT" || return 1
    set +e
  fi
  timed "$first/phases" sft shared_start "$seed" "$list" || return 1
  [ -f "experiments/$sft/trained.json" ] || { log "$sft: not trained ($state/$sft.log)"; return 1; }
  folder=$(ls -d "experiments/$sft"/checkpoints/global_step_*/huggingface | sort -V | tail -1)
  card=$(nvidia-smi --query-gpu=name --format=csv,noheader -i "${ids[0]}")
  # where the GPUs divide into one equal group an arm, the arms run at once (the same GPU count each); else
  # each on all of them, in turn
  local together=0 failed=0
  if [ "${ARMS_AT_ONCE:-1}" = 1 ] && [ "$n" -gt 1 ] && [ $((gpus % n)) -eq 0 ]; then together=1; fi
  for ((i = 0; i < n; i++)); do
    dir="$state/sitting_${names[i]}_s$seed"
    # the install and the start each line counts are the ones it used, spent once on this node
    for phase in install sft; do
      [ -f "$first/phases/$phase" ] && [ ! -f "$dir/phases/$phase" ] && cp "$first/phases/$phase" "$dir/phases/"
    done
    if [ "$together" = 1 ]; then
      one_arm "${names[i]}" "$seed" "$folder" "$(IFS=,; echo "${ids[*]:$((i * gpus / n)):$((gpus / n))}")" \
        "$card" "$dir" & pids+=($!)
    else  # in turn: with FINISH_BY, each arm gets an equal share of the time left to the arms still to run
      FINISH_BY=$(arm_finish_by $((n - i))) one_arm "${names[i]}" "$seed" "$folder" "$list" "$card" "$dir" || return 1
    fi
  done
  for i in "${pids[@]}"; do wait "$i" || failed=1; done
  [ "$failed" = 0 ] && [ "${SCORE_START:-0}" = 1 ] && { score_sitting_start "$seed" "${ids[0]}" || failed=1; }
  return $failed
}

score_sitting_start() {  # score_sitting_start SEED GPU: the seed's start scored as `starts` scores one (greedy val,
  # and 8 samples at T=1 of the 64 train tasks its arms drew), after the arms and outside their lines' seconds;
  # once: a sitting run again finds it scored
  local done="$state/sft_qwen_s$1.scored"
  [ -f "$done" ] && { log "sft_qwen_s$1: scored already"; return 0; }
  DRAW_SEED=$1 score_start "s$1" "$2" && touch "$done"
}

one_arm() {  # one_arm ARM SEED SFT_FOLDER GPU_LIST CARD DIR: the arm's launch, its line and its archive
  local run="learn_qwen_$1_s$2_sitting"
  timed "$6/phases" arm arm_launch "$1" "$2" "$3" "$4" "$run" || return 1
  [ -f "$6/phases/arm_steps" ] || split_arm_phases "$run" "$6/phases"
  if [ ! -f "$6/line.json" ]; then
    "$py" -m seal.reports.sitting --arm "$1" --seed "$2" --card "$5" --gpus "$(gpu_count "$4")" \
      --run "experiments/$run" --sft-gpus "$(cat "$state/sft_qwen_s$2.gpus" 2>/dev/null)" \
      --phases "$6/phases" --commit "$(revision)" \
      --task-scores "$6/task_scores.csv" > "$6/line.json.partial" && mv "$6/line.json.partial" "$6/line.json" || return 1
    cat "$6/line.json" >> "$state/runs.jsonl"
  fi
  pack_sitting "$1" "$2" "$run" "$6"
  log "sitting $1 seed $2: $(grep -o '"sitting_s": [0-9]*' "$6/line.json")"
}

pack_sitting() {  # pack_sitting ARM SEED RUN DIR: the sitting's small files as results/qwen_coder_1_5b/<folder>/
  local name="$1_s$2_$(date -u +%F)" stage
  stage=$(mktemp -d)
  local to="$stage/results/qwen_coder_1_5b/$name" run="experiments/$3" sft="experiments/sft_qwen_s$2"
  mkdir -p "$to"
  cp "$4/line.json" "$to/result.json"
  [ -f "$4/task_scores.csv" ] && cp "$4/task_scores.csv" "$to/"
  cat "$sft"/metrics/*.jsonl > "$to/sft_metrics.jsonl" 2>/dev/null
  mkdir -p "$to/metrics" && cat "$run"/metrics/*.jsonl > "$to/metrics/arm.jsonl"  # the arm's, as runs.jsonl's files
  cp "$run/test_report.json" "$to/"
  [ -f "$run/seal_steps.jsonl" ] && cp "$run/seal_steps.jsonl" "$to/"
  tar -czf "$state/sitting_$1_s$2.tar.gz" -C "$stage" results && rm -rf "$stage"
  echo "packed $state/sitting_$1_s$2.tar.gz (untar it in the project root; the line is also in $state/runs.jsonl)"
}

need_stack() {  # stops in one line where vLLM or verl cannot be imported (a shell that has not sourced the install)
  "$py" -c 'import importlib.util as u, sys; sys.exit(not (u.find_spec("vllm") and u.find_spec("verl")))' \
    2>/dev/null && return 0
  echo "gpu_qwen_compare.sh: vLLM and verl are not importable by $py: source gpu/gpu_node_install.sh KIT in this shell first" >&2
  exit 2
}

driver_alive() {  # driver_alive [PID_FILE]: whether the process it names (the driver's by default) runs
  local file=${1:-$state/driver.pid}
  [ -f "$file" ] && kill -0 "$(cat "$file")" 2>/dev/null
}

status() {
  [ -f "$state/seeds" ] || { echo "nothing started yet ($state/seeds is missing)"; return 0; }
  driver_alive && echo "driver: running (pid $(cat "$state/driver.pid"), log $state/driver.log)" \
    || echo "driver: not running (start again to resume)"
  local dir run seed arm
  for dir in "$state"/eval_*; do
    [ -d "$dir" ] || continue
    if [ -f "$dir/summary.json" ]; then echo "$(basename "$dir"): Avg $(val_mean "$dir")"
    else echo "$(basename "$dir"): $(wc -l < "$dir/episodes.jsonl" 2>/dev/null || echo 0) episodes so far"; fi
  done
  for seed in $(cat "$state/seeds"); do
    for arm in "${arms[@]}"; do
      run="learn_qwen_${arm}_s${seed}"
      if [ -f "experiments/$run/trained.json" ]; then echo "$run: done"
      elif [ -f "$state/$run.exit" ]; then echo "$run: failed, exit $(cat "$state/$run.exit") ($state/$run.log)"
      elif [ -f "$state/$run.log" ]; then echo "$run: $(grep -c 'step:' "$state/$run.log") step lines so far"
      else echo "$run: to do"; fi
    done
  done
}

follow() {
  local limit=$1 began=$SECONDS poll=${WAIT_POLL:-20}
  while driver_alive && [ $((SECONDS - began + poll)) -le "$limit" ]; do sleep "$poll"; done
  driver_alive && echo "after $((SECONDS - began)) s the driver still runs: wait again" \
    || echo "after $((SECONDS - began)) s the driver has ended"
  status
}

case "$mode" in
  build)
    [ $# -eq 2 ] || { echo "gpu_qwen_compare.sh: build WHEELS_DIR MODEL_DIR" >&2; exit 2; }
    "$py" scripts/make_smoke_model.py qwen2.5-coder-1.5b "$2" --wheels "$1" ;;
  start)
    [ $# -ge 1 ] || { echo "gpu_qwen_compare.sh: start MODEL_DIR [SEED ...]" >&2; exit 2; }
    [ -f "$1/config.json" ] || { echo "gpu_qwen_compare.sh: $1 holds no config.json (build it first)" >&2; exit 2; }
    if driver_alive; then echo "already running (pid $(cat "$state/driver.pid")): see status"; exit 0; fi
    need_stack
    mkdir -p "$state"
    setsid nohup bash "${BASH_SOURCE[0]}" run "$@" > "$state/driver.log" 2>&1 < /dev/null &
    echo "started in the background: bash gpu/gpu_qwen_compare.sh status (log $state/driver.log)" ;;
  run)
    [ $# -ge 1 ] || { echo "gpu_qwen_compare.sh: run MODEL_DIR [SEED ...]" >&2; exit 2; }
    need_stack
    drive "$@" ;;
  starts)
    [ $# -ge 2 ] || { echo "gpu_qwen_compare.sh: starts MODEL_DIR NAME@GPUS[+OVERRIDE...]..." >&2; exit 2; }
    [ -f "$1/config.json" ] || { echo "gpu_qwen_compare.sh: $1 holds no config.json (build it first)" >&2; exit 2; }
    need_stack
    model=$1
    shift
    drive_starts "$@" ;;
  evaluate)
    [ $# -eq 4 ] || { echo "gpu_qwen_compare.sh: evaluate MODEL_DIR NAME SPLIT GPU" >&2; exit 2; }
    [ -f "$1/config.json" ] || { echo "gpu_qwen_compare.sh: $1 holds no config.json" >&2; exit 2; }
    need_stack
    mkdir -p "$state"
    evaluate "$@" ;;
  sitting)
    [ $# -eq 3 ] || { echo "gpu_qwen_compare.sh: sitting MODEL_DIR ARM[,ARM...] SEED" >&2; exit 2; }
    IFS=, read -r -a names <<< "$2"
    [ ${#names[@]} -gt 0 ] || { echo "gpu_qwen_compare.sh: ARM names no arm" >&2; exit 2; }
    for arm in "${names[@]}"; do
      [ -n "$arm" ] || { echo "gpu_qwen_compare.sh: an empty arm name in '$2' (arms are comma-separated)" >&2; exit 2; }
      [ -f "exp/learn_qwen_$arm.yaml" ] || { echo "gpu_qwen_compare.sh: no arm '$arm' (exp/learn_qwen_$arm.yaml)" >&2; exit 2; }
    done
    [ "$(printf '%s\n' "${names[@]}" | sort | uniq -d)" = "" ] || { echo "gpu_qwen_compare.sh: an arm is named twice in '$2'" >&2; exit 2; }
    [[ "$3" =~ ^[0-9]+$ ]] || { echo "gpu_qwen_compare.sh: SEED is a whole number, got '$3'" >&2; exit 2; }
    [[ "${GPUS-0}" =~ ^[0-9]+(,[0-9]+)*$ ]] \
      || { echo "gpu_qwen_compare.sh: GPUS lists GPU numbers with commas (GPUS=2,3), got '$GPUS'" >&2; exit 2; }
    [ -n "${KIT:-}" ] || [ -f "$1/config.json" ] || { echo "gpu_qwen_compare.sh: $1 holds no config.json" >&2; exit 2; }
    [ -n "${KIT:-}" ] || need_stack
    model=$1
    logs=()
    for arm in "${names[@]}"; do mkdir -p "$state/sitting_${arm}_s$3" && logs+=("$state/sitting_${arm}_s$3/driver.log"); done
    sitting "$@" 2>&1 | tee -a "${logs[@]}" ;;
  status) status ;;
  wait)
    [[ "${1:-540}" =~ ^[0-9]+$ ]] || { echo "gpu_qwen_compare.sh: wait [SECONDS], a whole number" >&2; exit 2; }
    follow "${1:-540}" ;;
  pack)
    [ $# -eq 1 ] || { echo "gpu_qwen_compare.sh: pack FILE" >&2; exit 2; }
    names=(experiments/qwen experiments/sft_qwen* experiments/learn_qwen_* launcher_record/sft_qwen
      launcher_record/learn_qwen_*)
    present=()
    for name in "${names[@]}"; do [ -e "$name" ] && present+=("$name"); done
    tar -czf "$1" --exclude='*/checkpoints' --exclude='*/start_model' --exclude='*.parquet' --exclude='*/hydra' "${present[@]}" \
      && echo "packed $(du -h "$1" | cut -f1) into $1 (untar it in the project root)" ;;
  stop)
    [ $# -eq 0 ] || [ $# -eq 2 ] || { echo "gpu_qwen_compare.sh: stop [ARM SEED]" >&2; exit 2; }
    file=$state/driver.pid what="the driver"
    [ $# -eq 2 ] && { file=$state/sitting_$1_s$2/driver.pid; what="sitting $1 seed $2"; }
    if driver_alive "$file"; then
      pid=$(cat "$file")
      kill -- -"$pid" 2>/dev/null || kill "$pid"
      echo "stopped $what (pid $pid) and what it started"
    else echo "not running: $what"; fi ;;
  *) echo "gpu_qwen_compare.sh: no mode '$mode' (build start run starts evaluate sitting status wait pack stop; --help)" >&2; exit 2 ;;
esac
