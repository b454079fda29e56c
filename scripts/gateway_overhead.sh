#!/usr/bin/env bash
# Side-by-side latency of the gateway (docs/GATEWAY.md, "Measured"):
#
#   proxy: `redline bench` at a fixed rate against (a) the fake OpenAI server
#          directly, (b) the same server through `redline gateway`, (c) the
#          same server through nginx (reverse proxy, keep-alive upstream);
#          prints each run's E2E p50/p99 and the added latency b-a and c-a.
#   cache: the same load through gateways with the response cache: the miss
#          path (Cache-Control: no-cache), hits from the local tier, hits
#          from Redis (a real redis-server on a free port, persistence off;
#          a gateway whose local tier holds nothing).
#
# Rounds interleave the configurations so that machine noise hits them all
# alike; the summary is the median over the rounds. Everything runs on
# loopback and is stopped on exit.
#
# Usage: scripts/gateway_overhead.sh [--duration 20s] [--rate 1000]
#          [--rounds 2] [--bin DIR] [--only proxy|cache] [--keep DIR]
#          [--gateway-bin PATH] [--nice N]
# --gateway-bin: another `redline` for the gateway only (compare two
#        builds under the same load generator).
# --nice: run every process of the measurement at this niceness (e.g. -10,
#        needs root), so that other work on a shared machine (compilers)
#        preempts it less; the processes use a few % of a core each.
# --bin: the directory holding `redline` (and `fake_openai_server`, else
#        found in ../src/bench) (default build/ci/bin; build them with
#        `cmake --build build/ci --target redline fake_openai_server`).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

duration=20s
rate=1000
rounds=2
bin="$root/build/ci/bin"
only=""
keep=""
gateway_bin=""
nice_level=""
while (($#)); do
  case $1 in
    --duration) duration=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --gateway-bin) gateway_bin=$2; shift 2 ;;
    --nice) nice_level=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "gateway_overhead: unknown argument $1" >&2; exit 2 ;;
  esac
done

redline=$bin/redline
fake=$bin/fake_openai_server
# The CMake build puts the test-only fake server beside its sources.
[[ -x $fake ]] || fake=$(dirname "$bin")/src/bench/fake_openai_server
for b in "$redline" "$fake"; do
  [[ -x $b ]] || { echo "gateway_overhead: $b not found (see --bin)" >&2; exit 2; }
done
gateway_bin=${gateway_bin:-$redline}
command -v python3 >/dev/null || { echo "gateway_overhead: python3 needed" >&2; exit 2; }

if [[ -n $nice_level ]]; then
  renice -n "$nice_level" -p $$ >/dev/null || { echo "gateway_overhead: renice failed" >&2; exit 2; }
fi
tmp=${keep:-$(mktemp -d /tmp/gateway_overhead.XXXXXX)}
mkdir -p "$tmp"
script=gateway_overhead
# shellcheck source=scripts/loopback_lib.sh
source "$root/scripts/loopback_lib.sh"
trap stop_all EXIT

# --- the upstream: the fake OpenAI server, answering at once -----------------
fake_port=$(free_port)
"$fake" --port "$fake_port" >"$tmp/fake.log" 2>&1 &
pids+=($!)
wait_ready "http://127.0.0.1:$fake_port/health"
upstream="http://127.0.0.1:$fake_port"

# Not in a subshell (its pid must reach `pids`): the URL lands in $gw_url.
start_gateway() {  # NAME CONFIG_YAML
  local name=$1 config=$2
  printf '%s\n' "$config" >"$tmp/$name.yaml"
  "$gateway_bin" gateway --config "$tmp/$name.yaml" --port 0 \
    --port-file "$tmp/$name.port" >"$tmp/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do [[ -s $tmp/$name.port ]] && break; sleep 0.1; done
  local port
  port=$(cat "$tmp/$name.port")
  gw_url="http://127.0.0.1:$port"
  wait_ready "$gw_url/readyz"
}

# max-in-flight far above what the rate needs: a machine stall must not
# turn into the gateway's own 429s (nginx has no such limit).
pool_yaml="pools:
  - name: fake
    models: [fake]
    max-in-flight: 4096
    upstreams: [$upstream]"

