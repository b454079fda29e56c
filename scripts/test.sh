#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine, builds Redline and runs every test.
#   scripts/test.sh            # preset "ci": -O2, DCHECKs on, warnings are errors
#   PRESET=asan scripts/test.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
preset=${PRESET:-ci}

bash scripts/setup.sh
cmake --preset "$preset"
cmake --build --preset "$preset"
ctest --preset "$preset" -j 2

# A short libFuzzer run over the GGUF parser (clang build of its own).
if [[ "${RL_SKIP_FUZZ:-0}" != 1 ]]; then
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz --target gguf_fuzz
  mkdir -p build/fuzz/corpus
  corpus=(build/fuzz/corpus)
  [[ -d "$root/tests/data/gguf_seeds" ]] && corpus+=("$root/tests/data/gguf_seeds")
  ./build/fuzz/fuzz/gguf_fuzz -max_total_time="${RL_FUZZ_SECONDS:-30}" -rss_limit_mb=2048 \
    -max_len=65536 "${corpus[@]}"
  echo "gguf_fuzz: no crash in ${RL_FUZZ_SECONDS:-30} s"
fi
