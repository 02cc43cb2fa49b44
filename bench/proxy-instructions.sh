#!/usr/bin/env bash
# The deterministic companion of bench/proxy-vs-haproxy.sh: how much work ordo serve's proxy route and
# HAProxy each do per proxied request, counted rather than timed. On a shared 2-core VM one proxy's req/s
# moves ±8% from round to round, more than the differences being judged; the instructions a proxy executes
# per request hardly move (about 1% between runs), so a code change that cuts per-request work shows here
# when wall-clock rounds cannot tell.
#
# Both proxies are configured as in bench/proxy-vs-haproxy.sh (bench_haproxy_conf, bench_ordo_proxy_conf:
# ordo serve with threads = 1, fcfs, one class, one proxy route; HAProxy with nbthread 1, `http-reuse
# always`, `option forwardfor`), in front of the same nginx upstream (one worker) serving a 2 KB file.
#  1. User space: each proxy runs under `valgrind --tool=callgrind`; for each request shape, wrk warms it up
#     (WARMUP), `callgrind_control -z` zeroes the counters, wrk -t1 -c CONNS drives it for DURATION,
#     `callgrind_control -d` dumps them: instructions executed (Ir, the proxy's own code and its libraries,
#     not the kernel's) / requests wrk completed.
#  2. Kernel side, when perf is installed and can count tracepoints: each proxy runs natively (no valgrind)
#     under `perf stat -e raw_syscalls:sys_enter,context-switches` with the counters enabled only around
#     a wrk run of PERF_DURATION (perf's --control fifo; the proxy is started by perf, because `perf stat
#     -p PID` counts nothing inside some containers): system calls and context switches per request.
# Request shapes: wrk's minimal request (`GET /file.txt`, Host), and the same with ten browser-like headers
# (User-Agent, Accept, Accept-Language, Accept-Encoding, Cookie, Referer, Sec-Fetch-*, ...); and, when h2load
# is installed, `h2`: HTTP/2 over TLS 1.3 (h2load -c4 -m32, H2_REQUESTS requests counted after as many of
# warm-up; the TLS handshakes of its 4 connections are counted too, about 300 instructions a request at
# 20 000) to a TLS listener of each proxy (ordo's `tls.listen`, a second HAProxy `bind ... ssl alpn
# h2,http/1.1`) in front of the same upstream, counted by callgrind only (bench/h2-proxy.sh times it).
# ordo runs with bench_ordo_head's `workers = 4096`, as HAProxy has no such pool: at ordo's default pool
# (64 per thread) h2load's 128 streams in flight wait for a worker (docs/serve.md).
# The ratios are ordo / HAProxy: below 1.0, ordo does less work per request.
#
#   bench/proxy-instructions.sh                 # needs haproxy, nginx, wrk, valgrind (and perf): ORDO_SETUP_PEERS=1 ./scripts/setup.sh
#   ORDO_BENCH_NO_BUILD=1 bench/proxy-instructions.sh          # the release binary already built
#   ORDO_BIN=/path/to/ordo ORDO_BENCH_NO_BUILD=1 ...           # another build of ordo (e.g. before a change)
#   CALLGRIND_OUT=/tmp/cg bench/proxy-instructions.sh          # keep the callgrind profiles there
#                                                              # (callgrind_annotate --auto=no FILE)
#   ORDO_WORKERS=default bench/proxy-instructions.sh           # ordo's default pool instead of 4096 (its h2
#                                                              # streams then wait for a worker: the gate's
#                                                              # waiting path is counted too)
# Knobs: DURATION (measured wrk run under callgrind, default 4s), WARMUP (default 2s), CONNS (wrk -c, default
# 16), PERF_DURATION (the native run perf counts, default 4s), SERVER_CPU (the proxies, default 0),
# CLIENT_CPU (wrk, h2load and the upstream, default 1), H2_REQUESTS (h2 shape, default 20000), BASE_PORT
# (default 18200; the upstream, HAProxy and ordo listen on BASE_PORT .. BASE_PORT+2, their TLS listeners on
# +3 and +4, and the script refuses to start if one is taken).
# Everything it starts is killed and its temp dir removed on every exit path. Takes about a minute (three with
# the h2 shape).
set -euo pipefail

