#!/usr/bin/env bash
# ordo serve on many cores, at its DEFAULTS (issue 22): for each thread count N, the servers get cores
# 0..N-1, and the client (and, for the proxy, an upstream nginx) the cores after them:
#   static  ordo serve (threads = 0: one per CPU it may run on, so N) vs nginx (worker_processes N), 2 KB
#           file, keep-alive;
#   proxy   ordo serve as a reverse proxy vs nginx proxy_pass (upstream keepalive, as nginx's docs advise)
#           vs HAProxy (nbthread N), all in front of the same upstream nginx;
#   h2      HTTP/2 over TLS 1.3: ordo serve vs nginx (http2 ssl), loaded by h2load (only if installed).
#   shares  the class policy's guarantees when requests wait, on N threads (issue 22 item 2): ordo serve with
#           five classes and a small pool (SHARES_WORKERS per thread) in front of its synthetic backend
#           (SHARES_MS of waiting per request), each class loaded by its own closed-loop `ordo bench`
#           clients, twice: policy stride (weights 5:4:3:2:1: each class's share of the requests served
#           within 2% of its weight's), priority (the top class, always backlogged, gets them all, goal
#           >= 99%) and edf (every request due to start within 25 ms: under this overload some are refused
#           at once, and none starts late). Read from the server's counters; once per N (thousands of
#           dispatches each; not a paired timing ratio).
# With the proxy case, a diagnostic one beside it: ordo_proxy_wide, the same proxy with `workers = 100000`
# (not the default): with 64 connections per thread, more requests are in flight than the default 64 workers
# once N > 1, so they wait in the gate; the difference between the two is what that waiting costs.
# ordo's configuration sets only what every deployment must (listen address, route, certificate, an admin
# port that does not collide): no worker, pool or queue setting. Prints per N req/s and server CPU µs per
# request, and paired ratios (95% CI) against each peer. N whose client would get no core is skipped.
#
#   bench/many-cores.sh                              # N in 1 4 8 16 (those that fit on this machine)
#   THREAD_COUNTS="1 2" ROUNDS=3 DURATION=5s bench/many-cores.sh
#   CASES="static proxy" bench/many-cores.sh         # leave out h2 and shares
#   CASES=shares THREAD_COUNTS="1 2" bench/many-cores.sh   # only the class guarantees
#   SHARES_COUNTS=8 ...                              # the shares case at these thread counts only
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
CASES=${CASES:-static proxy h2 shares}
SHARES_COUNTS=${SHARES_COUNTS:-$THREAD_COUNTS}
SHARES_WORKERS=${SHARES_WORKERS:-8}
SHARES_MS=${SHARES_MS:-1}
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
SHARES_PORT=$((BASE_PORT + 9))
ADMIN_PORT=$((BASE_PORT + 10)) # and the next four: one per ordo instance

. "$(dirname "$0")/lib.sh"
bench_init many-cores nginx haproxy wrk taskset curl openssl jq
nginx_bin=$(command -v nginx)
haproxy_bin=$(command -v haproxy)
bench_build --bin ordo
SERIES_OUT=${SERIES_OUT:-$here/ordo-results/many-cores.json}
bench_ports_free "$UP_PORT" "$NGINX_PORT" "$ORDO_PORT" "$NGINX_PROXY_PORT" "$HAPROXY_PORT" "$ORDO_PROXY_PORT" \
  "$NGINX_H2_PORT" "$ORDO_H2_PORT" "$ORDO_WIDE_PORT" "$SHARES_PORT" "$ADMIN_PORT" $((ADMIN_PORT + 1)) \
  $((ADMIN_PORT + 2)) $((ADMIN_PORT + 3)) $((ADMIN_PORT + 4))
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

