# Plumbing shared by the scripts under bench/ (sourced, not run): the tool check, a temp dir and the
# processes a script starts, both cleaned up on every exit path, the release build and where its binaries
# are, and a check that the ports a script will listen on are free (a port another program holds would
# otherwise be measured in ordo's or the peer's place); the measuring helpers (a process's CPU ticks,
# a core's busy share, the median, one wrk run, the ABBA rounds); and what the peer comparisons set up
# alike (the 2 KB file, a test CA and certificate, nginx's configuration and start, ordo serve's start, the
# three-class request mix). Each script keeps what it measures and prints.
#
#   . "$(dirname "$0")/lib.sh"
#   bench_init serve-vs-nginx nginx wrk taskset curl   # $here, $tmp, pids=(), traps; exits 1 naming a missing tool
#   bench_build --bin ordo                               # unless ORDO_BENCH_NO_BUILD=1; sets $target_dir and $ordo
#                                                        # ($ORDO_BIN when set: another build of ordo)
#   bench_ports_free "$NGINX_PORT" "$ORDO_PORT"          # exits 1 naming a port already in use
#   some_server & pids+=("$!")                           # killed and waited for on exit
#
# ORDO_BENCH_DEBUG=1 prints the last lines of every *.stderr and *.log under $tmp on exit.

# $1 = the script's name (for messages and the temp dir), then the tools it needs.
bench_init() {
  bench_name=$1
  shift
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 || {
      echo "$bench_name: $tool not found (ORDO_SETUP_PEERS=1 ./scripts/setup.sh)" >&2
      exit 1
    }
  done
  tmp=$(mktemp -d -t "ordo-$bench_name.XXXXXX")
  chmod 755 "$tmp" # nginx's and apache's workers run as an unprivileged user when started as root
  pids=()
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
}

bench_cleanup() {
  local p
  if [ "${ORDO_BENCH_DEBUG:-0}" = 1 ]; then
    find "$tmp" \( -name '*.stderr' -o -name '*.log' -o -name stderr \) -type f 2>/dev/null | while read -r f; do
      echo "== $f" >&2
      tail -n 5 "$f" >&2
    done
  fi
  for p in "${pids[@]:-}"; do
    [ -n "$p" ] && kill "$p" 2>/dev/null || true
  done
  for p in "${pids[@]:-}"; do
    [ -n "$p" ] && wait "$p" 2>/dev/null || true
  done
  rm -rf "$tmp"
}

# Builds (release, quietly) what the arguments name, unless ORDO_BENCH_NO_BUILD=1; one call per cargo
# invocation. Sets $target_dir (cargo's, wherever CARGO_TARGET_DIR puts it) and $ordo (the release binary,
# or $ORDO_BIN when set: another build of ordo, an earlier commit's say, with ORDO_BENCH_NO_BUILD=1).
bench_build() {
  if [ "${ORDO_BENCH_NO_BUILD:-0}" != 1 ]; then
    echo "building (release): cargo build --release $*" >&2
    (cd "$here" && cargo build --release -q "$@")
  fi
  # (no cargo, as on the device machine, or no answer: the default target directory)
  target_dir=$(cd "$here" && cargo metadata --format-version 1 --no-deps 2>/dev/null |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p') || target_dir=""
  target_dir=${target_dir:-$here/target}
  ordo=${ORDO_BIN:-$target_dir/release/ordo}
}

# Exits 1 if any of the TCP ports is already listened on (on any address).
bench_ports_free() {
  local port
  for port in "$@"; do
    if ss -Htln "sport = :$port" 2>/dev/null | grep -q .; then
      echo "$bench_name: port $port is already in use ($(ss -Htlnp "sport = :$port" 2>/dev/null | grep -o 'users:.*' | head -n 1)); set the script's *PORT variables to free ones" >&2
      exit 1
    fi
  done
}

# Measuring helpers shared by the scripts that pin a server and a client to a core each:
# the CPU ticks (user + system) a process (or the space-separated processes: nginx's workers) has used so
# far, and the system's tick rate.
ticks() { local p t=0; for p in $1; do t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat"))); done; echo "$t"; }
clk_tck=$(getconf CLK_TCK)
# One CPU's line of /proc/stat, and how busy (%) that CPU was between two of its lines.
cpu_line() { grep "^cpu$1 " /proc/stat; }
busy_pct() {
  echo "$1 $2" | awk '{ i1 = $5 + $6; t1 = 0; for (k = 2; k <= 11; k++) t1 += $k;
                        i2 = $16 + $17; t2 = 0; for (k = 13; k <= 22; k++) t2 += $k;
                        printf "%.0f", (t2 > t1 ? 100 * (1 - (i2 - i1) / (t2 - t1)) : 0) }'
}
# The median of numbers given one per line or separated by spaces.
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }

