#!/usr/bin/env bash
# What one gateway core sustains (docs/GATEWAY.md, "Measured"):
#
#   requests: wrk (Debian `wrk`, closed loop, keep-alive) posts a short chat
#             completion as fast as the gateway answers, (a) to the upstream
#             directly, the ceiling of the load generator and the upstream,
#             (b) through `redline gateway` pinned to CPU 0 with everything
#             else on CPU 1; prints req/s and the gateway's CPU share of its
#             core (utime + stime from /proc), so req/s / share is the rate
#             of one fully busy core. The upstream is nginx answering a fixed
#             OpenAI body (a few µs per request, so it is not the limit).
#   streams:  `redline bench --users N` streams through the gateway from the
#             fake OpenAI server (tokens slowly, so N streams are open at
#             once); prints the streams completed, errors, TTFT/ITL
#             percentiles and the gateway's CPU share and RSS.
#
# Everything runs on loopback and is stopped on exit. Needs root for
# `ulimit -n` above the default when --streams is large.
#
# Usage: scripts/gateway_throughput.sh [--duration 10s] [--connections 64]
#          [--rounds 3] [--streams 5000] [--stream-seconds 20]
#          [--token-gap-ms 200] [--bin DIR] [--only requests|streams]
# --bin: the directory holding `redline` (default build/ci/bin; the
#        fake server is found in ../src/bench of it).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

duration=10s
connections=64
rounds=3
streams=5000
stream_seconds=20
token_gap_ms=200
bin="$root/build/ci/bin"
only=""
while (($#)); do
  case $1 in
    --duration) duration=$2; shift 2 ;;
    --connections) connections=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --streams) streams=$2; shift 2 ;;
    --stream-seconds) stream_seconds=$2; shift 2 ;;
    --token-gap-ms) token_gap_ms=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "gateway_throughput: unknown argument $1" >&2; exit 2 ;;
  esac
done

redline=$bin/redline
fake=$(dirname "$bin")/src/bench/fake_openai_server
for b in "$redline" "$fake"; do
  [[ -x $b ]] || { echo "gateway_throughput: $b not found (see --bin)" >&2; exit 2; }
done
for c in python3 taskset; do
  command -v "$c" >/dev/null || { echo "gateway_throughput: $c needed" >&2; exit 2; }
done
if [[ $only != streams ]]; then
  for c in wrk nginx; do
    command -v "$c" >/dev/null || [[ -x /usr/sbin/$c ]] ||
      { echo "gateway_throughput: $c needed (apt install $c)" >&2; exit 2; }
  done
fi
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
(($(nproc) >= 2)) || { echo "gateway_throughput: needs 2 CPUs" >&2; exit 2; }

tmp=$(mktemp -d /tmp/gateway_throughput.XXXXXX)
script=gateway_throughput
# shellcheck source=scripts/loopback_lib.sh
source "$root/scripts/loopback_lib.sh"
trap stop_all EXIT

# utime + stime of PID in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
seconds() {  # 10s / 500ms / 2m -> seconds
  python3 -c 'import re,sys; m=re.fullmatch(r"([0-9.]+)(ms|s|m)?", sys.argv[1]); v=float(m[1]); print(v/1000 if m[2]=="ms" else v*60 if m[2]=="m" else v)' "$1"
}

start_gateway() {  # NAME CONFIG_YAML -> $gw_url, $gw_pid
  local name=$1 config=$2
  printf '%s\n' "$config" >"$tmp/$name.yaml"
  taskset -c 0 "$redline" gateway --config "$tmp/$name.yaml" --port 0 \
    --port-file "$tmp/$name.port" >"$tmp/$name.log" 2>&1 &
  gw_pid=$!
  pids+=("$gw_pid")
  for _ in $(seq 100); do [[ -s $tmp/$name.port ]] && break; sleep 0.1; done
  gw_url="http://127.0.0.1:$(cat "$tmp/$name.port")"
  wait_ready "$gw_url/readyz"
}

# --- requests: wrk -> (nginx | gateway -> nginx) ------------------------------
if [[ $only != streams ]]; then
  ng_port=$(free_port)
  mkdir -p "$tmp/nginx"
  answer='{"id":"chatcmpl-1","object":"chat.completion","created":1764633600,"model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":"Paris is the capital."},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}'
  cat >"$tmp/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $tmp/nginx/body;
  proxy_temp_path $tmp/nginx/proxy;
  fastcgi_temp_path $tmp/nginx/fcgi;
  uwsgi_temp_path $tmp/nginx/uwsgi;
  scgi_temp_path $tmp/nginx/scgi;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$ng_port;
    location = /health { return 200 'ok'; }
    location = /readyz { return 200 'ok'; }
    location / {
      default_type application/json;
      return 200 '$answer';
    }
  }
}
EOF
  taskset -c 1 "$nginx_bin" -c "$tmp/nginx/nginx.conf" &
  pids+=($!)
  wait_ready "http://127.0.0.1:$ng_port/health"
  upstream="http://127.0.0.1:$ng_port"

  start_gateway gw "pools:
  - name: fake
    models: [fake]
    max-in-flight: 4096
    upstreams: [$upstream]"

  cat >"$tmp/post.lua" <<'EOF'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"model":"fake","messages":[{"role":"user","content":"What is the capital of France?"}],"max_tokens":4,"temperature":0}'
