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
ordo_bin=$ordo
bench_ports_free "$NGINX_PORT" "$ORDO_PORT"

mkdir -p "$tmp/www" "$tmp/nginx/tmp" "$tmp/nginx/logs"
awk 'BEGIN { for (i = 0; i < 2048; i++) printf "%c", 97 + i % 26 }' > "$tmp/www/file.txt"
# a throwaway CA and a server certificate it signs (a self-signed leaf is refused by rustls clients)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=bench CA" \
  -keyout "$tmp/ca.key" -out "$tmp/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
  -keyout "$tmp/key.pem" -out "$tmp/cert.csr" 2>/dev/null
printf "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n" > "$tmp/ext.cnf"
openssl x509 -req -in "$tmp/cert.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca.key" -days 2 \
  -extfile "$tmp/ext.cnf" -out "$tmp/cert.pem" 2>/dev/null
chmod 644 "$tmp/key.pem"

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
  server {
    listen 127.0.0.1:$NGINX_PORT ssl;
    ssl_certificate $tmp/cert.pem; ssl_certificate_key $tmp/key.pem;
    ssl_protocols TLSv1.3;
    root $tmp/www;
  }
}
EOF

cat > "$tmp/ordo.toml" <<EOF
listen = "127.0.0.1:$ORDO_PORT"
threads = 1
workers = 4096
queue_cap = 100000
[limits]
max_connections = 100000
[admin]
enabled = false
[tls]
min_version = "1.3"
certificates = [{ cert = "$tmp/cert.pem", key = "$tmp/key.pem" }]
[[routes]]
prefix = "/"
static = { root = "$tmp/www" }
EOF

wait_ready() { # $1 = url
  for _ in $(seq 1 100); do
    if curl -fsk -o /dev/null "$1"; then return 0; fi
    sleep 0.1
  done
  echo "tls-vs-nginx: $1 did not come up" >&2
  exit 1
}

taskset -c "$SERVER_CPU" "$nginx_bin" -c "$tmp/nginx/nginx.conf" -p "$tmp/nginx" 2>>"$tmp/nginx/stderr" &
nginx_master=$!
pids+=("$nginx_master")
wait_ready "https://127.0.0.1:$NGINX_PORT/file.txt"
nginx_pid=$(pgrep -P "$nginx_master" | head -1)
taskset -c "$SERVER_CPU" "$ordo_bin" serve --config "$tmp/ordo.toml" 2>>"$tmp/ordo.stderr" &
ordo_pid=$!
pids+=("$ordo_pid")
wait_ready "https://127.0.0.1:$ORDO_PORT/file.txt"

# `ordo bench https://` against both: every response must be 2xx (keep-alive and a handshake per request)
for port in "$NGINX_PORT" "$ORDO_PORT"; do
  for ka in "" "--no-keepalive"; do
    out=$(taskset -c "$CLIENT_CPU" "$ordo_bin" bench -q --no-progress --json -c 8 -n 2000 $ka \
      --cacert "$tmp/ca.pem" "https://localhost:$port/file.txt")
    ok=$(echo "$out" | tr -d ' \n' | sed -n 's/.*"status_counts":\[\(.*\)\].*/\1/p' | grep -o '"status":2[0-9][0-9],"count":[0-9]*' | awk -F: '{ s += $NF } END { print s + 0 }')
    name=$([ "$port" = "$NGINX_PORT" ] && echo nginx || echo ordo)
    echo "ordo bench https:// → $name ${ka:-keep-alive}: $ok/2000 2xx" >&2
    [ "$ok" = 2000 ] || { echo "tls-vs-nginx: not every response was 2xx" >&2; exit 1; }
  done
done


# run_wrk PID PORT CONNS [wrk args...] -> "rps cpu_us_per_req server_core_busy% client_core_busy%"
run_wrk() { local pid=$1 port=$2 conns=$3; shift 3; bench_wrk "$pid" "https://127.0.0.1:$port/file.txt" "$conns" "$@"; }

declare -A rps cpu sbusy cbusy
record() {
  rps[$1]="${rps[$1]:-} $2"; cpu[$1]="${cpu[$1]:-} $3"; sbusy[$1]="${sbusy[$1]:-} $4"; cbusy[$1]="${cbusy[$1]:-} $5"
}
run_case() {
  local r c sb cb
  case $1 in
    nginx_ka) read -r r c sb cb < <(run_wrk "$nginx_pid" "$NGINX_PORT" "$CONNS") ;;
    ordo_ka) read -r r c sb cb < <(run_wrk "$ordo_pid" "$ORDO_PORT" "$CONNS") ;;
    nginx_hs) read -r r c sb cb < <(run_wrk "$nginx_pid" "$NGINX_PORT" "$CLOSE_CONNS" -H 'Connection: close') ;;
    ordo_hs) read -r r c sb cb < <(run_wrk "$ordo_pid" "$ORDO_PORT" "$CLOSE_CONNS" -H 'Connection: close') ;;
  esac
  record "$1" "$r" "$c" "$sb" "$cb"
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; $ROUNDS rounds x $DURATION" >&2
uptime >&2
cases=(nginx_ka ordo_ka ordo_hs nginx_hs)
for round in $(seq 1 "$ROUNDS"); do
  echo "round $round/$ROUNDS..." >&2
  if [ $((round % 2)) = 1 ]; then order=("${cases[@]}"); else order=(); for ((k = ${#cases[@]} - 1; k >= 0; k--)); do order+=("${cases[$k]}"); done; fi
  for k in "${order[@]}"; do run_case "$k"; done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

med() { echo "${1}" | tr ' ' '\n' | grep -v '^$' | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

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
echo "ratio ordo/nginx new TLS handshakes:   $(ratio "$(med "${rps[ordo_hs]}")" "$(med "${rps[nginx_hs]}")") (handshakes/s, target >= 0.9)   $(ratio "$(med "${cpu[nginx_hs]}")" "$(med "${cpu[ordo_hs]}")") (CPU efficiency)"