# One wrk run from CLIENT_CPU against URL with CONNS connections for DURATION, the extra arguments passed on
# (-H, -s): prints "req/s  CPU µs per request of process PID  busy % of SERVER_CPU  busy % of CLIENT_CPU",
# and warns on stderr when wrk saw non-2xx answers or socket errors.
bench_wrk() {
  local measure_pid=$1 url=$2 conns=$3; shift 3
  local t0 t1 out reqs rps s0 s1 c0 c1
  t0=$(ticks "$measure_pid")
  s0=$(cpu_line "$SERVER_CPU"); c0=$(cpu_line "$CLIENT_CPU")
  out=$(taskset -c "$CLIENT_CPU" wrk -t1 -c"$conns" -d"$DURATION" "$@" "$url")
  s1=$(cpu_line "$SERVER_CPU"); c1=$(cpu_line "$CLIENT_CPU")
  t1=$(ticks "$measure_pid")
  reqs=$(echo "$out" | awk '/requests in/ { print $1 }')
  rps=$(echo "$out" | awk '/Requests\/sec/ { print $2 }')
  if echo "$out" | grep -qE 'Non-2xx|Socket errors'; then
    echo "warning: wrk on $url reported: $(echo "$out" | grep -E 'Non-2xx|Socket errors' | tr -s ' ')" >&2
  fi
  awk -v r="$rps" -v n="$reqs" -v dt="$((t1 - t0))" -v hz="$clk_tck" -v sb="$(busy_pct "$s0" "$s1")" -v cb="$(busy_pct "$c0" "$c1")" \
    'BEGIN { printf "%.0f %.2f %s %s\n", r, (n > 0 ? dt / hz * 1e6 / n : 0), sb, cb }'
}

