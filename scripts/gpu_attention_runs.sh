#!/usr/bin/env bash
# The measured runs of packed attention on one GPU, one after another, each in its own run folder, then their
# step tables side by side (scripts/step_table.py: each phase's median over the steps after the first).
#   bash scripts/gpu_attention_runs.sh MODEL_DIR [RUN ...]
# RUN (default: smoke-auto smoke-sdpa paper-dynamic paper-mb1 paper-eager):
#   smoke-auto     exp/smoke_gpu.yaml, seal.attention auto                        -> experiments/smoke_gpu_auto
#   smoke-sdpa     the same with seal.attention=sdpa (every micro-batch padded)   -> experiments/smoke_gpu_sdpa
#   paper-dynamic  exp/smoke_gpu_paper_batch.yaml, micro-batches packed up to 16384 tokens (use_dynamic_bsz)
#                                                                                 -> experiments/paper_batch_dynamic
#   paper-mb1      the same at Table 4's micro-batch 1                            -> experiments/paper_batch_mb1
#   paper-eager    paper-dynamic with vLLM in eager mode (no CUDA graphs)          -> experiments/paper_batch_eager
# Each run's output goes to experiments/<run folder>.log; a failed run does not stop the next.
set -uo pipefail
usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "${BASH_SOURCE[0]}"; }
case "${1:-}" in -h|--help) usage; exit 0 ;; "") usage >&2; exit 2 ;; -*) echo "gpu_attention_runs.sh: unknown option '$1' (see --help)" >&2; exit 2 ;; esac
model=$1
shift
runs=("$@")
[ ${#runs[@]} -eq 0 ] && runs=(smoke-auto smoke-sdpa paper-dynamic paper-mb1 paper-eager)
cd "$(dirname "$0")/.."
dynamic=(actor_rollout_ref.actor.use_dynamic_bsz=true actor_rollout_ref.actor.ppo_max_token_len_per_gpu=16384)

one_run() {  # one_run RUN: its folder name, then gpu_smoke.sh's arguments
  case "$1" in
    smoke-auto) echo smoke_gpu_auto seal 1 ;;
    smoke-sdpa) echo smoke_gpu_sdpa seal 1 seal.attention=sdpa ;;
    paper-dynamic) echo paper_batch_dynamic paper-batch 1 "${dynamic[@]}" ;;
    paper-mb1) echo paper_batch_mb1 paper-batch 1 ;;
    paper-eager) echo paper_batch_eager paper-batch 1 "${dynamic[@]}" actor_rollout_ref.rollout.enforce_eager=true ;;
    *) return 2 ;;
  esac
}

for run in "${runs[@]}"; do
  one_run "$run" > /dev/null || { echo "gpu_attention_runs.sh: no run '$run' (see --help)" >&2; exit 2; }
done
status=0
for run in "${runs[@]}"; do
  read -r -a args <<< "$(one_run "$run")"
  mkdir -p experiments
  started=$SECONDS
  if RUN_NAME=${args[0]} bash scripts/gpu_smoke.sh "$model" "${args[@]:1}" > "experiments/${args[0]}.log" 2>&1; then
    echo "$run: done in $((SECONDS - started)) s (experiments/${args[0]}.log)"
  else
    echo "$run: failed after $((SECONDS - started)) s (experiments/${args[0]}.log)" >&2
    status=1
  fi
done
for pair in "smoke_gpu_sdpa smoke_gpu_auto" "paper_batch_mb1 paper_batch_dynamic" "paper_batch_eager paper_batch_dynamic"; do
  read -r -a both <<< "$pair"
  [ -d "experiments/${both[0]}" ] && [ -d "experiments/${both[1]}" ] && "${PYTHON:-python3}" scripts/step_table.py \
    "experiments/${both[0]}" "experiments/${both[1]}"
done
exit $status
