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

# A short libFuzzer run of every fuzz target (clang build of its own): each
# runs RL_FUZZ_SECONDS (default 20) over a scratch corpus plus its seeds,
# tests/data/<name without _fuzz>_seeds, when that folder exists. A crash
# (or a leak, or going over the RSS limit) fails the script.
if [[ "${RL_SKIP_FUZZ:-0}" != 1 ]]; then
  fuzz_seconds=${RL_FUZZ_SECONDS:-20}
  cmake --preset fuzz >/dev/null
  mapfile -t fuzzers < <(cd fuzz && ls -1 -- *_fuzz.cc | sed 's/\.cc$//')
  cmake --build --preset fuzz --target "${fuzzers[@]}"
  for name in "${fuzzers[@]}"; do
    mkdir -p "build/fuzz/corpus/$name"
    corpus=("build/fuzz/corpus/$name")
    seeds="$root/tests/data/${name%_fuzz}_seeds"
    [[ -d "$seeds" ]] && corpus+=("$seeds")
    # GGUF seeds are whole files of a few KiB; libFuzzer's default length
    # (from the corpus, at least 4 KiB) suits the others.
    flags=(-max_total_time="$fuzz_seconds" -rss_limit_mb=2048)
    [[ "$name" == gguf_fuzz ]] && flags+=(-max_len=65536)
    "./build/fuzz/fuzz/$name" "${flags[@]}" "${corpus[@]}" \
      >"build/fuzz/$name.log" 2>&1 || {
      tail -n 60 "build/fuzz/$name.log"
      echo "$name: crashed (log: build/fuzz/$name.log)"
      exit 1
    }
    echo "$name: no crash in $fuzz_seconds s"
  done
fi