# The class guarantees on N threads (CASES shares): ordo serve with five classes c1..c5 (by path prefix), a
# pool of SHARES_WORKERS per thread, its synthetic backend waiting SHARES_MS per request; `ordo bench` with a
# mix of the five, 4 x the pool's workers of closed-loop clients each (so every class always has requests
# queued), once with stride 5:4:3:2:1 and once with priority c1 > ... > c5. Prints each class's share of the
# requests served beside what the policy promises, and the verdicts.
shares_metrics() { # the shares server's /metrics now
  curl -fsS "http://127.0.0.1:$((ADMIN_PORT + 4))/metrics"
}
# Per class, what a counter of the shares server gained between two /metrics snapshots: "c1 N" lines.
#   gained NAME BEFORE AFTER
gained() {
  awk -v name="$1" 'FNR == 1 { f++ } index($0, name "{class=\"") == 1 && $0 !~ /reason=/ {
      split($0, q, "\""); v[q[2]] += (f == 1 ? -$NF : $NF) }
    END { for (c in v) print c, v[c] }' "$2" "$3" | sort
}
# What the lines of a snapshot that start with PREFIX gained in all, between two snapshots.
#   gained_sum PREFIX BEFORE AFTER
gained_sum() {
  awk -v p="$1" 'FNR == 1 { f++ } index($0, p) == 1 { s += (f == 1 ? -$NF : $NF) } END { printf "%d\n", s }' "$2" "$3"
}
SHARES_DEADLINE_MS=25
# The class guarantees on N threads (CASES shares): ordo serve with five classes c1..c5 (by path prefix), a
# pool of SHARES_WORKERS per thread, its synthetic backend waiting SHARES_MS per request; `ordo bench` with a
# mix of the five, 4 x the pool's workers of closed-loop clients each (so every class always has requests
# queued), three times: stride 5:4:3:2:1, priority c1 > ... > c5, and edf with every class's requests due
# to start within SHARES_DEADLINE_MS. What each policy promises is read from the server's own counters over
# DURATION in the middle of the load (a class's long queue wait does not move its requests out of a
# client-side window): each class's share of the dispatches, and edf's refusals and late starts.
shares_case() { # N
  local n=$1 policy workers=$((SHARES_WORKERS * $1)) clients c bpid bad
  local per_class=$((4 * SHARES_WORKERS * $1))
  {
    echo "assign = \"clients\""
    for c in 1 2 3 4 5; do
      printf '[[class]]\nname = "c%s"\nshare = 1\nurl = "/c%s/work?ms=%s"\n' "$c" "$c" "$SHARES_MS"
    done
  } > "$tmp/shares-mix.toml"
  clients=$((5 * per_class))
  for policy in stride priority edf; do
    {
      echo "listen = \"127.0.0.1:$SHARES_PORT\""
      echo "workers = $workers"
      echo "policy = \"$policy\""
      echo "queue_cap = 100000"
      echo "[admin]"
      echo "listen = \"127.0.0.1:$((ADMIN_PORT + 4))\""
      for c in 1 2 3 4 5; do
        printf '[[classes]]\nname = "c%s"\nweight = %s\npriority = %s\n' "$c" $((6 - c)) $((60 - 10 * c))
        [ "$policy" = edf ] && printf 'deadline = "%sms"\n' "$SHARES_DEADLINE_MS"
      done
      for c in 1 2 3 4 5; do
        printf '[[rules]]\nclass = "c%s"\npath_prefix = "/c%s/"\n' "$c" "$c"
      done
      printf '[[routes]]\nprefix = "/"\nsynthetic = {}\n'
    } > "$tmp/shares-$policy.toml"
    bench_start_ordo "$tmp/shares-$policy.toml" "http://127.0.0.1:$SHARES_PORT/c1/work" "$SERVER_CPUS"
    started+=("$started_pid")
    # the load runs a second longer on each side than the window the server's counters are read over
    taskset -c "$CLIENT_CPUS" "$ordo" bench -c "$clients" -t "$CLIENT_THREADS" -d "$((${DURATION%s} + 2))s" \
      --mix "$tmp/shares-mix.toml" --json "http://127.0.0.1:$SHARES_PORT/" > "$tmp/shares-$policy.json" 2>>"$tmp/ordo.stderr" &
    bpid=$!
    sleep 1
    shares_metrics > "$tmp/m0"
    sleep "${DURATION%s}"
    shares_metrics > "$tmp/m1"
    wait "$bpid" || echo "warning: ordo bench for the $policy shares exited $?" >&2
    stop_servers
    gained ordo_serve_dispatched_total "$tmp/m0" "$tmp/m1" > "$tmp/shares-$policy.txt"
    # answers that were neither 2xx nor edf's 503s: failures of the run itself
    bad=$(jq '[.classes[] | .failed.total // 0] | add' "$tmp/shares-$policy.json" 2>/dev/null || echo "?")
    if [ "$policy" != edf ] && [ "$bad" != "?" ]; then
      bad=$((bad + $(jq '[.classes[] | .non_2xx // 0] | add' "$tmp/shares-$policy.json")))
    fi
    [ "$bad" = "?" ] && echo "warning: no report from ordo bench for the $policy shares" >&2 && bad=0
    case $policy in
      stride)
        echo "stride shares on N = $n ($workers workers, $per_class clients per class, ${SHARES_MS} ms per request; dispatches in $DURATION):"
        awk -v bad="$bad" '{ w = 6 - substr($1, 2); n[NR] = $1; got[NR] = $2; ws += w; wt[NR] = w; tot += $2 }
          END { worst = 0
            for (i = 1; i <= NR; i++) { want = wt[i] / ws; g = (tot ? got[i] / tot : 0); err = (want ? g / want - 1 : 0)
              a = (err < 0 ? -err : err); if (a > worst) worst = a
              printf "  %s (weight %d): %6.2f%% of %d requests, weight share %6.2f%%, %+5.1f%%\n", n[i], wt[i], 100 * g, tot, 100 * want, 100 * err }
            printf "  largest error %.1f%%: %s (goal: each within 2%%)%s\n", 100 * worst, (worst <= 0.02 ? "meets" : "BELOW GOAL"),
              (bad ? sprintf("; %d requests failed", bad) : "") }' "$tmp/shares-$policy.txt"
        ;;
      priority)
        echo "priority order on N = $n (c1 highest; dispatches in $DURATION):"
        awk -v bad="$bad" '{ n[NR] = $1; got[NR] = $2; tot += $2 }
          END { for (i = 1; i <= NR; i++) printf "  %s: %6.2f%% of %d requests\n", n[i], (tot ? 100 * got[i] / tot : 0), tot
            top = (tot ? got[1] / tot : 0)
            printf "  top class %.2f%%: %s (goal: >= 99%%)%s\n", 100 * top,
              (top >= 0.99 ? "meets" : "BELOW GOAL"), (bad ? sprintf("; %d requests failed", bad) : "") }' "$tmp/shares-$policy.txt"
        ;;
      edf)
        local served refused late
        served=$(awk '{ s += $2 } END { print s + 0 }' "$tmp/shares-$policy.txt")
        refused=$(gained_sum 'ordo_serve_rejected_total{class="' "$tmp/m0" "$tmp/m1")
        # started later than the deadline: waited past the histogram bound just above it (25.6 ms)
        late=$(($(gained_sum 'ordo_serve_queue_wait_seconds_count{' "$tmp/m0" "$tmp/m1") -
          $(gained_sum 'ordo_serve_queue_wait_seconds_bucket{le="0.0256"' "$tmp/m0" "$tmp/m1")))
        echo "edf on N = $n (every request due to start within ${SHARES_DEADLINE_MS} ms; in $DURATION):"
        awk -v s="$served" -v r="$refused" -v l="$late" -v bad="$bad" 'BEGIN {
          printf "  %d started, %d refused as unreachable (%.1f%%), %d started after waiting more than 25.6 ms\n", s, r, (s + r ? 100 * r / (s + r) : 0), l
          printf "  %s (goal: under overload some are refused, none starts late)%s\n", (r > 0 && l == 0 ? "meets" : "BELOW GOAL"),
            (bad ? sprintf("; %d requests failed", bad) : "") }'
        ;;
    esac
  done
}

