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

. "$(dirname "$0")/lib.sh"
bench_init serve-vs-nginx nginx wrk taskset curl
nginx_bin=$(command -v nginx)

build=(--bin ordo)
ordo_kind="ordo serve (threads = 1)"
if [ "${ORDO_BENCH_EXAMPLE:-0}" = 1 ]; then
  build=(-p ordo-serve --example static_bench)
  ordo_kind="static_bench example (HTTP layer + static backend, no scheduler)"
fi
bench_build "${build[@]}"
bench_ports_free "$NGINX_PORT" "$ORDO_PORT" $((ORDO_PORT + 1)) $((ORDO_PORT + 2)) $((ORDO_PORT + 3)) "$NGINX_DEFER_PORT"

# The 2 KB file, also under a/ b/ c/ for the three-class runs.
mkdir -p "$tmp/www" "$tmp/nginx/tmp" "$tmp/nginx/logs"
for d in "" a b c; do
  mkdir -p "$tmp/www/$d"
  awk 'BEGIN { for (i = 0; i < 2048; i++) printf "%c", 97 + i % 26 }' > "$tmp/www/$d/file.txt"
done

cat > "$tmp/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log;
events { worker_connections 8192; }
http {
  access_log off;
  sendfile on; tcp_nopush on; tcp_nodelay on;
  keepalive_requests 100000000;
  open_file_cache max=100 inactive=60s;
  default_type text/plain;
  client_body_temp_path $tmp/nginx/tmp; proxy_temp_path $tmp/nginx/tmp; fastcgi_temp_path $tmp/nginx/tmp;
  uwsgi_temp_path $tmp/nginx/tmp; scgi_temp_path $tmp/nginx/tmp;
  server { listen 127.0.0.1:$NGINX_PORT; listen 127.0.0.1:$NGINX_DEFER_PORT deferred; root $tmp/www; }
}
EOF

write_ordo_config() { # $1 = file, $2 = policy, $3 = classes (1 or 3), $4 = port, $5 = defer_accept (default false)
  {
    echo "listen = \"127.0.0.1:$4\""
    echo "threads = 1"
    echo "workers = 4096"
    echo "policy = \"$2\""
    echo "queue_cap = 100000"
    echo "[limits]"
    echo "max_connections = 100000"
    echo "defer_accept = ${5:-false}"
    echo "[admin]"
    echo "enabled = false"
    if [ "$3" = 3 ]; then
      for c in a:4 b:2 c:1; do
        echo "[[classes]]"; echo "name = \"${c%%:*}\""; echo "weight = ${c##*:}"
      done
      for c in a b c; do
        echo "[[rules]]"; echo "class = \"$c\""; echo "path_prefix = \"/$c\""
      done
    else
      echo "[[classes]]"; echo "name = \"default\""
    fi
    echo "[[routes]]"
    echo "prefix = \"/\""
    echo "static = { root = \"$tmp/www\" }"
  } > "$1"
}
FCFS3_PORT=$((ORDO_PORT + 1))
STRIDE3_PORT=$((ORDO_PORT + 2))
DEFER_PORT=$((ORDO_PORT + 3))
write_ordo_config "$tmp/plain.toml" fcfs 1 "$ORDO_PORT"
write_ordo_config "$tmp/fcfs3.toml" fcfs 3 "$FCFS3_PORT"
write_ordo_config "$tmp/stride3.toml" stride 3 "$STRIDE3_PORT"
write_ordo_config "$tmp/deferred.toml" fcfs 1 "$DEFER_PORT" true

cat > "$tmp/mix.lua" <<'EOF'
local paths = { "/a/file.txt", "/b/file.txt", "/c/file.txt" }
local i = 0
request = function()
  i = i % 3 + 1
  return wrk.format(nil, paths[i])
end
EOF

wait_ready() { # $1 = url
  for _ in $(seq 1 100); do
    if curl -fs -o /dev/null "$1"; then return 0; fi
    sleep 0.1
  done
  echo "serve-vs-nginx: $1 did not come up" >&2
  exit 1
}

# All servers run for the whole benchmark, each pinned to SERVER_CPU; only the one under load does work, so
# the cases can be interleaved closely in time (the machine's noise then hits them alike).
start_nginx() { # sets nginx_pid (the worker: the process that does the work)
  taskset -c "$SERVER_CPU" "$nginx_bin" -c "$tmp/nginx/nginx.conf" -p "$tmp/nginx" 2>>"$tmp/nginx/stderr" &
  local master=$!
  pids+=("$master")
  wait_ready "http://127.0.0.1:$NGINX_PORT/file.txt"
  nginx_pid=$(pgrep -P "$master" | head -1)
}

