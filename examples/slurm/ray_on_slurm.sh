# Sourced by seal_1node.sbatch and seal_2nodes.sbatch (docs/guides/slurm.md): a Ray cluster over the job's
# nodes (the head on the first node, a worker on each other node through srun, as Ray's SLURM guide lays it
# out), the paper's launch on it with the environment as Ray actors on every node, and a requeue shortly
# before the time limit; the requeued job launches again and verl resumes from the last checkpoint.
#   MODEL        the model folder, the same path on every node (required)
#   CKPT_DIR     checkpoints, on a disk every node shares (default: $PWD/experiments/SEAL/checkpoints)
#   SEAL_SLURM_RENDER=1  print each command instead of running it (the scripts' test runs them so)
# Arguments after the script's name are more Hydra overrides, e.g. trainer.save_freq=5.
set -euo pipefail

if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
  grep '^#' "$0" | grep -v '^#!'
  sed -n '/^#/!q;p' "${BASH_SOURCE[0]}"
  exit 0
fi

: "${SLURM_JOB_ID:?submit this with sbatch (SLURM_JOB_ID is not set)}"
: "${MODEL:?set MODEL to the model folder, e.g. sbatch --export=ALL,MODEL=/models/Qwen2.5-7B-Instruct ...}"
ckpt_dir=${CKPT_DIR:-$PWD/experiments/SEAL/checkpoints}
gpus=${SLURM_GPUS_ON_NODE:-4}
port=6379
render=${SEAL_SLURM_RENDER:-0}

run() {
  if [ "$render" = 1 ]; then
    printf '+'
    printf ' %q' "$@"
    printf '\n'
  else
    "$@"
  fi
}

# `run` in the background (rendered with a trailing &, in order).
run_in_background() {
  if [ "$render" = 1 ]; then
    run "$@" | sed 's/$/ \&/'
  else
    "$@" &
  fi
}

# What every node's Ray workers inherit (docs/guides/multi-node.md): exported before `ray start`.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
  VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1 HYDRA_FULL_ERROR=1

mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
head=${nodes[0]}
if [ "$render" = 1 ]; then
  head_ip=$head
else
  head_ip=$(srun --nodes=1 --ntasks=1 -w "$head" hostname --ip-address | awk '{print $1}')
fi
export RAY_ADDRESS="$head_ip:$port"

run_in_background srun --nodes=1 --ntasks=1 -w "$head" \
  ray start --head --node-ip-address="$head_ip" --port="$port" --num-gpus="$gpus" --block
run sleep 10
for node in "${nodes[@]:1}"; do
  run_in_background srun --nodes=1 --ntasks=1 -w "$node" \
    ray start --address="$RAY_ADDRESS" --num-gpus="$gpus" --block
done
run sleep 20

# Requeue when SLURM signals the time limit is near (#SBATCH --signal=B:USR1@...): the next start of the job
# runs this script again, and the launch resumes from the latest checkpoint (trainer.resume_mode=auto).
trap 'echo "time limit near: requeueing job $SLURM_JOB_ID"; scontrol requeue "$SLURM_JOB_ID"' USR1
run_in_background python launcher.py --conf exp/SEAL.yaml -- actor_rollout_ref.model.path="$MODEL" \
  trainer.nnodes="$SLURM_NNODES" trainer.n_gpus_per_node="$gpus" seal.rollout.env_backend=ray \
  trainer.default_local_dir="$ckpt_dir" "$@"
[ "$render" = 1 ] || wait $!