# Runs `run_case NAME` (the script's) for each case named, ROUNDS times: forward in odd rounds, backward in
# even ones (ABBA), so a drift in the machine's load favours no case.
bench_rounds() {
  local round k order
  for round in $(seq 1 "$ROUNDS"); do
    echo "round $round/$ROUNDS..." >&2
    if [ $((round % 2)) = 1 ]; then order=("$@"); else order=(); for ((k = $#; k >= 1; k--)); do order+=("${!k}"); done; fi
    for k in "${order[@]}"; do run_case "$k"; done
  done
}

# Each case's figures over the rounds, space-separated: req/s, server CPU µs per request, server and client
# core busy %. bench_wrk_case CASE PID URL CONNS [wrk args...] runs bench_wrk once and adds its figures.
declare -A rps cpu sbusy cbusy
bench_wrk_case() {
  local case=$1 r c sb cb
  shift
  read -r r c sb cb < <(bench_wrk "$@")
  rps[$case]="${rps[$case]:-} $r"; cpu[$case]="${cpu[$case]:-} $c"
  sbusy[$case]="${sbusy[$case]:-} $sb"; cbusy[$case]="${cbusy[$case]:-} $cb"
}
# The median of a space-separated list, and a / b with two decimals (0 when b is 0).
med() { echo "$1" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

# Paired ratios: each round runs both cases of a comparison back to back (ABBA, bench_rounds), so the ratio
# of the two figures of one round cancels the machine's drift between rounds, which the ratio of two medians
# keeps (on a shared 2-core VM one proxy alone moves ±8% from round to round). bench_paired A B: the ratio
# a_i / b_i of each round's figures (A and B space-separated, one figure per round, same rounds in the same
# order; a round where either figure is 0 — a failed run — is left out), summarised on stdout as
# "MEDIAN GEOMEAN LO HI N": the median paired ratio, their geometric mean and its 95% confidence interval
# (Student's t interval on the log ratios, N - 1 degrees of freedom, back-transformed; "- -" when N < 2).
bench_paired() {
  awk -v a="$1" -v b="$2" 'BEGIN {
    na = split(a, x, " "); nb = split(b, y, " "); n = 0
    for (i = 1; i <= na && i <= nb; i++) if (x[i] > 0 && y[i] > 0) { n++; r[n] = x[i] / y[i] }
    if (n == 0) { print "- - - - 0"; exit }
    for (i = 2; i <= n; i++) { v = r[i]; for (j = i - 1; j >= 1 && r[j] > v; j--) r[j + 1] = r[j]; r[j + 1] = v }
    med = (n % 2 ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2)
    s = 0; for (i = 1; i <= n; i++) s += log(r[i]); m = s / n
    if (n < 2) { printf "%.4f %.4f - - %d\n", med, exp(m), n; exit }
    ss = 0; for (i = 1; i <= n; i++) ss += (log(r[i]) - m) ^ 2
    se = sqrt(ss / (n - 1) / n)
    # two-sided 95% quantiles of Student t, 1..30 degrees of freedom; beyond, z + (z^3 + z) / (4 df)
    split("12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262 2.228 2.201 2.179 2.160 2.145 2.131 2.120 2.110 2.101 2.093 2.086 2.080 2.074 2.069 2.064 2.060 2.056 2.052 2.048 2.045 2.042", t, " ")
    df = n - 1; q = (df <= 30 ? t[df] : 1.96 + 2.372 / df)
    printf "%.4f %.4f %.4f %.4f %d\n", med, exp(m), exp(m - q * se), exp(m + q * se), n
  }'
}
# The two paired lines of a comparison between two bench_wrk_case cases: req/s (CASE / PEER) and CPU
# efficiency (PEER's CPU us/req / CASE's), each against its goal (default 1.0; "-" for none).
#   bench_paired_cases CASE PEER [REQS_GOAL] [CPU_GOAL]
bench_paired_cases() {
  bench_paired_line "  paired req/s:         " "${rps[$1]}" "${rps[$2]}" "${3:-1.0}"
  bench_paired_line "  paired CPU efficiency:" "${cpu[$2]}" "${cpu[$1]}" "${4:-1.0}"
}
# One line on a paired comparison: LABEL, then "median M, geo. mean G, 95% CI [LO, HI] (t on log ratios):"
# and a verdict against GOAL (default 1.0, the ratio must be at least GOAL): "meets goal" when the whole
# interval is >= GOAL, "below goal" when it is wholly below, "not distinguishable from GOAL (N rounds)"
# otherwise; then the per-round ratios. With GOAL "-" (a ratio with no goal) the verdict says "above 1.0" /
# "below 1.0" / "not distinguishable from 1.0 (N rounds)".
#   bench_paired_line LABEL A B [GOAL]
bench_paired_line() {
  local label=$1 a=$2 b=$3 goal=${4:-1.0} med gm lo hi n
  read -r med gm lo hi n < <(bench_paired "$a" "$b")
  awk -v label="$label" -v med="$med" -v gm="$gm" -v lo="$lo" -v hi="$hi" -v n="$n" -v goal="$goal" -v a="$a" -v b="$b" 'BEGIN {
    g = (goal == "-" ? 1.0 : goal + 0)
    rounds = n " round" (n == 1 ? "" : "s")
    if (n == 0) { printf "%s no round with both figures\n", label; exit }
    if (lo == "-") { ci = "no CI from 1 round"; verdict = "not distinguishable from " sprintf("%.1f", g) " (" rounds ")" }
    else {
      ci = sprintf("95%% CI [%.3f, %.3f] (t on log ratios)", lo, hi)
      if (lo + 0 >= g) verdict = (goal == "-" ? "above 1.0" : "meets goal (>= " goal ")")
      else if (hi + 0 < g) verdict = (goal == "-" ? "below 1.0" : "below goal (>= " goal ")")
      else verdict = "not distinguishable from " (goal == "-" ? "1.0" : goal) " (" rounds ")"
    }
    na = split(a, x, " "); nb = split(b, y, " "); per = ""
    for (i = 1; i <= na && i <= nb; i++) per = per " " (x[i] > 0 && y[i] > 0 ? sprintf("%.2f", x[i] / y[i]) : "-")
    printf "%s median %.2f, geo. mean %.2f, %s: %s; rounds:%s\n", label, med, gm, ci, verdict, per
  }'
}

# --- what the peer comparisons set up alike ---------------------------------------------------------------

# The 2 KB text file the comparisons serve: $1 = path.
bench_file_2k() { awk 'BEGIN { for (i = 0; i < 2048; i++) printf "%c", 97 + i % 26 }' > "$1"; }

# A throwaway CA ($tmp/ca.pem) and an ECDSA P-256 server certificate it signs, for localhost and 127.0.0.1
# ($tmp/cert.pem, $tmp/key.pem, readable by nginx's unprivileged worker): rustls clients refuse a
# self-signed leaf.
bench_tls_cert() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=bench CA" \
    -keyout "$tmp/ca.key" -out "$tmp/ca.pem" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
    -keyout "$tmp/key.pem" -out "$tmp/cert.csr" 2>/dev/null
  printf "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n" > "$tmp/ext.cnf"
  openssl x509 -req -in "$tmp/cert.csr" -CA "$tmp/ca.pem" -CAkey "$tmp/ca.key" -days 2 \
    -extfile "$tmp/ext.cnf" -out "$tmp/cert.pem" 2>/dev/null
  chmod 644 "$tmp/key.pem"
}

