#!/usr/bin/env bash
# Memory pinned by HTTP/2 slow readers (issue 20): CONNS h2c connections (h2load -w 0: every stream's window
# is 0, so nothing is ever read) opening STREAMS streams each for a SIZE-byte file, through a reverse
# proxy — ordo serve and nginx, both proxying to the same nginx upstream over HTTP/1.1. Reports each
# proxy's resident memory before the clients, after HOLD seconds with them connected, the growth, and what
# is still resident 2 s after the clients left (memory the allocator kept).
# The target: ordo's growth ≤ nginx's (ordo holds at most `[http2] max_buffered_bytes` per connection
# beyond what is being produced, docs/serve-http.md "Slow readers").
#
#   bench/h2-slow-readers.sh                 # needs nginx, h2load (nghttp2-client), curl
#   CONNS=20 STREAMS=128 SIZE=200000 HOLD=5 bench/h2-slow-readers.sh
#   ORDO_BENCH_NO_BUILD=1 ORDO_BIN=target/debug/ordo bench/h2-slow-readers.sh   # another build
#   ORDO_IN_PROGRESS=8 bench/h2-slow-readers.sh     # [http2] max_streams_in_progress
#
# Everything it starts is killed and its temp dir removed on every exit path.
set -euo pipefail

CONNS=${CONNS:-20}
STREAMS=${STREAMS:-128}
SIZE=${SIZE:-200000}
HOLD=${HOLD:-5}
UP_PORT=${UP_PORT:-18471}
NGINX_PORT=${NGINX_PORT:-18472}
ORDO_PORT=${ORDO_PORT:-18473}

. "$(dirname "$0")/lib.sh"
bench_init h2-slow-readers nginx h2load curl
bench_build --bin ordo
bench_ports_free "$UP_PORT" "$NGINX_PORT" "$ORDO_PORT"

mkdir -p "$tmp/www"
head -c "$SIZE" /dev/urandom > "$tmp/www/big.bin"

# the upstream, and nginx as the h2c proxy in front of it (1.22 takes `http2` on the listen line; without
# `ssl` that is h2c with prior knowledge)
bench_nginx_conf "$tmp/up" "  server {
    listen 127.0.0.1:$UP_PORT;
    root $tmp/www;
  }"
bench_nginx_conf "$tmp/px" "  server {
    listen 127.0.0.1:$NGINX_PORT http2;
    http2_max_concurrent_streams $STREAMS;
    location / { proxy_pass http://127.0.0.1:$UP_PORT; proxy_http_version 1.1; proxy_set_header Connection \"\"; }
  }"
{
  bench_ordo_head "$ORDO_PORT" fcfs
  echo "[http2]"
  echo "max_concurrent_streams = $STREAMS"
  # ORDO_IN_PROGRESS: [http2] max_streams_in_progress (ordo's default, 32, if unset)
  if [ -n "${ORDO_IN_PROGRESS:-}" ]; then echo "max_streams_in_progress = $ORDO_IN_PROGRESS"; fi
  echo "[[routes]]"
  echo "prefix = \"/\""
  echo "proxy = { upstreams = [\"127.0.0.1:$UP_PORT\"] }"
} > "$tmp/ordo.toml"

bench_start_nginx "$tmp/up" "http://127.0.0.1:$UP_PORT/big.bin"
# (its h2c-only listener: readiness is checked below with curl --http2-prior-knowledge)
bench_start_nginx "$tmp/px" "http://127.0.0.1:$UP_PORT/big.bin"; nginx_pids=$started_pids
for _ in $(seq 1 100); do
  curl -fs --http2-prior-knowledge -o /dev/null "http://127.0.0.1:$NGINX_PORT/big.bin" && break
  sleep 0.1
done
curl -fs --http2-prior-knowledge -o /dev/null "http://127.0.0.1:$NGINX_PORT/big.bin" ||
  { echo "h2-slow-readers: nginx's h2c proxy did not come up: $(tail -n 2 "$tmp/px/error.log")" >&2; exit 1; }
bench_start_ordo "$tmp/ordo.toml" "http://127.0.0.1:$ORDO_PORT/big.bin"; ordo_pid=$started_pid

rss_kb() { local p t=0; for p in $1; do t=$((t + $(awk '/^VmRSS:/ { print $2 }' "/proc/$p/status"))); done; echo "$t"; }

# one server: RSS before, with the slow readers connected for HOLD s, and the growth (MB)
measure() { # label pids port
  local before after left h2
  before=$(rss_kb "$2")
  h2load -c "$CONNS" -m "$STREAMS" -n $((CONNS * STREAMS)) -w 0 -T 60 "http://127.0.0.1:$3/big.bin" \
    > "$tmp/h2load-$1.log" 2>&1 &
  h2=$!
  pids+=("$h2")
  sleep "$HOLD"
  after=$(rss_kb "$2")
  kill "$h2" 2>/dev/null || true
  wait "$h2" 2>/dev/null || true
  sleep 2
  left=$(rss_kb "$2")
  awk -v l="$1" -v b="$before" -v a="$after" -v r="$left" \
    'BEGIN { printf "%-6s RSS before %7.1f MB  with slow readers %7.1f MB  growth %7.1f MB  2 s after they left %7.1f MB\n", l, b / 1024, a / 1024, (a - b) / 1024, r / 1024 }'
  echo $((after - before)) > "$tmp/growth-$1"
}

echo "h2-slow-readers: $CONNS connections × $STREAMS zero-window streams of a $SIZE-byte file through each proxy"
measure nginx "$nginx_pids" "$NGINX_PORT"
measure ordo "$ordo_pid" "$ORDO_PORT"
sleep 1
# the server still answers afterwards
curl -fs -o /dev/null "http://127.0.0.1:$ORDO_PORT/big.bin" || { echo "h2-slow-readers: ordo stopped answering" >&2; exit 1; }
awk -v o="$(cat "$tmp/growth-ordo")" -v n="$(cat "$tmp/growth-nginx")" \
  'BEGIN { printf "growth ordo / nginx: %.2f (target ≤ 1.0)\n", (n > 0 ? o / n : 0) }'