DURATION=${DURATION:-4s}
WARMUP=${WARMUP:-2s}
CONNS=${CONNS:-16}
PERF_DURATION=${PERF_DURATION:-4s}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
BASE_PORT=${BASE_PORT:-18200}
UP_PORT=$BASE_PORT
HAPROXY_PORT=$((BASE_PORT + 1))
ORDO_PORT=$((BASE_PORT + 2))
HAPROXY_TLS_PORT=$((BASE_PORT + 3))
ORDO_TLS_PORT=$((BASE_PORT + 4))
H2_REQUESTS=${H2_REQUESTS:-20000}

. "$(dirname "$0")/lib.sh"
bench_init proxy-instructions haproxy nginx wrk valgrind callgrind_control taskset curl
haproxy_bin=$(command -v haproxy)
bench_build --bin ordo
bench_ports_free "$UP_PORT" "$HAPROXY_PORT" "$ORDO_PORT" "$HAPROXY_TLS_PORT" "$ORDO_TLS_PORT"

mkdir -p "$tmp/www" "$tmp/cg" "$tmp/perf"
bench_file_2k "$tmp/www/file.txt"
bench_nginx_conf "$tmp/upstream" "  server { listen 127.0.0.1:$UP_PORT; root $tmp/www; }"
bench_haproxy_conf "$tmp/haproxy" "$HAPROXY_PORT" "$UP_PORT"
bench_ordo_proxy_conf "$tmp/ordo.toml" fcfs 1 "$ORDO_PORT" "$UP_PORT"
# the h2 shape: a TLS listener beside the plain one in each proxy
h2=0
if command -v h2load >/dev/null 2>&1 && command -v openssl >/dev/null 2>&1; then
  h2=1
  bench_tls_cert
  cat "$tmp/cert.pem" "$tmp/key.pem" > "$tmp/combined.pem"
  sed -i "s|^  bind 127.0.0.1:$HAPROXY_PORT\$|&\n  bind 127.0.0.1:$HAPROXY_TLS_PORT ssl crt $tmp/combined.pem alpn h2,http/1.1 ssl-min-ver TLSv1.3|" "$tmp/haproxy/haproxy.cfg"
  printf '[tls]\nlisten = "127.0.0.1:%s"\nmin_version = "1.3"\ncertificates = [{ cert = "%s", key = "%s" }]\n' \
    "$ORDO_TLS_PORT" "$tmp/cert.pem" "$tmp/key.pem" >> "$tmp/ordo.toml"
else
  echo "note: h2load or openssl missing: the h2 shape is skipped" >&2
fi
bench_start_nginx "$tmp/upstream" "http://127.0.0.1:$UP_PORT/file.txt" "$CLIENT_CPU"

# The two proxies: how each is started (PROXY_cmd), and its port.
# shellcheck disable=SC2034 # read through a nameref (local -n c=${p}_cmd)
ordo_cmd=("$ordo" serve --config "$tmp/ordo.toml")
# shellcheck disable=SC2034
haproxy_cmd=("$haproxy_bin" -db -f "$tmp/haproxy/haproxy.cfg")
declare -A port
port[ordo]=$ORDO_PORT
port[haproxy]=$HAPROXY_PORT
declare -A tls_port
tls_port[ordo]=$ORDO_TLS_PORT
tls_port[haproxy]=$HAPROXY_TLS_PORT
proxies=(ordo haproxy)

# The request shapes: wrk's arguments for each.
shapes=(minimal browser)
declare -A shape_label
shape_label[minimal]="minimal"
shape_label[browser]="browser (10 hdrs)"
shape_label[h2]="h2 (TLS, 4x32)"
browser_headers=(
  -H "User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36"
  -H "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
  -H "Accept-Language: en-US,en;q=0.9"
  -H "Accept-Encoding: gzip, deflate, br"
  -H "Cookie: session=abcdef0123456789; theme=dark; _ga=GA1.2.12345.67890"
  -H "Referer: https://example.com/index.html"
  -H "Sec-Fetch-Dest: document"
  -H "Sec-Fetch-Mode: navigate"
  -H "Upgrade-Insecure-Requests: 1"
  -H "Cache-Control: max-age=0"
)

# wrk_requests PROXY SHAPE DURATION: one wrk run (pinned to CLIENT_CPU) against PROXY with SHAPE's requests;
# prints how many requests completed. Exits 1 if any answer was not 2xx (the count would then be of
# errors); warns on socket errors (timeouts: requests wrk gave up on, not counted).
wrk_requests() {
  local args=() out
  [ "$2" = browser ] && args=("${browser_headers[@]}")
  out=$(taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"$3" ${args[@]+"${args[@]}"} "http://127.0.0.1:${port[$1]}/file.txt")
  if echo "$out" | grep -q 'Non-2xx'; then
    echo "$bench_name: $1 ($2) answered non-2xx: $(echo "$out" | grep 'Non-2xx' | tr -s ' ')" >&2
    exit 1
  fi
  if echo "$out" | grep -q 'Socket errors'; then
    echo "warning: wrk against $1 ($2) reported: $(echo "$out" | grep 'Socket errors' | tr -s ' ')" >&2
  fi
  echo "$out" | awk '/requests in/ { print $1 }'
}

