#!/usr/bin/env bash
# ordo serve's edge duties beside nginx's on the same load (issue 21, "How it is checked"), one server
# thread each pinned to SERVER_CPU, wrk pinned to CLIENT_CPU:
#   1. rate limiting: ordo `[rate_limit] rate = "RATE/s", burst = BURST` against nginx `limit_req` (same
#      rate and burst, nodelay, status 429), both offered far more than the limit by one client address for
#      RL_DURATION: the accepted (2xx) rate of each against the limit (goal: within 2%). The ideal is the
#      rate plus the burst spread over the run (RATE + BURST / RL_DURATION). With BURST = 1 both fall far
#      below the limit (about 0.2-0.4x here): a request is admitted only at least 1/RATE after the last
#      admitted one, and with arrivals in clumps (wrk's connections answered in batches) each admission
#      waits for the next clump — strict spacing, not a rate; a burst of a few percent of the rate absorbs it.
#   2. compression: ordo `[compression]` against nginx `gzip on` at the same level (LEVEL, default 5; gzip
#      only: Debian's nginx has no brotli module), on a 20 KB HTML file (ordo keeps the compressed copy of
#      a cached file; nginx compresses each response) and a 300 KB one (both compress every response):
#      bytes per response, req/s and server CPU per request, paired per round (ABBA).
# ordo's own brotli and zstd on the same files are printed beside them (no nginx peer).
#
#   bench/edge-vs-nginx.sh                            # needs nginx, wrk, curl
#   RATE=2000 BURST=100 RL_DURATION=20s ROUNDS=5 bench/edge-vs-nginx.sh
#   ORDO_BENCH_NO_BUILD=1 ...                          # use the release binary already built
set -euo pipefail

DURATION=${DURATION:-5s}
ROUNDS=${ROUNDS:-3}
RATE=${RATE:-1000}
BURST=${BURST:-50}
RL_DURATION=${RL_DURATION:-10s}
LEVEL=${LEVEL:-5}
CONNS=${CONNS:-32}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
BASE_PORT=${BASE_PORT:-18520}
NGINX_RL_PORT=$BASE_PORT
ORDO_RL_PORT=$((BASE_PORT + 1))
NGINX_GZ_PORT=$((BASE_PORT + 2))
ORDO_GZ_PORT=$((BASE_PORT + 3))

. "$(dirname "$0")/lib.sh"
bench_init edge-vs-nginx nginx wrk taskset curl
bench_build --bin ordo
bench_ports_free "$NGINX_RL_PORT" "$ORDO_RL_PORT" "$NGINX_GZ_PORT" "$ORDO_GZ_PORT"

# An HTML page of SIZE bytes with the redundancy of real markup (a table of rows that differ in numbers).
html_file() { # path size
  awk -v size="$2" 'BEGIN {
    s = "<!doctype html><html><head><title>edge</title></head><body><table>\n"; i = 0
    while (length(s) < size - 30) { s = s sprintf("<tr><td class=\"n\">%d</td><td>item %d</td><td>%.2f</td></tr>\n", i, i * 7 % 1000, i * 3.14159); i++ }
    printf "%s</table></body></html>\n", s }' > "$1"
}
mkdir -p "$tmp/www"
html_file "$tmp/www/20k.html" 20000
html_file "$tmp/www/300k.html" 300000

bench_nginx_conf "$tmp/nginx" "  types { text/html html; }
  limit_req_zone \$binary_remote_addr zone=one:10m rate=${RATE}r/s;
  limit_req_status 429;
  server {
    listen 127.0.0.1:$NGINX_RL_PORT;
    root $tmp/www;
    location / { limit_req zone=one burst=$BURST nodelay; }
  }
  server {
    listen 127.0.0.1:$NGINX_GZ_PORT;
    root $tmp/www;
    gzip on; gzip_comp_level $LEVEL; gzip_min_length 1024; gzip_types text/html;
  }"
bench_start_nginx "$tmp/nginx" "http://127.0.0.1:$NGINX_GZ_PORT/20k.html" "$SERVER_CPU"
nginx_pid=$started_pid

{
  bench_ordo_head "$ORDO_RL_PORT" fcfs
  echo '[[classes]]'; echo 'name = "default"'
  echo '[rate_limit]'; echo "rate = \"$RATE/s\""; echo "burst = $BURST"
  echo '[[routes]]'; echo 'prefix = "/"'; echo "static = { root = \"$tmp/www\" }"
} > "$tmp/rl.toml"
{
  bench_ordo_head "$ORDO_GZ_PORT" fcfs
  echo '[[classes]]'; echo 'name = "default"'
  echo '[compression]'; echo 'enabled = true'; echo "level = $LEVEL"
  echo '[[routes]]'; echo 'prefix = "/"'; echo "static = { root = \"$tmp/www\" }"
} > "$tmp/gz.toml"
bench_start_ordo "$tmp/rl.toml" "http://127.0.0.1:$ORDO_RL_PORT/20k.html" "$SERVER_CPU"
ordo_rl_pid=$started_pid
bench_start_ordo "$tmp/gz.toml" "http://127.0.0.1:$ORDO_GZ_PORT/20k.html" "$SERVER_CPU"
ordo_gz_pid=$started_pid
sleep $((BURST / RATE + 1)) # the readiness probes spent some of the buckets' burst; let them refill

