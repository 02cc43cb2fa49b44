#!/usr/bin/env bash
# Balancing spread and the cost of active health checks, beside HAProxy and nginx (issue 20). Three nginx
# upstreams serve a 2 KB file and log each request; nothing fails.
#   1. Spread: wrk loads each proxy and balancing mode in turn for DURATION, with the upstreams weighted
#      WEIGHTS; the share of requests each upstream logged is printed beside the share its weight asks for,
#      with the largest relative deviation. ordo: round_robin (its default), least_requests, p2c_ewma;
#      HAProxy: roundrobin, leastconn; nginx: round robin, least_conn — each as its docs configure weights.
#   2. Health-check overhead: ordo and HAProxy each with and without active checks every CHECK_INTERVAL
#      (aggressive on purpose, 10× HAProxy's 2 s default, to bound the cost from above), ROUNDS paired
#      rounds (ABBA): the proxy's CPU time per request and req/s with checks ÷ without, with its 95% CI;
#      and the checks per second the upstreams logged.
#
#   bench/upstream-balance.sh                     # needs nginx, haproxy, wrk: ORDO_SETUP_PEERS=1 ./scripts/setup.sh
#   WEIGHTS="1 1 1" DURATION=5s bench/upstream-balance.sh
#   ROUNDS=5 CHECK_INTERVAL=50ms bench/upstream-balance.sh
#   ORDO_BENCH_NO_BUILD=1 ORDO_BIN=target/debug/ordo bench/upstream-balance.sh   # another build of ordo
#
# The proxies run on SERVER_CPU, wrk and the upstreams on CLIENT_CPU. Everything it starts is killed and its
# temp dir removed on every exit path.
set -euo pipefail

DURATION=${DURATION:-4s}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-32}
WEIGHTS=${WEIGHTS:-"1 2 3"}
CHECK_INTERVAL=${CHECK_INTERVAL:-200ms}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
BASE_PORT=${BASE_PORT:-18420}
UP_PORTS=("$BASE_PORT" $((BASE_PORT + 1)) $((BASE_PORT + 2)))
PROXY_PORT=$((BASE_PORT + 3))         # the spread runs, one proxy at a time
ORDO_PLAIN=$((BASE_PORT + 4)) ORDO_CHECKED=$((BASE_PORT + 5))
HAPROXY_PLAIN=$((BASE_PORT + 6)) HAPROXY_CHECKED=$((BASE_PORT + 7))

. "$(dirname "$0")/lib.sh"
bench_init upstream-balance nginx haproxy wrk taskset curl
nginx_bin=$(command -v nginx)
haproxy_bin=$(command -v haproxy)
bench_build --bin ordo
bench_ports_free "${UP_PORTS[@]}" "$PROXY_PORT" "$ORDO_PLAIN" "$ORDO_CHECKED" "$HAPROXY_PLAIN" "$HAPROXY_CHECKED"
read -r -a weight <<< "$WEIGHTS"
[ "${#weight[@]}" = 3 ] || { echo "upstream-balance: WEIGHTS needs three weights, got '$WEIGHTS'" >&2; exit 2; }

mkdir -p "$tmp/www"
bench_file_2k "$tmp/www/file.txt"
echo ok > "$tmp/www/health.txt"
for i in 0 1 2; do
  bench_nginx_conf "$tmp/up$i" "  server { listen 127.0.0.1:${UP_PORTS[$i]}; root $tmp/www; access_log $tmp/up$i/access.log; }"
  taskset -c "$CLIENT_CPU" "$nginx_bin" -c "$tmp/up$i/nginx.conf" -p "$tmp/up$i" 2>>"$tmp/up$i/stderr" &
  pids+=("$!")
  bench_wait_ready "http://127.0.0.1:${UP_PORTS[$i]}/file.txt"
done

# how many requests for PATH upstream I has logged so far
logged() { grep -c "\"GET $2 " "$tmp/up$1/access.log" 2>/dev/null || true; }

