#!/usr/bin/env bash
# `ordo bench --h2` vs h2load (nghttp2) as HTTP/2 clients of the same server: issue 11's "ordo bench --h2
# >= 1.0x h2load's req/s against the same server". The server (`ordo serve`, threads = 1, a 2 KB static
# file; or nginx with SERVER=nginx) is pinned to SERVER_CPU, each client (one thread, CONNS connections x
# STREAMS streams) to CLIENT_CPU. Rounds alternate the two clients (ABBA), ROUNDS times; the medians give
#   req/s ratio (ordo bench / h2load): which client gets more out of the server (target >= 1.0);
#   client CPU per request (user + system of the client process) and its ratio (ordo bench / h2load; lower
#   is better, 1.0 = as cheap as h2load): the figure that does not depend on which core is the bottleneck.
# PROTO=h2 (TLS 1.3, ALPN h2; default) or h2c (cleartext, prior knowledge). "base" (BASE_BIN) is another
# build's client measured in the same rounds, for before/after figures from one invocation.
# Both clients send the same request: h2load gets `-H 'accept: */*'`, the one field ordo bench adds by
# default (as ab and curl do) that h2load does not, so the server parses the same header block for both.
#
#   bench/h2-client-vs-h2load.sh             # needs h2load (nghttp2-client), taskset, curl, openssl (nginx)
#   DURATION=5 ROUNDS=5 CONNS=4 STREAMS=100 PROTO=h2c SERVER=nginx bench/h2-client-vs-h2load.sh
#   ORDO_BENCH_NO_BUILD=1 ...                 # use the release binary already built
#   ORDO_BIN=/path/to/ordo ...                # the client measured (the server stays the release build)
#   BASE_BIN=/path/to/older/ordo ...          # also measure this build's client in the same rounds (before/after)
#
# Everything it starts is killed and its temp dir removed on every exit path.
set -euo pipefail

DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-5}
CONNS=${CONNS:-4}
STREAMS=${STREAMS:-100}
PROTO=${PROTO:-h2}
SERVER=${SERVER:-ordo}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
PORT=${PORT:-18463}

. "$(dirname "$0")/lib.sh"
case $SERVER in
  ordo) bench_init h2-client-vs-h2load h2load taskset curl openssl ;;
  nginx) bench_init h2-client-vs-h2load h2load taskset curl openssl nginx ;;
  *) echo "h2-client-vs-h2load: SERVER must be ordo or nginx, not '$SERVER'" >&2; exit 2 ;;
esac
case $PROTO in
  h2) scheme=https; host=localhost ;;
  h2c) scheme=http; host=127.0.0.1 ;;
  *) echo "h2-client-vs-h2load: PROTO must be h2 or h2c, not '$PROTO'" >&2; exit 2 ;;
esac
bench_build --bin ordo
server_bin=$ordo
client_bin=${ORDO_BIN:-$ordo}
[ -x "$client_bin" ] || { echo "h2-client-vs-h2load: ORDO_BIN $client_bin is not an executable" >&2; exit 2; }
base_bin=${BASE_BIN:-}
[ -z "$base_bin" ] || [ -x "$base_bin" ] || { echo "h2-client-vs-h2load: BASE_BIN $base_bin is not an executable" >&2; exit 2; }
bench_ports_free "$PORT"
url="$scheme://$host:$PORT/file.txt"

mkdir -p "$tmp/www" "$tmp/nginx/tmp" "$tmp/nginx/logs"
bench_file_2k "$tmp/www/file.txt"
bench_tls_cert

if [ "$SERVER" = ordo ]; then
  tls=""
  [ "$PROTO" = h2 ] && tls="[tls]
