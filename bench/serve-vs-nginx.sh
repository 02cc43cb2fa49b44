#!/usr/bin/env bash
# ordo serve vs nginx on the same 2 KB static file, one worker thread each pinned to the same core
# (SERVER_CPU, default 0), loaded by wrk pinned to another core (CLIENT_CPU, default 1):
#   1. keep-alive, 2. without keep-alive (wrk -H 'Connection: close'),
#   3. without keep-alive, both accepting only connections whose request has arrived (nginx
#      `listen ... deferred`, ordo `[limits] defer_accept = true`: TCP_DEFER_ACCEPT on both sides),
#   4. ordo serve with `stride` over three classes vs `fcfs` (same three classes, routes and request mix).
# Each case runs ROUNDS times, interleaved, and the median is reported with the server's CPU time per request
# (from /proc/PID/stat: robust when other processes steal the core, which req/s is not).
#
#   bench/serve-vs-nginx.sh                       # needs nginx and wrk: ORDO_SETUP_PEERS=1 ./scripts/setup.sh
#   DURATION=10s ROUNDS=5 CONNS=100 bench/serve-vs-nginx.sh
#   ORDO_BENCH_EXAMPLE=1 bench/serve-vs-nginx.sh  # HTTP layer + static backend only (crates/serve/examples/static_bench.rs)
#   ORDO_BENCH_NO_BUILD=1 ...                      # use the release binary already built
#   THREADS=2 bench/serve-vs-nginx.sh              # ordo `threads = 2` vs nginx `worker_processes 2` (still on
#                                                  # SERVER_CPU: the CPU cost of N threads, not their scaling)
#
# Everything it starts is killed and its temp dir removed on every exit path.
set -euo pipefail

DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-100}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
NGINX_PORT=${NGINX_PORT:-18080}
ORDO_PORT=${ORDO_PORT:-18081} # and the next three ports
NGINX_DEFER_PORT=${NGINX_DEFER_PORT:-18085}
THREADS=${THREADS:-1}
export ORDO_THREADS=$THREADS NGINX_WORKERS=$THREADS

. "$(dirname "$0")/lib.sh"
bench_init serve-vs-nginx nginx wrk taskset curl
nginx_bin=$(command -v nginx)

build=(--bin ordo)
ordo_kind="ordo serve (threads = $THREADS)"
if [ "${ORDO_BENCH_EXAMPLE:-0}" = 1 ]; then
  build=(-p ordo-serve --example static_bench)
  ordo_kind="static_bench example (HTTP layer + static backend, no scheduler)"
fi
bench_build "${build[@]}"
bench_ports_free "$NGINX_PORT" "$ORDO_PORT" $((ORDO_PORT + 1)) $((ORDO_PORT + 2)) $((ORDO_PORT + 3)) "$NGINX_DEFER_PORT"

# The 2 KB file, also under a/ b/ c/ for the three-class runs.
for d in "" a b c; do
  mkdir -p "$tmp/www/$d"
  bench_file_2k "$tmp/www/$d/file.txt"
done

bench_nginx_conf "$tmp/nginx" "  server { listen 127.0.0.1:$NGINX_PORT; listen 127.0.0.1:$NGINX_DEFER_PORT deferred; root $tmp/www; }"

write_ordo_config() { # $1 = file, $2 = policy, $3 = classes (1 or 3), $4 = port, $5 = defer_accept (default false)
  bench_ordo_route_conf "$1" "$2" "$3" "$4" "static = { root = \"$tmp/www\" }" "defer_accept = ${5:-false}"
}
FCFS3_PORT=$((ORDO_PORT + 1))
STRIDE3_PORT=$((ORDO_PORT + 2))
DEFER_PORT=$((ORDO_PORT + 3))
write_ordo_config "$tmp/plain.toml" fcfs 1 "$ORDO_PORT"
write_ordo_config "$tmp/fcfs3.toml" fcfs 3 "$FCFS3_PORT"
write_ordo_config "$tmp/stride3.toml" stride 3 "$STRIDE3_PORT"
write_ordo_config "$tmp/deferred.toml" fcfs 1 "$DEFER_PORT" true

bench_mix_lua "$tmp/mix.lua"

# All servers run for the whole benchmark, each pinned to SERVER_CPU; only the one under load does work, so
# the cases can be interleaved closely in time (the machine's noise then hits them alike).
start_ordo() { # $1 = config, $2 = port; sets started_pid
  if [ "${ORDO_BENCH_EXAMPLE:-0}" = 1 ]; then
    taskset -c "$SERVER_CPU" "$target_dir/release/examples/static_bench" "$tmp/www" "127.0.0.1:$2" 2>>"$tmp/ordo.stderr" &
    bench_check_started "$!" "http://127.0.0.1:$2/file.txt"
  else
    bench_start_ordo "$1" "http://127.0.0.1:$2/file.txt" "$SERVER_CPU"
  fi
}

