#!/usr/bin/env bash
# ordo serve on many cores, at its DEFAULTS (issue 22): for each thread count N, the servers get cores
# 0..N-1, and the client (and, for the proxy, an upstream nginx) the cores after them:
#   static  ordo serve (threads = 0: one per CPU it may run on, so N) vs nginx (worker_processes N), 2 KB
#           file, keep-alive;
#   proxy   ordo serve as a reverse proxy vs nginx proxy_pass (upstream keepalive, as nginx's docs advise)
#           vs HAProxy (nbthread N), all in front of the same upstream nginx;
#   h2      HTTP/2 over TLS 1.3: ordo serve vs nginx (http2 ssl), loaded by h2load (only if installed).
# With the proxy case, a diagnostic one beside it: ordo_proxy_wide, the same proxy with `workers = 100000`
# (not the default): with 64 connections per thread, more requests are in flight than the default 64 workers
# once N > 1, so they wait in the gate; the difference between the two is what that waiting costs.
# ordo's configuration sets only what every deployment must (listen address, route, certificate, an admin
# port that does not collide): no worker, pool or queue setting. Prints per N req/s and server CPU µs per
# request, and paired ratios (95% CI) against each peer. N whose client would get no core is skipped.
#
#   bench/many-cores.sh                              # N in 1 4 8 16 (those that fit on this machine)
#   THREAD_COUNTS="1 2" ROUNDS=3 DURATION=5s bench/many-cores.sh
#   CASES="static proxy" bench/many-cores.sh         # leave out h2
#   ORDO_BENCH_NO_BUILD=1 ...                         # use the release binary already built
#   SERIES_OUT=scaling.json ...                       # where the scaling charts go (a `series` result)
#
# The scaling curves (req/s and CPU per request by thread count, one line per server) are also written as a
# `series` result to SERIES_OUT (default ordo-results/many-cores.json): `ordo report FILE -o scaling.html`.
#
# On a 2-core machine only N = 1 fits (server on CPU 0; client and upstream share CPU 1). The 16-core
# layout for N = 8: servers 0-7, upstream 8-10, client 11-15.
set -euo pipefail

DURATION=${DURATION:-5s}
ROUNDS=${ROUNDS:-3}
THREAD_COUNTS=${THREAD_COUNTS:-1 4 8 16}
CASES=${CASES:-static proxy h2}
CONNS_PER_THREAD=${CONNS_PER_THREAD:-64}
BASE_PORT=${BASE_PORT:-18280}
SERIES_OUT=${SERIES_OUT:-}
UP_PORT=$BASE_PORT
NGINX_PORT=$((BASE_PORT + 1))
ORDO_PORT=$((BASE_PORT + 2))
NGINX_PROXY_PORT=$((BASE_PORT + 3))
HAPROXY_PORT=$((BASE_PORT + 4))
ORDO_PROXY_PORT=$((BASE_PORT + 5))
NGINX_H2_PORT=$((BASE_PORT + 6))
ORDO_H2_PORT=$((BASE_PORT + 7))
ORDO_WIDE_PORT=$((BASE_PORT + 8))
ADMIN_PORT=$((BASE_PORT + 10)) # and the next three: one per ordo instance

. "$(dirname "$0")/lib.sh"
bench_init many-cores nginx haproxy wrk taskset curl openssl
nginx_bin=$(command -v nginx)
haproxy_bin=$(command -v haproxy)
bench_build --bin ordo
SERIES_OUT=${SERIES_OUT:-$here/ordo-results/many-cores.json}
bench_ports_free "$UP_PORT" "$NGINX_PORT" "$ORDO_PORT" "$NGINX_PROXY_PORT" "$HAPROXY_PORT" "$ORDO_PROXY_PORT" \
  "$NGINX_H2_PORT" "$ORDO_H2_PORT" "$ORDO_WIDE_PORT" "$ADMIN_PORT" $((ADMIN_PORT + 1)) $((ADMIN_PORT + 2)) $((ADMIN_PORT + 3))
have_h2load=0
command -v h2load >/dev/null 2>&1 && have_h2load=1
[[ " $CASES " == *" h2 "* ]] && [ "$have_h2load" = 0 ] && echo "many-cores: h2load not found: the h2 case is left out" >&2

