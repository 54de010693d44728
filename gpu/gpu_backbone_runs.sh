#!/usr/bin/env bash
# The paper backbones on a GPU node: random-weight model folders, SEAL runs measured by a resource sampler, and
# their table (start-up, gen / old_log_prob / ref / update_actor / update_weights, peak GPU memory, peak host
# RSS, tokens per step, tokens/s/GPU, MFU). Every mode but `build`, `probe` and the launches runs on any machine.
#   bash gpu/gpu_backbone_runs.sh build SRC NAME   copy SRC, a `make_smoke_model.py NAME --weights none` folder
#                                     built where PyPI answers, to $MODELS/NAME and add random bf16 weights there
#                                     (NAME: qwen2.5-3b, qwen2.5-7b, toolace-2-8b)
#   bash gpu/gpu_backbone_runs.sh probe        does this torch pin an offloaded 308 MB unit into 512 MiB?
#   bash gpu/gpu_backbone_runs.sh start RUN    launch RUN in the background under benchmarks/resource_sampler.py
#   bash gpu/gpu_backbone_runs.sh wait [S]     follow the started run for at most S seconds (default 540); exit 0
#                                     when it ended well (and print its table), 1 when it failed, 3 while it runs on
#   bash gpu/gpu_backbone_runs.sh run RUN      start RUN and wait for its end
#   bash gpu/gpu_backbone_runs.sh table [RUN ...]  the table of finished runs (default: every one there is)
#   bash gpu/gpu_backbone_runs.sh plan         the memory arithmetic of every scenario (benchmarks/memory_plan.py)
# RUN (each in experiments/backbone_<run>, its output in experiments/backbone_<run>.log; 2 steps unless said):
#   3b              exp/SEAL_3B_1gpu.yaml on $MODELS/qwen2.5-3b: 16 prompts x 8 rollouts, random weights (each
#                   trajectory one reply to the 4,096-token cap)
#   3b-shaped       the same with data.max_response_length=1152: a step holding the tokens a trained model's does
#                   (ground-truth episodes: 5,081 prompt + 1,149 response tokens on average)
#   3b-liger        3b-shaped with Liger's decoder kernels (actor_rollout_ref.model.use_liger; needs
#                   liger-kernel) and vLLM without torch.compile (compilation mode 0, full CUDA graphs for
#                   decoding only): the 3B's step and start-up targets (one H100: step 100.5 s, start-up 191.3 s,
#                   peak GPU 79.0 GiB; one H200: 94.2 s and 205.1 s; 3b-shaped as shipped on an H100: 126.1 s and
#                   321 s)
#   3b-offload-all  SEAL_3B with the actor's param and optimizer offload, fp32 reference: the run Ray killed
#   7b-lora         exp/SEAL.yaml on one GPU with verl's LoRA (rank 64), 1 step of 16 x 8, on $MODELS/qwen2.5-7b;
#                   vLLM reads the base from the model folder (load_format=safetensors) and only the adapters
#                   are synced (with verl's `dummy`, the first sync gathered the whole fp32 base on the host and
#                   an H200 node ran out of RAM: benchmarks/memory_plan.py 7b-1h200-lora-dummy); the actor on
#                   FSDP2 (on FSDP1 verl syncs no adapter tensor: seal/trainer/launch/engine_limits.py);
#                   attention is seal.attention's auto: without flash-attn, torch_varlen on packed sequences
#                   without verl's fused kernels (they fail on FSDP2), log-probs chunked by seal.trainer.logprobs
#                   (so far one step of a small model on a GPU); responses shaped as 3b-shaped's (the step holds the tokens a trained
#                   model's does)
#   7b-lora-sdpa    7b-lora with seal.attention=sdpa (every micro-batch padded). Measured on an H200 while verl
#                   still looped over the tokens for their log-probs (now chunked by seal.trainer.logprobs): one
#                   step in 582 s, peak GPU 87.5 GiB, node 113.2 GiB (docs/guides/gpu.md, "What fits where")
#   8b-lora         7b-lora on $MODELS/toolace-2-8b with exp/SEAL_ToolACE.yaml (python_list, a 9,216-token prompt)
#                   (measured on an H200 with seal.attention=sdpa: one step in 752 s, peak GPU 88.0 GiB, node
#                   83.1 GiB)
#   7b-full         exp/SEAL.yaml on one H200, full fine-tuning: param offload, bf16 reference, vLLM 0.4,
#                   10,240-token micro-batches, 1 step of 16 x 8, shaped responses. Measured: out of GPU memory
#                   in the first optimizer step (AdamW's moments on the GPU beside the gathered weights)
#   RUN-profile     RUN with verl's torch profiler on rank 0 during the second mini-batch of step 2's update
#                   (benchmarks/update_profile.py): the table adds where that mini-batch's GPU time went, by region
#                   and kind; the profiler slows the step it records, so time RUN itself
# MODELS (default /root/models) holds the model folders; PYTHON (default python3) runs the scripts.
source "$(dirname "${BASH_SOURCE[0]}")/gpu_mode_cli.sh"
mode=$1
shift
models=${MODELS:-/root/models}
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # benchmarks/backbone_table.py reads the runs with seal
state=experiments/.backbone_run
timed=(trainer.val_before_train=false trainer.test_freq=-1 trainer.save_freq=-1 "trainer.logger=[console,file]")
one_step_of_16=(trainer.total_training_steps=1 data.train_batch_size=16 data.max_response_length=1152)
single=(trainer.n_gpus_per_node=1)
lora=(actor_rollout_ref.model.lora_rank=64 actor_rollout_ref.model.lora_alpha=128
      actor_rollout_ref.actor.fsdp_config.param_offload=true actor_rollout_ref.rollout.load_format=safetensors
      actor_rollout_ref.actor.strategy=fsdp2 actor_rollout_ref.actor.fsdp_config.strategy=fsdp2
      actor_rollout_ref.ref.fsdp_config.strategy=fsdp2)

