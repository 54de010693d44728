#!/usr/bin/env bash
# The paper's own launch at the paper's scale on one node of four GPUs: exp/SEAL.yaml as shipped on random bf16
# weights of Qwen2.5-7B-Instruct's and ToolACE-2-8B's exact shape (built on the node with the real tokenizer and
# template), a checkpoint save and a resume from it, timing runs with responses shaped like a trained model's,
# the 1/2/4-GPU scaling of the 1.5B learning recipe and verl's LoRA on it. Each run in the background under
# benchmarks/resource_sampler.py; benchmarks/backbone_table.py gives start-up, phases, tokens/s/GPU, MFU per phase and
# peak GPU and host memory (scripts/step_table.py the LoRA run's rollout-vs-trainer agreement per step).
#   bash gpu/gpu_paper_launch.sh build 7b|8b    the model folder in $MODELS (qwen2.5-7b, toolace-2-8b): the
#                                    weightless one from .gpu/models/NAME (else built there: make_smoke_model.py,
#                                    needs the tokenizer packages), then random bf16 weights (~1 min, 15-16 GB)
#   bash gpu/gpu_paper_launch.sh next           start the first run of ORDER not yet done well (then `wait`)
#   bash gpu/gpu_paper_launch.sh start RUN...   launch the runs in the background; several run side by side on
#                                    disjoint GPUs (CUDA_VISIBLE_DEVICES, in the order given), at most GPUS in all
#                                    (default: the node's count); each samples only its own GPUs' memory
#   bash gpu/gpu_paper_launch.sh wait [S]       follow the started runs for at most S seconds (default 540);
#                                    exit 0 when all ended well (their tables printed), 1 one failed, 3 running
#   bash gpu/gpu_paper_launch.sh run RUN...     start the runs and wait for their end
#   bash gpu/gpu_paper_launch.sh queue RUN...   one run after another in the background, each starting as the
#                                    last ends (log experiments/.paper_launch/queue.log); `wait` follows the queue
#   bash gpu/gpu_paper_launch.sh status         each run of ORDER: done, running, failed or to do
#   bash gpu/gpu_paper_launch.sh table [RUN...] the tables of finished runs (default: all), then side by side
#   bash gpu/gpu_paper_launch.sh show RUN       the launch RUN makes, one argument a line
# ORDER (the most valuable first; minutes on 4 GPUs, start-up included: measured on 4 H200 where given):
#   7b-ckpt     exp/SEAL.yaml as shipped, 1 step of 32 prompts x 8 rollouts and a checkpoint (trainer.save_freq=1,
#               ~91 GB of fp32 weights and AdamW); beside the model path only run length, validation and
#               checkpoints overridden. Random weights answer every turn to the 4,096-token cap: the full-cap
#               step, the memory peak (11, measured)
#   7b-resume   a second launch in 7b-ckpt's folder to step 2: verl resumes from the checkpoint; checked to log
#               step 2 only; the checkpoint is then removed (the node's disk holds one) (10, measured)
#   7b-shaped   the timing run: 2 steps with data.max_response_length=1152, so that a step holds the tokens a
#               trained model's does (ground-truth episodes: 5,081 prompt + 1,149 response tokens on average);
#               the cap is the one setting beyond the three (and vLLM logs at INFO, so that its start-up's steps
#               and their times are in the launch's log); its table checks the 7B targets (9, measured)
#   7b-tuned    7b-shaped with the speed settings to try against the targets, which leave the algorithm as
#               it is: the update without gradient checkpointing (verl's default recomputes each layer's forward
#               in the backward: a third more compute than its MFU counts) on packed micro-batches of up to
#               10,240 tokens (the shaped run's longest sequence is 9,344; every layer's activations, 6.0 MiB a
#               token, stay: 99 GiB of an H200 by benchmarks/memory_plan.py --parts 7b-4h200-tuned, more than an
#               H100 has); the forward-only phases on
#               32,768-token micro-batches; the reference model held in bf16, the precision its forward
#               computes in anyway (verl keeps a forward-only model's parameters on the host whatever its
#               param_offload says, and streams them for every micro-batch: 16-23% MFU on 4 H200; bf16 and
#               fewer, larger micro-batches shrink that stream); refused on GPUs of less than 120 GiB (10,
#               measured)
#   7b-nocompile   7b-tuned with vLLM's torch.compile off and full CUDA graphs for decoding only (compilation
#               mode 0, cudagraph_mode FULL_DECODE_ONLY; verl's default is compiled FULL_AND_PIECEWISE): what a
#               node's first launch saves in start-up, against what generation loses (~8)
#   7b-fast     7b-shaped with gradient checkpointing kept and the update's micro-batches packed up to 49,152
#               tokens (2-3 a mini-batch instead of 6-7), 7b-tuned's forward-only settings and vLLM as
#               7b-nocompile's: every 7B target in one run, 66 GiB a GPU by benchmarks/memory_plan.py --parts
#               7b-4h200-fast, so an H100 holds it too (7b-4gpu-fast). Its update took as long as 7b-shaped's:
#               the count of micro-batches is not what the update spends (9, measured)
#   7b-liger-decoder   7b-fast with Liger's RMSNorm, SwiGLU and RoPE kernels in the decoder
#               (actor_rollout_ref.model.use_liger, seal/trainer/launch/liger.py; 13-17% off one micro-batch's
#               forward and backward on an H200, benchmarks/bench_packed_attention.py --liger): every 7B target
#               in one run, the update at 40.9% MFU. The log-probs' Liger kernel
#               (fused_kernel_options.impl_backend=liger) is left out: on Hopper liger-kernel 0.8.5 runs it
#               with NVIDIA's CuTe DSL, which the kit does not carry, and the launcher refuses it without
#               (8, measured)
#   8b-ckpt, 8b-resume, 8b-shaped   the same for ToolACE-2-8B with its config as shipped, exp/SEAL_ToolACE.yaml
#               (Table 4 with the python_list protocol and a 9,216-token prompt budget) (13, 11, measured; ~10)
#   scale-1, scale-2, scale-4   exp/learn_qwen_seal.yaml on $CODER (Qwen2.5-Coder-1.5B-Instruct, real weights)
#               with trainer.n_gpus_per_node=1/2/4, 3 steps, no validation or checkpoint (~5 each; `start
#               scale-1 scale-2 lora` runs three side by side on four GPUs, then `start scale-4`)
#   lora        exp/learn_qwen_seal.yaml on $CODER on 1 GPU with verl's LoRA (rank 64, FSDP2, vLLM reads the base
#               from the folder and gets only the adapters), 4 steps (2 updates each) at lr 1e-4 with an entropy
#               bonus (entropy_coeff=1: the base model's groups earn no reward, so GRPO alone leaves the adapters
#               at zero): the adapters move the policy far, so a rollout-vs-trainer probability difference at
#               scale-1's level (full fine-tuning, one GPU too) after 3+ updates says they reach vLLM;
#               scripts/step_table.py prints it per step with the trainer's entropy (~8)
#   RUN-profile RUN (not a checkpoint or resume) with verl's torch profiler on rank 0 during the second
#               mini-batch of step 2's update (benchmarks/update_profile.py): its table adds where that mini-batch's
#               GPU time went, by region and kind; the profiler slows the step it records, so time RUN itself
#   7b, 8b      2 full-cap steps in one launch, no checkpoint: what the -ckpt and -resume pair already shows in
#               two launches, so last (~13 each)
# vLLM's compile cache is on (seal/config/seal_trainer.yaml): a node's first launch of a model compiles its
# graphs, later launches of the same model and rollout settings load them, so say which a start-up was: the
# table splits each start-up into its parts, the rollout servers' among them.
# MODELS (default /root/models) holds the model folders; CODER (default $MODELS/qwen2.5-coder-1.5b) the 1.5B;
# PYTHON (default python3) runs the scripts. Runs go to experiments/paper_<run> (the resumes to their ckpt's).
# A -ckpt run starts only with CHECKPOINT_GIB (default 110) GiB free under experiments/.
source "$(dirname "${BASH_SOURCE[0]}")/gpu_mode_cli.sh"
mode=$1
shift
models=${MODELS:-/root/models}
coder=${CODER:-$models/qwen2.5-coder-1.5b}
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # the tables read the runs with seal
state=experiments/.paper_launch
checkpoint_gib=${CHECKPOINT_GIB:-110}  # the free space a -ckpt run asks for (the 8B's checkpoint: 96 GB)
ORDER=(7b-ckpt 7b-resume 7b-shaped 7b-tuned 7b-nocompile 7b-fast 7b-liger-decoder 8b-ckpt 8b-resume 8b-shaped scale-1 scale-2 scale-4 lora 7b 8b)
no_val=(trainer.val_before_train=false trainer.test_freq=-1)
forward_only=(actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=32768
              actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=32768 actor_rollout_ref.ref.fsdp_config.model_dtype=bf16)