# --- 1. rate limiting ---------------------------------------------------------------------------------
# One wrk run: prints "accepted/s offered/s" (2xx per second of wrk's measured time, all answers per second).
accepted_rate() { # url
  local out reqs non2xx secs
  out=$(taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"$RL_DURATION" "$1")
  reqs=$(echo "$out" | awk '/requests in/ { print $1 }')
  secs=$(echo "$out" | awk '/requests in/ { sub("s,", "", $4); print $4 }')
  non2xx=$(echo "$out" | awk '/Non-2xx or 3xx responses/ { print $NF }')
  awk -v r="${reqs:-0}" -v n="${non2xx:-0}" -v s="${secs:-1}" 'BEGIN { printf "%.1f %.0f\n", (r - n) / s, r / s }'
}
declare -A acc offered
for round in $(seq 1 "$ROUNDS"); do
  echo "rate limit, round $round/$ROUNDS..." >&2
  for who in nginx ordo; do
    if [ "$who" = nginx ]; then port=$NGINX_RL_PORT; else port=$ORDO_RL_PORT; fi
    read -r a o < <(accepted_rate "http://127.0.0.1:$port/20k.html")
    acc[$who]="${acc[$who]:-} $a"; offered[$who]="${offered[$who]:-} $o"
    sleep $((BURST / RATE + 1)) # the bucket full again before the next run
  done
done

# --- 2. compression -------------------------------------------------------------------------------------
bytes_of() { curl -s -H "Accept-Encoding: $2" "$1" | wc -c; }
run_case() {
  local enc=${1##*_} file
  case $1 in *20k*) file=20k.html ;; *) file=300k.html ;; esac
  case $1 in
    nginx_*) bench_wrk_case "$1" "$nginx_pid" "http://127.0.0.1:$NGINX_GZ_PORT/$file" "$CONNS" -H "Accept-Encoding: $enc" ;;
    ordo_*) bench_wrk_case "$1" "$ordo_gz_pid" "http://127.0.0.1:$ORDO_GZ_PORT/$file" "$CONNS" -H "Accept-Encoding: $enc" ;;
  esac
}
bench_rounds nginx_20k_gzip ordo_20k_gzip nginx_300k_gzip ordo_300k_gzip ordo_20k_br ordo_20k_zstd ordo_300k_br ordo_300k_zstd

echo
secs=${RL_DURATION%s}
ideal=$(awk -v r="$RATE" -v b="$BURST" -v s="$secs" 'BEGIN { printf "%.1f", r + b / s }')
echo "rate limiting: limit $RATE req/s, burst $BURST, one client address, wrk -c$CONNS for $RL_DURATION, $ROUNDS rounds (median); ideal $ideal accepted/s"
printf '%-7s %14s %14s %16s %16s   %s\n' server "accepted/s" "offered/s" "/ limit" "/ ideal" "all rounds (accepted/s)"
for who in nginx ordo; do
  a=$(med "${acc[$who]}")
  printf '%-7s %14s %14s %15sx %15sx   %s\n' "$who" "$a" "$(med "${offered[$who]}")" "$(awk -v a="$a" -v r="$RATE" 'BEGIN { printf "%.4f", a / r }')" \
    "$(awk -v a="$a" -v i="$ideal" 'BEGIN { printf "%.4f", a / i }')" "${acc[$who]# }"
done
echo "(goal: accepted within 2% of the limit: / limit between 0.98 and 1.02)"

echo
echo "compression at level $LEVEL ($ROUNDS rounds x $DURATION, wrk -c$CONNS, medians; server CPU per request)"
printf '%-16s %12s %12s %11s\n' case "bytes/resp" "req/s" "CPU us/req"
for k in nginx_20k_gzip ordo_20k_gzip ordo_20k_br ordo_20k_zstd nginx_300k_gzip ordo_300k_gzip ordo_300k_br ordo_300k_zstd; do
  enc=${k##*_}
  case $k in *20k*) file=20k.html ;; *) file=300k.html ;; esac
  case $k in nginx_*) port=$NGINX_GZ_PORT ;; *) port=$ORDO_GZ_PORT ;; esac
  printf '%-16s %12s %12s %11s\n' "$k" "$(bytes_of "http://127.0.0.1:$port/$file" "$enc")" "$(med "${rps[$k]}")" "$(med "${cpu[$k]}")"
done
echo "identity: 20k.html $(wc -c < "$tmp/www/20k.html") bytes, 300k.html $(wc -c < "$tmp/www/300k.html") bytes"
echo "ratio ordo / nginx, gzip, 20 KB (ordo keeps the compressed copy):"
bench_paired_cases ordo_20k_gzip nginx_20k_gzip
echo "ratio ordo / nginx, gzip, 300 KB (both compress every response):"
bench_paired_cases ordo_300k_gzip nginx_300k_gzip