launch_args() {  # launch_args RUN: the launcher's arguments, one per line
  case "$1" in
    3b) printf '%s\n' exp/SEAL_3B_1gpu.yaml "actor_rollout_ref.model.path=$models/qwen2.5-3b" \
          trainer.total_training_steps=2 ;;
    3b-shaped) launch_args 3b; echo data.max_response_length=1152 ;;
    3b-liger) launch_args 3b-shaped; printf '%s\n' "$liger_decoder" "$no_compile" ;;
    3b-offload-all) printf '%s\n' exp/SEAL_3B.yaml "actor_rollout_ref.model.path=$models/qwen2.5-3b" \
          trainer.total_training_steps=2 "${single[@]}" actor_rollout_ref.actor.fsdp_config.param_offload=true \
          actor_rollout_ref.actor.fsdp_config.optimizer_offload=true ;;
    7b-lora) printf '%s\n' exp/SEAL.yaml "actor_rollout_ref.model.path=$models/qwen2.5-7b" "${single[@]}" \
          "${one_step_of_16[@]}" "${lora[@]}" ;;
    7b-lora-sdpa) launch_args 7b-lora; echo seal.attention=sdpa ;;
    8b-lora) printf '%s\n' exp/SEAL_ToolACE.yaml "actor_rollout_ref.model.path=$models/toolace-2-8b" \
          "${single[@]}" "${one_step_of_16[@]}" "${lora[@]}" ;;
    7b-full) printf '%s\n' exp/SEAL.yaml "actor_rollout_ref.model.path=$models/qwen2.5-7b" "${single[@]}" \
          "${one_step_of_16[@]}" actor_rollout_ref.actor.fsdp_config.param_offload=true \
          actor_rollout_ref.ref.fsdp_config.model_dtype=bf16 actor_rollout_ref.rollout.gpu_memory_utilization=0.4 \
          actor_rollout_ref.actor.ppo_max_token_len_per_gpu=10240 ;;
    *-profile-profile) return 2 ;;
    *-profile) launch_args "${1%-profile}" || return 2
          "$py" benchmarks/update_profile.py overrides "$(folder_of "$1")/profile" ;;
    *) return 2 ;;
  esac
}

folder_of() { echo "experiments/backbone_${1//-/_}"; }

