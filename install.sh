#!/usr/bin/env bash
# One-command set-up of SEAL into the active Python (a venv, or the machine's interpreter).
#   bash install.sh         CPU machine: torch 2.13.0 (CPU build), verl[verl-core] 0.9.1, bfcl-eval, SEAL
#   bash install.sh --gpu   GPU node:    verl[vllm] 0.9.1 (torch 2.11, vLLM 0.24), bfcl-eval, SEAL
# Idempotent: a second run installs nothing new. Any failure stops the script with the reason.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PYTHON:-python}"
command -v "$python" >/dev/null 2>&1 || python=python3
gpu=0
for arg in "$@"; do
  case "$arg" in
    --gpu) gpu=1 ;;
    -h|--help) sed -n '2,5p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option '$arg' (use --gpu or nothing)" >&2; exit 2 ;;
  esac
done

fail() { echo "install.sh: $*" >&2; exit 1; }
step() { echo "==> $*"; }

"$python" - <<'PY' || fail "SEAL needs Python 3.11 or 3.12 (verl and bfcl-eval's numpy pin rule out 3.13); found $("$python" --version 2>&1)"
import sys
sys.exit(0 if (3, 11) <= sys.version_info[:2] <= (3, 12) else 1)
PY

pip_install() { "$python" -m pip install --disable-pip-version-check "$@" || fail "pip install $* failed (see the pip output above)"; }

if [ "$gpu" = 1 ]; then
  step "GPU stack: verl[vllm]==0.9.1 (torch 2.11, vLLM 0.24)"
  pip_install "verl[vllm]==0.9.1"
else
  step "torch 2.13.0 (CPU build) first, so that nothing pulls CUDA wheels"
  pip_install "torch==2.13.0"
fi

step "bfcl-eval 2026.3.23 with only what its multi-turn parts import (its numpy 1.26 pin would break verl)"
"$python" "$here/scripts/slim_bfcl_eval.py" || fail "could not install bfcl-eval (see above)"

step "SEAL and its dependencies"
pip_install -r "$here/requirements.txt"
pip_install --no-deps -e "$here"

step "checking the environment"
"$python" -m pip check || fail "pip check found conflicting packages (listed above)"
"$python" -c "import seal, verl, bfcl_eval; from seal.bfcl.tasks import load_tasks; assert len(load_tasks()) == 800" \
  || fail "the installed packages do not import (see the traceback above)"
echo "SEAL installed. Run the tests with: python -m pytest -q"
