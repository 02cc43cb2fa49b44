#!/usr/bin/env bash
# ordo serve as a reverse proxy vs HAProxy and nginx proxy_pass, all in front of the same nginx upstream
# serving a 2 KB file. Each proxy runs one thread pinned to SERVER_CPU (default 0) and keeps its upstream
# connections alive; wrk (keep-alive, -c CONNS) is pinned to CLIENT_CPU (default 1). The upstream nginx
# (one worker) is pinned to UPSTREAM_CPU, by default the client core: on a 2-core machine the proxy's core
# then carries the proxy alone, which is what is measured (the client core is shared by wrk and the
# upstream, so req/s can be capped by that core: compare CPU µs per request, read from the proxy's
# /proc/PID/stat, which other processes cannot inflate).
# Cases:
#   haproxy      HAProxy, nbthread 1, `http-reuse always`, `option forwardfor`
#   haproxy_mix  the same HAProxy loaded with the three-path request mix of ordo_stride3 (wrk running the
#                Lua script is slower, which changes how many requests the proxy finds per wakeup: the
#                stride case is compared with this one)
#   nginx_proxy  nginx proxy_pass, 1 worker, upstream keepalive, X-Forwarded-For set
#   ordo_fcfs    ordo serve, threads = 1, one proxy route, fcfs, one class
#   ordo_stride3 ordo serve, threads = 1, one proxy route, stride over 3 classes (weights 4:2:1) chosen by
#                path prefix, wrk cycling through /a/, /b/, /c/ (a Lua script)
# Each case runs ROUNDS times, interleaved (ABBA), and the table reports each case's median. The two cases
# of a comparison run in the same round (ordo_fcfs right after or before haproxy, ordo_stride3 next to
# haproxy_mix), so each comparison is also judged on its paired ratios, one per round: their median, the
# geometric mean with a 95% confidence interval (Student's t on the log ratios) and a verdict — "meets goal"
# when the whole interval is >= 1.0, "below goal" when it is wholly below, "not distinguishable from 1.0 (N
# rounds)" otherwise (more rounds narrow the interval; see bench_paired in bench/lib.sh).
#
#   bench/proxy-vs-haproxy.sh                     # needs haproxy, nginx and wrk: ORDO_SETUP_PEERS=1 ./scripts/setup.sh
#   DURATION=5s ROUNDS=10 CONNS=64 bench/proxy-vs-haproxy.sh   # the defaults: about 5 minutes
#   ORDO_BENCH_NO_BUILD=1 ...                      # use the release binary already built
#   ORDO_BIN=/path/to/ordo ORDO_BENCH_NO_BUILD=1 ... # another ordo binary (e.g. an older build, to compare)
#   COALESCE=0s ...                                # ordo's `coalesce` (default: ordo's own, 2us; 0s: off)
#   BODY_BYTES=200000 ...                          # a file of this many bytes instead of the 2 KB one (ordo
#                                                  # reads bodies up to its buffer_max_bytes whole: 256 KiB
#                                                  # for HTTP/1.x clients such as wrk)
#   ORDO_BUFFER_MAX_BYTES=65536 BODY_BYTES=200000 ...    # ordo streaming such bodies (its HTTP/2 clients' default)
#
# Ports: BASE_PORT (default 18180) .. BASE_PORT+4 (the script refuses to start if one is taken).
# Everything it starts is killed and its temp dir removed on every exit path.
set -euo pipefail

DURATION=${DURATION:-5s}
# ordo's wakeup coalescing (`coalesce`): a serving thread that works most of the time spins this long before
# it waits on its sockets (docs/serve.md, "Wakeup coalescing"); empty: ordo's default
COALESCE=${COALESCE:-}
export ORDO_COALESCE=$COALESCE
ROUNDS=${ROUNDS:-10}
CONNS=${CONNS:-64}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
UPSTREAM_CPU=${UPSTREAM_CPU:-$CLIENT_CPU}
BASE_PORT=${BASE_PORT:-18180}
UP_PORT=$BASE_PORT
HAPROXY_PORT=$((BASE_PORT + 1))
NGINX_PROXY_PORT=$((BASE_PORT + 2))
ORDO_PORT=$((BASE_PORT + 3))
STRIDE3_PORT=$((BASE_PORT + 4))

. "$(dirname "$0")/lib.sh"
bench_init proxy-vs-haproxy haproxy nginx wrk taskset curl
nginx_bin=$(command -v nginx)
haproxy_bin=$(command -v haproxy)
bench_build --bin ordo
bench_ports_free "$UP_PORT" "$HAPROXY_PORT" "$NGINX_PROXY_PORT" "$ORDO_PORT" "$STRIDE3_PORT"

# The file (2 KB, or BODY_BYTES) at the upstream's root and under a/ b/ c/ (the three-class mix).
mkdir -p "$tmp/www"
for d in "" a b c; do
  mkdir -p "$tmp/www/$d"
  if [ -n "${BODY_BYTES:-}" ]; then
    # (the same bytes in each: the bodies are compared with the root's)
    [ -f "$tmp/body.bin" ] || head -c "$BODY_BYTES" /dev/urandom > "$tmp/body.bin"
    cp "$tmp/body.bin" "$tmp/www/$d/file.txt"
  else
    bench_file_2k "$tmp/www/$d/file.txt"
  fi
done

bench_nginx_conf "$tmp/upstream" "  server { listen 127.0.0.1:$UP_PORT; root $tmp/www; }"
bench_nginx_conf "$tmp/nginx_proxy" "  upstream up { server 127.0.0.1:$UP_PORT; keepalive $CONNS; keepalive_requests 100000000; }
  server {
    listen 127.0.0.1:$NGINX_PROXY_PORT;
    location / {
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection \"\";
      proxy_set_header Host \$host;
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
    }
  }"

