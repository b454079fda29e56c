#!/usr/bin/env bash
# Light/full routing measured (docs/GATEWAY.md, "Measured"): two real
# `redline serve` processes — a light and a full model — behind one
# `redline gateway` with routing for `model: auto`, then three `redline
# bench` runs of the same mixed scenario (three simple questions to one
# complex task) in one window: everything to the light model, everything
# to the full model, and `auto`. Prints each run's E2E/TTFT percentiles
# and, for `auto`, the per-route share and E2E (the bench report's "per
# route" table), plus the gateway's route_e2e_seconds and decision time.
#
# Usage: scripts/route_bench.sh [--light FILE.gguf] [--full FILE.gguf]
#          [--rate 4] [--duration 20s] [--max-tokens 48] [--bin DIR]
# Defaults: ../shared/testdata/models/stories260K.gguf (light) and
# TinyStories-656K-Q8_0.gguf (full), build/ci/bin.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
models=$root/../shared/testdata/models
light=$models/stories260K.gguf
full=$models/TinyStories-656K-Q8_0.gguf
rate=4
duration=20s
max_tokens=48
bin="$root/build/ci/bin"
while (($#)); do
  case $1 in
    --light) light=$2; shift 2 ;;
    --full) full=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --duration) duration=$2; shift 2 ;;
    --max-tokens) max_tokens=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "route_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
redline=$bin/redline
for f in "$redline" "$light" "$full"; do
  [[ -e $f ]] || { echo "route_bench: $f not found" >&2; exit 2; }
done
command -v python3 >/dev/null || { echo "route_bench: python3 needed" >&2; exit 2; }

tmp=$(mktemp -d /tmp/route_bench.XXXXXX)
script=route_bench
# shellcheck source=scripts/loopback_lib.sh
source "$root/scripts/loopback_lib.sh"
trap stop_all EXIT
wait_port() {  # FILE -> port
  for _ in $(seq 300); do [[ -s $1 ]] && { cat "$1"; return 0; }; sleep 0.1; done
  echo "route_bench: no port in $1" >&2
  return 1
}

"$redline" serve -m "$light" -a light -t 1 --parallel 4 --port 0 \
  --port-file "$tmp/light.port" >"$tmp/light.log" 2>&1 &
pids+=($!)
"$redline" serve -m "$full" -a full -t 1 --parallel 4 --port 0 \
  --port-file "$tmp/full.port" >"$tmp/full.log" 2>&1 &
pids+=($!)
light_url=http://127.0.0.1:$(wait_port "$tmp/light.port")
full_url=http://127.0.0.1:$(wait_port "$tmp/full.port")
wait_ready "$light_url/readyz" 300
wait_ready "$full_url/readyz" 300

cat >"$tmp/gateway.yaml" <<EOF
routing:
  models: [auto]
  classes:
    - {name: light, model: light, max-score: 0.3}
    - {name: full, model: full}
pools:
  - {name: small, models: [light], upstreams: [$light_url]}
  - {name: big, models: [full], upstreams: [$full_url]}
EOF
"$redline" gateway --config "$tmp/gateway.yaml" --port 0 \
  --port-file "$tmp/gw.port" >"$tmp/gw.log" 2>&1 &
pids+=($!)
gw_url=http://127.0.0.1:$(wait_port "$tmp/gw.port")
wait_ready "$gw_url/readyz" 300

# Simple questions (short, no markers) and a complex task (reasoning and
# step markers, a code block), 3:1.
cat >"$tmp/mixed.yaml" <<'EOF'
tasks:
  - name: simple
    weight: 3
    source: jsonl
    file: simple.jsonl
    temperature: 0
  - name: complex
    weight: 1
    source: jsonl
    file: complex.jsonl
    temperature: 0
EOF
cat >"$tmp/simple.jsonl" <<'EOF'
{"messages": [{"role": "user", "content": "What is a cat?"}]}
{"messages": [{"role": "user", "content": "Tell me about the sun."}]}
{"messages": [{"role": "user", "content": "Who is Lily?"}]}
{"messages": [{"role": "user", "content": "Name a red fruit."}]}
EOF
cat >"$tmp/complex.jsonl" <<'EOF'
{"messages": [{"role": "user", "content": "Explain step by step why the dog ran away, then compare it with the cat. First list the reasons, then evaluate each one, and finally derive a conclusion.\n```\nstory = load('dog')\n```"}]}
{"messages": [{"role": "user", "content": "Prove that Tom was kind. Analyze the story step by step: first the park, then the ball, next the rain, finally the friend. Compare and explain the trade-off.\n```\nfor s in story: print(s)\n```"}]}
EOF

run() {  # NAME MODEL
  "$redline" bench --url "$gw_url/v1" -m "$2" --scenario "$tmp/mixed.yaml" \
    --rate "$rate" --arrival poisson --seed 7 --duration "$duration" \
    --warmup 2s --max-tokens "$max_tokens" -q \
    --json "$tmp/$1.json" >"$tmp/$1.txt" 2>&1 || true
}
run light light
run full full
run auto auto

python3 - "$tmp" <<'EOF'
import json, sys
tmp = sys.argv[1]
def ms(v):
    return f"{v / 1000:.1f}" if isinstance(v, (int, float)) else "?"
print(f"{'run':<6}{'ok':>6}{'errors':>8}{'e2e p50':>10}{'p95':>9}{'p99':>9}{'ttft p50':>10}{'p99':>9}   (ms)")
for name in ("light", "full", "auto"):
    try:
        r = json.load(open(f"{tmp}/{name}.json"))
    except Exception as e:
        print(f"{name:<6} no result ({type(e).__name__})")
        continue
    m = r["phases"]["measure"]
    e = m["latency_us"]["e2e"]["success"]
    t = m["latency_us"]["ttft"]["success"]
    print(f"{name:<6}{m['requests']['ok']:>6}{m['errors']['all']['count']:>8}"
          f"{ms(e.get('p50')):>10}{ms(e.get('p95')):>9}{ms(e.get('p99')):>9}"
          f"{ms(t.get('p50')):>10}{ms(t.get('p99')):>9}")
    if name == "auto":
        routes = r.get("routes") or m.get("routes")
        print("auto per route:", json.dumps(routes))
EOF
echo "per route, the bench text report of the auto run:"
sed -n '/[Pp]er route/,/^$/p' "$tmp/auto.txt"
echo "gateway:"
curl -s "$gw_url/metrics" | grep -E '^redline_gateway_route_(requests_total|decision_seconds_(sum|count)|e2e_seconds_(sum|count))' || true
