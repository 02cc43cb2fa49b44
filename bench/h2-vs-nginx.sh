#!/usr/bin/env bash
# ordo serve vs nginx over HTTP/2 (TLS 1.3 + ALPN h2, same ECDSA P-256 certificate, same 2 KB static file),
# one worker thread each pinned to the same core (SERVER_CPU, default 0), loaded by h2load (nghttp2) pinned
# to another core (CLIENT_CPU, default 1) with CONNS connections of STREAMS concurrent streams each:
#   1. h2 req/s: ordo serve vs nginx, h2load as the client (target >= 1.0);
#   2. client req/s: `ordo bench --h2 --streams STREAMS` vs h2load against the same ordo serve (target >= 1.0).
# Before the rounds, the peer clients must all get 100% 2xx from ordo serve: h2load over h2 (TLS), h2c and
# --h1, `ordo bench --h2` and `--h2c`, curl --http2 and --http2-prior-knowledge.
# Each case runs ROUNDS times, interleaved (ABBA), and the median is reported with the server's CPU time per
# request (from /proc/PID/stat: robust when other processes steal the core, which req/s is not).
#
#   bench/h2-vs-nginx.sh                     # needs nginx, h2load (nghttp2-client), curl, openssl
#   DURATION=10 ROUNDS=5 CONNS=4 STREAMS=100 bench/h2-vs-nginx.sh
#   ORDO_BENCH_NO_BUILD=1 ...                 # use the release binary already built
#
# Everything it starts is killed and its temp dir removed on every exit path.
set -euo pipefail

DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-4}
STREAMS=${STREAMS:-100}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
NGINX_PORT=${NGINX_PORT:-18453}
ORDO_PORT=${ORDO_PORT:-18454}
ORDO_H2C_PORT=${ORDO_H2C_PORT:-18455}

. "$(dirname "$0")/lib.sh"
bench_init h2-vs-nginx nginx h2load taskset curl openssl
nginx_bin=$(command -v nginx)
bench_build --bin ordo
bench_ports_free "$NGINX_PORT" "$ORDO_PORT" "$ORDO_H2C_PORT"

mkdir -p "$tmp/www"
bench_file_2k "$tmp/www/file.txt"
bench_tls_cert

# nginx before 1.25.1 takes `http2` on the listen line; later ones want `http2 on;` (the old form still works)
bench_nginx_conf "$tmp/nginx" "  server {
    listen 127.0.0.1:$NGINX_PORT ssl http2;
    http2_max_requests 100000000;
    http2_max_concurrent_streams 128;
    ssl_certificate $tmp/cert.pem; ssl_certificate_key $tmp/key.pem;
    ssl_protocols TLSv1.3;
    root $tmp/www;
  }"

