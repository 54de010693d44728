#!/usr/bin/env bash
# `seal eval` against a real vLLM OpenAI server on a GPU node: checks that a context overflow is a truncated
# episode scored by the environment, never an endpoint error.
#   bash gpu/gpu_eval_smoke.sh MODEL_DIR [SPLIT] [OUT]      (default: the val split, runs/eval_smoke)
# The server runs with the model's own window (8192 for SmolLM2) and the default --max-tokens 4096, the
# setting under which a third of the episodes used to be filed as endpoint errors.
set -uo pipefail
case "${1:-}" in -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "${BASH_SOURCE[0]}"; exit 0 ;; esac
model=${1:?usage: gpu_eval_smoke.sh MODEL_DIR [SPLIT] [OUT] (--help says more)}
case "$model" in -*) echo "gpu_eval_smoke.sh: unknown option '$model' (MODEL_DIR comes first; see --help)" >&2; exit 2 ;; esac
split=${2:-val}
dest=${3:-runs/eval_smoke}
py=${PYTHON:-python3}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 VLLM_USE_FLASHINFER_SAMPLER=0
cd "$(dirname "$0")/.." && mkdir -p "$(dirname "$dest")"
"$py" -m vllm.entrypoints.openai.api_server --model "$model" --served-model-name smoke --port 8000 \
  --gpu-memory-utilization 0.3 --enforce-eager > "${dest%/}.vllm.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT
for _ in $(seq 300); do
  curl -sf http://127.0.0.1:8000/v1/models > /dev/null && break
  kill -0 $server 2>/dev/null || { echo "gpu_eval_smoke: the vLLM server died (${dest%/}.vllm.log)" >&2; exit 1; }
  sleep 1
done
"$py" -m seal.cli eval --base-url http://127.0.0.1:8000/v1 --model smoke --split "$split" --out "$dest" \
  --concurrency 32 --official
