#!/usr/bin/env bash
# HTTP/2 clients through a reverse proxy — what a browser in front of an application does: h2load (TLS 1.3,
# ALPN h2, CONNS connections x STREAMS streams) against ordo serve, HAProxy (`bind ... ssl alpn h2,http/1.1`)
# and nginx (`listen ... ssl http2` + proxy_pass with upstream keepalive), each in front of the same HTTP/1.1
# nginx upstream serving a 2 KB file (or BODY_BYTES). Each proxy runs one thread pinned to SERVER_CPU
# (default 0); h2load and the upstream share CLIENT_CPU (default 1), so req/s can be capped by that core:
# compare the proxies' CPU µs per request (from /proc/PID/stat, which other processes cannot inflate).
# ordo runs at its defaults but `threads = 1` (the peers get one thread each too); HAProxy as
# bench/proxy-vs-haproxy.sh configures it (http-reuse always, option forwardfor).
# Cases run ROUNDS times, interleaved (ABBA); printed: each case's medians, and the paired ratios (95% CI)
# of ordo against each peer.
#
#   bench/h2-proxy.sh                              # needs haproxy, nginx, h2load: ORDO_SETUP_PEERS=1 ./scripts/setup.sh
#   ROUNDS=6 DURATION=3 bench/h2-proxy.sh
#   BODY_BYTES=200000 ...                          # bodies over ordo's 64 KiB for HTTP/2 clients: streamed
#   ORDO_BENCH_NO_BUILD=1 ...                      # use the release binary already built
#   ORDO_BASE_BIN=/tmp/ordo-before ...             # also another build of ordo ("base", e.g. before a change),
#                                                  # same configuration, in the same rounds: ratio ordo / base
set -euo pipefail

DURATION=${DURATION:-3}
ROUNDS=${ROUNDS:-6}
CONNS=${CONNS:-4}
STREAMS=${STREAMS:-32}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
BASE_PORT=${BASE_PORT:-18780}
UP_PORT=$BASE_PORT
HAPROXY_PORT=$((BASE_PORT + 1))
NGINX_PORT=$((BASE_PORT + 2))
ORDO_PORT=$((BASE_PORT + 3))
ADMIN_PORT=$((BASE_PORT + 4))
BASE_ORDO_PORT=$((BASE_PORT + 5))
BASE_ADMIN_PORT=$((BASE_PORT + 6))
ORDO_BASE_BIN=${ORDO_BASE_BIN:-}

. "$(dirname "$0")/lib.sh"
bench_init h2-proxy haproxy nginx h2load taskset curl openssl
bench_build --bin ordo
bench_ports_free "$UP_PORT" "$HAPROXY_PORT" "$NGINX_PORT" "$ORDO_PORT" "$ADMIN_PORT"
if [ -n "$ORDO_BASE_BIN" ]; then
  [ -x "$ORDO_BASE_BIN" ] || { echo "h2-proxy: ORDO_BASE_BIN=$ORDO_BASE_BIN is not an executable" >&2; exit 2; }
  bench_ports_free "$BASE_ORDO_PORT" "$BASE_ADMIN_PORT"
fi

mkdir -p "$tmp/www"
if [ -n "${BODY_BYTES:-}" ]; then head -c "$BODY_BYTES" /dev/urandom > "$tmp/www/file.txt"; else bench_file_2k "$tmp/www/file.txt"; fi
bench_tls_cert
cat "$tmp/cert.pem" "$tmp/key.pem" > "$tmp/combined.pem"

bench_nginx_conf "$tmp/upstream" "  server { listen 127.0.0.1:$UP_PORT; root $tmp/www; }"
bench_nginx_conf "$tmp/nginx" "  upstream up { server 127.0.0.1:$UP_PORT; keepalive 64; keepalive_requests 100000000; }
  server {
    listen 127.0.0.1:$NGINX_PORT ssl http2;
    http2_max_requests 100000000;
    ssl_certificate $tmp/cert.pem; ssl_certificate_key $tmp/key.pem;
    ssl_protocols TLSv1.3;
    location / {
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection \"\";
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
    }
  }"
mkdir -p "$tmp/haproxy"
{
  bench_haproxy_head "$HAPROXY_PORT" "  pidfile $tmp/haproxy/haproxy.pid" "  option forwardfor" |
    sed "s|^  bind 127.0.0.1:$HAPROXY_PORT\$|  bind 127.0.0.1:$HAPROXY_PORT ssl crt $tmp/combined.pem alpn h2,http/1.1 ssl-min-ver TLSv1.3|"
  echo "backend be"
  echo "  server up 127.0.0.1:$UP_PORT"
} > "$tmp/haproxy/haproxy.cfg"
cat > "$tmp/ordo.toml" <<EOF
listen = "127.0.0.1:$ORDO_PORT"
threads = 1
[admin]
listen = "127.0.0.1:$ADMIN_PORT"
[tls]
min_version = "1.3"
certificates = [{ cert = "$tmp/cert.pem", key = "$tmp/key.pem" }]
[[routes]]
prefix = "/"
proxy = { upstreams = ["127.0.0.1:$UP_PORT"] }
EOF