# ordo: TLS on the main listener, and an h2c (plain) listener of its own for the h2c checks
ordo_conf() { # $1 = port, $2 = tls table or ""
  bench_ordo_head "$1" fcfs
  cat <<EOF
[http2]
max_concurrent_streams = 128
max_streams_in_progress = 128
$2
[[routes]]
prefix = "/"
static = { root = "$tmp/www" }
EOF
}
ordo_conf "$ORDO_PORT" "[tls]
min_version = \"1.3\"
certificates = [{ cert = \"$tmp/cert.pem\", key = \"$tmp/key.pem\" }]" > "$tmp/ordo.toml"
ordo_conf "$ORDO_H2C_PORT" "" > "$tmp/ordo-h2c.toml"

bench_start_nginx "$tmp/nginx" "https://127.0.0.1:$NGINX_PORT/file.txt" "$SERVER_CPU"; nginx_pid=$started_pid
bench_start_ordo "$tmp/ordo.toml" "https://127.0.0.1:$ORDO_PORT/file.txt" "$SERVER_CPU"; ordo_pid=$started_pid
bench_start_ordo "$tmp/ordo-h2c.toml" "http://127.0.0.1:$ORDO_H2C_PORT/file.txt" "$SERVER_CPU"

# --- peer clients: every response must be 2xx -----------------------------------------------------------
fail() { echo "h2-vs-nginx: $*" >&2; exit 1; }
h2load_2xx() { # h2load args... -> "2xx total"
  local out
  out=$(taskset -c "$CLIENT_CPU" h2load "$@" 2>&1) || true
  echo "$out" | awk '/^status codes:/ { ok = $3 } /^requests:/ { n = $2 } END { print ok + 0, n + 0 }'
}
check_h2load() { # label args...
  local label=$1; shift
  read -r ok n < <(h2load_2xx "$@")
  echo "h2load $label: $ok/$n 2xx" >&2
  [ "$n" -gt 0 ] && [ "$ok" = "$n" ] || fail "h2load $label: not every response was 2xx"
}
check_h2load "h2 (TLS) → ordo" -n 20000 -c 4 -m 50 "https://127.0.0.1:$ORDO_PORT/file.txt"
check_h2load "h2c → ordo" -n 20000 -c 4 -m 50 "http://127.0.0.1:$ORDO_H2C_PORT/file.txt"
check_h2load "--h1 (TLS) → ordo" -n 20000 -c 4 -m 1 --h1 "https://127.0.0.1:$ORDO_PORT/file.txt"
check_h2load "h2 (TLS) → nginx" -n 20000 -c 4 -m 50 "https://127.0.0.1:$NGINX_PORT/file.txt"
for mode in "--h2 https://localhost:$ORDO_PORT" "--h2c http://127.0.0.1:$ORDO_H2C_PORT"; do
  set -- $mode
  out=$(taskset -c "$CLIENT_CPU" "$ordo" bench --no-progress --json -c 4 --streams 50 -n 20000 "$1" \
    --cacert "$tmp/ca.pem" "$2/file.txt")
  ok=$(bench_2xx "$out")
  echo "ordo bench $1 → ordo: $ok/20000 2xx" >&2
  [ "$ok" = 20000 ] || fail "ordo bench $1: not every response was 2xx"
done
for c in "--http2 --cacert $tmp/ca.pem https://localhost:$ORDO_PORT/file.txt" "--http2-prior-knowledge http://127.0.0.1:$ORDO_H2C_PORT/file.txt"; do
  got=$(curl -sS -o /dev/null -w '%{http_code} HTTP/%{http_version}' $c)
  echo "curl ${c%% *} → ordo: $got" >&2
  [ "$got" = "200 HTTP/2" ] || fail "curl ${c%% *}: expected 200 over HTTP/2, got $got"
done

# --- rounds ---------------------------------------------------------------------------------------------

# CPU seconds (user + system) of this shell's waited-for children so far (bash's `times`, second line)
# (`times` runs in this shell, not a command substitution's, whose children would be its own)
children_cpu() {
  times > "$tmp/times"
  tail -1 "$tmp/times" | awk '{ split($1, u, /[ms]/); split($2, s, /[ms]/); print u[1] * 60 + u[2] + s[1] * 60 + s[2] }'
}

# measure PID CLIENT PORT -> "rps server_cpu_us_per_req server_core_busy% client_core_busy% client_cpu_us_per_req"
measure() {
  local measure_pid=$1 client=$2 port=$3
  local t0 t1 out reqs rps s0 s1 c0 c1 k0 k1 url="https://localhost:$port/file.txt"
  children_cpu > "$tmp/k0"; k0=$(cat "$tmp/k0")
  t0=$(ticks "$measure_pid")
  s0=$(cpu_line "$SERVER_CPU"); c0=$(cpu_line "$CLIENT_CPU")
  if [ "$client" = h2load ]; then
    out=$(taskset -c "$CLIENT_CPU" h2load -t1 -c"$CONNS" -m"$STREAMS" -D"$DURATION" "$url" 2>&1)
    reqs=$(echo "$out" | awk '/^status codes:/ { print $3 }')
    rps=$(echo "$out" | awk '/^finished in/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "req/s,") print $i }')
    echo "$out" | grep -q ' 0 failed, 0 errored, 0 timeout' || echo "warning: h2load on port $port: $(echo "$out" | grep '^requests:')" >&2
  else
    out=$(taskset -c "$CLIENT_CPU" "$ordo" bench --no-progress --h2 -t1 -c"$CONNS" --streams "$STREAMS" \
      -d"${DURATION}s" --cacert "$tmp/ca.pem" "$url")
    reqs=$(echo "$out" | awk '/^Complete requests:/ { print $3 }')
    rps=$(echo "$out" | awk '/^Requests per second:/ { print $4 }')
    echo "$out" | grep -q '^Failed requests: *0$' || echo "warning: ordo bench on port $port: $(echo "$out" | grep '^Failed requests')" >&2
  fi
  s1=$(cpu_line "$SERVER_CPU"); c1=$(cpu_line "$CLIENT_CPU")
  t1=$(ticks "$measure_pid")
  children_cpu > "$tmp/k1"; k1=$(cat "$tmp/k1")
  awk -v r="$rps" -v n="$reqs" -v dt="$((t1 - t0))" -v hz="$clk_tck" -v sb="$(busy_pct "$s0" "$s1")" -v cb="$(busy_pct "$c0" "$c1")" \
    -v kc="$(awk -v a="$k0" -v b="$k1" 'BEGIN { print b - a }')" \
    'BEGIN { printf "%.0f %.2f %s %s %.2f\n", r, (n > 0 ? dt / hz * 1e6 / n : 0), sb, cb, (n > 0 ? kc * 1e6 / n : 0) }'
}

# rps, cpu, sbusy and cbusy are lib.sh's (see bench_wrk_case); ccpu: the client process's CPU µs per request
declare -A ccpu
record() {
  rps[$1]="${rps[$1]:-} $2"; cpu[$1]="${cpu[$1]:-} $3"; sbusy[$1]="${sbusy[$1]:-} $4"; cbusy[$1]="${cbusy[$1]:-} $5"
  ccpu[$1]="${ccpu[$1]:-} $6"
}
run_case() {
  local r c sb cb kc
  case $1 in
    nginx_h2load) read -r r c sb cb kc < <(measure "$nginx_pid" h2load "$NGINX_PORT") ;;
    ordo_h2load) read -r r c sb cb kc < <(measure "$ordo_pid" h2load "$ORDO_PORT") ;;
    ordo_ordobench) read -r r c sb cb kc < <(measure "$ordo_pid" ordo "$ORDO_PORT") ;;
  esac
  record "$1" "$r" "$c" "$sb" "$cb" "$kc"
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; $ROUNDS rounds x ${DURATION}s" >&2
echo "uptime: $(uptime)"
cases=(nginx_h2load ordo_h2load ordo_ordobench)
bench_rounds "${cases[@]}"
echo "uptime after: $(uptime)"