bench_haproxy_conf "$tmp/haproxy" "$HAPROXY_PORT" "$UP_PORT"
bench_ordo_proxy_conf "$tmp/fcfs.toml" fcfs 1 "$ORDO_PORT" "$UP_PORT"
bench_ordo_proxy_conf "$tmp/stride3.toml" stride 3 "$STRIDE3_PORT" "$UP_PORT"

bench_mix_lua "$tmp/mix.lua"

# The body that comes back through a proxy must be the upstream's file.
check_body() { # $1 = url
  cmp -s <(curl -fs "$1") "$tmp/www/file.txt" || { echo "proxy-vs-haproxy: $1 did not return the file" >&2; exit 1; }
}

bench_start_nginx "$tmp/upstream" "http://127.0.0.1:$UP_PORT/file.txt" "$UPSTREAM_CPU"
bench_start_nginx "$tmp/nginx_proxy" "http://127.0.0.1:$NGINX_PROXY_PORT/file.txt" "$SERVER_CPU"; nginx_pid=$started_pid
taskset -c "$SERVER_CPU" "$haproxy_bin" -db -f "$tmp/haproxy/haproxy.cfg" >>"$tmp/haproxy/stderr" 2>&1 &
bench_check_started "$!" "http://127.0.0.1:$HAPROXY_PORT/file.txt" "$tmp/haproxy/stderr"; haproxy_pid=$started_pid
bench_start_ordo "$tmp/fcfs.toml" "http://127.0.0.1:$ORDO_PORT/file.txt" "$SERVER_CPU"; ordo_pid=$started_pid
bench_start_ordo "$tmp/stride3.toml" "http://127.0.0.1:$STRIDE3_PORT/file.txt" "$SERVER_CPU"; stride3_pid=$started_pid
for port in "$HAPROXY_PORT" "$NGINX_PROXY_PORT" "$ORDO_PORT" "$STRIDE3_PORT"; do
  check_body "http://127.0.0.1:$port/file.txt"
done
check_body "http://127.0.0.1:$STRIDE3_PORT/c/file.txt"


# run_wrk CASE PID PORT [wrk args...]
run_wrk() { local case=$1 pid=$2 port=$3; shift 3; bench_wrk_case "$case" "$pid" "http://127.0.0.1:$port/file.txt" "$CONNS" "$@"; }
run_case() {
  case $1 in
    haproxy) run_wrk "$1" "$haproxy_pid" "$HAPROXY_PORT" ;;
    haproxy_mix) run_wrk "$1" "$haproxy_pid" "$HAPROXY_PORT" -s "$tmp/mix.lua" ;;
    nginx_proxy) run_wrk "$1" "$nginx_pid" "$NGINX_PROXY_PORT" ;;
    ordo_fcfs) run_wrk "$1" "$ordo_pid" "$ORDO_PORT" ;;
    ordo_stride3) run_wrk "$1" "$stride3_pid" "$STRIDE3_PORT" -s "$tmp/mix.lua" ;;
  esac
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; $ROUNDS rounds x $DURATION, $CONNS connections" >&2
bench_rounds haproxy ordo_fcfs nginx_proxy haproxy_mix ordo_stride3
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

echo
echo "proxies on CPU $SERVER_CPU (one thread each): HAProxy $("$haproxy_bin" -v 2>&1 | awk 'NR == 1 { print $3 }'), nginx $("$nginx_bin" -v 2>&1 | sed 's/.*nginx\///') proxy_pass, ordo serve (coalesce = ${COALESCE:-its default});"
echo "upstream nginx (1 worker) on CPU $UPSTREAM_CPU; wrk -t1 -c$CONNS -d$DURATION on CPU $CLIENT_CPU; $(if [ -n "${BODY_BYTES:-}" ]; then echo "$BODY_BYTES-byte"; else echo "2 KB"; fi) file"
printf '%-13s %12s %11s %12s %12s   %s\n' "case" "req/s (med)" "CPU us/req" "server core" "client core" "all rounds (req/s)"
for k in haproxy nginx_proxy ordo_fcfs haproxy_mix ordo_stride3; do
  printf '%-13s %12s %11s %11s%% %11s%%   %s\n' "$k" "$(med "${rps[$k]}")" "$(med "${cpu[$k]}")" \
    "$(med "${sbusy[$k]}")" "$(med "${cbusy[$k]}")" "${rps[$k]# }"
done
echo "(CPU us/req: the proxy process's CPU time per request; server/client core: median busy % of"
echo " SERVER_CPU/CLIENT_CPU — a client core near 100% means wrk and the upstream, not the proxy, set req/s)"
echo
line() { # case peer: the ratio of the medians, then the paired ratios of each round
  printf 'ratio %-12s / %-11s: %s (req/s, goal >= 1.0)   %s (CPU efficiency, %s us/req / %s us/req, goal >= 1.0)\n' \
    "$1" "$2" "$(ratio "$(med "${rps[$1]}")" "$(med "${rps[$2]}")")" "$(ratio "$(med "${cpu[$2]}")" "$(med "${cpu[$1]}")")" "$2" "$1"
  bench_paired_cases "$1" "$2"
}
line ordo_fcfs haproxy
line ordo_stride3 haproxy_mix
line nginx_proxy haproxy
echo "(paired: one ratio per round between the two cases run in it; median, geometric mean and its 95% CI by"
echo " Student's t on the log ratios; verdict: meets goal = whole CI >= 1.0, below goal = whole CI < 1.0)"
