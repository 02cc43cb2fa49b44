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
bench_ports_free "$NGINX_PORT" "$ORDO_PORT"

mkdir -p "$tmp/www"
head -c "$SIZE" /dev/urandom > "$tmp/www/large.bin"
chmod 644 "$tmp/www/large.bin"
cat "$tmp/www/large.bin" > /dev/null # in the page cache before either server reads it

bench_nginx_conf "$tmp/nginx" "  server { listen 127.0.0.1:$NGINX_PORT; root $tmp/www; default_type application/octet-stream; }"

{
  bench_ordo_head "$ORDO_PORT" fcfs
  cat <<EOF
[[classes]]
name = "default"
[[routes]]
prefix = "/"
static = { root = "$tmp/www" }
EOF
} > "$tmp/ordo.toml"

bench_start_nginx "$tmp/nginx" "http://127.0.0.1:$NGINX_PORT/large.bin" "$SERVER_CPU"; nginx_pid=$started_pid
bench_start_ordo "$tmp/ordo.toml" "http://127.0.0.1:$ORDO_PORT/large.bin" "$SERVER_CPU"; ordo_pid=$started_pid

# both serve the same bytes
for port in "$NGINX_PORT" "$ORDO_PORT"; do
  curl -fs "http://127.0.0.1:$port/large.bin" | cmp -s - "$tmp/www/large.bin" \
    || { echo "static-large: port $port served different bytes" >&2; exit 1; }
done


run_case() {
  case $1 in
    nginx) bench_wrk_case nginx "$nginx_pid" "http://127.0.0.1:$NGINX_PORT/large.bin" "$CONNS" ;;
    ordo) bench_wrk_case ordo "$ordo_pid" "http://127.0.0.1:$ORDO_PORT/large.bin" "$CONNS" ;;
  esac
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; $ROUNDS rounds x $DURATION, $CONNS connections, $SIZE-byte file" >&2
bench_rounds nginx ordo
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
# the goal ordo <= 1.2x nginx's CPU per request, as a CPU efficiency (nginx us/req / ordo us/req): >= 1/1.2
bench_paired_line "  paired CPU efficiency (nginx us/req / ordo us/req, goal >= 0.83):" "${cpu[nginx]}" "${cpu[ordo]}" 0.83
bench_paired_line "  paired req/s (ordo / nginx):" "${rps[ordo]}" "${rps[nginx]}" -
echo "(paired: one ratio per round between the two cases run in it; median, geometric mean and its 95% CI by"
echo " Student's t on the log ratios; meets goal / above 1.0 = the whole CI is, below = it is wholly below)"
