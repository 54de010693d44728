#!/usr/bin/env bash
# The first run that learns, on one GPU: behaviour cloning of the train split's ground truth (SFT), then SEAL and
# vanilla GRPO from the SFT model, with train and val reward before and after.
#   bash gpu/gpu_learning_run.sh MODEL_DIR [PHASE] [STEPS] [overrides ...]
# MODEL_DIR: e.g. SmolLM2-135M-Instruct from `python scripts/make_smoke_model.py smollm2 /models/smollm2`.
# PHASE (default all); each is one launch, so a phase cut by a time limit is run again and resumes:
#   base-eval   validation-only pass of MODEL_DIR on the 400 train and 100 val tasks  -> experiments/learn_base_eval
#   sft         exp/sft_warmstart.yaml on MODEL_DIR (3 epochs)                           -> experiments/learn_sft
#   sft-eval    the same validation-only pass of the SFT model                           -> experiments/learn_sft_eval
#   seal        exp/smoke_gpu.yaml from the SFT model, STEPS steps (default 10)           -> experiments/learn_seal
#   vanilla     exp/smoke_gpu_vanilla.yaml from the SFT model, the same settings        -> experiments/learn_vanilla
#   report      per-step tables of both runs side by side, pass rates with the two evaluations beside them
# all runs base-eval beside sft and, once sft is done, sft-eval, seal and vanilla at once, then report: the
# launches share the GPU (vLLM takes 0.2 of its memory in each) and each writes its output to
# experiments/learn_<phase>.log; a failed phase other than sft leaves the others running, and the script then
# exits 1 at the end.
# Overrides (Hydra, after STEPS) go to every launch but the SFT one. The RL runs validate on all 100 val tasks at
# their last step (sft-eval is their "before": the same greedy pass of the same model) and save every step (the
# last two checkpoints kept).
set -uo pipefail
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ] || [ $# -lt 1 ]; then
  awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "${BASH_SOURCE[0]}"
  [ $# -lt 1 ] && exit 2 || exit 0
fi
model=$1
phase=${2:-all}
steps=${3:-10}
shift $(( $# < 3 ? $# : 3 ))
extra=("$@")
py=${PYTHON:-python3}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 VLLM_USE_FLASHINFER_SAMPLER=0
cd "$(dirname "$0")/.."

sft_model() {  # the Hugging Face folder of the SFT run's latest checkpoint
  "$py" -c 'from seal.trainer.experiment import compose_experiment; from seal.trainer.launch.sft import sft_model_path
print(sft_model_path(compose_experiment("exp/sft_warmstart.yaml", ["trainer.experiment_name=learn_sft"])))'
}

evaluate() {  # evaluate MODEL NAME: one validation-only pass over the train and val tasks, skipped when done
  [ -n "$(ls "experiments/$2/validation/"*.jsonl 2>/dev/null)" ] && { echo "$2: evaluated already"; return 0; }
  "$py" launcher.py --conf exp/smoke_gpu.yaml --with-bfcl -- actor_rollout_ref.model.path="$1" \
    trainer.experiment_name="$2" trainer.val_only=true data.val_max_samples=-1 \
    'data.val_files=[data/bfcl_train.parquet,data/bfcl_val.parquet]' "${extra[@]}"
}

train_rl() {  # train_rl CONF NAME: STEPS steps from the SFT model, validation on all val tasks before and at the end
  "$py" launcher.py --conf "exp/$1.yaml" --with-bfcl -- actor_rollout_ref.model.path="$(sft_model)" \
    trainer.experiment_name="$2" trainer.total_training_steps="$steps" trainer.test_freq="$steps" \
    trainer.save_freq=1 trainer.max_actor_ckpt_to_keep=2 trainer.val_before_train=false data.val_max_samples=-1 \
    "${extra[@]}"
}

run_phase() {
  case "$1" in
    base-eval) evaluate "$model" learn_base_eval ;;
    sft) "$py" launcher.py --conf exp/sft_warmstart.yaml -- model.path="$model" trainer.experiment_name=learn_sft ;;
    sft-eval) evaluate "$(sft_model)" learn_sft_eval ;;
    seal) train_rl smoke_gpu learn_seal ;;
    vanilla) train_rl smoke_gpu_vanilla learn_vanilla ;;
    report)
      "$py" scripts/step_table.py experiments/learn_seal experiments/learn_vanilla
      for run in learn_seal learn_vanilla; do
        "$py" scripts/stats_validation_bfcl.py --run "experiments/$run" \
          --sft experiments/learn_base_eval experiments/learn_sft_eval
      done ;;
    *) echo "gpu_learning_run.sh: no phase '$1' (base-eval sft sft-eval seal vanilla report all)" >&2; return 2 ;;
  esac
}

in_background() {  # in_background PHASE: start it, logged to experiments/learn_<phase>.log; its pid in $!
  mkdir -p experiments
  run_phase "$1" > "experiments/learn_${1//-/_}.log" 2>&1 &
}

finished() {  # finished PHASE PID: wait for it and say how it ended
  wait "$2" && { echo "phase $1 done"; return 0; }
  echo "phase $1 failed (experiments/learn_${1//-/_}.log)" >&2
  return 1
}

case "$phase" in
  all)
    extra+=(actor_rollout_ref.rollout.gpu_memory_utilization=0.2)
    status=0
    in_background base-eval; base_eval=$!
    in_background sft; finished sft $! || status=1
    sft_model > /dev/null || { echo "gpu_learning_run.sh: no SFT model, so no RL runs" >&2; exit 1; }
    pids=()
    for each in sft-eval seal vanilla; do in_background "$each"; pids+=($!); done
    finished base-eval "$base_eval" || status=1
    finished sft-eval "${pids[0]}" || status=1
    finished seal "${pids[1]}" || status=1
    finished vanilla "${pids[2]}" || status=1
    run_phase report || status=1
    exit $status ;;
  *) run_phase "$phase" ;;
esac