summary=()
for n in $THREAD_COUNTS; do
  if ! layout "$n"; then
    echo "N = $n: no core left for the client on $cpus CPUs; skipped" >&2
    continue
  fi
  CONNS=$((CONNS_PER_THREAD * n))
  cases=()
  [[ " $CASES " == *" static "* ]] && cases+=(nginx_static ordo_static)
  [[ " $CASES " == *" proxy "* ]] && cases+=(haproxy ordo_proxy nginx_proxy ordo_proxy_wide)
  [[ " $CASES " == *" h2 "* ]] && [ "$have_h2load" = 1 ] && cases+=(nginx_h2 ordo_h2)
  if [ ${#cases[@]} = 0 ]; then
    if [[ " $CASES " == *" shares "* ]] && [[ " $SHARES_COUNTS " == *" $n "* ]]; then shares_case "$n"; fi
    continue
  fi
  echo "== N = $n: servers on CPUs $SERVER_CPUS, upstream nginx ($UP_WORKERS workers) on $UPSTREAM_CPUS, client ($CLIENT_THREADS threads, $CONNS connections) on $CLIENT_CPUS" >&2
  start_n "$n"
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
  if [[ " $CASES " == *" shares "* ]] && [[ " $SHARES_COUNTS " == *" $n "* ]]; then
    echo
    shares_case "$n"
  fi
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