# One bench run; prints "p50_us p90_us p99_us requests errors".
bench() {  # NAME URL [extra bench args...]
  local name=$1 url=$2
  shift 2
  "$redline" bench --url "$url/v1" -m fake --rate "${b_rate:-$rate}" \
    --arrival constant --duration "${b_duration:-$duration}" \
    --warmup "${b_warmup:-1s}" --no-stream --max-tokens 4 \
    --temperature 0 -p "What is the capital of France?" -q \
    --json "$tmp/$name.json" "$@" >"$tmp/$name.bench.log" 2>&1 || true
  python3 - "$tmp/$name.json" <<'EOF'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
    m = r["phases"]["measure"]
    e = m["latency_us"]["e2e"]["success"]
    req = m["requests"]
    print(f'{e["p50"]:.0f} {e["p90"]:.0f} {e["p99"]:.0f} {req.get("completed", req.get("ok", "?"))} '
          f'{m["errors"]["all"]["count"]}')
except Exception as ex:  # a failed run: no numbers
    print(f"nan nan nan 0 {type(ex).__name__}")
EOF
}

# The gateway's own histograms: mean and the bucket holding the median, from
# /metrics (over everything the gateway served).
gateway_self() {  # URL SERIES
  python3 - "$1/metrics" "$2" <<'EOF'
import re, sys, urllib.request
text = urllib.request.urlopen(sys.argv[1], timeout=2).read().decode()
series = sys.argv[2]
groups = {}
for line in text.splitlines():
    m = re.match(r'(\S+?)_(bucket|sum|count)\{?(.*?)\}? (\S+)$', line)
    if not m or not m.group(1).endswith(series):
        continue
    labels = re.sub(r',?le="[^"]*"', "", m.group(3))
    g = groups.setdefault(labels, {"b": []})
    if m.group(2) == "bucket":
        le = re.search(r'le="([^"]*)"', m.group(3)).group(1)
        g["b"].append((float("inf") if le == "+Inf" else float(le), float(m.group(4))))
    else:
        g[m.group(2)] = float(m.group(4))
for labels, g in sorted(groups.items()):
    n = g.get("count", 0)
    if n == 0:
        continue
    med = next((le for le, c in sorted(g["b"]) if c >= n / 2), float("inf"))
    p99 = next((le for le, c in sorted(g["b"]) if c >= n * 0.99), float("inf"))
    print(f"  {series}{{{labels}}}: n={n:.0f} mean={g['sum'] / n * 1e6:.1f} us, "
          f"p50 <= {med * 1e6:g} us, p99 <= {p99 * 1e6:g} us")
EOF
}

summary() {  # FILE: lines "round name p50 p99 ..." -> medians per name
  python3 - "$1" "$2" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
ref = sys.argv[2]
names = []
for r in rows:
    if r[1] not in names:
        names.append(r[1])
def med(name, i):
    v = [float(r[i]) for r in rows if r[1] == name and r[i] != "nan"]
    return statistics.median(v) if v else float("nan")
head = f"{'':<14}{'p50 us':>10}{'p90 us':>10}{'p99 us':>10}"
if ref:
    head += f"{'added p50':>12}{'added p90':>12}{'added p99':>12}"
print(head)
for n in names:
    p = [med(n, i) for i in (2, 3, 4)]
    extra = ""
    if ref and n != ref:
        extra = "".join(f"{v - med(ref, i):>12.0f}" for v, i in zip(p, (2, 3, 4)))
    print(f"{n:<14}{p[0]:>10.0f}{p[1]:>10.0f}{p[2]:>10.0f}{extra}")
EOF
}

echo "gateway_overhead: $rounds round(s), $duration each at $rate req/s; load average $(cut -d' ' -f1-3 /proc/loadavg); niceness $(nice)"
echo "  (work files in $tmp)"

