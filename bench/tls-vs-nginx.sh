#!/usr/bin/env bash
# ordo serve vs nginx over TLS 1.3, same ECDSA P-256 certificate, same 2 KB static file, one worker thread
# each pinned to the same core (SERVER_CPU, default 0), loaded by wrk (OpenSSL) pinned to another core
# (CLIENT_CPU, default 1):
#   1. keep-alive: requests/s over established TLS connections (record encryption + HTTP);
#   2. new connections: wrk -H 'Connection: close', so every request is a new TCP connection and a new TLS
#      handshake (ECDHE + ECDSA signature on the server) — handshakes/s.
# Before the rounds, `ordo bench https://` is run against both servers (the 100%-2xx check of issue 11).
# Each case runs ROUNDS times, interleaved (ABBA), and the median is reported with the server's CPU time per
# request (from /proc/PID/stat: robust when other processes steal the core, which req/s is not).
#
#   bench/tls-vs-nginx.sh                        # needs nginx, wrk, openssl: ORDO_SETUP_PEERS=1 ./scripts/setup.sh
#   DURATION=10s ROUNDS=5 CONNS=100 bench/tls-vs-nginx.sh
#   ORDO_BENCH_NO_BUILD=1 ...                     # use the release binary already built
#
# Everything it starts is killed and its temp dir removed on every exit path.
set -euo pipefail

DURATION=${DURATION:-10s}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-100}
CLOSE_CONNS=${CLOSE_CONNS:-32}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
NGINX_PORT=${NGINX_PORT:-18443}
ORDO_PORT=${ORDO_PORT:-18444}

. "$(dirname "$0")/lib.sh"
bench_init tls-vs-nginx nginx wrk taskset curl openssl
nginx_bin=$(command -v nginx)
bench_build --bin ordo
bench_ports_free "$NGINX_PORT" "$ORDO_PORT"

mkdir -p "$tmp/www"
bench_file_2k "$tmp/www/file.txt"
bench_tls_cert

bench_nginx_conf "$tmp/nginx" "  server {
    listen 127.0.0.1:$NGINX_PORT ssl;
    ssl_certificate $tmp/cert.pem; ssl_certificate_key $tmp/key.pem;
    ssl_protocols TLSv1.3;
    root $tmp/www;
  }"

{
  bench_ordo_head "$ORDO_PORT" fcfs
  cat <<EOF
[tls]
min_version = "1.3"
certificates = [{ cert = "$tmp/cert.pem", key = "$tmp/key.pem" }]
[[routes]]
prefix = "/"
static = { root = "$tmp/www" }
EOF
} > "$tmp/ordo.toml"

bench_start_nginx "$tmp/nginx" "https://127.0.0.1:$NGINX_PORT/file.txt" "$SERVER_CPU"; nginx_pid=$started_pid
bench_start_ordo "$tmp/ordo.toml" "https://127.0.0.1:$ORDO_PORT/file.txt" "$SERVER_CPU"; ordo_pid=$started_pid

# `ordo bench https://` against both: every response must be 2xx (keep-alive and a handshake per request)
for port in "$NGINX_PORT" "$ORDO_PORT"; do
  for ka in "" "--no-keepalive"; do
    out=$(taskset -c "$CLIENT_CPU" "$ordo" bench -q --no-progress --json -c 8 -n 2000 $ka \
      --cacert "$tmp/ca.pem" "https://localhost:$port/file.txt")
    ok=$(bench_2xx "$out")
    name=$([ "$port" = "$NGINX_PORT" ] && echo nginx || echo ordo)
    echo "ordo bench https:// → $name ${ka:-keep-alive}: $ok/2000 2xx" >&2
    [ "$ok" = 2000 ] || { echo "tls-vs-nginx: not every response was 2xx" >&2; exit 1; }
  done
done

# run_wrk CASE PID PORT CONNS [wrk args...]
run_wrk() { local case=$1 pid=$2 port=$3; shift 3; bench_wrk_case "$case" "$pid" "https://127.0.0.1:$port/file.txt" "$@"; }
run_case() {
  case $1 in
    nginx_ka) run_wrk "$1" "$nginx_pid" "$NGINX_PORT" "$CONNS" ;;
    ordo_ka) run_wrk "$1" "$ordo_pid" "$ORDO_PORT" "$CONNS" ;;
    nginx_hs) run_wrk "$1" "$nginx_pid" "$NGINX_PORT" "$CLOSE_CONNS" -H 'Connection: close' ;;
    ordo_hs) run_wrk "$1" "$ordo_pid" "$ORDO_PORT" "$CLOSE_CONNS" -H 'Connection: close' ;;
  esac
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; $ROUNDS rounds x $DURATION" >&2
uptime >&2
bench_rounds nginx_ka ordo_ka ordo_hs nginx_hs
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

echo
echo "TLS 1.3, ECDSA P-256; ordo serve (threads = 1, rustls/ring) vs nginx $("$nginx_bin" -v 2>&1 | sed 's/.*nginx\///') (1 worker, OpenSSL); both on CPU $SERVER_CPU"
echo "wrk -t1 -d$DURATION on CPU $CLIENT_CPU: keep-alive -c$CONNS, new connections -c$CLOSE_CONNS -H 'Connection: close'"
printf '%-10s %12s %11s %12s %12s   %s\n' "case" "req/s (med)" "CPU us/req" "server core" "client core" "all rounds (req/s)"
for k in nginx_ka ordo_ka nginx_hs ordo_hs; do
  printf '%-10s %12s %11s %11s%% %11s%%   %s\n' "$k" "$(med "${rps[$k]}")" "$(med "${cpu[$k]}")" \
    "$(med "${sbusy[$k]}")" "$(med "${cbusy[$k]}")" "${rps[$k]# }"
done
echo "(*_ka: keep-alive requests; *_hs: one TLS handshake per request. A client core near 100% with the server"
echo " core well below it means the case measured wrk more than the server.)"
echo
echo "ratio ordo/nginx TLS keep-alive 2 KB:  $(ratio "$(med "${rps[ordo_ka]}")" "$(med "${rps[nginx_ka]}")") (req/s, target >= 1.0)   $(ratio "$(med "${cpu[nginx_ka]}")" "$(med "${cpu[ordo_ka]}")") (CPU efficiency, nginx us/req / ordo us/req)"
bench_paired_cases ordo_ka nginx_ka 1.0 -
echo "ratio ordo/nginx new TLS handshakes:   $(ratio "$(med "${rps[ordo_hs]}")" "$(med "${rps[nginx_hs]}")") (handshakes/s, target >= 0.9)   $(ratio "$(med "${cpu[nginx_hs]}")" "$(med "${cpu[ordo_hs]}")") (CPU efficiency)"
bench_paired_cases ordo_hs nginx_hs 0.9 -
echo "(paired: one ratio per round between the two cases run in it; median, geometric mean and its 95% CI by"
echo " Student's t on the log ratios; meets goal / above 1.0 = the whole CI is, below = it is wholly below)"
