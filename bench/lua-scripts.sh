#!/usr/bin/env bash
# The cost of a Lua script per request, ordo bench -s beside wrk -s: against nginx serving a 2 KB file (one
# worker pinned to SERVER_CPU), each generator pinned to CLIENT_CPU, one thread, CONNS connections, DURATION
# per run, runs:
#   plain      no script
#   counter    wrk's counter.lua: request() builds a new request (wrk.format) for every request
#   setup      wrk's setup.lua: request() and response(status, headers, body) for every request
# for both tools, in ABBA rounds (bench_rounds). The generator's CPU (user + system, /proc/PID/stat) per
# request gives the Lua cost: CPU/request with the script minus CPU/request without, each tool against
# itself in the same round. Prints every run, the medians, and the ratios ordo/wrk of the Lua cost and of
# req/s.
#
#   bench/lua-scripts.sh                         # defaults below
#   DURATION=3s ROUNDS=2 bench/lua-scripts.sh
set -euo pipefail

DURATION=${DURATION:-5s}
CONNS=${CONNS:-50}
ROUNDS=${ROUNDS:-3}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
PORT=${PORT:-18097}

. "$(dirname "$0")/lib.sh"
bench_init lua-scripts nginx wrk taskset curl
bench_build --bin ordo
bench_ports_free "$PORT"

mkdir -p "$tmp/www"
chmod 755 "$tmp/www"
head -c 2048 /dev/zero | tr '\0' 'x' > "$tmp/www/2k.html"
# every path answers the 2 KB file (counter.lua asks for /0, /1, …)
bench_nginx_conf "$tmp" "  server { listen 127.0.0.1:$PORT backlog=4096; root $tmp/www; location / { try_files \$uri /2k.html; } }"
URL="http://127.0.0.1:$PORT/2k.html"
bench_start_nginx "$tmp" "$URL" "$SERVER_CPU"
scripts="$here/examples/bench/wrk"

# One generator run in the background, pinned; its CPU ticks read from /proc before it exits would miss
# the end, so the run's own CPU comes from /usr/bin/time. Prints "req/s CPU-us-per-request".
gen_time() { /usr/bin/time -f "%U %S" -o "$tmp/time" taskset -c "$CLIENT_CPU" "$@"; }
time_cpu() { awk '{ print $1 + $2 }' "$tmp/time"; }
run_wrk() {
  local out reqs rps
  out=$(gen_time wrk -t1 -c"$CONNS" -d"$DURATION" "$@" "$URL")
  reqs=$(echo "$out" | awk '/requests in/ { print $1 }')
  rps=$(echo "$out" | awk '/Requests\/sec/ { print $2 }')
  if echo "$out" | grep -qE 'Non-2xx|Socket errors'; then
    echo "warning: wrk $*: $(echo "$out" | grep -E 'Non-2xx|Socket errors' | tr -s ' ')" >&2
  fi
  awk -v r="$rps" -v n="$reqs" -v c="$(time_cpu)" 'BEGIN { printf "%.0f %.3f\n", r, (n > 0 ? c * 1e6 / n : 0) }'
}
run_ordo() {
  local row
  row=$(gen_time "$ordo" bench --no-progress --csv -t 1 -c "$CONNS" -d "$DURATION" "$@" "$URL" |
    awk -F, '$1 == "all" && $2 == "uncorrected"')
  awk -v r="$(echo "$row" | cut -d, -f10)" -v n="$(echo "$row" | cut -d, -f3)" -v c="$(time_cpu)" \
    'BEGIN { printf "%.0f %.3f\n", r, (n > 0 ? c * 1e6 / n : 0) }'
}

declare -A rate cost
run_case() {
  local tool=${1%%-*} script=${1#*-} args=() r c
  [ "$script" != plain ] && args=(-s "$scripts/$script.lua")
  if [ "$tool" = wrk ]; then read -r r c < <(run_wrk "${args[@]+"${args[@]}"}")
  else read -r r c < <(run_ordo "${args[@]+"${args[@]}"}"); fi
  rate[$1]="${rate[$1]:-} $r"; cost[$1]="${cost[$1]:-} $c"
  printf '  %-14s %9s req/s %8s us CPU/request\n' "$1" "$r" "$c" >&2
}

echo "nginx $(nginx -v 2>&1 | sed 's/.*\///') on CPU $SERVER_CPU serving 2 KB; generators on CPU $CLIENT_CPU, 1 thread, $CONNS connections, $DURATION per run, $ROUNDS rounds"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
cases=(wrk-plain ordo-plain wrk-counter ordo-counter wrk-setup ordo-setup)
bench_rounds "${cases[@]}"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
# The Lua cost of SCRIPT for TOOL in each round: CPU/request with it minus without (same round).
lua_cost() {
  awk -v a="${cost[$1-$2]}" -v b="${cost[$1-plain]}" 'BEGIN {
    n = split(a, x, " "); split(b, y, " "); for (i = 1; i <= n; i++) printf "%.3f ", x[i] - y[i] }'
}
printf '%-10s %12s %12s %14s %14s %9s %9s\n' "script" "wrk req/s" "ordo req/s" "wrk us/req" "ordo us/req" "req/s" "Lua cost"
printf '%-10s %12s %12s %14s %14s %9s %9s\n' "" "" "" "(Lua cost)" "(Lua cost)" "ordo/wrk" "ordo/wrk"
for s in plain counter setup; do
  wr=$(med "${rate[wrk-$s]}"); orr=$(med "${rate[ordo-$s]}")
  wc=$(med "${cost[wrk-$s]}"); oc=$(med "${cost[ordo-$s]}")
  if [ "$s" = plain ]; then
    printf '%-10s %12.0f %12.0f %14.3f %14.3f %9s %9s\n' "$s" "$wr" "$orr" "$wc" "$oc" "$(ratio "$orr" "$wr")" "-"
  else
    wl=$(med "$(lua_cost wrk "$s")"); ol=$(med "$(lua_cost ordo "$s")")
    printf '%-10s %12.0f %12.0f %7.3f (%5.3f) %7.3f (%5.3f) %9s %9s\n' "$s" "$wr" "$orr" "$wc" "$wl" "$oc" "$ol" \
      "$(ratio "$orr" "$wr")" "$(ratio "$ol" "$wl")"
  fi
done
echo "(us/req: the generator's CPU per request; Lua cost: us/req with the script minus without, same round;"
echo " req/s ratio > 1: ordo faster; Lua-cost ratio < 1: ordo's Lua cheaper per request)"