bench_start_nginx "$tmp/upstream" "http://127.0.0.1:$UP_PORT/file.txt" "$CLIENT_CPU"
bench_start_nginx "$tmp/nginx" "https://127.0.0.1:$NGINX_PORT/file.txt" "$SERVER_CPU"; nginx_pid=$started_pid
taskset -c "$SERVER_CPU" haproxy -db -f "$tmp/haproxy/haproxy.cfg" >>"$tmp/haproxy/stderr" 2>&1 &
bench_check_started "$!" "https://127.0.0.1:$HAPROXY_PORT/file.txt" "$tmp/haproxy/stderr"; haproxy_pid=$started_pid
bench_start_ordo "$tmp/ordo.toml" "https://127.0.0.1:$ORDO_PORT/file.txt" "$SERVER_CPU"; ordo_pid=$started_pid
cases=(haproxy ordo nginx)
ports=("$HAPROXY_PORT" "$NGINX_PORT" "$ORDO_PORT")
if [ -n "$ORDO_BASE_BIN" ]; then
  sed -e "s/127.0.0.1:$ORDO_PORT/127.0.0.1:$BASE_ORDO_PORT/" -e "s/127.0.0.1:$ADMIN_PORT/127.0.0.1:$BASE_ADMIN_PORT/" "$tmp/ordo.toml" > "$tmp/base.toml"
  ordo_new=$ordo; ordo=$ORDO_BASE_BIN
  bench_start_ordo "$tmp/base.toml" "https://127.0.0.1:$BASE_ORDO_PORT/file.txt" "$SERVER_CPU"; base_pid=$started_pid
  ordo=$ordo_new
  cases=(haproxy ordo base nginx) # (base beside ordo in every round's order: their ratio is the one judged)
  ports+=("$BASE_ORDO_PORT")
fi
# every proxy must return the upstream's file over HTTP/2
for port in "${ports[@]}"; do
  cmp -s <(curl -fsk --http2 "https://localhost:$port/file.txt") "$tmp/www/file.txt" ||
    { echo "h2-proxy: port $port did not return the file over HTTP/2" >&2; exit 1; }
done

# One h2load run against PORT, measuring PID: "req/s  CPU µs/req  server busy %  client busy %".
h2_case() { # case pid port
  local t0 t1 s0 s1 c0 c1 out n r c sb cb
  t0=$(ticks "$2"); s0=$(cpu_line "$SERVER_CPU"); c0=$(cpu_line "$CLIENT_CPU")
  out=$(taskset -c "$CLIENT_CPU" h2load -t1 -c"$CONNS" -m"$STREAMS" -D"$DURATION" "https://localhost:$3/file.txt" 2>&1) || true
  s1=$(cpu_line "$SERVER_CPU"); c1=$(cpu_line "$CLIENT_CPU"); t1=$(ticks "$2")
  echo "$out" | grep -q ' 0 failed, 0 errored, 0 timeout' || echo "warning: h2load on $1: $(echo "$out" | grep '^requests:')" >&2
  n=$(echo "$out" | awk '/^status codes:/ { print $3 }')
  read -r r c sb cb < <(awk -v n="${n:-0}" -v d="$DURATION" -v dt="$((t1 - t0))" -v hz="$clk_tck" -v sb="$(busy_pct "$s0" "$s1")" -v cb="$(busy_pct "$c0" "$c1")" \
    'BEGIN { printf "%.0f %.2f %s %s\n", n / d, (n > 0 ? dt / hz * 1e6 / n : 0), sb, cb }')
  rps[$1]="${rps[$1]:-} $r"; cpu[$1]="${cpu[$1]:-} $c"; sbusy[$1]="${sbusy[$1]:-} $sb"; cbusy[$1]="${cbusy[$1]:-} $cb"
}
run_case() {
  case $1 in
    haproxy) h2_case "$1" "$haproxy_pid" "$HAPROXY_PORT" ;;
    nginx) h2_case "$1" "$nginx_pid" "$NGINX_PORT" ;;
    ordo) h2_case "$1" "$ordo_pid" "$ORDO_PORT" ;;
    base) h2_case "$1" "$base_pid" "$BASE_ORDO_PORT" ;;
  esac
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; $ROUNDS rounds x ${DURATION}s" >&2
bench_rounds "${cases[@]}"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

echo
echo "proxies on CPU $SERVER_CPU (one thread each): HAProxy $(haproxy -v 2>&1 | awk 'NR == 1 { print $3 }'), nginx $(nginx -v 2>&1 | sed 's/.*nginx\///'), ordo serve;"
echo "HTTP/2 over TLS 1.3 from h2load -t1 -c$CONNS -m$STREAMS -D$DURATION and the HTTP/1.1 upstream nginx, both on CPU $CLIENT_CPU; $(if [ -n "${BODY_BYTES:-}" ]; then echo "$BODY_BYTES-byte"; else echo "2 KB"; fi) file"
printf '%-9s %12s %11s %12s %12s   %s\n' "case" "req/s (med)" "CPU us/req" "server core" "client core" "all rounds (req/s)"
for k in "${cases[@]}"; do
  printf '%-9s %12s %11s %11s%% %11s%%   %s\n' "$k" "$(med "${rps[$k]}")" "$(med "${cpu[$k]}")" \
    "$(med "${sbusy[$k]}")" "$(med "${cbusy[$k]}")" "${rps[$k]# }"
done
echo
for peer in haproxy nginx; do
  echo "ratio ordo / $peer:"
  bench_paired_cases ordo "$peer"
done
if [ -n "$ORDO_BASE_BIN" ]; then
  echo "ratio ordo / base ($ORDO_BASE_BIN):"
  bench_paired_cases ordo base - -
fi
echo "(paired: one ratio per round; CPU efficiency = the peer's CPU us/req / ordo's; goal >= 1.0 for both)"
