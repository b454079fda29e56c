#!/usr/bin/env bash
# Manual cross-check (not part of the build or the tests): do files written by
# `redline make-model` load in llama.cpp, and does greedy decoding from the same
# token ids give the same tokens? llama.cpp comes from the npm package
# node-llama-cpp (prebuilt CPU binaries), installed into a scratch folder.
#
#   tools/crosscheck_llamacpp.sh BUILD_DIR [PRESET...]
set -euo pipefail
build=${1:?usage: crosscheck_llamacpp.sh BUILD_DIR [PRESET...]}
shift
presets=("$@")
[[ ${#presets[@]} -gt 0 ]] || presets=(tiny tiny-qwen2 smollm2-135m qwen2.5-0.5b llama3.2-1b)
types=(${TYPES:-f32 q8_0})
n=${N_TOKENS:-32}
scratch=${SCRATCH:-/tmp/redline-crosscheck}
redline="$build/bin/redline"
mkdir -p "$scratch"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ ! -d "$scratch/node_modules/node-llama-cpp" ]]; then
  (cd "$scratch" && npm init -y >/dev/null && npm install --no-audit --no-fund node-llama-cpp@3.22.1 >/dev/null)
fi
cp "$here/crosscheck_llamacpp.mjs" "$scratch/"
ids=${IDS:-1,300,301,302,303,304,305,306}
for preset in "${presets[@]}"; do
  for type in "${types[@]}"; do
    model="$scratch/$preset-$type.gguf"
    [[ -f "$model" ]] || "$redline" make-model --preset "$preset" --type "$type" -o "$model" 2>/dev/null
    ours=$("$redline" run -m "$model" --prompt-ids "$ids" -n "$n" --temp 0 --ignore-eos --print-ids --ctx 512 2>/dev/null | tail -n 1)
    theirs=$(cd "$scratch" && node crosscheck_llamacpp.mjs "$model" "$ids" "$n" 2>/dev/null)
    read -ra a <<<"$ours"
    read -ra b <<<"$theirs"
    same=0
    while [[ $same -lt ${#a[@]} && $same -lt ${#b[@]} && "${a[$same]}" == "${b[$same]}" ]]; do same=$((same + 1)); done
    echo "$preset $type: first $same of $n greedy tokens identical"
    [[ "${KEEP:-0}" == 1 ]] || rm -f "$model"
  done
done