min_version = \"1.3\"
certificates = [{ cert = \"$tmp/cert.pem\", key = \"$tmp/key.pem\" }]"
  cat > "$tmp/ordo.toml" <<EOF
listen = "127.0.0.1:$PORT"
threads = 1
workers = 4096
queue_cap = 100000
[limits]
max_connections = 100000
[http2]
max_concurrent_streams = 128
max_streams_in_progress = 128
[admin]
enabled = false
$tls
[[routes]]
prefix = "/"
static = { root = "$tmp/www" }
EOF
  taskset -c "$SERVER_CPU" "$server_bin" serve --config "$tmp/ordo.toml" 2>>"$tmp/ordo.stderr" &
  server_pid=$!
  pids+=("$server_pid")
else
  listen="listen 127.0.0.1:$PORT http2;"
  [ "$PROTO" = h2 ] && listen="listen 127.0.0.1:$PORT ssl http2;
    ssl_certificate $tmp/cert.pem; ssl_certificate_key $tmp/key.pem; ssl_protocols TLSv1.3;"
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
  http2_max_requests 100000000;
  http2_max_concurrent_streams 128;
  open_file_cache max=100 inactive=60s;
  default_type text/plain;
  client_body_temp_path $tmp/nginx/tmp; proxy_temp_path $tmp/nginx/tmp; fastcgi_temp_path $tmp/nginx/tmp;
  uwsgi_temp_path $tmp/nginx/tmp; scgi_temp_path $tmp/nginx/tmp;
  server {
    $listen
    root $tmp/www;
  }
}
EOF
  taskset -c "$SERVER_CPU" nginx -c "$tmp/nginx/nginx.conf" -p "$tmp/nginx" 2>>"$tmp/nginx/stderr" &
  server_pid=$!
  pids+=("$server_pid")
fi
curl_proto=--http2
[ "$PROTO" = h2c ] && curl_proto=--http2-prior-knowledge
for _ in $(seq 1 100); do
  curl -fs "$curl_proto" --cacert "$tmp/ca.pem" -o /dev/null "$url" && break
  sleep 0.1
done
curl -fs "$curl_proto" --cacert "$tmp/ca.pem" -o /dev/null "$url" ||
  { echo "h2-client-vs-h2load: $SERVER did not come up on $url" >&2; exit 1; }

# CPU seconds (user + system) of this shell's waited-for children so far (bash's `times`, second line)
children_cpu() {
  times > "$tmp/times"
  tail -1 "$tmp/times" | awk '{ split($1, u, /[ms]/); split($2, s, /[ms]/); print u[1] * 60 + u[2] + s[1] * 60 + s[2] }'
}

# measure CLIENT -> "rps client_cpu_us_per_req server_core_busy% client_core_busy%", or "-" when the client
# did not finish within its time limit (h2load has been seen to stop reading and hang on a loaded machine)
limit=$((DURATION * 3 + 30))
measure() {
  local out reqs rps s0 s1 c0 c1 k0 k1
  children_cpu > "$tmp/k0"; k0=$(cat "$tmp/k0")
  s0=$(cpu_line "$SERVER_CPU"); c0=$(cpu_line "$CLIENT_CPU")
  if [ "$1" = h2load ]; then
    out=$(timeout -s KILL "$limit" taskset -c "$CLIENT_CPU" h2load -t1 -c"$CONNS" -m"$STREAMS" -D"$DURATION" -H 'accept: */*' "$url" 2>&1 || true)
    reqs=$(echo "$out" | awk '/^status codes:/ { print $3 }')
    rps=$(echo "$out" | awk '/^finished in/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "req/s,") print $i }')
    echo "$out" | grep -q ' 0 failed, 0 errored, 0 timeout' ||
      echo "warning: h2load: $(echo "$out" | grep '^requests:')" >&2
  else
    local bin=$client_bin
    [ "$1" = base ] && bin=$base_bin
    out=$(timeout -s KILL "$limit" taskset -c "$CLIENT_CPU" "$bin" bench --no-progress "--$PROTO" -t1 -c"$CONNS" \
      --streams "$STREAMS" -d"${DURATION}s" --cacert "$tmp/ca.pem" "$url" || true)
    reqs=$(echo "$out" | awk '/^Complete requests:/ { print $3 }')
    rps=$(echo "$out" | awk '/^Requests per second:/ { print $4 }')
    echo "$out" | grep -q '^Failed requests: *0$' ||
      echo "warning: ordo bench: $(echo "$out" | grep '^Failed requests')" >&2
    echo "$out" | grep -q '^Non-2xx responses' &&
      echo "warning: ordo bench: $(echo "$out" | grep '^Non-2xx responses')" >&2
  fi
  s1=$(cpu_line "$SERVER_CPU"); c1=$(cpu_line "$CLIENT_CPU")
  children_cpu > "$tmp/k1"; k1=$(cat "$tmp/k1")
  if [ -z "$rps" ] || [ -z "$reqs" ]; then
    echo "warning: $1 gave no result within ${limit}s; round not counted" >&2
    echo "-"
    return
  fi
  awk -v r="$rps" -v n="$reqs" -v sb="$(busy_pct "$s0" "$s1")" -v cb="$(busy_pct "$c0" "$c1")" \
    -v kc="$(awk -v a="$k0" -v b="$k1" 'BEGIN { print b - a }')" \
    'BEGIN { printf "%.0f %.2f %s %s\n", r, (n > 0 ? kc * 1e6 / n : 0), sb, cb }'
}

declare -A rps ccpu sbusy cbusy prps pccpu
run_case() {
  local r c sb cb ok=1
  read -r r c sb cb < <(measure "$1")
  if [ -z "$r" ] || [ "$r" = - ]; then ok=0; fi
  # every round, 0 for a round without result, so the paired ratios match rounds up (bench_paired skips 0s)
  if [ "$ok" = 1 ]; then prps[$1]="${prps[$1]:-} $r"; pccpu[$1]="${pccpu[$1]:-} $c"
  else prps[$1]="${prps[$1]:-} 0"; pccpu[$1]="${pccpu[$1]:-} 0"; fi
  if [ "$ok" = 0 ]; then return; fi
  rps[$1]="${rps[$1]:-} $r"; ccpu[$1]="${ccpu[$1]:-} $c"; sbusy[$1]="${sbusy[$1]:-} $sb"; cbusy[$1]="${cbusy[$1]:-} $cb"
}

cases=(h2load ordobench)
[ -n "$base_bin" ] && cases+=(base)
echo "uptime before: $(uptime)"
for round in $(seq 1 "$ROUNDS"); do
  echo "round $round/$ROUNDS..." >&2
  if [ $((round % 2)) = 1 ]; then order=("${cases[@]}"); else order=(); for ((k = ${#cases[@]} - 1; k >= 0; k--)); do order+=("${cases[$k]}"); done; fi
  for k in "${order[@]}"; do run_case "$k"; done
done
echo "uptime after:  $(uptime)"

med() { echo "$1" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

echo
echo "$PROTO clients of $SERVER (server on CPU $SERVER_CPU, 2 KB file); clients on CPU $CLIENT_CPU, one thread, $CONNS connections x $STREAMS streams, ${DURATION}s x $ROUNDS rounds"
printf '%-10s %12s %14s %12s %12s   %s\n' "client" "req/s (med)" "client us/req" "server core" "client core" "all rounds (req/s | client us/req)"
for k in "${cases[@]}"; do
  printf '%-10s %12s %14s %11s%% %11s%%   %s |%s\n' "$k" "$(med "${rps[$k]}")" "$(med "${ccpu[$k]}")" \
    "$(med "${sbusy[$k]}")" "$(med "${cbusy[$k]}")" "${rps[$k]# }" "${ccpu[$k]}"
done
echo "(a client core near 100% with the server core below it: that round measured the client)"
echo
echo "ratio ordo bench / h2load, req/s:          $(ratio "$(med "${rps[ordobench]}")" "$(med "${rps[h2load]}")") (target >= 1.0)"
echo "ratio ordo bench / h2load, client us/req:  $(ratio "$(med "${ccpu[ordobench]}")" "$(med "${ccpu[h2load]}")") (1.0 = as cheap as h2load; lower is better)"
bench_paired_line "  paired req/s (ordo bench / h2load):" "${prps[ordobench]}" "${prps[h2load]}" 1.0
bench_paired_line "  paired client CPU efficiency (h2load us/req / ordo bench us/req):" "${pccpu[h2load]}" "${pccpu[ordobench]}" -
echo "(paired: one ratio per round between the two clients run in it; median, geometric mean and its 95% CI by"
echo " Student's t on the log ratios; meets goal / above 1.0 = the whole CI is, below = it is wholly below)"
if [ -n "$base_bin" ]; then
  echo "ratio base ($base_bin) / h2load: req/s $(ratio "$(med "${rps[base]}")" "$(med "${rps[h2load]}")"), client us/req $(ratio "$(med "${ccpu[base]}")" "$(med "${ccpu[h2load]}")")"
  echo "ratio ordo bench / base, client us/req:   $(ratio "$(med "${ccpu[ordobench]}")" "$(med "${ccpu[base]}")")"
fi
