#!/usr/bin/env bash
# ordo bench vs wrk (keep-alive) and vs ab (a new connection per request), against nginx serving a 2 KB file.
# nginx runs with 1 worker pinned to CPU $SERVER_CPU; every load generator is pinned to CPU $GEN_CPU and
# runs single-threaded with the same connections and the same duration (wrk) or request count (ab).
# Each pairing runs $REPEATS times, alternating tools; the script prints every run, the medians and the
# ratios ordo/peer. Peers: `ORDO_SETUP_PEERS=1 ./scripts/setup.sh`.
#
#   bench/bench-vs-wrk.sh                       # defaults below
#   DURATION=5 REPEATS=5 bench/bench-vs-wrk.sh
set -euo pipefail

DURATION=${DURATION:-10}        # seconds per keep-alive run
CONNS=${CONNS:-100}
REQUESTS=${REQUESTS:-20000}     # requests per no-keep-alive run
REPEATS=${REPEATS:-3}
SERVER_CPU=${SERVER_CPU:-0}
GEN_CPU=${GEN_CPU:-1}
PORT=${PORT:-18089}
ORDO=${ORDO:-target/release/ordo}

cd "$(dirname "$0")/.."
for tool in nginx wrk ab taskset; do
  command -v "$tool" >/dev/null || { echo "bench-vs-wrk: $tool not found (ORDO_SETUP_PEERS=1 ./scripts/setup.sh)" >&2; exit 1; }
done
if [ ! -x "$ORDO" ]; then
  echo "bench-vs-wrk: building $ORDO" >&2
  cargo build --release --bin ordo >&2
fi

tmp=$(mktemp -d)
cleanup() {
  if [ -s "$tmp/nginx.pid" ]; then kill "$(cat "$tmp/nginx.pid")" 2>/dev/null || true; fi
  sleep 0.2
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

mkdir -p "$tmp/www" "$tmp/logs"
chmod 755 "$tmp" "$tmp/www"   # nginx workers run as an unprivileged user
head -c 2048 /dev/zero | tr '\0' 'x' > "$tmp/www/2k.html"
cat > "$tmp/nginx.conf" <<EOF
worker_processes 1;
daemon on;
pid $tmp/nginx.pid;
error_log $tmp/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  keepalive_timeout 60s;
  server {
    listen 127.0.0.1:$PORT backlog=4096;
    root $tmp/www;
  }
}
EOF
taskset -c "$SERVER_CPU" nginx -p "$tmp" -e "$tmp/logs/error.log" -c "$tmp/nginx.conf"
URL="http://127.0.0.1:$PORT/2k.html"
for _ in $(seq 50); do
  curl -fsS -o /dev/null "$URL" 2>/dev/null && break
  sleep 0.1
done
curl -fsS -o /dev/null "$URL" || { echo "bench-vs-wrk: nginx did not come up" >&2; exit 1; }
size=$(curl -fsS "$URL" | wc -c)

# Each runner prints "req/s requests cpu_seconds" (the generator's user + system CPU from /usr/bin/time).
gen() { /usr/bin/time -f "%U %S" -o "$tmp/time" taskset -c "$GEN_CPU" "$@"; }
cpu() { awk '{print $1 + $2}' "$tmp/time"; }
ordo_run() {
  local row
  row=$(gen "$ORDO" bench --no-progress --csv "$@" "$URL" | awk -F, '$1=="all" && $2=="uncorrected"')
  echo "$(echo "$row" | cut -d, -f10) $(echo "$row" | cut -d, -f3) $(cpu)"
}
wrk_run() {
  local out
  out=$(gen wrk -t1 -c"$CONNS" -d"${DURATION}s" "$URL")
  echo "$(echo "$out" | awk '/^Requests\/sec:/ {print $2}') $(echo "$out" | awk '/requests in/ {print $1}') $(cpu)"
}
ab_run() {
  local out
  out=$(gen ab -q -c "$CONNS" -n "$REQUESTS" "$URL" 2>/dev/null)
  echo "$(echo "$out" | awk '/^Requests per second:/ {print $4}') $(echo "$out" | awk '/^Complete requests:/ {print $3}') $(cpu)"
}
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
show() { echo "$1" | awk '{printf "%10.0f req/s %6.2f us CPU/req", $1, ($3 * 1e6) / ($2 > 0 ? $2 : 1)}'; }
cpu_per_req() { echo "$1" | awk '{printf "%.3f\n", ($3 * 1e6) / ($2 > 0 ? $2 : 1)}'; }