# h2_requests PROXY N: one h2load run of N requests (HTTP/2 over TLS, 4 connections x 32 streams, pinned to
# CLIENT_CPU) against PROXY's TLS listener; prints how many were answered 2xx. Exits 1 if any was not.
h2_requests() {
  local out ok
  out=$(taskset -c "$CLIENT_CPU" h2load -t1 -c4 -m32 -n"$2" "https://localhost:${tls_port[$1]}/file.txt" 2>&1) || true
  ok=$(echo "$out" | awk '/^status codes:/ { print $3 }')
  if [ "${ok:-0}" != "$2" ]; then
    echo "$bench_name: $1 (h2) answered $ok of $2 requests 2xx: $(echo "$out" | grep -E '^(requests|status codes):' | tr '\n' ' ')" >&2
    exit 1
  fi
  echo "$ok"
}

# The body that comes back through a proxy must be the upstream's 2 KB file.
check_body() { # PROXY
  cmp -s <(curl -fs "http://127.0.0.1:${port[$1]}/file.txt") "$tmp/www/file.txt" ||
    { echo "$bench_name: $1 did not return the file" >&2; exit 1; }
}

# Stops a proxy this script started (and removes it from the cleanup list).
stop() { # PID...
  local p q keep=()
  for p in "$@"; do kill "$p" 2>/dev/null || true; done
  for p in "$@"; do wait "$p" 2>/dev/null || true; done
  for q in "${pids[@]}"; do
    for p in "$@"; do [ "$q" = "$p" ] && continue 2; done
    keep+=("$q")
  done
  pids=("${keep[@]}")
}

# --- 1. user-space instructions per request (callgrind) -------------------------------------------------
declare -A ir reqs
# Waits (60 s at most) until FILE holds a complete callgrind dump (its `totals:` line is written last).
wait_dump() {
  for _ in $(seq 1 600); do
    grep -qE '^(totals|summary):' "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "$bench_name: callgrind wrote no dump $1" >&2
  exit 1
}
# cg_ctl OPTION PID: callgrind_control OPTION PID, quiet unless it fails.
cg_ctl() {
  local out
  out=$(callgrind_control "$1" "$2" 2>&1) || { echo "$bench_name: callgrind_control $1 $2 failed: $out" >&2; exit 1; }
}
# cg_read PROXY SHAPE VPID PART REQUESTS: the instructions of dump PART, kept as SHAPE's.
cg_read() {
  local f="$tmp/cg/$1.$3.$4"
  wait_dump "$f"
  ir[$1,$2]=$(awk '/^(totals|summary):/ { print $2; exit }' "$f")
  reqs[$1,$2]=$5
  if [ -n "${CALLGRIND_OUT:-}" ]; then
    mkdir -p "$CALLGRIND_OUT"
    cp "$f" "$CALLGRIND_OUT/callgrind.$1.$2"
  fi
}
callgrind_proxy() { # PROXY
  local p=$1 vpid part=0 shape n f
  local -n c=${p}_cmd
  taskset -c "$SERVER_CPU" valgrind --tool=callgrind --callgrind-out-file="$tmp/cg/$p.%p" "${c[@]}" \
    >"$tmp/cg/$p.log" 2>&1 &
  vpid=$!
  pids+=("$vpid")
  bench_wait_ready "http://127.0.0.1:${port[$p]}/file.txt" 60
  kill -0 "$vpid" 2>/dev/null || { echo "$bench_name: $p under valgrind exited: $(tail -n 2 "$tmp/cg/$p.log")" >&2; exit 1; }
  check_body "$p"
  for shape in "${shapes[@]}"; do
    wrk_requests "$p" "$shape" "$WARMUP" >/dev/null
    cg_ctl -z "$vpid"
    n=$(wrk_requests "$p" "$shape" "$DURATION")
    cg_ctl -d "$vpid"
    part=$((part + 1))
    cg_read "$p" "$shape" "$vpid" "$part" "$n"
  done
  if [ "$h2" = 1 ]; then
    h2_requests "$p" "$H2_REQUESTS" >/dev/null
    cg_ctl -z "$vpid"
    n=$(h2_requests "$p" "$H2_REQUESTS")
    cg_ctl -d "$vpid"
    part=$((part + 1))
    cg_read "$p" h2 "$vpid" "$part" "$n"
  fi
  stop "$vpid"
}

