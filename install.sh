#!/usr/bin/env bash
# One-command set-up of SEAL into the active Python (a venv, or the machine's interpreter).
#   bash install.sh         CPU machine: torch 2.13.0 (CPU build), verl[verl-core] 0.9.1, bfcl-eval, SEAL
#   bash install.sh --gpu   GPU node:    verl[vllm] 0.9.1 (torch 2.11, vLLM 0.24), Liger's kernels, bfcl-eval, SEAL
#   bash install.sh --ood   also the extras of `seal eval`'s out-of-distribution suites (BFCL V4 memory's
#                           backends and MiniLM weights, tau2-bench): requirements-ood.txt, scripts/ood_extras.py
#   bash install.sh --dev   everything the test suite needs: --ood, the docs tooling (requirements-docs.txt:
#                           MkDocs and Material, which tests/docs build the site with), headless Chromium
#                           (Debian's chromium package, apt-get when run as root) and playwright, which drives it
#                           (no browser download)
# torch's CPU build comes from the PyTorch CPU index (https://download.pytorch.org/whl/cpu) when it answers
# within 5 s; an installed torch 2.13 is kept; otherwise torch 2.13.0 comes from PyPI, which on Linux is
# the CUDA build (with its nvidia wheels, several GB), and the script says so.
# Idempotent: a second run installs nothing new. Any failure stops the script with the reason.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PYTHON:-python}"
command -v "$python" >/dev/null 2>&1 || python=python3
gpu=0
ood=0
dev=0
torch_release=2.13.0
torch_cpu_index=${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
for arg in "$@"; do
  case "$arg" in
    --gpu) gpu=1 ;;
    --ood) ood=1 ;;
    --dev) dev=1; ood=1 ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option '$arg' (use --gpu, --ood, --dev or nothing)" >&2; exit 2 ;;
  esac
done

fail() { echo "install.sh: $*" >&2; exit 1; }
step() { echo "==> $*"; }

"$python" - <<'PY' || fail "SEAL needs Python 3.11 or 3.12 (verl and bfcl-eval's numpy pin rule out 3.13); found $("$python" --version 2>&1)"
import sys
sys.exit(0 if (3, 11) <= sys.version_info[:2] <= (3, 12) else 1)
PY

reachable() { "$python" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' "$1" >/dev/null 2>&1; }

install_cpu_torch() {
  installed=$("$python" -c 'from importlib.metadata import version; print(version("torch"))' 2>/dev/null || true)
  case "$installed" in
    "$torch_release"|"$torch_release"+*) step "torch $installed is installed: kept"; return ;;
  esac
  if reachable "$torch_cpu_index/torch/"; then
    step "torch $torch_release, CPU build, from $torch_cpu_index (its dependencies from your usual index)"
    "$python" -m pip install --disable-pip-version-check --no-deps --index-url "$torch_cpu_index" \
      "torch==$torch_release" || step "the CPU index failed: torch $torch_release from PyPI instead (on Linux the CUDA build)"
  else
    step "the PyTorch CPU index ($torch_cpu_index) did not answer in 5 s: torch $torch_release from PyPI (on Linux the CUDA build)"
  fi
  pip_install "torch==$torch_release"
}

pip_install() { "$python" -m pip install --disable-pip-version-check "$@" || fail "pip install $* failed (see the pip output above)"; }

if [ "$gpu" = 1 ]; then
  step "GPU stack: verl[vllm]==0.9.1 (torch 2.11, vLLM 0.24) and liger-kernel (actor_rollout_ref.model.use_liger)"
  pip_install "verl[vllm]==0.9.1" "liger-kernel==0.8.5"
else
  install_cpu_torch
fi

step "bfcl-eval 2026.3.23 with only what its multi-turn parts import (its numpy 1.26 pin would break verl)"
"$python" "$here/scripts/slim_bfcl_eval.py" || fail "could not install bfcl-eval (see above)"

step "SEAL and its dependencies"
pip_install -r "$here/requirements.txt"
pip_install --no-deps -e "$here"
if [ "$ood" = 1 ]; then
  step "the out-of-distribution suites' extras (BFCL V4 memory backends and MiniLM weights, tau2-bench)"
  "$python" "$here/scripts/ood_extras.py" || fail "could not install the OOD extras (see above)"
fi
if [ "$dev" = 1 ]; then
  step "the docs tooling (MkDocs and Material: the site the tests build)"
  pip_install -r "$here/requirements-docs.txt"
  step "the test suite's browser: Debian's chromium (seal view's page is tested in it) and playwright 1.65.2"
  if ! command -v chromium >/dev/null 2>&1; then
    [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
      || fail "chromium is missing: install Debian's chromium package (apt-get install -y chromium) as root"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
      || fail "apt-get could not install chromium (see above)"
  fi
  pip_install "playwright==1.65.2"
fi

step "checking the environment"
"$python" -m pip check || fail "pip check found conflicting packages (listed above)"
"$python" -c "import seal, verl, bfcl_eval; from seal.bfcl.tasks import load_tasks; assert len(load_tasks()) == 800" \
  || fail "the installed packages do not import (see the traceback above)"
echo "SEAL installed. Run the tests with: python -m pytest -q"