# --- proxy: direct, gateway, nginx ------------------------------------------
if [[ -z $only || $only == proxy ]]; then
  start_gateway gw_proxy "$pool_yaml"
  gw=$gw_url
  nginx_url=""
  if command -v nginx >/dev/null 2>&1 || [[ -x /usr/sbin/nginx ]]; then
    nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
    nginx_port=$(free_port)
    mkdir -p "$tmp/nginx"
    cat >"$tmp/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $tmp/nginx/body;
  proxy_temp_path $tmp/nginx/proxy;
  fastcgi_temp_path $tmp/nginx/fastcgi;
  uwsgi_temp_path $tmp/nginx/uwsgi;
  scgi_temp_path $tmp/nginx/scgi;
  upstream fake { server 127.0.0.1:$fake_port; keepalive 64; }
  server {
    listen 127.0.0.1:$nginx_port;
    location / {
      proxy_pass http://fake;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
EOF
    "$nginx_bin" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" >"$tmp/nginx/stdout.log" 2>&1 &
    pids+=($!)
    nginx_url="http://127.0.0.1:$nginx_port"
    wait_ready "$nginx_url/health"
  else
    echo "gateway_overhead: nginx not installed (scripts/setup.sh installs it); skipping (c)"
  fi
  : >"$tmp/proxy.txt"
  for r in $(seq "$rounds"); do
    for cfg in direct gateway nginx; do
      case $cfg in
        direct) url=$upstream ;;
        gateway) url=$gw ;;
        nginx) url=$nginx_url; [[ -n $url ]] || continue ;;
      esac
      read -r p50 p90 p99 n err < <(bench "proxy_${cfg}_$r" "$url")
      echo "$r $cfg $p50 $p90 $p99 $n $err" >>"$tmp/proxy.txt"
      printf '  round %s %-8s p50 %6s us  p90 %6s us  p99 %6s us  (%s requests, errors %s)\n' \
        "$r" "$cfg" "$p50" "$p90" "$p99" "$n" "$err"
    done
  done
  echo "proxy, median over rounds (added = minus direct):"
  summary "$tmp/proxy.txt" direct
  echo "the gateway's own time per request (its /metrics):"
  gateway_self "$gw" gateway_overhead_seconds
fi

# --- cache: miss, local hit, Redis hit ---------------------------------------
if [[ -z $only || $only == cache ]]; then
  redis_port=$(free_port)
  redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$tmp" --logfile "$tmp/redis.log" &
  pids+=($!)
  for _ in $(seq 50); do
    redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  cache_yaml="cache:
  store-length: true
  redis: redis://127.0.0.1:$redis_port
$pool_yaml"
  # B: the same Redis, no local tier: every hit comes from Redis.
  redis_yaml="cache:
  store-length: true
  max-bytes: 0
  redis: redis://127.0.0.1:$redis_port
$pool_yaml"
  start_gateway gw_cache "$cache_yaml"
  gw_a=$gw_url
  start_gateway gw_redis "$redis_yaml"
  gw_b=$gw_url
  # Stores the answer (in both tiers) before the hit runs.
  b_rate=10 b_duration=1s b_warmup=0s bench cache_prime "$gw_a" >/dev/null
  : >"$tmp/cache.txt"
  for r in $(seq "$rounds"); do
    for cfg in miss local_hit redis_hit; do
      case $cfg in
        miss) read -r p50 p90 p99 n err < <(bench "cache_miss_$r" "$gw_a" -H 'Cache-Control: no-cache') ;;
        local_hit) read -r p50 p90 p99 n err < <(bench "cache_local_$r" "$gw_a") ;;
        redis_hit) read -r p50 p90 p99 n err < <(bench "cache_redis_$r" "$gw_b") ;;
      esac
      echo "$r $cfg $p50 $p90 $p99 $n $err" >>"$tmp/cache.txt"
      printf '  round %s %-9s p50 %6s us  p90 %6s us  p99 %6s us  (%s requests, errors %s)\n' \
        "$r" "$cfg" "$p50" "$p90" "$p99" "$n" "$err"
    done
  done
  echo "cache, median over rounds (the bar: hit p99 < 1000 us local, < 2000 us Redis):"
  summary "$tmp/cache.txt" ""
  echo "the gateways' own time per request by cache outcome (their /metrics):"
  gateway_self "$gw_a" gateway_cache_overhead_seconds
  gateway_self "$gw_b" gateway_cache_overhead_seconds
  gateway_self "$gw_b" cache_redis_latency_seconds
fi