EOF
  dur_s=$(seconds "$duration")
  run_wrk() {  # URL -> "req_per_s non2xx_or_errors"
    taskset -c 1 wrk -t1 -c"$connections" -d"$duration" -s "$tmp/post.lua" \
      "$1/v1/chat/completions" >"$tmp/wrk.log" 2>&1 || true
    python3 - "$tmp/wrk.log" <<'EOF'
import re, sys
t = open(sys.argv[1]).read()
rps = re.search(r"Requests/sec:\s+([0-9.]+)", t)
bad = sum(int(x) for x in re.findall(r"Non-2xx or 3xx responses: (\d+)", t))
err = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", t)
if err:
    bad += sum(int(x) for x in err.groups())
print(f'{float(rps.group(1)) if rps else float("nan"):.0f} {bad}')
EOF
  }
  hz=$(getconf CLK_TCK)
  echo "requests: wrk -t1 -c$connections for $duration; gateway on CPU 0, wrk and nginx on CPU 1"
  printf '%-7s %12s %14s %10s %16s %8s\n' round "direct/s" "gateway/s" "gw cpu" "per gw core/s" errors
  rows=()
  for r in $(seq "$rounds"); do
    read -r direct direct_bad < <(run_wrk "$upstream")
    t0=$(cpu_ticks "$gw_pid")
    read -r via via_bad < <(run_wrk "$gw_url")
    t1=$(cpu_ticks "$gw_pid")
    share=$(python3 -c "print(f'{($t1 - $t0) / $hz / $dur_s:.3f}')")
    per_core=$(python3 -c "print(f'{$via / max($share, 1e-9):.0f}')")
    printf '%-7s %12s %14s %9.0f%% %16s %8s\n' "$r" "$direct" "$via" \
      "$(python3 -c "print($share * 100)")" "$per_core" "$((direct_bad + via_bad))"
    rows+=("$via $share $per_core")
  done
  printf '%s\n' "${rows[@]}" | python3 -c '
import statistics, sys
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
print(f"median: gateway {statistics.median(r[0] for r in rows):.0f} req/s at "
      f"{statistics.median(r[1] for r in rows) * 100:.0f}% of its core, "
      f"{statistics.median(r[2] for r in rows):.0f} req/s per fully busy core")'
  echo "gateway overhead histogram after the runs:"
  curl -s "$gw_url/metrics" | grep -E '^redline_gateway_overhead_seconds_(sum|count)' || true
fi

# --- streams: bench --users N -> gateway -> fake server ------------------------
if [[ $only != requests ]]; then
  # Each stream holds a client and an upstream socket in the gateway, and
  # one each in bench and the fake server.
  want=$((streams * 2 + 1024))
  hard=$(ulimit -Hn)
  [[ $hard != unlimited ]] && ((hard < want)) && want=$hard
  ulimit -n "$want" 2>/dev/null || true
  (($(ulimit -n) >= streams * 2 + 64)) ||
    echo "gateway_throughput: ulimit -n $(ulimit -n) is too low for $streams streams" >&2
  tokens=$((stream_seconds * 1000 / token_gap_ms))
  fake_port=$(free_port)
  taskset -c 1 "$fake" --port "$fake_port" \
    --plan "ttft=100ms;gap=${token_gap_ms}ms;tokens=$tokens" >"$tmp/fake.log" 2>&1 &
  pids+=($!)
  wait_ready "http://127.0.0.1:$fake_port/health"
  start_gateway gws "pools:
  - name: fake
    models: [fake]
    max-in-flight: $((streams * 2))
    upstreams: [http://127.0.0.1:$fake_port]"
  run_s=$((stream_seconds * 2 + 10))
  echo "streams: $streams users, each a stream of $tokens tokens $token_gap_ms ms apart (${stream_seconds} s; $((streams * 1000 / token_gap_ms)) events/s at full concurrency), for ${run_s} s"
  t0=$(cpu_ticks "$gw_pid")
  taskset -c 1 "$redline" bench --url "$gw_url/v1" -m fake --users "$streams" \
    --ramp-up 5s --think 0s --duration "${run_s}s" --warmup 0s --max-tokens "$tokens" \
    --temperature 0 -p "Tell me a story." -q --max-connections "$((streams + 16))" \
    --json "$tmp/streams.json" >"$tmp/streams.log" 2>&1 || true
  t1=$(cpu_ticks "$gw_pid")
  rss_kb=$(awk '/VmHWM/ {print $2}' "/proc/$gw_pid/status")
  python3 - "$tmp/streams.json" "$(( (t1 - t0) ))" "$(getconf CLK_TCK)" "$run_s" "$rss_kb" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
m = r["phases"]["measure"]
req = m["requests"]
lat = m["latency_us"]
def p(name, q):
    v = lat.get(name, {}).get("success", {}).get(q)
    return f"{v / 1000:.1f} ms" if v is not None else "?"
ticks, hz, run_s, rss = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
print(f"requests: {req}")
print(f"errors: {m['errors']['all']['count']}")
print(f"mean concurrency {m['rates']['mean_concurrency']:.0f} streams, "
      f"{m['rates']['output_tps']:.0f} tokens/s through the gateway")
print(f"ttft p50 {p('ttft', 'p50')}, p99 {p('ttft', 'p99')}; itl p50 {p('itl', 'p50')}, p99 {p('itl', 'p99')}")
print(f"gateway cpu {ticks / hz / run_s * 100:.0f}% of its core over the run, peak RSS {rss / 1024:.0f} MiB")
EOF
  curl -s "$gw_url/metrics" | grep -E '^redline_gateway_(in_flight|requests_total)' | head -8 || true
fi
