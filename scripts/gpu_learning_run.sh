#!/usr/bin/env bash
# The first run that learns, on one GPU: behaviour cloning of the train split's ground truth (SFT), then SEAL and
# vanilla GRPO from the SFT model, with train and val reward before and after.
#   bash scripts/gpu_learning_run.sh MODEL_DIR [PHASE] [STEPS]
# MODEL_DIR: e.g. SmolLM2-135M-Instruct from `python scripts/make_smoke_model.py smollm2 /models/smollm2`.
# PHASE (default all), in order; each is one launch, so a phase cut by a time limit is run again and resumes:
#   base-eval   validation-only pass of MODEL_DIR on the 400 train and 100 val tasks  -> experiments/learn_base_eval
#   sft         exp/sft_warmstart.yaml on MODEL_DIR (3 epochs)                           -> experiments/learn_sft
#   sft-eval    the same validation-only pass of the SFT model                           -> experiments/learn_sft_eval
#   seal        exp/smoke_gpu.yaml from the SFT model, STEPS steps (default 10)           -> experiments/learn_seal
#   vanilla     exp/smoke_gpu_vanilla.yaml from the SFT model, the same settings        -> experiments/learn_vanilla
#   report      per-step tables of both runs side by side, pass rates with the two evaluations beside them
# The RL runs validate on all 100 val tasks before training and at the last step, and save every step.
set -uo pipefail
if [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ] || [ $# -lt 1 ]; then
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
  [ $# -lt 1 ] && exit 2 || exit 0
fi
model=$1
phase=${2:-all}
steps=${3:-10}
py=${PYTHON:-python3}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 VLLM_USE_FLASHINFER_SAMPLER=0
cd "$(dirname "$0")/.."

sft_model() {  # the Hugging Face folder of the SFT run's latest checkpoint
  "$py" -c 'from seal.trainer.experiment import compose_experiment; from seal.trainer.sft import sft_model_path
print(sft_model_path(compose_experiment("exp/sft_warmstart.yaml", ["trainer.experiment_name=learn_sft"])))'
}

evaluate() {  # evaluate MODEL NAME: one validation-only pass over the train and val tasks, skipped when done
  [ -n "$(ls "experiments/$2/validation/"*.jsonl 2>/dev/null)" ] && { echo "$2: evaluated already"; return 0; }
  "$py" launcher.py --conf exp/smoke_gpu.yaml --with-bfcl -- actor_rollout_ref.model.path="$1" \
    trainer.experiment_name="$2" trainer.val_only=true data.val_max_samples=-1 \
    'data.val_files=[data/bfcl_train.parquet,data/bfcl_val.parquet]'
}

train_rl() {  # train_rl CONF NAME: STEPS steps from the SFT model, validation on all val tasks before and at the end
  "$py" launcher.py --conf "exp/$1.yaml" --with-bfcl -- actor_rollout_ref.model.path="$(sft_model)" \
    trainer.experiment_name="$2" trainer.total_training_steps="$steps" trainer.test_freq="$steps" \
    trainer.save_freq=1 data.val_max_samples=-1
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

if [ "$phase" = all ]; then
  for each in base-eval sft sft-eval seal vanilla report; do
    run_phase "$each" || { echo "gpu_learning_run.sh: phase $each failed" >&2; exit 1; }
  done
else
  run_phase "$phase"
fi
