#!/usr/bin/env bash
# The measured runs of packed attention on one GPU, one after another, each in its own run folder, then their
# step tables side by side (scripts/step_table.py: each phase's median over the steps after the first).
#   bash gpu/gpu_attention_runs.sh MODEL_DIR [RUN ...]
# RUN (default: check smoke-sdpa smoke-auto paper-dynamic paper-mb1-eager, what docs/results/measurements.md's numbers come from):
#   check          benchmarks/attention_check.py: one BFCL batch, torch_varlen packed against sdpa padded
#                                                                                 -> experiments/attention_check.log
#   smoke-sdpa     exp/smoke_gpu.yaml with seal.attention=sdpa (every micro-batch padded)
#                                                                                 -> experiments/smoke_gpu_sdpa
#   smoke-auto     the same with seal.attention's auto                            -> experiments/smoke_gpu_auto
#   paper-dynamic  exp/smoke_gpu_paper_batch.yaml as it is: micro-batches packed up to 16384 tokens
#                  (use_dynamic_bsz), vLLM with CUDA graphs
#                                                                                 -> experiments/paper_batch_dynamic
#   paper-mb1-eager  paper-dynamic at Table 4's micro-batch 1 unpacked, with vLLM in eager mode (no CUDA
#                  graphs): against paper-dynamic its actor phases (old_log_prob, ref, update_actor) measure
#                  the micro-batches and its gen and start-up measure eager vLLM, as each phase depends on
#                  one of the two only                                            -> experiments/paper_batch_mb1_eager
#   paper-mb1      micro-batch 1 alone, with CUDA graphs                          -> experiments/paper_batch_mb1
# The smoke runs skip validation and checkpoints: 3 steps, timed. Each run's output goes to
# experiments/<run folder>.log; its wall time (start-up included) is printed; a failed run does not stop the next.
set -uo pipefail
usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "${BASH_SOURCE[0]}"; }
case "${1:-}" in -h|--help) usage; exit 0 ;; "") usage >&2; exit 2 ;; -*) echo "gpu_attention_runs.sh: unknown option '$1' (see --help)" >&2; exit 2 ;; esac
model=$1
shift
runs=("$@")
[ ${#runs[@]} -eq 0 ] && runs=(check smoke-sdpa smoke-auto paper-dynamic paper-mb1-eager)
cd "$(dirname "$0")/.."
one_each=actor_rollout_ref.actor.use_dynamic_bsz=false
eager=actor_rollout_ref.rollout.enforce_eager=true
timed=(trainer.val_before_train=false trainer.test_freq=-1 trainer.save_freq=-1)

one_run() {  # one_run RUN: its folder name, then gpu_smoke.sh's arguments
  case "$1" in
    check) echo attention_check ;;
    smoke-sdpa) echo smoke_gpu_sdpa seal 1 "${timed[@]}" seal.attention=sdpa ;;
    smoke-auto) echo smoke_gpu_auto seal 1 "${timed[@]}" ;;
    paper-dynamic) echo paper_batch_dynamic paper-batch 1 ;;
    paper-mb1) echo paper_batch_mb1 paper-batch 1 "$one_each" ;;
    paper-mb1-eager) echo paper_batch_mb1_eager paper-batch 1 "$one_each" "$eager" ;;
    *) return 2 ;;
  esac
}

launch() {  # launch FOLDER [gpu_smoke.sh arguments]
  if [ "$1" = attention_check ]; then
    "${PYTHON:-python3}" benchmarks/attention_check.py "$model"
  else
    RUN_NAME=$1 bash gpu/gpu_smoke.sh "$model" "${@:2}"
  fi
}

for run in "${runs[@]}"; do
  one_run "$run" > /dev/null || { echo "gpu_attention_runs.sh: no run '$run' (see --help)" >&2; exit 2; }
done
status=0
for run in "${runs[@]}"; do
  read -r -a args <<< "$(one_run "$run")"
  mkdir -p experiments
  started=$SECONDS
  if launch "${args[@]}" > "experiments/${args[0]}.log" 2>&1; then
    echo "$run: done in $((SECONDS - started)) s (experiments/${args[0]}.log)"
  else
    echo "$run: failed after $((SECONDS - started)) s (experiments/${args[0]}.log)" >&2
    status=1
  fi
done
for pair in "smoke_gpu_sdpa smoke_gpu_auto" "paper_batch_mb1_eager paper_batch_dynamic" \
  "paper_batch_mb1 paper_batch_dynamic"; do
  read -r -a both <<< "$pair"
  [ -d "experiments/${both[0]}" ] && [ -d "experiments/${both[1]}" ] && "${PYTHON:-python3}" scripts/step_table.py \
    "experiments/${both[0]}" "experiments/${both[1]}"
done
exit $status
