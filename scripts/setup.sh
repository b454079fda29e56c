#!/usr/bin/env bash
# Installs every Debian package that building Redline and running its tests need.
# Idempotent: packages already present are skipped by apt; safe to run again.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  clang-14 libclang-rt-14-dev lld-14 clang-format
  libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev
  libcli11-dev libfmt-dev libspdlog-dev libpcre2-dev libssl-dev libyaml-cpp-dev
  libhiredis-dev libzstd-dev redis-server
  libgtest-dev libgmock-dev libbenchmark-dev nginx
  prometheus chromium wrk python3-locust
)
# Node.js may come from elsewhere (its npm then conflicts with Debian's); add Debian's only when absent.
if ! command -v node >/dev/null 2>&1; then packages+=(nodejs); fi
if ! command -v npm >/dev/null 2>&1; then packages+=(npm); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi

# The official OpenAI Node SDK, used by the server integration tests (npm registry).
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [[ -f "$root/tests/integration/node/package.json" && ! -d "$root/tests/integration/node/node_modules/openai" ]]; then
  (cd "$root/tests/integration/node" && npm ci --no-audit --no-fund --loglevel=error || npm install --no-audit --no-fund --loglevel=error)
fi
