#!/usr/bin/env bash
# Installs what ordo's build, tests and benchmarks need on a fresh Debian machine, and nothing when it is
# already there. Safe to run repeatedly. Set ORDO_SETUP_PEERS=1 to also install the peers used by bench/
# (nginx, apache2, haproxy, wrk, ab, sysbench, hey, h2load, stress-ng, perf, valgrind, jq).
set -euo pipefail

need=()
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v make >/dev/null 2>&1 || need+=(make)
# Headless Chromium for the report's browser test.
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# Redis for `ordo serve`'s fleet-mode tests (crates/serve/tests/it/fleet.rs start their own redis-server).
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
if [ "${ORDO_SETUP_PEERS:-0}" = 1 ]; then
  command -v nginx >/dev/null 2>&1 || need+=(nginx)
  command -v apache2 >/dev/null 2>&1 || need+=(apache2)
  command -v haproxy >/dev/null 2>&1 || need+=(haproxy)
  command -v wrk >/dev/null 2>&1 || need+=(wrk)
  command -v ab >/dev/null 2>&1 || need+=(apache2-utils)
  command -v sysbench >/dev/null 2>&1 || need+=(sysbench)
  command -v hey >/dev/null 2>&1 || need+=(hey)
  command -v h2load >/dev/null 2>&1 || need+=(nghttp2-client)
  command -v stress-ng >/dev/null 2>&1 || need+=(stress-ng)
  command -v perf >/dev/null 2>&1 || need+=(linux-perf)
  # callgrind (valgrind, with callgrind_control): bench/proxy-instructions.sh counts instructions per request
  command -v callgrind_control >/dev/null 2>&1 || need+=(valgrind)
  command -v jq >/dev/null 2>&1 || need+=(jq)
fi

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing ${need[*]}; run as root (or install them) to continue" >&2
    exit 1
  fi
  echo "setup: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# Python modules the serve tests drive real peers with: websockets (a WebSocket client and server through
# the proxy), h2 (hyper-h2: the WebSocket client over HTTP/2, RFC 8441) and PyYAML (the Kubernetes
# example's manifest).
if command -v python3 >/dev/null 2>&1; then
  py_need=()
  python3 -c 'import websockets' >/dev/null 2>&1 || py_need+=(websockets)
  python3 -c 'import h2' >/dev/null 2>&1 || py_need+=(h2)
  python3 -c 'import yaml' >/dev/null 2>&1 || py_need+=(pyyaml)
  if [ ${#py_need[@]} -gt 0 ]; then
    echo "setup: pip installing ${py_need[*]}" >&2
    python3 -m pip install --quiet --disable-pip-version-check "${py_need[@]}" >/dev/null 2>&1 ||
      echo "setup: could not install ${py_need[*]} with pip; the tests that need them say they were skipped" >&2
  fi
fi
command -v cargo >/dev/null 2>&1 || { echo "setup: cargo not found: install a Rust toolchain (rustup)" >&2; exit 1; }
