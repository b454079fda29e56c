# Helpers of the loopback measurement scripts (gateway_overhead.sh,
# gateway_throughput.sh, route_bench.sh), sourced by them. The sourcing
# script sets `script` (its name in messages) and `tmp` (its scratch
# directory, removed on exit unless `keep` is set), appends the pid of every
# process it starts to `pids`, and calls `trap stop_all EXIT`.
pids=()

# Stops every started process, then removes $tmp.
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  [[ -n ${keep:-} ]] || rm -rf "$tmp"
}

# A loopback port free now.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits until URL answers 200, at most TENTHS x 0.1 s (default 100).
wait_ready() {  # URL [TENTHS]
  for _ in $(seq "${2:-100}"); do
    if python3 - "$1" <<'PY' 2>/dev/null; then return 0; fi
import sys, urllib.request
sys.exit(0 if urllib.request.urlopen(sys.argv[1], timeout=1).status == 200 else 1)
PY
    sleep 0.1
  done
  echo "$script: $1 not ready" >&2
  return 1
}