vllm_timings=+ray_kwargs.ray_init.runtime_env.env_vars.VLLM_LOGGING_LEVEL=INFO  # logs only: vLLM's start-up lines
lora=(actor_rollout_ref.model.lora_rank=64 actor_rollout_ref.model.lora_alpha=128
      actor_rollout_ref.rollout.load_format=safetensors actor_rollout_ref.actor.strategy=fsdp2
      actor_rollout_ref.actor.fsdp_config.strategy=fsdp2 actor_rollout_ref.actor.optim.lr=1e-4
      actor_rollout_ref.actor.entropy_coeff=1)

model_of() {  # model_of RUN: the model folder the run trains
  case "$1" in 7b*) echo "$models/qwen2.5-7b" ;; 8b*) echo "$models/toolace-2-8b" ;; *) echo "$coder" ;; esac
}

conf_of() {  # conf_of RUN: the shipped experiment of a 7B or 8B run
  case "$1" in 8b*) echo exp/SEAL_ToolACE.yaml ;; *) echo exp/SEAL.yaml ;; esac
}

launch_args() {  # launch_args RUN: the experiment, then the overrides beside the model path, one a line
  local run=$1
  case "$run" in
    7b|8b) printf '%s\n' "$(conf_of "$run")" trainer.total_training_steps=2 "${no_val[@]}" trainer.save_freq=-1 ;;
    7b-ckpt|8b-ckpt) printf '%s\n' "$(conf_of "$run")" trainer.total_training_steps=1 "${no_val[@]}" \
          trainer.save_freq=1 ;;
    7b-resume|8b-resume) launch_args "${run%-resume}" ;;
    7b-shaped|8b-shaped) launch_args "${run%-shaped}"; printf '%s\n' data.max_response_length=1152 "$vllm_timings" ;;
    7b-tuned) launch_args 7b-shaped; printf '%s\n' actor_rollout_ref.model.enable_gradient_checkpointing=false \
          actor_rollout_ref.actor.ppo_max_token_len_per_gpu=10240 "${forward_only[@]}" ;;
    7b-nocompile) launch_args 7b-tuned; echo "$no_compile" ;;
    7b-fast) launch_args 7b-shaped; printf '%s\n' actor_rollout_ref.actor.ppo_max_token_len_per_gpu=49152 \
          "${forward_only[@]}" "$no_compile" ;;
    7b-liger-decoder) launch_args 7b-fast; echo "$liger_decoder" ;;
    scale-[124]) printf '%s\n' exp/learn_qwen_seal.yaml trainer.total_training_steps=3 "${no_val[@]}" \
          trainer.save_freq=-1 "trainer.n_gpus_per_node=${run#scale-}" ;;
    lora) printf '%s\n' exp/learn_qwen_seal.yaml trainer.total_training_steps=4 "${no_val[@]}" \
          trainer.save_freq=-1 trainer.n_gpus_per_node=1 "${lora[@]}" ;;
    *-ckpt-profile|*-resume-profile|*-profile-profile) return 2 ;;
    *-profile) launch_args "${run%-profile}" || return 2
          "$py" benchmarks/update_profile.py overrides "$(folder_of "$run")/profile" ;;
    *) return 2 ;;
  esac
}