# --- 2. kernel side: system calls and context switches per request (perf stat) -------------------------
declare -A sysc csw preqs percall
perf_ok=0
perf_note=""
if ! command -v perf >/dev/null 2>&1; then
  perf_note="perf not installed (apt-get install linux-perf): kernel side skipped"
elif ! [[ "$(perf stat -h 2>&1 || true)" == *--control* ]]; then
  perf_note="this perf has no --control (perf >= 5.9 needed): kernel side skipped"
elif ! perf stat -x, -o /dev/null -e raw_syscalls:sys_enter,context-switches -- true 2>/dev/null; then
  perf_note="perf cannot count raw_syscalls:sys_enter here (permissions: kernel.perf_event_paranoid, tracefs): kernel side skipped"
else
  perf_ok=1
fi
# The calls a proxy's request path makes, counted one by one when the kernel has their tracepoints (the
# breakdown printed under the totals); the rest is reported as "other".
calls=(recvfrom sendto read write readv writev recvmsg sendmsg epoll_wait epoll_pwait epoll_ctl accept4 close
  shutdown setsockopt getsockopt futex clock_gettime)
call_events=""
if [ "$perf_ok" = 1 ]; then
  for call in "${calls[@]}"; do call_events+=",syscalls:sys_enter_$call"; done
  perf stat -x, -o /dev/null -e "raw_syscalls:sys_enter$call_events" -- true 2>/dev/null || call_events=""
fi
# perf_ctl COMMAND: sends enable/disable to perf stat's --control fifo (fd 8) and waits for its ack (fd 9,
# 5 s at most).
perf_ctl() {
  local a=""
  echo "$1" >&8
  read -r -t 5 a <&9 || true
  [ "$a" = ack ] || { echo "$bench_name: perf did not acknowledge '$1'" >&2; exit 1; }
}
perf_proxy() { # PROXY SHAPE
  local p=$1 shape=$2 ppid spid n dir="$tmp/perf/$1.$2"
  local -n c=${p}_cmd
  mkdir -p "$dir"
  mkfifo "$dir/ctl" "$dir/ack"
  # the counters start disabled (-D -1) and count the proxy and every thread it starts
  perf stat -x, -o "$dir/counts" -e "raw_syscalls:sys_enter,context-switches$call_events" -D -1 \
    --control "fifo:$dir/ctl,$dir/ack" -- taskset -c "$SERVER_CPU" "${c[@]}" >"$dir/log" 2>&1 &
  ppid=$!
  pids+=("$ppid")
  bench_wait_ready "http://127.0.0.1:${port[$p]}/file.txt"
  spid=$(pgrep -P "$ppid" | head -n 1)
  [ -n "$spid" ] || { echo "$bench_name: $p under perf exited: $(tail -n 2 "$dir/log")" >&2; exit 1; }
  pids+=("$spid")
  wrk_requests "$p" "$shape" "$WARMUP" >/dev/null
  exec 8<>"$dir/ctl" 9<>"$dir/ack" # read-write opens: never block, even if perf has gone
  perf_ctl enable
  n=$(wrk_requests "$p" "$shape" "$PERF_DURATION")
  perf_ctl disable
  exec 8>&- 9>&-
  # perf writes its counts when the proxy exits: stop the proxy, then wait for perf
  kill "$spid" 2>/dev/null || true
  wait "$ppid" 2>/dev/null || true
  stop "$spid" "$ppid"
  sysc[$p,$shape]=$(awk -F, '$3 == "raw_syscalls:sys_enter" { print $1 }' "$dir/counts")
  csw[$p,$shape]=$(awk -F, '$3 == "context-switches" { print $1 }' "$dir/counts")
  preqs[$p,$shape]=$n
  local call
  for call in "${calls[@]}"; do
    percall[$p,$shape,$call]=$(awk -F, -v e="syscalls:sys_enter_$call" '$3 == e { print $1 }' "$dir/counts")
  done
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs" >&2
for p in "${proxies[@]}"; do
  echo "callgrind: $p..." >&2
  callgrind_proxy "$p"
done
if [ "$perf_ok" = 1 ]; then
  for p in "${proxies[@]}"; do
    for shape in "${shapes[@]}"; do
      echo "perf: $p, $shape..." >&2
      perf_proxy "$p" "$shape"
    done
  done
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# per_req COUNT REQUESTS [DECIMALS]: COUNT / REQUESTS ("-" when either is missing or not a number).
per_req() {
  awk -v c="$1" -v n="$2" -v d="${3:-0}" 'BEGIN {
    if (c !~ /^[0-9.]+$/ || n + 0 <= 0) { print "-"; exit }
    printf "%.*f\n", d, c / n }'
}
# ratio_or_dash A B: A / B with two decimals, "-" when either is "-".
ratio_or_dash() { if [ "$1" = - ] || [ "$2" = - ]; then echo -; else ratio "$1" "$2"; fi; }
echo
echo "ordo serve (threads = 1, fcfs, one proxy route) vs HAProxy $("$haproxy_bin" -v 2>&1 | awk 'NR == 1 { print $3 }') (nbthread 1), upstream nginx serving 2 KB;"
echo "proxies on CPU $SERVER_CPU, wrk -t1 -c$CONNS and the upstream on CPU $CLIENT_CPU"
echo
echo "user-space instructions per request (valgrind --tool=callgrind, $WARMUP warm-up, $DURATION counted):"
printf '%-18s %12s %14s %13s   %s\n' "request" "ordo Ir/req" "haproxy Ir/req" "ordo/haproxy" "requests counted (ordo, haproxy)"
counted=("${shapes[@]}")
[ "$h2" = 1 ] && counted+=(h2)
for shape in "${counted[@]}"; do
  o=$(per_req "${ir[ordo,$shape]}" "${reqs[ordo,$shape]}")
  h=$(per_req "${ir[haproxy,$shape]}" "${reqs[haproxy,$shape]}")
  printf '%-18s %12s %14s %13s   %s, %s\n' "${shape_label[$shape]}" "$o" "$h" "$(ratio_or_dash "$o" "$h")" \
    "${reqs[ordo,$shape]}" "${reqs[haproxy,$shape]}"