echo
echo "HTTP/2 over TLS 1.3, ECDSA P-256, 2 KB file; ordo serve (threads = 1, h2 + rustls/ring) vs nginx $("$nginx_bin" -v 2>&1 | sed 's/.*nginx\///') (1 worker, OpenSSL); both on CPU $SERVER_CPU"
echo "clients on CPU $CLIENT_CPU, one thread: $CONNS connections x $STREAMS streams, ${DURATION}s"
printf '%-15s %12s %11s %12s %12s %12s   %s\n' "case" "req/s (med)" "CPU us/req" "server core" "client core" "client us/req" "all rounds (req/s)"
for k in "${cases[@]}"; do
  printf '%-15s %12s %11s %11s%% %11s%% %12s   %s\n' "$k" "$(med "${rps[$k]}")" "$(med "${cpu[$k]}")" \
    "$(med "${sbusy[$k]}")" "$(med "${cbusy[$k]}")" "$(med "${ccpu[$k]}")" "${rps[$k]# }"
done
echo "(server_client: who serves and who loads. CPU us/req is the server's, client us/req the client process's."
echo " A client core near 100% with the server core well below it means the case measured the client.)"
echo
echo "ratio ordo/nginx h2, $STREAMS streams, 2 KB:   $(ratio "$(med "${rps[ordo_h2load]}")" "$(med "${rps[nginx_h2load]}")") (req/s, h2load as the client, target >= 1.0)   $(ratio "$(med "${cpu[nginx_h2load]}")" "$(med "${cpu[ordo_h2load]}")") (CPU efficiency, nginx us/req / ordo us/req)"
bench_paired_cases ordo_h2load nginx_h2load 1.0 -
echo "ratio ordo bench --h2 / h2load vs ordo:    $(ratio "$(med "${rps[ordo_ordobench]}")" "$(med "${rps[ordo_h2load]}")") (req/s against the same server, target >= 1.0)   $(ratio "$(med "${ccpu[ordo_h2load]}")" "$(med "${ccpu[ordo_ordobench]}")") (client CPU efficiency, h2load us/req / ordo bench us/req)"
bench_paired_line "  paired req/s:                " "${rps[ordo_ordobench]}" "${rps[ordo_h2load]}" 1.0
bench_paired_line "  paired client CPU efficiency:" "${ccpu[ordo_h2load]}" "${ccpu[ordo_ordobench]}" -
echo "(paired: one ratio per round between the two cases run in it; median, geometric mean and its 95% CI by"
echo " Student's t on the log ratios; meets goal / above 1.0 = the whole CI is, below = it is wholly below)"