# --- configurations ----------------------------------------------------------------------------------------
# ordo on PORT with balance MODE (and EXTRA proxy keys), at its defaults otherwise
ordo_conf() { # FILE PORT MODE [EXTRA]
  local ups="" i
  for i in 0 1 2; do ups+="{ address = \"127.0.0.1:${UP_PORTS[$i]}\", weight = ${weight[$i]} }, "; done
  cat > "$1" <<EOF
listen = "127.0.0.1:$2"
[admin]
enabled = false
[[routes]]
prefix = "/"
proxy = { upstreams = [${ups%, }], balance = "$3"${4:+, $4} }
EOF
}
haproxy_conf() { # DIR PORT ALGORITHM [SERVER_OPTIONS]
  mkdir -p "$1"
  {
    bench_haproxy_head "$2"
    echo "backend be"
    echo "  balance $3"
    echo "  option httpchk GET /health.txt"
    for i in 0 1 2; do echo "  server u$i 127.0.0.1:${UP_PORTS[$i]} weight ${weight[$i]} ${4:-}"; done
  } > "$1/haproxy.cfg"
}
nginx_conf() { # DIR PORT [BALANCE_DIRECTIVE]
  local servers="" i
  for i in 0 1 2; do servers+="    server 127.0.0.1:${UP_PORTS[$i]} weight=${weight[$i]};
"; done
  bench_nginx_conf "$1" "  upstream up {
    ${3:-}
$servers    keepalive $CONNS;
  }
  server {
    listen 127.0.0.1:$2;
    location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection \"\"; }
  }"
}
stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# --- 1. spread ---------------------------------------------------------------------------------------------
url="http://127.0.0.1:$PROXY_PORT/file.txt"
total_w=$((weight[0] + weight[1] + weight[2]))
spread_rows=()
spread() { # PROXY MODE: start it (config written), load it, stop it, add its row
  local before=() after=() i n=0 line dev=0 share want
  for i in 0 1 2; do before[i]=$(logged "$i" /file.txt); done
  taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"$DURATION" "$url" > "$tmp/wrk.out"
  sleep 0.2 # the upstreams' last log lines
  for i in 0 1 2; do after[i]=$(logged "$i" /file.txt); n=$((n + after[i] - before[i])); done
  line=$(printf '%-8s %-16s %9s' "$1" "$2" "$n")
  for i in 0 1 2; do
    share=$(awk -v a="$((after[i] - before[i]))" -v n="$n" 'BEGIN { printf "%.1f", (n > 0 ? 100 * a / n : 0) }')
    want=$(awk -v w="${weight[$i]}" -v t="$total_w" 'BEGIN { print 100 * w / t }')
    dev=$(awk -v s="$share" -v w="$want" -v d="$dev" 'BEGIN { x = (s - w) / w; if (x < 0) x = -x; print (x > d ? x : d) }')
    line+=$(printf ' %8s' "$share%")
  done
  spread_rows+=("$line $(awk -v d="$dev" 'BEGIN { printf "%12.1f%%", 100 * d }')")
}
for mode in round_robin least_requests p2c_ewma; do
  echo "spread: ordo $mode..." >&2
  ordo_conf "$tmp/ordo-spread.toml" "$PROXY_PORT" "$mode"
  bench_start_ordo "$tmp/ordo-spread.toml" "$url" "$SERVER_CPU"
  spread ordo "$mode"
  stop "$started_pid"
done
for mode in roundrobin leastconn; do
  echo "spread: haproxy $mode..." >&2
  haproxy_conf "$tmp/haproxy-spread" "$PROXY_PORT" "$mode"
  taskset -c "$SERVER_CPU" "$haproxy_bin" -db -f "$tmp/haproxy-spread/haproxy.cfg" >>"$tmp/haproxy-spread/stderr" 2>&1 &
  bench_check_started "$!" "$url" "$tmp/haproxy-spread/stderr"
  spread haproxy "$mode"
  stop "$started_pid"
done
for mode in round_robin least_conn; do
  echo "spread: nginx $mode..." >&2
  directive=""; [ "$mode" = least_conn ] && directive="least_conn;"
  rm -rf "$tmp/nginx-spread"
  nginx_conf "$tmp/nginx-spread" "$PROXY_PORT" "$directive"
  bench_start_nginx "$tmp/nginx-spread" "$url" "$SERVER_CPU"
  spread nginx "$mode"
  master=$(cat "$tmp/nginx-spread/nginx.pid")
  stop "$master"
done

# --- 2. health-check overhead --------------------------------------------------------------------------------
echo "health checks: starting ordo and HAProxy with and without checks every $CHECK_INTERVAL..." >&2
ordo_conf "$tmp/ordo-plain.toml" "$ORDO_PLAIN" round_robin
ordo_conf "$tmp/ordo-checked.toml" "$ORDO_CHECKED" round_robin \
  "health_check = { path = \"/health.txt\", interval = \"$CHECK_INTERVAL\", timeout = \"1s\" }"