mkdir -p "$tmp/www"
bench_file_2k "$tmp/www/file.txt"
bench_tls_cert
cpus=$(nproc)

# CPU ranges: servers 0..N-1; the rest split between the upstream (a third, at least one) and the client.
# On 2 cores (N = 1) the upstream shares the client's core.
layout() { # $1 = N -> sets SERVER_CPUS UPSTREAM_CPUS CLIENT_CPUS CLIENT_THREADS UP_WORKERS, or returns 1
  local n=$1 rest up
  rest=$((cpus - n))
  [ "$rest" -ge 1 ] || return 1
  SERVER_CPUS="0-$((n - 1))"
  if [ "$rest" -ge 3 ]; then
    up=$((rest / 3))
    UPSTREAM_CPUS="$n-$((n + up - 1))"
    CLIENT_CPUS="$((n + up))-$((cpus - 1))"
    CLIENT_THREADS=$((rest - up))
    UP_WORKERS=$up
  else
    UPSTREAM_CPUS="$n-$((cpus - 1))"
    CLIENT_CPUS=$UPSTREAM_CPUS
    CLIENT_THREADS=$rest
    UP_WORKERS=$rest
  fi
}

# CPU ticks of a set of processes and all their threads (ordo's threads are in its /proc/PID/stat).
# Busy % of a CPU range between two /proc/stat snapshots.
cpu_lines() { local r=$1 a b c; a=${r%-*}; b=${r#*-}; for ((c = a; c <= b; c++)); do cpu_line "$c"; done; }
range_busy() { # before-file after-file -> percent busy (mean over the range's CPUs)
  paste -d' ' "$1" "$2" | awk '{ i1 = $5 + $6; t1 = 0; for (k = 2; k <= 11; k++) t1 += $k;
    i2 = $16 + $17; t2 = 0; for (k = 13; k <= 22; k++) t2 += $k;
    s += (t2 > t1 ? 100 * (1 - (i2 - i1) / (t2 - t1)) : 0); n++ } END { printf "%.0f", (n ? s / n : 0) }'
}

# One run: wrk (or h2load) with CLIENT_THREADS threads on CLIENT_CPUS against URL; prints "req/s CPU-us/req
# server-busy% client-busy%", the CPU time being MEASURE_PIDS' (the server's processes).
run_load() { # kind(wrk|h2load) measure_pids url conns
  local kind=$1 pids=$2 url=$3 conns=$4 t0 t1 out reqs rps
  t0=$(ticks "$pids")
  cpu_lines "$SERVER_CPUS" > "$tmp/s0"; cpu_lines "$CLIENT_CPUS" > "$tmp/c0"
  if [ "$kind" = wrk ]; then
    out=$(taskset -c "$CLIENT_CPUS" wrk -t"$CLIENT_THREADS" -c"$conns" -d"$DURATION" "$url")
    reqs=$(echo "$out" | awk '/requests in/ { print $1 }')
    rps=$(echo "$out" | awk '/Requests\/sec/ { print $2 }')
    if echo "$out" | grep -qE 'Non-2xx|Socket errors'; then
      echo "warning: wrk on $url: $(echo "$out" | grep -E 'Non-2xx|Socket errors' | tr -s ' ')" >&2
    fi
  else
    out=$(taskset -c "$CLIENT_CPUS" h2load -t"$CLIENT_THREADS" -c"$conns" -m100 -D"${DURATION%s}" "$url" 2>&1)
    reqs=$(echo "$out" | awk '/^status codes:/ { print $3 }')
    rps=$(echo "$out" | awk '/^finished in/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "req/s,") print $i }')
    echo "$out" | grep -q ' 0 failed, 0 errored, 0 timeout' || echo "warning: h2load on $url: $(echo "$out" | grep '^requests:')" >&2
  fi
  cpu_lines "$SERVER_CPUS" > "$tmp/s1"; cpu_lines "$CLIENT_CPUS" > "$tmp/c1"
  t1=$(ticks "$pids")
  awk -v r="${rps:-0}" -v n="${reqs:-0}" -v dt="$((t1 - t0))" -v hz="$clk_tck" -v sb="$(range_busy "$tmp/s0" "$tmp/s1")" \
    -v cb="$(range_busy "$tmp/c0" "$tmp/c1")" 'BEGIN { printf "%.0f %.2f %s %s\n", r, (n > 0 ? dt / hz * 1e6 / n : 0), sb, cb }'
}

# ordo serve at its defaults: listen, the route, an admin port of its own.
ordo_conf() { # file port admin_port backend_line [extra tables]
  {
    echo "listen = \"127.0.0.1:$2\""
    echo "[admin]"
    echo "listen = \"127.0.0.1:$3\""
    if [ -n "${5:-}" ]; then echo "$5"; fi
    echo "[[routes]]"
    echo "prefix = \"/\""
    echo "$4"
  } > "$1"
}

started=()
stop_servers() {
  local p
  for p in "${started[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for p in "${started[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
  started=()
}
start_n() { # N: start every server for thread count N (pinned), setting *_pids
  local n=$1
  NGINX_WORKERS=$n bench_nginx_conf "$tmp/nginx$n" "  server { listen 127.0.0.1:$NGINX_PORT; root $tmp/www; }
  server {
    listen 127.0.0.1:$NGINX_H2_PORT ssl http2;
    http2_max_requests 100000000;
    ssl_certificate $tmp/cert.pem; ssl_certificate_key $tmp/key.pem;
    ssl_protocols TLSv1.3;
    root $tmp/www;
  }
  upstream up { server 127.0.0.1:$UP_PORT; keepalive $CONNS; keepalive_requests 100000000; }
  server {
    listen 127.0.0.1:$NGINX_PROXY_PORT;
    location / {
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection \"\";
      proxy_set_header Host \$host;
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
    }
  }"
  NGINX_WORKERS=$UP_WORKERS bench_nginx_conf "$tmp/upstream$n" "  server { listen 127.0.0.1:$UP_PORT; root $tmp/www; }"
  bench_haproxy_conf "$tmp/haproxy$n" "$HAPROXY_PORT" "$UP_PORT"
  sed -i "s/nbthread 1/nbthread $n/" "$tmp/haproxy$n/haproxy.cfg"
  ordo_conf "$tmp/static$n.toml" "$ORDO_PORT" "$ADMIN_PORT" "static = { root = \"$tmp/www\" }"
  ordo_conf "$tmp/proxy$n.toml" "$ORDO_PROXY_PORT" $((ADMIN_PORT + 1)) "proxy = { upstreams = [\"127.0.0.1:$UP_PORT\"] }"
  # the diagnostic case (not at the defaults): the same proxy with a worker pool no client count fills, so
  # no request ever waits in the gate — the difference to ordo_proxy is what waiting costs on N threads
  ordo_conf "$tmp/wide$n.toml" "$ORDO_WIDE_PORT" $((ADMIN_PORT + 3)) "proxy = { upstreams = [\"127.0.0.1:$UP_PORT\"] }"
  sed -i '1a workers = 100000' "$tmp/wide$n.toml"
  ordo_conf "$tmp/h2$n.toml" "$ORDO_H2_PORT" $((ADMIN_PORT + 2)) "static = { root = \"$tmp/www\" }" "[tls]
min_version = \"1.3\"
certificates = [{ cert = \"$tmp/cert.pem\", key = \"$tmp/key.pem\" }]"

  bench_start_nginx "$tmp/upstream$n" "http://127.0.0.1:$UP_PORT/file.txt" "$UPSTREAM_CPUS"; started+=("${pids[-1]}")
  bench_start_nginx "$tmp/nginx$n" "http://127.0.0.1:$NGINX_PORT/file.txt" "$SERVER_CPUS"; started+=("${pids[-1]}")
  nginx_pids=$started_pids
  taskset -c "$SERVER_CPUS" "$haproxy_bin" -db -f "$tmp/haproxy$n/haproxy.cfg" >>"$tmp/haproxy.stderr" 2>&1 &
  bench_check_started "$!" "http://127.0.0.1:$HAPROXY_PORT/file.txt" "$tmp/haproxy.stderr"; started+=("$started_pid")
  haproxy_pid=$started_pid
  bench_start_ordo "$tmp/static$n.toml" "http://127.0.0.1:$ORDO_PORT/file.txt" "$SERVER_CPUS"; started+=("$started_pid")
  ordo_pid=$started_pid
  bench_start_ordo "$tmp/proxy$n.toml" "http://127.0.0.1:$ORDO_PROXY_PORT/file.txt" "$SERVER_CPUS"; started+=("$started_pid")
  ordo_proxy_pid=$started_pid
  bench_start_ordo "$tmp/h2$n.toml" "https://127.0.0.1:$ORDO_H2_PORT/file.txt" "$SERVER_CPUS"; started+=("$started_pid")
  ordo_h2_pid=$started_pid
  if [[ " $CASES " == *" proxy "* ]]; then
    bench_start_ordo "$tmp/wide$n.toml" "http://127.0.0.1:$ORDO_WIDE_PORT/file.txt" "$SERVER_CPUS"; started+=("$started_pid")
    ordo_wide_pid=$started_pid
  fi
  # the serving threads ordo started (threads = 0: one per CPU of its affinity mask)
  ordo_threads=$(($(cat /proc/"$ordo_pid"/task/*/comm | grep -c '^ordo-serve-' || true) + 1))
}

declare -A results
run_case() {
  local r c sb cb url kind=wrk pid
  case $1 in
    nginx_static) pid=$nginx_pids; url="http://127.0.0.1:$NGINX_PORT/file.txt" ;;
    ordo_static) pid=$ordo_pid; url="http://127.0.0.1:$ORDO_PORT/file.txt" ;;
    nginx_proxy) pid=$nginx_pids; url="http://127.0.0.1:$NGINX_PROXY_PORT/file.txt" ;;
    haproxy) pid=$haproxy_pid; url="http://127.0.0.1:$HAPROXY_PORT/file.txt" ;;
    ordo_proxy) pid=$ordo_proxy_pid; url="http://127.0.0.1:$ORDO_PROXY_PORT/file.txt" ;;
    nginx_h2) pid=$nginx_pids; kind=h2load; url="https://127.0.0.1:$NGINX_H2_PORT/file.txt" ;;
    ordo_proxy_wide) pid=$ordo_wide_pid; url="http://127.0.0.1:$ORDO_WIDE_PORT/file.txt" ;;
    ordo_h2) pid=$ordo_h2_pid; kind=h2load; url="https://127.0.0.1:$ORDO_H2_PORT/file.txt" ;;
  esac
  local conns=$CONNS
  [ "$kind" = h2load ] && conns=$((CLIENT_THREADS * 4))
  read -r r c sb cb < <(run_load "$kind" "$pid" "$url" "$conns")
  rps[$1]="${rps[$1]:-} $r"; cpu[$1]="${cpu[$1]:-} $c"; sbusy[$1]="${sbusy[$1]:-} $sb"; cbusy[$1]="${cbusy[$1]:-} $cb"
}

summary=()
for n in $THREAD_COUNTS; do
  if ! layout "$n"; then
    echo "N = $n: no core left for the client on $cpus CPUs; skipped" >&2
    continue
  fi
  CONNS=$((CONNS_PER_THREAD * n))
  echo "== N = $n: servers on CPUs $SERVER_CPUS, upstream nginx ($UP_WORKERS workers) on $UPSTREAM_CPUS, client ($CLIENT_THREADS threads, $CONNS connections) on $CLIENT_CPUS" >&2
  start_n "$n"
  cases=()
  [[ " $CASES " == *" static "* ]] && cases+=(nginx_static ordo_static)
  [[ " $CASES " == *" proxy "* ]] && cases+=(haproxy ordo_proxy nginx_proxy ordo_proxy_wide)
  [[ " $CASES " == *" h2 "* ]] && [ "$have_h2load" = 1 ] && cases+=(nginx_h2 ordo_h2)
  for k in "${cases[@]}"; do unset "rps[$k]" "cpu[$k]" "sbusy[$k]" "cbusy[$k]"; done
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  bench_rounds "${cases[@]}"
  echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  stop_servers

  echo
  echo "N = $n ($ordo_threads ordo threads; servers on CPUs $SERVER_CPUS; client $CLIENT_THREADS threads on $CLIENT_CPUS, $CONNS connections; $ROUNDS rounds x $DURATION)"
  printf '%-15s %12s %11s %12s %12s   %s\n' "case" "req/s (med)" "CPU us/req" "server cores" "client cores" "all rounds (req/s)"
  for k in "${cases[@]}"; do
    printf '%-15s %12s %11s %11s%% %11s%%   %s\n' "$k" "$(med "${rps[$k]}")" "$(med "${cpu[$k]}")" \
      "$(med "${sbusy[$k]}")" "$(med "${cbusy[$k]}")" "${rps[$k]# }"
    summary+=("$n $k $(med "${rps[$k]}") $(med "${cpu[$k]}")")
  done
  pair() {
    [ -n "${rps[$1]:-}" ] && [ -n "${rps[$2]:-}" ] || return 0
    echo "ratio $1 / $2:"
    bench_paired_cases "$1" "$2"
  }
  pair ordo_static nginx_static
  pair ordo_proxy nginx_proxy
  pair ordo_proxy haproxy
  pair ordo_proxy_wide nginx_proxy
  pair ordo_h2 nginx_h2
done

echo
echo "scaling (req/s and server CPU us/req by thread count):"
printf '%4s %-15s %12s %11s\n' N case "req/s" "CPU us/req"
for line in "${summary[@]:-}"; do
  [ -n "$line" ] || continue
  # shellcheck disable=SC2086
  printf '%4s %-15s %12s %11s\n' $line
done
echo "(ordo at its defaults; peers as their docs advise for the role: nginx worker_processes N and upstream"
echo " keepalive, HAProxy nbthread N with http-reuse always; goal per issue 22: ordo >= 1.0x nginx req/s at <= 1.0x"
echo " its CPU per request, and >= 1.0x HAProxy on the proxy, at every N)"

# The scaling curves as a `series` result (crates/results/src/series.rs) for `ordo report`.
series_line() { # case column(3 = req/s, 4 = CPU us/req) -> one series, or nothing when the case never ran
  local pts
  pts=$(printf '%s\n' "${summary[@]:-}" | awk -v k="$1" -v c="$2" '$2 == k && $c != "" { printf "%s[%s, %s]", (n++ ? ", " : ""), $1, $c }')
  [ -n "$pts" ] && printf '{"name": "%s", "points": [%s]}' "$1" "$pts"
}
series_chart() { # caption y_label column
  local sep="" k line
  printf '{"caption": "%s", "x_label": "serving threads (N)", "y_label": "%s", "series": [' "$1" "$2"
  for k in ordo_static nginx_static ordo_proxy nginx_proxy haproxy ordo_proxy_wide ordo_h2 nginx_h2; do
    line=$(series_line "$k" "$3") || true
    [ -n "$line" ] && { printf '%s%s' "$sep" "$line"; sep=", "; }
  done
  printf ']}'
}
if [ "${#summary[@]}" -gt 0 ]; then
  mkdir -p "$(dirname "$SERIES_OUT")"
  {
    printf '{"kind": "series", "version": 1, "title": "ordo serve on many cores, at its defaults",\n'
    printf '"subtitle": "bench/many-cores.sh on %s CPUs, %s, %s rounds x %s per case (medians)",\n' "$cpus" "$(date -u '+%F %H:%M UTC')" "$ROUNDS" "$DURATION"
    printf '"charts": [\n'
    series_chart "Requests per second by thread count: servers on CPUs 0..N-1, the client on the others" "requests per second" 3
    printf ',\n'
    series_chart "Server CPU time per request by thread count (lower is cheaper)" "CPU us per request" 4
    printf '],\n"tables": [{"title": "Medians by thread count", "headers": ["N", "case", "req/s", "CPU us/req"], "rows": ['
    printf '%s\n' "${summary[@]}" | awk '{ printf "%s[\"%s\", \"%s\", \"%s\", \"%s\"]", (n++ ? ", " : ""), $1, $2, $3, $4 }'
    printf ']}],\n"notes": ["ordo at its defaults; nginx worker_processes N (upstream keepalive for proxy_pass), HAProxy nbthread N with http-reuse always"]}\n'
  } > "$SERIES_OUT"
  echo "scaling charts: $SERIES_OUT (ordo report $SERIES_OUT -o scaling.html)"
fi