# Writes DIR/nginx.conf: one worker (NGINX_WORKERS when set) in the foreground, its pid, logs and temp files under DIR, no access log,
# sendfile with tcp_nopush/tcp_nodelay, unlimited keep-alive requests, an open-file cache, text/plain by
# default; SERVERS (the server blocks, with whatever a script sets differently per server) inside `http`.
# CONNECTIONS (default 8192) sets worker_connections, and worker_rlimit_nofile when given. NGINX_USER (when
# set) is the user nginx's workers run as when started by root (default: nginx's own, `nobody`).
#   bench_nginx_conf DIR SERVERS [CONNECTIONS]
bench_nginx_conf() {
  local dir=$1 servers=$2 conns=${3:-8192} rlimit=""
  [ -n "${3:-}" ] && rlimit="worker_rlimit_nofile $3;
"
  mkdir -p "$dir/tmp" "$dir/logs"
  local user=""
  [ -n "${NGINX_USER:-}" ] && user="user $NGINX_USER;
"
  cat > "$dir/nginx.conf" <<EOF
${user}worker_processes ${NGINX_WORKERS:-1};
${rlimit}daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections $conns; }
http {
  access_log off;
  sendfile on; tcp_nopush on; tcp_nodelay on;
  keepalive_requests 100000000;
  open_file_cache max=100 inactive=60s;
  default_type text/plain;
  client_body_temp_path $dir/tmp; proxy_temp_path $dir/tmp; fastcgi_temp_path $dir/tmp;
  uwsgi_temp_path $dir/tmp; scgi_temp_path $dir/tmp;
$servers
}
EOF
}

# Waits (SECONDS at most, default 10) until URL answers 2xx; exits 1 saying so when it does not.
#   bench_wait_ready URL [SECONDS]
bench_wait_ready() {
  for _ in $(seq 1 "$((${2:-10} * 10))"); do
    if curl -fsk -o /dev/null "$1"; then return 0; fi
    sleep 0.1
  done
  echo "$bench_name: $1 did not come up" >&2
  exit 1
}