gpus_of() {  # gpus_of RUN: the GPUs its launch asks for
  local run=${1%-profile}
  case "$run" in scale-*) echo "${run#scale-}" ;; lora) echo 1 ;; *) echo 4 ;; esac
}

node_gpus() { echo "${GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)}"; }
gpu_mib() {  # the smallest GPU's memory in MiB (GPU_MIB to say; empty where nvidia-smi cannot tell)
  echo "${GPU_MIB:-$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | sort -n | head -n 1)}"
}

folder_of() { local run=${1%-resume}; [ "$run" = "$1" ] || run+=-ckpt; echo "experiments/paper_${run//-/_}"; }

launch_line() {  # launch_line RUN: the whole launch, one argument a line
  local args
  mapfile -t args < <(launch_args "$1") || return 2
  [ ${#args[@]} -gt 0 ] || return 2
  printf '%s\n' launcher.py --conf "${args[0]}" --with-bfcl -- "actor_rollout_ref.model.path=$(model_of "$1")" \
    "${args[@]:1}" "trainer.logger=[console,file]" "trainer.experiment_name=$(basename "$(folder_of "$1")")"
}

started() { [ -f "$state/started" ] && cat "$state/started"; }  # "RUN PID" a line: the runs last started
started_names() { started | cut -d' ' -f1 | xargs; }

alive() { kill -0 "$1" 2>/dev/null; }

running() {  # running [RUN]: a run of the last start (that one, when named) still runs
  local run pid
  while read -r run pid; do
    [ -z "${1:-}" ] || [ "$run" = "$1" ] || continue
    alive "$pid" && return 0
  done < <(started)
  return 1
}

log_of() {  # log_of RUN: its launch log
  local folder
  folder=$(folder_of "$1")
  if [[ $1 == *-resume ]]; then echo "$folder/resume/launch.log"; else echo "$folder/launch.log"; fi
}

check_run() {  # check_run RUN [BEFORE...]: it exists, its model is there, and the disk or checkpoint it needs
  local run=$1 folder                       # (a resume's checkpoint may come from a run queued BEFORE it)
  shift
  launch_line "$run" > /dev/null || { echo "gpu_paper_launch.sh: no run '$run' (see --help)" >&2; return 2; }
  [ -f "$(model_of "$run")/config.json" ] || {
    echo "gpu_paper_launch.sh: no model folder $(model_of "$run") (bash gpu/gpu_paper_launch.sh build ${run%%-*}, or CODER=DIR)" >&2
    return 2
  }
  folder=$(folder_of "$run")
  if [[ ${run%-profile} == 7b-tuned || ${run%-profile} == 7b-nocompile ]]; then
    local mib
    mib=$(gpu_mib)
    [ -z "$mib" ] || [ "$mib" -ge 122880 ] || {
      echo "gpu_paper_launch.sh: $run keeps every layer's activations, 99 GiB a GPU (python benchmarks/memory_plan.py --parts 7b-4h200-tuned); this node's GPUs have $((mib / 1024)) GiB" >&2
      return 2
    }
  fi
  if [[ $run == *-ckpt ]]; then
    mkdir -p experiments
    local free
    free=$(df --output=avail -BG experiments | tail -n 1 | tr -dc 0-9)
    [ "$free" -ge "$checkpoint_gib" ] || {
      echo "gpu_paper_launch.sh: $run saves ~100 GB (fp32 weights and AdamW's moments); experiments/ has ${free} GiB free" >&2
      return 2
    }
  fi
  if [[ $run == *-resume && " $* " != *" ${run%-resume}-ckpt "* ]]; then
    [ -f "$state/${run%-resume}-ckpt.done" ] && [ -d "$folder/checkpoints" ] || {
      echo "gpu_paper_launch.sh: $run resumes ${run%-resume}-ckpt's checkpoint: run ${run%-resume}-ckpt first" >&2
      return 2
    }
  fi
}

launch() {  # launch RUN DEVICES: the launch in its own session under the sampler (DEVICES: all when empty)
  local run=$1 devices=$2 line folder dest
  mapfile -t line < <(launch_line "$run")
  folder=$(folder_of "$run")
  dest=$(dirname "$(log_of "$run")")/resources.json
  [[ $run == *-resume ]] || rm -rf "$folder"
  mkdir -p "$(dirname "$dest")"
  rm -f "$state/$run.done" "$state/$run.failed"
  if [ -n "$devices" ]; then export CUDA_VISIBLE_DEVICES=$devices; fi
  setsid "$py" benchmarks/resource_sampler.py --out "$dest" --metrics "$folder/metrics" -- "$py" "${line[@]}" \
    > "$(log_of "$run")" 2>&1 < /dev/null &
  echo "$run $!" >> "$state/started"
  echo "$run started (pid $!${devices:+, GPUs $devices}): $(log_of "$run")"
}

start() {  # start RUN...: every run checked, then each launched on its own GPUs
  local run total=0 first=0 count devices
  queue_running || rm -f "$state/queue.pid"  # a finished queue's: `wait` follows these runs
  if running; then
    echo "gpu_paper_launch.sh: $(started_names) still running (wait, or kill -- -PID)" >&2
    return 2
  fi
  for run in "$@"; do check_run "$run" || return 2; total=$((total + $(gpus_of "$run"))); done
  if [ $# -gt 1 ] && [ "$total" -gt "$(node_gpus)" ]; then
    echo "gpu_paper_launch.sh: $* need $total GPUs side by side; the node has $(node_gpus) (GPUS=N to say)" >&2
    return 2
  fi
  mkdir -p "$state"
  : > "$state/started"
  for run in "$@"; do
    count=$(gpus_of "$run") devices=
    [ $# -gt 1 ] && devices=$(seq -s, "$first" $((first + count - 1)))
    first=$((first + count))
    (launch "$run" "$devices")
  done
}

resumed() {  # resumed FOLDER: the resume launch logged step 2 only, after the checkpoint of step 1; its start-up
  "$py" - "$1" <<'EOF'
import json, sys
from pathlib import Path

folder = Path(sys.argv[1])
saved = (folder / "checkpoints" / "latest_checkpointed_iteration.txt").read_text().strip()
launches = [[json.loads(line) for line in path.read_text().splitlines()]
            for path in sorted((folder / "metrics").glob("*.jsonl"))]
steps = [{r["step"]: r["data"]["timing_s/step"] for r in launch if "timing_s/step" in r["data"]} for launch in launches]
print(f"checkpoint of step {saved}; the steps each launch logged: {[sorted(s) for s in steps]}")
ok = saved == "1" and [sorted(s) for s in steps[-2:]] == [[1], [2]]
found = json.loads((folder / "resume" / "resources.json").read_text())
if ok and "2" in found["step_seen_s"]:
    print(f"resume launch: start-up {found['step_seen_s']['2'] - steps[-1][2]:.1f} s (the checkpoint's load "
          f"included), step 2 {steps[-1][2]:.1f} s, peak GPU {found['peak_gpu_used_gib']} GiB, peak node "
          f"{found['peak_node_used_gib']} GiB")
sys.exit(0 if ok else 1)
EOF
}

report() {  # report RUN: its table (the 1.5B runs: the rollout-vs-trainer agreement per step too)
  local run=$1 folder
  folder=$(folder_of "$run")
  "$py" benchmarks/backbone_table.py "$folder"
  [[ $run == lora || $run == scale-* ]] && "$py" scripts/step_table.py "$folder"
  [[ $run == *-profile ]] && "$py" benchmarks/update_profile.py table "$folder"/profile/*.json*
  return 0
}

finish() {  # finish RUN: done (its table printed) when it ended well, else failed (its log's end printed)
  local run=$1 folder log
  folder=$(folder_of "$run")
  log=$(log_of "$run")
  if grep -qs '"returncode": 0' "$(dirname "$log")/resources.json" && { [[ $run != *-resume ]] || resumed "$folder"; }; then
    touch "$state/$run.done"
    echo "$run finished: $log"
    report "$run"
    if [[ $run == *-resume ]]; then rm -rf "$folder/checkpoints"; echo "$run: checkpoint removed (disk)"; fi
    return 0
  fi
  touch "$state/$run.failed"
  echo "$run failed: the end of $log follows" >&2
  tail -n 40 "$log" >&2
  return 1
}

follow() {  # follow SECONDS: progress until the started runs end or SECONDS pass
  local limit=$1 started_at=$SECONDS run pid status=0
  [ -s "$state/started" ] || { echo "gpu_paper_launch.sh: nothing was started" >&2; return 2; }
  while running; do
    if [ $((SECONDS - started_at)) -ge "$limit" ]; then
      echo "$(started_names) still running after $limit s: call wait again"
      return 3
    fi
    sleep 2
    if [ $(((SECONDS - started_at) % 30)) -lt 2 ]; then
      while read -r run pid; do
        alive "$pid" && echo "$run: $(grep -a '\[sampler\]' "$(log_of "$run")" | tail -n 1)"
      done < <(started)
    fi
  done
  while read -r run pid; do
    [ -f "$state/$run.done" ] || [ -f "$state/$run.failed" ] || finish "$run" || status=1
    [ -f "$state/$run.failed" ] && status=1
  done < <(started)
  return $status
}

queue_running() { [ -f "$state/queue.pid" ] && alive "$(cat "$state/queue.pid")"; }

follow_queue() {  # follow_queue SECONDS: the queue's log until it ends or SECONDS pass (0 all well, 1 not, 3 going)
  local limit=$1 started_at=$SECONDS shown=0 lines
  while queue_running; do
    if [ $((SECONDS - started_at)) -ge "$limit" ]; then
      echo "the queue is still running after $limit s (now: $(started_names)): call wait again"
      return 3
    fi
    sleep 2
    lines=$(wc -l < "$state/queue.log")
    [ "$lines" -gt "$shown" ] && sed -n "$((shown + 1)),${lines}p" "$state/queue.log"
    shown=$lines
  done
  rm -f "$state/queue.pid"
  tail -n +$((shown + 1)) "$state/queue.log"
  [ "$(cat "$state/queue.status" 2>/dev/null)" = 0 ]
}

status_of() {
  if [ -f "$state/$1.done" ]; then echo done
  elif running "$1"; then echo running
  elif [ -f "$state/$1.failed" ]; then echo failed
  else echo "to do"
  fi
}

build() {  # build NAME: the weightless folder (carried in .gpu/models, else built), then random bf16 weights
  local name=$1 src=.gpu/models/$1
  [ -f "$src/config.json" ] || "$py" scripts/make_smoke_model.py "$name" "$src" || return 1
  bash gpu/gpu_backbone_runs.sh build "$src" "$name"
}

case "$mode" in
  build)
    case "${1:-}" in 7b) build qwen2.5-7b ;; 8b) build toolace-2-8b ;;
      *) echo "usage: gpu_paper_launch.sh build 7b|8b" >&2; exit 2 ;; esac ;;
  next)
    running && { echo "gpu_paper_launch.sh: $(started_names) still running (wait)" >&2; exit 2; }
    for run in "${ORDER[@]}"; do
      [ "$(status_of "$run")" = "to do" ] || continue
      [[ $run == *-resume ]] && [ ! -f "$state/${run%-resume}-ckpt.done" ] && continue
      start "$run"; exit $?
    done
    echo "gpu_paper_launch.sh: nothing left to start (status)"; exit 0 ;;
  start) [ $# -ge 1 ] || { usage >&2; exit 2; }; start "$@" ;;
  queue) [ $# -ge 1 ] || { usage >&2; exit 2; }
    if queue_running || running; then echo "gpu_paper_launch.sh: runs are still going (wait)" >&2; exit 2; fi
    queued=()
    for run in "$@"; do check_run "$run" "${queued[@]}" || exit 2; queued+=("$run"); done
    mkdir -p "$state"
    rm -f "$state/queue.status"
    setsid bash "${BASH_SOURCE[0]}" sequence "$@" > "$state/queue.log" 2>&1 < /dev/null &
    echo $! > "$state/queue.pid"
    echo "queued $* (pid $!): $state/queue.log" ;;
  sequence) status=0
    for run in "$@"; do
      echo "== $run"
      { start "$run" && follow 1000000; } || status=1
    done
    echo "$status" > "$state/queue.status" ;;
  wait) if [ -f "$state/queue.pid" ]; then follow_queue "${1:-540}"; else follow "${1:-540}"; fi ;;
  run) [ $# -ge 1 ] || { usage >&2; exit 2; }; start "$@" && follow 1000000 ;;
  status) for run in "${ORDER[@]}"; do printf '%-10s %s\n' "$run" "$(status_of "$run")"; done ;;
  show) [ $# -eq 1 ] || { usage >&2; exit 2; }
    launch_line "$1" || { echo "gpu_paper_launch.sh: no run '$1' (see --help)" >&2; exit 2; } ;;
  table)
    runs=("$@"); [ ${#runs[@]} -gt 0 ] || runs=("${ORDER[@]}")
    folders=()
    for run in "${runs[@]}"; do
      [ -f "$state/$run.done" ] && folders+=("$(folder_of "$run")")
    done
    [ ${#folders[@]} -gt 0 ] || { echo "gpu_paper_launch.sh: no finished runs" >&2; exit 1; }
    mapfile -t folders < <(printf '%s\n' "${folders[@]}" | awk '!seen[$0]++')
    "$py" benchmarks/backbone_table.py "${folders[@]}" ;;
  *) echo "gpu_paper_launch.sh: unknown mode '$mode' (see --help)" >&2; exit 2 ;;
esac