start_ordo() { # $1 = config, $2 = port; sets started_pid
  if [ "${ORDO_BENCH_EXAMPLE:-0}" = 1 ]; then
    taskset -c "$SERVER_CPU" "$target_dir/release/examples/static_bench" "$tmp/www" "127.0.0.1:$2" 2>>"$tmp/ordo.stderr" &
  else
    taskset -c "$SERVER_CPU" "$target_dir/release/ordo" serve --config "$1" 2>>"$tmp/ordo.stderr" &
  fi
  started_pid=$!
  pids+=("$started_pid")
  wait_ready "http://127.0.0.1:$2/file.txt"
  kill -0 "$started_pid" 2>/dev/null || { echo "serve-vs-nginx: server on port $2 exited: $(tail -n 2 "$tmp/ordo.stderr")" >&2; exit 1; }
}



# run_wrk PID PORT [wrk args...] -> prints "rps cpu_us_per_req server_core_busy% client_core_busy%"
run_wrk() { local pid=$1 port=$2; shift 2; bench_wrk "$pid" "http://127.0.0.1:$port/file.txt" "$CONNS" "$@"; }


declare -A rps cpu sbusy cbusy
record() { # case rps cpu server_busy client_busy
  rps[$1]="${rps[$1]:-} $2"
  cpu[$1]="${cpu[$1]:-} $3"
  sbusy[$1]="${sbusy[$1]:-} $4"
  cbusy[$1]="${cbusy[$1]:-} $5"
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; $ROUNDS rounds x $DURATION, $CONNS connections" >&2
start_nginx
start_ordo "$tmp/plain.toml" "$ORDO_PORT"; ordo_pid=$started_pid
cases=(nginx_ka ordo_ka ordo_close nginx_close)
if [ "${ORDO_BENCH_EXAMPLE:-0}" != 1 ]; then
  start_ordo "$tmp/fcfs3.toml" "$FCFS3_PORT"; fcfs3_pid=$started_pid
  start_ordo "$tmp/stride3.toml" "$STRIDE3_PORT"; stride3_pid=$started_pid
  start_ordo "$tmp/deferred.toml" "$DEFER_PORT"; deferred_pid=$started_pid
  cases+=(nginx_close_def ordo_close_def fcfs3 stride3)
fi
run_case() {
  local r c sb cb
  case $1 in
    nginx_ka) read -r r c sb cb < <(run_wrk "$nginx_pid" "$NGINX_PORT") ;;
    nginx_close) read -r r c sb cb < <(run_wrk "$nginx_pid" "$NGINX_PORT" -H 'Connection: close') ;;
    ordo_ka) read -r r c sb cb < <(run_wrk "$ordo_pid" "$ORDO_PORT") ;;
    ordo_close) read -r r c sb cb < <(run_wrk "$ordo_pid" "$ORDO_PORT" -H 'Connection: close') ;;
    nginx_close_def) read -r r c sb cb < <(run_wrk "$nginx_pid" "$NGINX_DEFER_PORT" -H 'Connection: close') ;;
    ordo_close_def) read -r r c sb cb < <(run_wrk "$deferred_pid" "$DEFER_PORT" -H 'Connection: close') ;;
    fcfs3) read -r r c sb cb < <(run_wrk "$fcfs3_pid" "$FCFS3_PORT" -s "$tmp/mix.lua") ;;
    stride3) read -r r c sb cb < <(run_wrk "$stride3_pid" "$STRIDE3_PORT" -s "$tmp/mix.lua") ;;
  esac
  record "$1" "$r" "$c" "$sb" "$cb"
}
for round in $(seq 1 "$ROUNDS"); do
  echo "round $round/$ROUNDS..." >&2
  # forward in odd rounds, backward in even ones (ABBA), so a drift in the machine's load favours no case
  if [ $((round % 2)) = 1 ]; then order=("${cases[@]}"); else order=(); for ((k = ${#cases[@]} - 1; k >= 0; k--)); do order+=("${cases[$k]}"); done; fi
  for k in "${order[@]}"; do run_case "$k"; done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

med() { echo "${1}" | tr ' ' '\n' | grep -v '^$' | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

echo
echo "ordo side: $ordo_kind; nginx $("$nginx_bin" -v 2>&1 | sed 's/.*nginx\///'), 1 worker; both on CPU $SERVER_CPU, wrk -t1 -c$CONNS -d$DURATION on CPU $CLIENT_CPU"
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
echo "ratio ordo/nginx Connection:close: $(ratio "$(med "${rps[ordo_close]}")" "$(med "${rps[nginx_close]}")") (req/s)   $(ratio "$(med "${cpu[nginx_close]}")" "$(med "${cpu[ordo_close]}")") (CPU efficiency)"
if [ -n "${rps[ordo_close_def]:-}" ]; then
  echo "ratio ordo/nginx close, deferred: $(ratio "$(med "${rps[ordo_close_def]}")" "$(med "${rps[nginx_close_def]}")") (req/s)   $(ratio "$(med "${cpu[nginx_close_def]}")" "$(med "${cpu[ordo_close_def]}")") (CPU efficiency)"
fi
if [ -n "${rps[stride3]:-}" ]; then
  echo "ratio stride/fcfs (3 classes):     $(ratio "$(med "${rps[stride3]}")" "$(med "${rps[fcfs3]}")") (req/s)   $(ratio "$(med "${cpu[fcfs3]}")" "$(med "${cpu[stride3]}")") (CPU efficiency)"
fi
