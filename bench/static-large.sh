#!/usr/bin/env bash
# ordo serve vs nginx on one large static file (default 1 MiB): CPU time per request of each server, and the
# ratio. nginx runs with `sendfile on` (its default setup for static files); ordo serve sends files above
# `sendfile_min_bytes` (64 KiB) with sendfile(2) on plain TCP. One worker each (`threads = 1`), both pinned
# to SERVER_CPU, wrk pinned to CLIENT_CPU, keep-alive. Each case runs ROUNDS times, interleaved (ABBA), and
# the median is reported; CPU time comes from /proc/PID/stat (robust when other processes steal the core,
# which req/s is not).
#
#   bench/static-large.sh                        # needs nginx and wrk: ORDO_SETUP_PEERS=1 ./scripts/setup.sh
#   SIZE=4194304 CONNS=8 DURATION=5s ROUNDS=5 bench/static-large.sh
#   ORDO_BENCH_NO_BUILD=1 ...                    # use the release binary already built
#   ORDO_BIN=/path/to/ordo ORDO_BENCH_NO_BUILD=1 ... # another build of ordo (an earlier commit, say)
#
# Everything it starts is killed and its temp dir removed on every exit path.
set -euo pipefail

SIZE=${SIZE:-1048576}
DURATION=${DURATION:-5s}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-16}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
NGINX_PORT=${NGINX_PORT:-18460}
ORDO_PORT=${ORDO_PORT:-18461}

. "$(dirname "$0")/lib.sh"
bench_init static-large nginx wrk taskset curl
nginx_bin=$(command -v nginx)
bench_build --bin ordo
ordo_bin=${ORDO_BIN:-$ordo}
bench_ports_free "$NGINX_PORT" "$ORDO_PORT"

mkdir -p "$tmp/www" "$tmp/nginx/tmp"
head -c "$SIZE" /dev/urandom > "$tmp/www/large.bin"
chmod 644 "$tmp/www/large.bin"
cat "$tmp/www/large.bin" > /dev/null # in the page cache before either server reads it

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
  default_type application/octet-stream;
  client_body_temp_path $tmp/nginx/tmp; proxy_temp_path $tmp/nginx/tmp; fastcgi_temp_path $tmp/nginx/tmp;
  uwsgi_temp_path $tmp/nginx/tmp; scgi_temp_path $tmp/nginx/tmp;
  server { listen 127.0.0.1:$NGINX_PORT; root $tmp/www; }
}
EOF

cat > "$tmp/ordo.toml" <<EOF
listen = "127.0.0.1:$ORDO_PORT"
threads = 1
workers = 4096
policy = "fcfs"
queue_cap = 100000
[limits]
max_connections = 100000
[admin]
enabled = false
[[classes]]
name = "default"
[[routes]]
prefix = "/"
static = { root = "$tmp/www" }
EOF

wait_ready() { # $1 = url
  for _ in $(seq 1 100); do
    if curl -fs -o /dev/null "$1"; then return 0; fi
    sleep 0.1
  done
  echo "static-large: $1 did not come up" >&2
  exit 1
}

taskset -c "$SERVER_CPU" "$nginx_bin" -c "$tmp/nginx/nginx.conf" -p "$tmp/nginx" 2>>"$tmp/nginx/stderr" &
master=$!
pids+=("$master")
wait_ready "http://127.0.0.1:$NGINX_PORT/large.bin"
nginx_pid=$(pgrep -P "$master" | head -1)

taskset -c "$SERVER_CPU" "$ordo_bin" serve --config "$tmp/ordo.toml" 2>>"$tmp/ordo.stderr" &
ordo_pid=$!
pids+=("$ordo_pid")
wait_ready "http://127.0.0.1:$ORDO_PORT/large.bin"

# both serve the same bytes
for port in "$NGINX_PORT" "$ORDO_PORT"; do
  curl -fs "http://127.0.0.1:$port/large.bin" | cmp -s - "$tmp/www/large.bin" \
    || { echo "static-large: port $port served different bytes" >&2; exit 1; }
done


run_wrk() { # PID PORT -> "rps cpu_us_per_req"
  bench_wrk "$1" "http://127.0.0.1:$2/large.bin" "$CONNS" | awk '{ print $1, $2 }'
}


echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; $ROUNDS rounds x $DURATION, $CONNS connections, $SIZE-byte file" >&2
declare -A rps cpu
for round in $(seq 1 "$ROUNDS"); do
  echo "round $round/$ROUNDS..." >&2
  if [ $((round % 2)) = 1 ]; then order=(nginx ordo); else order=(ordo nginx); fi
  for k in "${order[@]}"; do
    if [ "$k" = nginx ]; then read -r r c < <(run_wrk "$nginx_pid" "$NGINX_PORT")
    else read -r r c < <(run_wrk "$ordo_pid" "$ORDO_PORT"); fi
    rps[$k]="${rps[$k]:-} $r"
    cpu[$k]="${cpu[$k]:-} $c"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

echo
echo "$SIZE-byte file, keep-alive; nginx $("$nginx_bin" -v 2>&1 | sed 's/.*nginx\///') (sendfile on), ordo serve (threads = 1); both on CPU $SERVER_CPU, wrk -t1 -c$CONNS -d$DURATION on CPU $CLIENT_CPU"
printf '%-8s %12s %11s   %s\n' "server" "req/s (med)" "CPU us/req" "all rounds (CPU us/req)"
for k in nginx ordo; do
  printf '%-8s %12s %11s   %s\n' "$k" "$(echo "${rps[$k]}" | median)" "$(echo "${cpu[$k]}" | median)" "${cpu[$k]# }"
done
echo
awk -v o="$(echo "${cpu[ordo]}" | median)" -v n="$(echo "${cpu[nginx]}" | median)" -v ro="$(echo "${rps[ordo]}" | median)" -v rn="$(echo "${rps[nginx]}" | median)" \
  'BEGIN { printf "ratio ordo/nginx: %.2f (CPU us/req; goal <= 1.2)   %.2f (req/s)\n", (n > 0 ? o / n : 0), (rn > 0 ? ro / rn : 0) }'
