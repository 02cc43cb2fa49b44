#!/usr/bin/env bash
# Memory per idle keep-alive connection: ordo serve vs nginx. For each server: N connections are opened, each
# sends one request (a 2 KB static file) and reads its response, then all N sit idle, kept alive. The server's
# resident memory (VmRSS of the process that holds the connections: nginx's worker) is read before, while the
# N connections are idle, and after the client closed them all; printed as KB per connection, with the ratio.
# "returned" is how much of the growth was given back after the close (100% = back to the start).
#
#   bench/idle-conns.sh                  # needs nginx: ORDO_SETUP_PEERS=1 ./scripts/setup.sh
#   N=20000 bench/idle-conns.sh
#   ORDO_BENCH_NO_BUILD=1 ...            # use the release binary already built
#
# Raises the open-file limit of itself (and so of both servers and the client) to N + 1000, which needs a
# hard limit at least that high. Everything it starts is killed and its temp dir removed on every exit path.
set -euo pipefail

N=${N:-10000}
NGINX_PORT=${NGINX_PORT:-18470}
ORDO_PORT=${ORDO_PORT:-18471}
SETTLE=${SETTLE:-2}

. "$(dirname "$0")/lib.sh"
bench_init idle-conns nginx python3 curl
nginx_bin=$(command -v nginx)
want=$((N + 1000))
if [ "$(ulimit -Hn)" != unlimited ] && [ "$(ulimit -Hn)" -lt "$want" ]; then
  echo "idle-conns: the hard open-file limit ($(ulimit -Hn)) is below N + 1000 = $want" >&2
  exit 1
fi
ulimit -n "$want"

bench_build --bin ordo
bench_ports_free "$NGINX_PORT" "$ORDO_PORT"

mkdir -p "$tmp/www"
bench_file_2k "$tmp/www/file.txt"
chmod 644 "$tmp/www/file.txt"

# without the skeleton's open-file cache (this measurement has always run without one); idle connections kept 300 s
bench_nginx_conf "$tmp/nginx" "  server {
    listen 127.0.0.1:$NGINX_PORT backlog=4096; root $tmp/www;
    keepalive_timeout 300s; open_file_cache off;
  }" "$want"

cat > "$tmp/ordo.toml" <<EOF
listen = "127.0.0.1:$ORDO_PORT"
threads = 1
workers = 64
policy = "fcfs"
[limits]
max_connections = $want
idle_timeout = "300s"
[admin]
enabled = false
[[classes]]
name = "default"
[[routes]]
prefix = "/"
static = { root = "$tmp/www" }
EOF

# The client: opens N connections, one request and its whole response on each, then holds them until its
# stdin closes; prints "ready" once all N are idle, "closed" after closing them.
cat > "$tmp/client.py" <<'EOF'
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
req = b"GET /file.txt HTTP/1.1\r\nHost: bench\r\n\r\n"
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(req)
    buf = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            sys.exit("connection %d closed before its response" % i)
        buf += chunk
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            head = buf[:end].decode("latin-1").lower()
            length = int(head.split("content-length:")[1].split("\r\n")[0])
            if not head.startswith("http/1.1 200") or "connection: close" in head:
                sys.exit("unexpected answer: " + head.splitlines()[0])
            if len(buf) >= end + 4 + length:
                break
    socks.append(s)
print("ready", flush=True)
sys.stdin.read()
for s in socks:
    s.close()
print("closed", flush=True)
EOF

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

# measure NAME PID PORT -> "before idle after"
measure() {
  local pid=$2 port=$3 before idle after
  for _ in 1 2 3; do curl -fs -o /dev/null "http://127.0.0.1:$port/file.txt"; done
  sleep 0.5
  before=$(rss_kb "$pid")
  exec 7> >(python3 "$tmp/client.py" "$port" "$N" > "$tmp/$1.client" 2>&1)
  local client=$!
  for _ in $(seq 1 600); do
    grep -q ready "$tmp/$1.client" 2>/dev/null && break
    if ! kill -0 "$client" 2>/dev/null; then echo "idle-conns: client for $1 failed: $(cat "$tmp/$1.client")" >&2; exit 1; fi
    sleep 0.1
  done
  grep -q ready "$tmp/$1.client" || { echo "idle-conns: $1: $N connections not ready in 60 s" >&2; exit 1; }
  sleep "$SETTLE"
  idle=$(rss_kb "$pid")
  exec 7>&- # the client closes its connections
  for _ in $(seq 1 100); do grep -q closed "$tmp/$1.client" 2>/dev/null && break; sleep 0.1; done
  sleep "$SETTLE"
  after=$(rss_kb "$pid")
  echo "$before $idle $after"
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs; N = $N" >&2
bench_start_nginx "$tmp/nginx" "http://127.0.0.1:$NGINX_PORT/file.txt"; nginx_pid=$started_pid
read -r nb ni na < <(measure nginx "$nginx_pid" "$NGINX_PORT")

bench_start_ordo "$tmp/ordo.toml" "http://127.0.0.1:$ORDO_PORT/file.txt"; ordo_pid=$started_pid
read -r ob oi oa < <(measure ordo "$ordo_pid" "$ORDO_PORT")
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

echo
echo "$N idle keep-alive connections (one 2 KB response each); nginx $("$nginx_bin" -v 2>&1 | sed 's/.*nginx\///') 1 worker, ordo serve threads = 1"
printf '%-6s %12s %12s %12s %10s %10s\n' server "RSS before" "RSS idle" "RSS closed" "KB/conn" returned
row() { # name before idle after
  awk -v name="$1" -v b="$2" -v i="$3" -v a="$4" -v n="$N" 'BEGIN {
    printf "%-6s %9d KB %9d KB %9d KB %10.2f %9.0f%%\n", name, b, i, a, (i - b) / n, (i > b ? 100 * (i - a) / (i - b) : 100) }'
}
row nginx "$nb" "$ni" "$na"
row ordo "$ob" "$oi" "$oa"
awk -v nb="$nb" -v ni="$ni" -v ob="$ob" -v oi="$oi" 'BEGIN {
  n = (ni - nb); o = (oi - ob);
  printf "\nratio ordo/nginx: %.2f (KB per idle connection; goal: ordo <= 2 KB)\n", (n > 0 ? o / n : 0) }'
