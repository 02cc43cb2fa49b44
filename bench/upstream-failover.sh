#!/usr/bin/env bash
# One of three upstreams killed under steady load and started again, behind each proxy in turn (issue 20):
# ordo serve at its defaults (failover to the next upstream, passive ejection), HAProxy as its docs advise
# for this (`check`, `observe layer7`, `option redispatch`, `retry-on`), nginx likewise (`max_fails`,
# `proxy_next_upstream error timeout http_502 http_503`, upstream keepalive). The upstreams are three nginx
# instances serving a 2 KB file; upstream 1 is stopped (its master and workers: connections are refused)
# at a third of the run and started again at two thirds. wrk loads each proxy for the whole run; the script
# prints what the clients saw — requests, non-2xx answers, socket errors, p50/p99/max — beside each other.
#
#   bench/upstream-failover.sh                    # needs nginx, haproxy, wrk: ORDO_SETUP_PEERS=1 ./scripts/setup.sh
#   DURATION=30 CONNS=64 bench/upstream-failover.sh
#   ORDO_BENCH_NO_BUILD=1 ORDO_BIN=target/debug/ordo bench/upstream-failover.sh   # another build of ordo
#
# Everything it starts is killed and its temp dir removed on every exit path.
set -euo pipefail

DURATION=${DURATION:-12} # seconds per proxy
CONNS=${CONNS:-32}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
BASE_PORT=${BASE_PORT:-18380}
UP_PORTS=("$BASE_PORT" $((BASE_PORT + 1)) $((BASE_PORT + 2)))
ORDO_PORT=$((BASE_PORT + 3))
HAPROXY_PORT=$((BASE_PORT + 4))
NGINX_PORT=$((BASE_PORT + 5))
ADMIN_PORT=$((BASE_PORT + 6))

. "$(dirname "$0")/lib.sh"
bench_init upstream-failover nginx haproxy wrk taskset curl
nginx_bin=$(command -v nginx)
haproxy_bin=$(command -v haproxy)
bench_build --bin ordo
bench_ports_free "${UP_PORTS[@]}" "$ORDO_PORT" "$HAPROXY_PORT" "$NGINX_PORT" "$ADMIN_PORT"

mkdir -p "$tmp/www"
bench_file_2k "$tmp/www/file.txt"
for i in 0 1 2; do
  bench_nginx_conf "$tmp/up$i" "  server { listen 127.0.0.1:${UP_PORTS[$i]}; root $tmp/www; }"
done
# The upstreams are found by nginx's own pid files (a restart happens in a background subshell, whose
# variables the script does not see), and stopped that way on every exit path.
start_up() { # i: start upstream i on CLIENT_CPU
  taskset -c "$CLIENT_CPU" "$nginx_bin" -c "$tmp/up$1/nginx.conf" -p "$tmp/up$1" 2>>"$tmp/up$1/stderr" &
  bench_wait_ready "http://127.0.0.1:${UP_PORTS[$1]}/file.txt"
}
stop_up() { # i: stop upstream i and wait until its port refuses connections
  local pid
  pid=$(cat "$tmp/up$1/nginx.pid" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
}
trap 'for i in 0 1 2; do stop_up "$i"; done; bench_cleanup' EXIT
for i in 0 1 2; do start_up "$i"; done

# ordo serve at its defaults: the upstream group and nothing else
cat > "$tmp/ordo.toml" <<EOF
listen = "127.0.0.1:$ORDO_PORT"
[admin]
listen = "127.0.0.1:$ADMIN_PORT"
[[routes]]
prefix = "/"
[routes.proxy]
upstreams = ["127.0.0.1:${UP_PORTS[0]}", "127.0.0.1:${UP_PORTS[1]}", "127.0.0.1:${UP_PORTS[2]}"]
EOF
mkdir -p "$tmp/haproxy"
{
  bench_haproxy_head "$HAPROXY_PORT" "" "  retries 3
  option redispatch 1
  retry-on conn-failure empty-response response-timeout 502 503"
  cat <<EOF
backend be
  default-server check inter 500ms fall 2 rise 2 observe layer7 error-limit 3 on-error mark-down
  server u0 127.0.0.1:${UP_PORTS[0]}
  server u1 127.0.0.1:${UP_PORTS[1]}
  server u2 127.0.0.1:${UP_PORTS[2]}
EOF
} > "$tmp/haproxy/haproxy.cfg"
bench_nginx_conf "$tmp/nginx" "  upstream up {
    server 127.0.0.1:${UP_PORTS[0]} max_fails=2 fail_timeout=5s;
    server 127.0.0.1:${UP_PORTS[1]} max_fails=2 fail_timeout=5s;
    server 127.0.0.1:${UP_PORTS[2]} max_fails=2 fail_timeout=5s;
    keepalive $CONNS;
  }
  server {
    listen 127.0.0.1:$NGINX_PORT;
    location / {
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection \"\";
      proxy_next_upstream error timeout http_502 http_503;
    }
  }"