echo "nginx $(nginx -v 2>&1 | sed 's/.*\///') on CPU $SERVER_CPU serving $size bytes; generators on CPU $GEN_CPU"
psi() { if [ -r /proc/pressure/cpu ]; then head -1 /proc/pressure/cpu | cut -d' ' -f2-3; else echo "n/a"; fi; }
echo "machine noise before: load average $(cut -d' ' -f1-3 /proc/loadavg), CPU pressure $(psi)"
echo
echo "keep-alive: $CONNS connections, 1 thread, ${DURATION}s"
ok=(); wk=(); okc=(); wkc=()
for i in $(seq "$REPEATS"); do
  w=$(wrk_run); o=$(ordo_run -t 1 -c "$CONNS" -d "${DURATION}s")
  echo "  run $i: ordo bench $(show "$o")   |   wrk $(show "$w")"
  ok+=("${o%% *}"); wk+=("${w%% *}"); okc+=("$(cpu_per_req "$o")"); wkc+=("$(cpu_per_req "$w")")
done
ok_m=$(printf '%s\n' "${ok[@]}" | median); wk_m=$(printf '%s\n' "${wk[@]}" | median)
okc_m=$(printf '%s\n' "${okc[@]}" | median); wkc_m=$(printf '%s\n' "${wkc[@]}" | median)
echo
echo "no keep-alive: $CONNS connections, $REQUESTS requests"
on=(); abv=(); onc=(); abc=()
for i in $(seq "$REPEATS"); do
  a=$(ab_run); o=$(ordo_run -t 1 -c "$CONNS" -n "$REQUESTS" --no-keepalive)
  echo "  run $i: ordo bench $(show "$o")   |   ab  $(show "$a")"
  on+=("${o%% *}"); abv+=("${a%% *}"); onc+=("$(cpu_per_req "$o")"); abc+=("$(cpu_per_req "$a")")
done
on_m=$(printf '%s\n' "${on[@]}" | median); ab_m=$(printf '%s\n' "${abv[@]}" | median)
onc_m=$(printf '%s\n' "${onc[@]}" | median); abc_m=$(printf '%s\n' "${abc[@]}" | median)
echo
echo "machine noise after: load average $(cut -d' ' -f1-3 /proc/loadavg), CPU pressure $(psi)"
echo
printf '%-40s %12s %12s %8s\n' "medians" "ordo bench" "peer" "ratio"
printf '%-40s %12.0f %12.0f %7.2fx\n' "keep-alive req/s (vs wrk -t1 -c$CONNS)" "$ok_m" "$wk_m" "$(echo "$ok_m $wk_m" | awk '{print $1/$2}')"
printf '%-40s %12.2f %12.2f %7.2fx\n' "keep-alive generator CPU us/request" "$okc_m" "$wkc_m" "$(echo "$okc_m $wkc_m" | awk '{print $1/$2}')"
printf '%-40s %12.0f %12.0f %7.2fx\n' "no keep-alive req/s (vs ab -c$CONNS)" "$on_m" "$ab_m" "$(echo "$on_m $ab_m" | awk '{print $1/$2}')"
printf '%-40s %12.2f %12.2f %7.2fx\n' "no keep-alive generator CPU us/request" "$onc_m" "$abc_m" "$(echo "$onc_m $abc_m" | awk '{print $1/$2}')"
echo "(req/s ratio > 1: ordo bench faster; CPU ratio < 1: ordo bench cheaper per request)"