done
echo
if [ "$perf_ok" = 1 ]; then
  echo "kernel side per request (perf stat on the native proxies, $PERF_DURATION of wrk counted):"
  printf '%-18s %14s %17s %6s %10s %13s %6s\n' "request" "ordo syscalls" "haproxy syscalls" "ratio" "ordo csw" "haproxy csw" "ratio"
  for shape in "${shapes[@]}"; do
    os=$(per_req "${sysc[ordo,$shape]}" "${preqs[ordo,$shape]}" 2)
    hs=$(per_req "${sysc[haproxy,$shape]}" "${preqs[haproxy,$shape]}" 2)
    oc=$(per_req "${csw[ordo,$shape]}" "${preqs[ordo,$shape]}" 3)
    hc=$(per_req "${csw[haproxy,$shape]}" "${preqs[haproxy,$shape]}" 3)
    printf '%-18s %14s %17s %6s %10s %13s %6s\n' "${shape_label[$shape]}" "$os" "$hs" "$(ratio_or_dash "$os" "$hs")" \
      "$oc" "$hc" "$(ratio_or_dash "$oc" "$hc")"
  done
  if [ -n "$call_events" ]; then
    echo "system calls per request, by call (those >= 0.01; other = the rest):"
    for shape in "${shapes[@]}"; do
      for p in "${proxies[@]}"; do
        line=""
        sum=0
        for call in "${calls[@]}"; do
          v=$(per_req "${percall[$p,$shape,$call]:-}" "${preqs[$p,$shape]}" 2)
          [ "$v" = - ] && continue
          sum=$(awk -v a="$sum" -v b="${percall[$p,$shape,$call]}" 'BEGIN { print a + b }')
          if awk -v v="$v" 'BEGIN { exit !(v >= 0.01) }'; then line+=" $call $v"; fi
        done
        other=$(awk -v t="${sysc[$p,$shape]:-0}" -v s="$sum" -v n="${preqs[$p,$shape]:-0}" 'BEGIN { printf "%.2f", (n > 0 ? (t - s) / n : 0) }')
        printf '  %-18s %-8s%s other %s\n' "${shape_label[$shape]}" "$p" "$line" "$other"
      done
    done
  fi
  echo "(syscalls: raw_syscalls:sys_enter of the proxy's threads; csw: its context switches; both depend on how"
  echo " many requests a wakeup finds, so they move with load, unlike the instruction counts)"
else
  echo "kernel side: $perf_note"
fi
echo "(ratios ordo / HAProxy: below 1.0, ordo does less work per request)"