# Starts nginx with DIR/nginx.conf, pinned to CPU when one is given, and waits until URL answers; sets
# started_pid to its (first) worker, the process that does the work, and started_pids to all its workers.
#   bench_start_nginx DIR URL [CPU]
bench_start_nginx() {
  local dir=$1 url=$2 pin=() master
  [ -n "${3:-}" ] && pin=(taskset -c "$3")
  ${pin[@]+"${pin[@]}"} "$(command -v nginx)" -c "$dir/nginx.conf" -p "$dir" 2>>"$dir/stderr" &
  master=$!
  pids+=("$master")
  bench_wait_ready "$url"
  started_pid=$(pgrep -P "$master" | head -1)
  started_pids=$(pgrep -P "$master" | paste -sd' ')
}

# Starts `$ordo serve --config CONFIG` (stderr to $tmp/ordo.stderr), pinned to CPU when one is given, waits
# until URL answers and checks it still runs; sets started_pid.
#   bench_start_ordo CONFIG URL [CPU]
bench_start_ordo() {
  local pin=()
  [ -n "${3:-}" ] && pin=(taskset -c "$3")
  ${pin[@]+"${pin[@]}"} "$ordo" serve --config "$1" 2>>"$tmp/ordo.stderr" &
  bench_check_started "$!" "$2"
}
# Registers PID (a server just started in the background) as started_pid, to be killed on exit; waits until
# URL answers and checks PID still runs (else exits 1 with the end of LOG, default $tmp/ordo.stderr).
#   bench_check_started PID URL [LOG]
bench_check_started() {
  started_pid=$1
  pids+=("$started_pid")
  bench_wait_ready "$2"
  kill -0 "$started_pid" 2>/dev/null || { echo "$bench_name: the server for $2 exited: $(tail -n 2 "${3:-$tmp/ordo.stderr}")" >&2; exit 1; }
}

# The head of ordo serve's configuration in the peer comparisons (on stdout): listen on 127.0.0.1:PORT, one
# serving thread (ORDO_THREADS when set), policy POLICY, workers (ORDO_WORKERS when set), queue and
# connections far above any client count (the peers have no such limits), no admin listener; LIMITS (lines,
# optional) added to [limits], the head's last table.
#   bench_ordo_head PORT POLICY [LIMITS]
bench_ordo_head() {
  echo "listen = \"127.0.0.1:$1\""
  echo "threads = ${ORDO_THREADS:-1}"
  # ORDO_WORKERS: the pool's size (default 4096); `default` leaves it to ordo (64 per serving thread)
  case "${ORDO_WORKERS:-4096}" in
    default) ;;
    *) echo "workers = ${ORDO_WORKERS:-4096}" ;;
  esac
  echo "policy = \"$2\""
  echo "queue_cap = 100000"
  # ORDO_COALESCE: the serving threads' wakeup coalescing (docs/serve.md, "Wakeup coalescing"); ordo's default if unset
  if [ -n "${ORDO_COALESCE:-}" ]; then echo "coalesce = \"$ORDO_COALESCE\""; fi
  echo "[admin]"
  echo "enabled = false"
  echo "[limits]"
  echo "max_connections = 100000"
  if [ -n "${3:-}" ]; then echo "$3"; fi
}

# The three-class mix of the scheduling cases: ordo serve's classes a, b, c (stride weights 4:2:1) chosen by
# path prefix (bench_three_classes: config lines on stdout), and a wrk script cycling through /a/, /b/ and
# /c/file.txt (bench_mix_lua FILE).
bench_three_classes() {
  local c
  for c in a:4 b:2 c:1; do
    echo "[[classes]]"; echo "name = \"${c%%:*}\""; echo "weight = ${c##*:}"
  done
  for c in a b c; do
    echo "[[rules]]"; echo "class = \"$c\""; echo "path_prefix = \"/$c\""
  done
}
bench_mix_lua() {
  cat > "$1" <<'EOF'
local paths = { "/a/file.txt", "/b/file.txt", "/c/file.txt" }
local i = 0
request = function()
  i = i % 3 + 1
  return wrk.format(nil, paths[i])
end
EOF
}

