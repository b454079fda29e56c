#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds Redline (release) and runs the main
# job on an embedded default: a synthetic SmolLM2-135M-shaped model generated on
# the spot, then a streamed generation with timings. No download needed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target redline

bin=build/release/bin/redline
model=build/release/smollm2-135m-q8_0.gguf
if [[ ! -f "$model" ]]; then
  "$bin" make-model --preset smollm2-135m --type q8_0 -o "$model"
fi
"$bin" run -m "$model" -p "The three-second line" -n 48 --temp 0