start() {  # start RUN: the launch in its own session, under the sampler; its pid and name in $state.*
  local run=$1 args folder
  mapfile -t args < <(launch_args "$run") || true
  [ ${#args[@]} -gt 0 ] || { echo "gpu_backbone_runs.sh: no run '$run' (see --help)" >&2; return 2; }
  if [ -f "$state.pid" ] && kill -0 "$(cat "$state.pid")" 2>/dev/null; then
    echo "gpu_backbone_runs.sh: $(cat "$state.name") is still running (wait, or kill -- -$(cat "$state.pid"))" >&2
    return 2
  fi
  folder=$(folder_of "$run")
  mkdir -p experiments
  rm -rf "$folder"
  setsid "$py" benchmarks/resource_sampler.py --out "$folder/resources.json" --metrics "$folder/metrics" -- \
    "$py" launcher.py --conf "${args[0]}" --with-bfcl -- "${args[@]:1}" "${timed[@]}" \
    "trainer.experiment_name=$(basename "$folder")" > "$folder.log" 2>&1 < /dev/null &
  echo $! > "$state.pid"
  echo "$run" > "$state.name"
  echo "$run started (pid $!): $folder.log"
}

follow() {  # follow SECONDS: progress until the started run ends or SECONDS pass
  local limit=$1 run pid folder left started=$SECONDS
  [ -f "$state.pid" ] || { echo "gpu_backbone_runs.sh: nothing was started" >&2; return 2; }
  pid=$(cat "$state.pid"); run=$(cat "$state.name"); folder=$(folder_of "$run")
  while kill -0 "$pid" 2>/dev/null; do
    left=$((limit - (SECONDS - started)))
    if [ "$left" -le 0 ]; then
      echo "$run still running after $limit s: call wait again"
      return 3
    fi
    sleep $((left < 2 ? left : 2))
    [ $(((SECONDS - started) % 30)) -lt 2 ] && grep -a '\[sampler\]' "$folder.log" | tail -n 1
  done
  if [ -f "$folder/resources.json" ] && grep -q '"returncode": 0' "$folder/resources.json"; then
    echo "$run finished: $folder.log"
    "$py" benchmarks/backbone_table.py "$folder"
    [[ $run != *-profile ]] || "$py" benchmarks/update_profile.py table "$folder"/profile/*.json*
    return 0
  fi
  echo "$run failed: the end of $folder.log follows" >&2
  tail -n 40 "$folder.log" >&2
  return 1
}

case "$mode" in
  build)
    [ $# -eq 2 ] || { echo "usage: gpu_backbone_runs.sh build SRC NAME (see --help)" >&2; exit 2; }
    [ -f "$1/config.json" ] || { echo "gpu_backbone_runs.sh: $1 has no config.json (build it with make_smoke_model.py $2 --weights none)" >&2; exit 2; }
    if [ "$(realpath "$1")" != "$(realpath -m "$models/$2")" ]; then
      mkdir -p "$models/$2" && cp -r "$1/." "$models/$2/"
    fi
    "$py" scripts/make_smoke_model.py "$2" "$models/$2" --weights random ;;
  probe) "$py" benchmarks/pinned_probe.py ;;
  start) [ $# -eq 1 ] || { usage >&2; exit 2; }; start "$1" ;;
  wait) follow "${1:-540}" ;;
  run) [ $# -eq 1 ] || { usage >&2; exit 2; }; start "$1" && follow 1000000 ;;
  table)
    if [ $# -eq 0 ]; then
      mapfile -t folders < <(ls -d experiments/backbone_*/ 2>/dev/null | sed 's:/$::')
    else
      folders=(); for run in "$@"; do folders+=("$(folder_of "$run")"); done
    fi
    [ ${#folders[@]} -gt 0 ] || { echo "gpu_backbone_runs.sh: no finished runs under experiments/" >&2; exit 1; }
    "$py" benchmarks/backbone_table.py "${folders[@]}" ;;
  plan) "$py" benchmarks/memory_plan.py ;;
  *) echo "gpu_backbone_runs.sh: unknown mode '$mode' (see --help)" >&2; exit 2 ;;
esac
