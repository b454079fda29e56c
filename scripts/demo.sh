#!/usr/bin/env bash
# The latency-lab demo on an embedded default, on a fresh Debian 12 machine:
# sets up and builds Redline (release), generates a synthetic SmolLM2-135M-
# shaped model (no download), then `redline bench` starts `redline serve` on it
# (cold start measured), drives it for about a minute with the three-second
# profile, prints the verdict table and writes an HTML report.
#
# Environment: DEMO_DURATION (default 60s), DEMO_RATE (req/s, default 2),
# DEMO_PRESET (default smollm2-135m), DEMO_TYPE (default q8_0).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

bash scripts/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release --target redline

bin="$root/build/release/bin/redline"
out="$root/build/release/demo"
mkdir -p "$out"
preset=${DEMO_PRESET:-smollm2-135m}
type=${DEMO_TYPE:-q8_0}
model="$out/$preset-$type.gguf"
[[ -f "$model" ]] || "$bin" make-model --preset "$preset" --type "$type" -o "$model"

echo "== one generation, streamed, with timings"
"$bin" run -m "$model" -p "The three-second line" -n 32 --temp 0

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
echo
echo "== redline bench: cold start of redline serve, then ${DEMO_DURATION:-60s} at ${DEMO_RATE:-2} req/s (Poisson)"
set +e
"$bin" bench \
  --cold-start "$bin serve -m $model --port $port" --server-log "$out/server.log" \
  --url "http://127.0.0.1:$port/v1" \
  --profile three-second \
  --rate "${DEMO_RATE:-2}" --arrival poisson --duration "${DEMO_DURATION:-60s}" --warmup 5s \
  --max-tokens 16 \
  --scrape "http://127.0.0.1:$port/metrics" \
  --json "$out/result.json" --html "$out/report.html"
code=$?
set -e
echo
echo "report: $out/report.html   result: $out/result.json   server log: $out/server.log"
case $code in
  0) echo "verdict: PASS (exit 0)" ;;
  99) echo "verdict: SLO FAILED (exit 99)" ;;
  *) echo "run invalid or tool error (exit $code)" ;;
esac
exit $code