bench_start_ordo "$tmp/ordo-plain.toml" "http://127.0.0.1:$ORDO_PLAIN/file.txt" "$SERVER_CPU"
pid_ordo_plain=$started_pid
bench_start_ordo "$tmp/ordo-checked.toml" "http://127.0.0.1:$ORDO_CHECKED/file.txt" "$SERVER_CPU"
pid_ordo_checked=$started_pid
haproxy_conf "$tmp/haproxy-plain" "$HAPROXY_PLAIN" roundrobin
haproxy_conf "$tmp/haproxy-checked" "$HAPROXY_CHECKED" roundrobin "check inter $CHECK_INTERVAL"
for d in plain checked; do
  port=$HAPROXY_PLAIN; [ "$d" = checked ] && port=$HAPROXY_CHECKED
  taskset -c "$SERVER_CPU" "$haproxy_bin" -db -f "$tmp/haproxy-$d/haproxy.cfg" >>"$tmp/haproxy-$d/stderr" 2>&1 &
  bench_check_started "$!" "http://127.0.0.1:$port/file.txt" "$tmp/haproxy-$d/stderr"
  eval "pid_haproxy_$d=\$started_pid"
done
checks0=0; for i in 0 1 2; do checks0=$((checks0 + $(logged "$i" /health.txt))); done
t0=$(date +%s.%N)
run_case() {
  case $1 in
    ordo_plain) bench_wrk_case "$1" "$pid_ordo_plain" "http://127.0.0.1:$ORDO_PLAIN/file.txt" "$CONNS" ;;
    ordo_checked) bench_wrk_case "$1" "$pid_ordo_checked" "http://127.0.0.1:$ORDO_CHECKED/file.txt" "$CONNS" ;;
    haproxy_plain) bench_wrk_case "$1" "$pid_haproxy_plain" "http://127.0.0.1:$HAPROXY_PLAIN/file.txt" "$CONNS" ;;
    haproxy_checked) bench_wrk_case "$1" "$pid_haproxy_checked" "http://127.0.0.1:$HAPROXY_CHECKED/file.txt" "$CONNS" ;;
  esac
}
bench_rounds ordo_plain ordo_checked haproxy_plain haproxy_checked
t1=$(date +%s.%N)
checks1=0; for i in 0 1 2; do checks1=$((checks1 + $(logged "$i" /health.txt))); done

echo
echo "1. balancing spread: weights $WEIGHTS, wrk -t1 -c$CONNS -d$DURATION per proxy and mode, proxies on CPU $SERVER_CPU"
printf '%-8s %-16s %9s %9s %8s %8s %13s\n' proxy balance requests up0 up1 up2 "max deviation"
printf '%-8s %-16s %9s' "" "(weight share)" ""
for i in 0 1 2; do printf ' %8s' "$(awk -v w="${weight[$i]}" -v t="$total_w" 'BEGIN { printf "%.1f%%", 100 * w / t }')"; done
echo
for r in "${spread_rows[@]}"; do echo "$r"; done
echo "(max deviation: the largest |share - weight share| / weight share over the three upstreams; least-requests"
echo " and leastconn modes follow load, not weights alone, so they may deviate by design)"
echo
echo "2. active health checks every $CHECK_INTERVAL on 3 upstreams, $ROUNDS paired rounds (ABBA) of wrk -c$CONNS $DURATION"
awk -v c="$((checks1 - checks0))" -v a="$t0" -v b="$t1" 'BEGIN { printf "   checks the upstreams logged: %d in %.0f s (%.1f/s for both checking proxies)\n", c, b - a, c / (b - a) }'
for p in ordo haproxy; do
  printf '%-8s without: %s req/s, %s us/req; with: %s req/s, %s us/req\n' "$p" \
    "$(med "${rps[${p}_plain]}")" "$(med "${cpu[${p}_plain]}")" "$(med "${rps[${p}_checked]}")" "$(med "${cpu[${p}_checked]}")"
  bench_paired_line "  req/s with ÷ without:           " "${rps[${p}_checked]}" "${rps[${p}_plain]}" -
  bench_paired_line "  CPU per request without ÷ with:" "${cpu[${p}_plain]}" "${cpu[${p}_checked]}" -
done
echo "(a ratio not distinguishable from 1.0 means the checks' cost is below what these rounds can see)"