bench_start_ordo "$tmp/ordo.toml" "http://127.0.0.1:$ORDO_PORT/file.txt" "$SERVER_CPU"
taskset -c "$SERVER_CPU" "$haproxy_bin" -db -f "$tmp/haproxy/haproxy.cfg" >>"$tmp/haproxy/stderr" 2>&1 &
bench_check_started "$!" "http://127.0.0.1:$HAPROXY_PORT/file.txt" "$tmp/haproxy/stderr"
bench_start_nginx "$tmp/nginx" "http://127.0.0.1:$NGINX_PORT/file.txt" "$SERVER_CPU"

# run NAME PORT: wrk for DURATION s while upstream 1 is stopped at a third and started at two thirds
declare -A out
run() {
  local name=$1 port=$2 third=$((DURATION / 3))
  echo "$name: wrk -c$CONNS ${DURATION}s; upstream 1 stopped at ${third}s, started at $((2 * third))s" >&2
  (
    sleep "$third"
    stop_up 1
    sleep "$third"
    start_up 1
  ) &
  local chaos=$!
  out[$name]=$(taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency "http://127.0.0.1:$port/file.txt")
  wait "$chaos"
  sleep 1 # let every proxy see the upstream back before the next one's run
}
run ordo "$ORDO_PORT"
run haproxy "$HAPROXY_PORT"
run nginx "$NGINX_PORT"

echo
echo "one of three upstreams (nginx) stopped and restarted during ${DURATION}s of wrk -t1 -c$CONNS, each proxy on CPU $SERVER_CPU"
printf '%-8s %10s %10s %14s %9s %9s %9s\n' proxy requests non-2xx socket-errors p50 p99 max
for name in ordo haproxy nginx; do
  o=${out[$name]}
  reqs=$(echo "$o" | awk '/requests in/ { print $1 }')
  non2xx=$(echo "$o" | awk '/Non-2xx/ { print $NF }')
  sock=$(echo "$o" | awk -F'[ ,]+' '/Socket errors/ { s = 0; for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/) s += $i; print s }')
  p50=$(echo "$o" | awk '$1 == "50%" { print $2 }')
  p99=$(echo "$o" | awk '$1 == "99%" { print $2 }')
  max=$(echo "$o" | awk '$1 == "Latency" { print $4 }')
  printf '%-8s %10s %10s %14s %9s %9s %9s\n' "$name" "$reqs" "${non2xx:-0}" "${sock:-0}" "$p50" "$p99" "$max"
done
echo "(goal, issue 20: ordo's client-visible errors and p99 during the event <= the better peer's)"
curl -fs "http://127.0.0.1:$ADMIN_PORT/status" | tr -d ' \n' | grep -o '"upstreams":\[{"route".*' | head -c 600 || true
echo
