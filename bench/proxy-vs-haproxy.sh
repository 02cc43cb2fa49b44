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
# Each case runs ROUNDS times, interleaved (ABBA), and the median is reported.
#
#   bench/proxy-vs-haproxy.sh                     # needs haproxy, nginx and wrk: ORDO_SETUP_PEERS=1 ./scripts/setup.sh
#   DURATION=10s ROUNDS=5 CONNS=64 bench/proxy-vs-haproxy.sh
#   ORDO_BENCH_NO_BUILD=1 ...                      # use the release binary already built
#   ORDO_BIN=/path/to/ordo ORDO_BENCH_NO_BUILD=1 ... # another ordo binary (e.g. an older build, to compare)
#
# Ports: BASE_PORT (default 18180) .. BASE_PORT+4 (the script refuses to start if one is taken).
# Everything it starts is killed and its temp dir removed on every exit path.
set -euo pipefail

DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
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
ordo_bin=${ORDO_BIN:-$ordo}
bench_ports_free "$UP_PORT" "$HAPROXY_PORT" "$NGINX_PROXY_PORT" "$ORDO_PORT" "$STRIDE3_PORT"

# The 2 KB file at the upstream's root and under a/ b/ c/ (the three-class mix).
mkdir -p "$tmp/www"
for d in "" a b c; do
  mkdir -p "$tmp/www/$d"
  awk 'BEGIN { for (i = 0; i < 2048; i++) printf "%c", 97 + i % 26 }' > "$tmp/www/$d/file.txt"
done

nginx_conf() { # $1 = dir, $2 = server block
  mkdir -p "$1/tmp"
  cat > "$1/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $1/nginx.pid;
error_log $1/error.log;
events { worker_connections 8192; }
http {
  access_log off;
  sendfile on; tcp_nopush on; tcp_nodelay on;
  keepalive_requests 100000000;
  open_file_cache max=100 inactive=60s;
  default_type text/plain;
  client_body_temp_path $1/tmp; proxy_temp_path $1/tmp; fastcgi_temp_path $1/tmp;
  uwsgi_temp_path $1/tmp; scgi_temp_path $1/tmp;
$2
}
EOF
}
nginx_conf "$tmp/upstream" "  server { listen 127.0.0.1:$UP_PORT; root $tmp/www; }"
nginx_conf "$tmp/nginx_proxy" "  upstream up { server 127.0.0.1:$UP_PORT; keepalive $CONNS; keepalive_requests 100000000; }
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

mkdir -p "$tmp/haproxy"
cat > "$tmp/haproxy/haproxy.cfg" <<EOF
global
  nbthread 1
  maxconn 8192
  pidfile $tmp/haproxy/haproxy.pid
defaults
  mode http
  timeout connect 2s
  timeout client 30s
  timeout server 30s
  option http-keep-alive
  option forwardfor
  http-reuse always
frontend fe
  bind 127.0.0.1:$HAPROXY_PORT
  default_backend be
backend be
  server up 127.0.0.1:$UP_PORT
EOF

write_ordo_config() { # $1 = file, $2 = policy, $3 = classes (1 or 3), $4 = port
  {
    echo "listen = \"127.0.0.1:$4\""
    echo "threads = 1"
    echo "workers = 4096"
    echo "policy = \"$2\""
    echo "queue_cap = 100000"
    echo "[limits]"
    echo "max_connections = 100000"
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
    # as many idle upstream connections as client connections, like nginx's `keepalive $CONNS` (HAProxy's
    # pool is unbounded)
    echo "proxy = { upstreams = [\"127.0.0.1:$UP_PORT\"], pool_max_idle = $CONNS }"
  } > "$1"
}
write_ordo_config "$tmp/fcfs.toml" fcfs 1 "$ORDO_PORT"
write_ordo_config "$tmp/stride3.toml" stride 3 "$STRIDE3_PORT"

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
  echo "proxy-vs-haproxy: $1 did not come up" >&2
  exit 1
}
# The body that comes back through a proxy must be the upstream's 2 KB file.
check_body() { # $1 = url
  cmp -s <(curl -fs "$1") "$tmp/www/file.txt" || { echo "proxy-vs-haproxy: $1 did not return the file" >&2; exit 1; }
}

