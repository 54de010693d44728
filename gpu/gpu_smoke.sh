#!/usr/bin/env bash
# End-to-end GPU smoke run: launcher -> environment service -> SealAgentLoop through vLLM -> SealPPOTrainer (FSDP).
#   bash gpu/gpu_smoke.sh MODEL_DIR [seal|vanilla|paper-batch] [N_GPUS] [hydra overrides ...]
# MODEL_DIR: e.g. from `python scripts/make_smoke_model.py smollm2 /models/smollm2`. Runs exp/smoke_gpu.yaml (or
# exp/smoke_gpu_vanilla.yaml): validation on 8 val tasks, 3 training steps, validation again, a checkpoint every
# step; then prints the per-step table (scripts/step_table.py). A second call with
# `trainer.total_training_steps=4 trainer.val_before_train=false` resumes from the last checkpoint.
# paper-batch runs exp/smoke_gpu_paper_batch.yaml: two steps of 32 prompts x 8 rollouts (Table 4's batch shape).
# With N_GPUS > 1 the run is named e.g. smoke_gpu_2gpu, so it never resumes a checkpoint of another GPU count.
# RUN_NAME=NAME names the run (its folder experiments/NAME), e.g. to compare seal.attention=sdpa with auto.
set -uo pipefail
case "${1:-}" in -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "${BASH_SOURCE[0]}"; exit 0 ;; esac
model=${1:?usage: gpu_smoke.sh MODEL_DIR [seal|vanilla|paper-batch] [N_GPUS] [overrides ...] (--help says more)}
case "$model" in -*) echo "gpu_smoke.sh: unknown option '$model' (MODEL_DIR comes first; see --help)" >&2; exit 2 ;; esac
kind=${2:-seal}
gpus=${3:-1}
shift $(( $# < 3 ? $# : 3 ))
case "$kind" in
  seal) conf=smoke_gpu ;;
  vanilla) conf=smoke_gpu_vanilla ;;
  paper-batch) conf=smoke_gpu_paper_batch ;;
  *) echo "gpu_smoke.sh: the run is seal, vanilla or paper-batch, not '$kind'" >&2; exit 2 ;;
esac
name=$conf
[ "$gpus" -gt 1 ] && name=${conf}_${gpus}gpu
name=${RUN_NAME:-$name}
# NVLink multicast stays off in every process (Ray's workers inherit these from the driver).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 VLLM_USE_FLASHINFER_SAMPLER=0
cd "$(dirname "$0")/.."
"${PYTHON:-python3}" launcher.py --conf "exp/$conf.yaml" --with-bfcl -- \
  actor_rollout_ref.model.path="$model" trainer.n_gpus_per_node="$gpus" trainer.experiment_name="$name" "$@"
status=$?
"${PYTHON:-python3}" scripts/step_table.py "experiments/$name"
exit $status
