#!/usr/bin/env bash
# The start every GPU script with modes shares (gpu_paper_launch.sh, gpu_backbone_runs.sh, gpu_qwen_compare.sh,
# gpu_compare_arms.sh), sourced as their first line:
#   source "$(dirname "${BASH_SOURCE[0]}")/gpu_mode_cli.sh"; mode=$1; shift
# -h/--help prints the calling script's header comment and exits; no argument prints it and fails (status 2);
# `usage` stays defined for the caller's own checks; `py` is PYTHON (default python3); NVLink multicast stays
# off in every process the caller starts (Ray's workers inherit these variables). The speed overrides the timing
# runs of gpu_paper_launch.sh and gpu_backbone_runs.sh share are defined here once: `no_compile` (vLLM without
# torch.compile, full CUDA graphs for decoding only) and `liger_decoder` (verl's switch for Liger's RMSNorm,
# SwiGLU and RoPE kernels, seal/trainer/launch/liger.py).
set -uo pipefail
usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; }
case "${1:-}" in -h|--help) usage; exit 0 ;; "") usage >&2; exit 2 ;; esac
py=${PYTHON:-python3}
no_compile=+actor_rollout_ref.rollout.engine_kwargs.vllm.compilation_config={mode:0,cudagraph_mode:FULL_DECODE_ONLY}
liger_decoder=actor_rollout_ref.model.use_liger=true
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 VLLM_USE_FLASHINFER_SAMPLER=0