start_nginx() { # $1 = dir, $2 = cpu, $3 = port; sets started_pid (the worker: the process that does the work)
  taskset -c "$2" "$nginx_bin" -c "$1/nginx.conf" -p "$1" 2>>"$1/stderr" &
  local master=$!
  pids+=("$master")
  wait_ready "http://127.0.0.1:$3/file.txt"
  started_pid=$(pgrep -P "$master" | head -1)
}
start_nginx "$tmp/upstream" "$UPSTREAM_CPU" "$UP_PORT"
start_nginx "$tmp/nginx_proxy" "$SERVER_CPU" "$NGINX_PROXY_PORT"; nginx_pid=$started_pid
taskset -c "$SERVER_CPU" "$haproxy_bin" -db -f "$tmp/haproxy/haproxy.cfg" >>"$tmp/haproxy/stderr" 2>&1 &
haproxy_pid=$!
pids+=("$haproxy_pid")
wait_ready "http://127.0.0.1:$HAPROXY_PORT/file.txt"
start_ordo() { # $1 = config, $2 = port; sets started_pid
  taskset -c "$SERVER_CPU" "$ordo_bin" serve --config "$1" 2>>"$tmp/ordo.stderr" &
  started_pid=$!
  pids+=("$started_pid")
  wait_ready "http://127.0.0.1:$2/file.txt"
  kill -0 "$started_pid" 2>/dev/null || { echo "proxy-vs-haproxy: ordo on port $2 exited: $(tail -n 2 "$tmp/ordo.stderr")" >&2; exit 1; }
}
start_ordo "$tmp/fcfs.toml" "$ORDO_PORT"; ordo_pid=$started_pid
start_ordo "$tmp/stride3.toml" "$STRIDE3_PORT"; stride3_pid=$started_pid
for port in "$HAPROXY_PORT" "$NGINX_PROXY_PORT" "$ORDO_PORT" "$STRIDE3_PORT"; do
  check_body "http://127.0.0.1:$port/file.txt"
done
check_body "http://127.0.0.1:$STRIDE3_PORT/c/file.txt"


# run_wrk PID PORT [wrk args...] -> "rps cpu_us_per_req server_core_busy% client_core_busy%"
run_wrk() { local pid=$1 port=$2; shift 2; bench_wrk "$pid" "http://127.0.0.1:$port/file.txt" "$CONNS" "$@"; }

declare -A rps cpu sbusy cbusy
record() {
  rps[$1]="${rps[$1]:-} $2"; cpu[$1]="${cpu[$1]:-} $3"; sbusy[$1]="${sbusy[$1]:-} $4"; cbusy[$1]="${cbusy[$1]:-} $5"
}
run_case() {
  local r c sb cb
  case $1 in
    haproxy) read -r r c sb cb < <(run_wrk "$haproxy_pid" "$HAPROXY_PORT") ;;
    haproxy_mix) read -r r c sb cb < <(run_wrk "$haproxy_pid" "$HAPROXY_PORT" -s "$tmp/mix.lua") ;;
    nginx_proxy) read -r r c sb cb < <(run_wrk "$nginx_pid" "$NGINX_PROXY_PORT") ;;
    ordo_fcfs) read -r r c sb cb < <(run_wrk "$ordo_pid" "$ORDO_PORT") ;;
    ordo_stride3) read -r r c sb cb < <(run_wrk "$stride3_pid" "$STRIDE3_PORT" -s "$tmp/mix.lua") ;;
  esac
  record "$1" "$r" "$c" "$sb" "$cb"
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; $ROUNDS rounds x $DURATION, $CONNS connections" >&2
cases=(haproxy ordo_fcfs nginx_proxy haproxy_mix ordo_stride3)
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
echo "proxies on CPU $SERVER_CPU (one thread each): HAProxy $("$haproxy_bin" -v 2>&1 | awk 'NR == 1 { print $3 }'), nginx $("$nginx_bin" -v 2>&1 | sed 's/.*nginx\///') proxy_pass, ordo serve;"
echo "upstream nginx (1 worker) on CPU $UPSTREAM_CPU; wrk -t1 -c$CONNS -d$DURATION on CPU $CLIENT_CPU; 2 KB file"
printf '%-13s %12s %11s %12s %12s   %s\n' "case" "req/s (med)" "CPU us/req" "server core" "client core" "all rounds (req/s)"
for k in haproxy nginx_proxy ordo_fcfs haproxy_mix ordo_stride3; do
  printf '%-13s %12s %11s %11s%% %11s%%   %s\n' "$k" "$(med "${rps[$k]}")" "$(med "${cpu[$k]}")" \
    "$(med "${sbusy[$k]}")" "$(med "${cbusy[$k]}")" "${rps[$k]# }"
done
echo "(CPU us/req: the proxy process's CPU time per request; server/client core: median busy % of"
echo " SERVER_CPU/CLIENT_CPU — a client core near 100% means wrk and the upstream, not the proxy, set req/s)"
echo
line() { # case peer
  printf 'ratio %-12s / %-11s: %s (req/s, goal >= 1.0)   %s (CPU efficiency, %s us/req / %s us/req, goal >= 1.0)\n' \
    "$1" "$2" "$(ratio "$(med "${rps[$1]}")" "$(med "${rps[$2]}")")" "$(ratio "$(med "${cpu[$2]}")" "$(med "${cpu[$1]}")")" "$2" "$1"
}
line ordo_fcfs haproxy
line ordo_stride3 haproxy_mix
line nginx_proxy haproxy