# The proxy comparisons' peers (bench/proxy-vs-haproxy.sh, bench/proxy-instructions.sh), configured alike:
# DIR/haproxy.cfg, HAProxy with one thread listening on 127.0.0.1:PORT in front of 127.0.0.1:UP_PORT, keeping
# client and upstream connections alive (`http-reuse always`) and adding X-Forwarded-For like ordo does;
# run it with `haproxy -db -f DIR/haproxy.cfg`.
#   bench_haproxy_conf DIR PORT UP_PORT
bench_haproxy_conf() {
  mkdir -p "$1"
  {
    bench_haproxy_head "$2" "  pidfile $1/haproxy.pid" "  option forwardfor"
    echo "backend be"
    echo "  server up 127.0.0.1:$3"
  } > "$1/haproxy.cfg"
}
# The head of the HAProxy configurations (on stdout): one thread, keep-alive both ways (`http-reuse always`),
# the usual timeouts, a frontend on 127.0.0.1:PORT to backend `be`, which the caller writes next;
# GLOBAL_LINES and DEFAULTS_LINES (optional) are added to those sections.
#   bench_haproxy_head PORT [GLOBAL_LINES] [DEFAULTS_LINES]
bench_haproxy_head() {
  cat <<EOF
global
  nbthread 1
  maxconn 8192
${2:-}
defaults
  mode http
  timeout connect 2s
  timeout client 30s
  timeout server 30s
  option http-keep-alive
  http-reuse always
${3:-}
frontend fe
  bind 127.0.0.1:$1
  default_backend be
EOF
}
# FILE: an ordo serve configuration on 127.0.0.1:PORT (bench_ordo_head, with HEAD_LINE among the [limits]
# settings if given), policy POLICY over one class ("default") or the three of bench_three_classes (CLASSES
# = 1 or 3), and one route "/" whose backend is BACKEND_LINE (e.g. `static = { root = "..." }`).
#   bench_ordo_route_conf FILE POLICY CLASSES PORT BACKEND_LINE [HEAD_LINE]
bench_ordo_route_conf() {
  {
    bench_ordo_head "$4" "$2" "${6:-}"
    if [ "$3" = 3 ]; then
      bench_three_classes
    else
      echo "[[classes]]"; echo "name = \"default\""
    fi
    echo "[[routes]]"
    echo "prefix = \"/\""
    echo "$5"
  } > "$1"
}

# FILE: ordo serve as a reverse proxy (bench_ordo_route_conf): one route "/" proxied to 127.0.0.1:UP_PORT,
# its connection pool at ordo's defaults (issue 22: the default pool keeps what is in use; ORDO_POOL_MAX_IDLE
# sets `pool_max_idle` to compare with a cap; ORDO_BUFFER_MAX_BYTES sets `buffer_max_bytes`, the largest body
# read whole, to compare reading a body whole with streaming it).
#   bench_ordo_proxy_conf FILE POLICY CLASSES PORT UP_PORT
bench_ordo_proxy_conf() {
  local pool=""
  [ -n "${ORDO_POOL_MAX_IDLE:-}" ] && pool=", pool_max_idle = $ORDO_POOL_MAX_IDLE"
  [ -n "${ORDO_BUFFER_MAX_BYTES:-}" ] && pool="$pool, buffer_max_bytes = $ORDO_BUFFER_MAX_BYTES"
  bench_ordo_route_conf "$1" "$2" "$3" "$4" "proxy = { upstreams = [\"127.0.0.1:$5\"]$pool }"
}

# How many of an `ordo bench --json` run's responses were 2xx ($1 = its JSON).
bench_2xx() {
  echo "$1" | tr -d ' \n' | sed -n 's/.*"status_counts":\[\(.*\)\].*/\1/p' |
    grep -o '"status":2[0-9][0-9],"count":[0-9]*' | awk -F: '{ s += $NF } END { print s + 0 }'
}