# run_wrk CASE PID PORT [wrk args...]
run_wrk() { local case=$1 pid=$2 port=$3; shift 3; bench_wrk_case "$case" "$pid" "http://127.0.0.1:$port/file.txt" "$CONNS" "$@"; }

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; $ROUNDS rounds x $DURATION, $CONNS connections" >&2
bench_start_nginx "$tmp/nginx" "http://127.0.0.1:$NGINX_PORT/file.txt" "$SERVER_CPU"; nginx_pid=$started_pids
start_ordo "$tmp/plain.toml" "$ORDO_PORT"; ordo_pid=$started_pid
cases=(nginx_ka ordo_ka ordo_close nginx_close)
if [ "${ORDO_BENCH_EXAMPLE:-0}" != 1 ]; then
  start_ordo "$tmp/fcfs3.toml" "$FCFS3_PORT"; fcfs3_pid=$started_pid
  start_ordo "$tmp/stride3.toml" "$STRIDE3_PORT"; stride3_pid=$started_pid
  start_ordo "$tmp/deferred.toml" "$DEFER_PORT"; deferred_pid=$started_pid
  cases+=(nginx_close_def ordo_close_def fcfs3 stride3)
fi
run_case() {
  case $1 in
    nginx_ka) run_wrk "$1" "$nginx_pid" "$NGINX_PORT" ;;
    nginx_close) run_wrk "$1" "$nginx_pid" "$NGINX_PORT" -H 'Connection: close' ;;
    ordo_ka) run_wrk "$1" "$ordo_pid" "$ORDO_PORT" ;;
    ordo_close) run_wrk "$1" "$ordo_pid" "$ORDO_PORT" -H 'Connection: close' ;;
    nginx_close_def) run_wrk "$1" "$nginx_pid" "$NGINX_DEFER_PORT" -H 'Connection: close' ;;
    ordo_close_def) run_wrk "$1" "$deferred_pid" "$DEFER_PORT" -H 'Connection: close' ;;
    fcfs3) run_wrk "$1" "$fcfs3_pid" "$FCFS3_PORT" -s "$tmp/mix.lua" ;;
    stride3) run_wrk "$1" "$stride3_pid" "$STRIDE3_PORT" -s "$tmp/mix.lua" ;;
  esac
}
bench_rounds "${cases[@]}"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

echo
echo "ordo side: $ordo_kind; nginx $("$nginx_bin" -v 2>&1 | sed 's/.*nginx\///'), $THREADS worker(s); both on CPU $SERVER_CPU, wrk -t1 -c$CONNS -d$DURATION on CPU $CLIENT_CPU"
printf '%-15s %12s %11s %12s %12s   %s\n' "case" "req/s (med)" "CPU us/req" "server core" "client core" "all rounds (req/s)"
for k in nginx_ka ordo_ka nginx_close ordo_close nginx_close_def ordo_close_def fcfs3 stride3; do
  [ -n "${rps[$k]:-}" ] || continue
  printf '%-15s %12s %11s %11s%% %11s%%   %s\n' "$k" "$(med "${rps[$k]}")" "$(med "${cpu[$k]}")" \
    "$(med "${sbusy[$k]}")" "$(med "${cbusy[$k]}")" "${rps[$k]# }"
done
echo "(server/client core: median busy % of SERVER_CPU/CLIENT_CPU during the run; a client core near 100% with"
echo " the server core well below it means the case measured wrk more than the server)"
echo
echo "ratio ordo/nginx keep-alive:      $(ratio "$(med "${rps[ordo_ka]}")" "$(med "${rps[nginx_ka]}")") (req/s)   $(ratio "$(med "${cpu[nginx_ka]}")" "$(med "${cpu[ordo_ka]}")") (CPU efficiency, nginx us/req / ordo us/req)"
bench_paired_cases ordo_ka nginx_ka - -
echo "ratio ordo/nginx Connection:close: $(ratio "$(med "${rps[ordo_close]}")" "$(med "${rps[nginx_close]}")") (req/s)   $(ratio "$(med "${cpu[nginx_close]}")" "$(med "${cpu[ordo_close]}")") (CPU efficiency)"
bench_paired_cases ordo_close nginx_close - -
if [ -n "${rps[ordo_close_def]:-}" ]; then
  echo "ratio ordo/nginx close, deferred: $(ratio "$(med "${rps[ordo_close_def]}")" "$(med "${rps[nginx_close_def]}")") (req/s)   $(ratio "$(med "${cpu[nginx_close_def]}")" "$(med "${cpu[ordo_close_def]}")") (CPU efficiency)"
  bench_paired_cases ordo_close_def nginx_close_def - -
fi
if [ -n "${rps[stride3]:-}" ]; then
  echo "ratio stride/fcfs (3 classes):     $(ratio "$(med "${rps[stride3]}")" "$(med "${rps[fcfs3]}")") (req/s)   $(ratio "$(med "${cpu[fcfs3]}")" "$(med "${cpu[stride3]}")") (CPU efficiency)"
  bench_paired_cases stride3 fcfs3 - -
fi
echo "(paired: one ratio per round between the two cases run in it; median, geometric mean and its 95% CI by"
echo " Student's t on the log ratios; above/below 1.0 = the whole CI is)"
