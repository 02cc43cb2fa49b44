# Plumbing shared by the scripts under bench/ (sourced, not run): the tool check, a temp dir and the
# processes a script starts, both cleaned up on every exit path, the release build and where its binaries
# are, and a check that the ports a script will listen on are free (a port another program holds would
# otherwise be measured in ordo's or the peer's place), and the measuring helpers (a process's CPU ticks,
# a core's busy share, the median). Each script keeps what it measures and prints.
#
#   . "$(dirname "$0")/lib.sh"
#   bench_init serve-vs-nginx nginx wrk taskset curl   # $here, $tmp, pids=(), traps; exits 1 naming a missing tool
#   bench_build --bin ordo                               # unless ORDO_BENCH_NO_BUILD=1; sets $target_dir and $ordo
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
# invocation. Sets $target_dir (cargo's, wherever CARGO_TARGET_DIR puts it) and $ordo (the release binary).
bench_build() {
  if [ "${ORDO_BENCH_NO_BUILD:-0}" != 1 ]; then
    echo "building (release): cargo build --release $*" >&2
    (cd "$here" && cargo build --release -q "$@")
  fi
  target_dir=$(cd "$here" && cargo metadata --format-version 1 --no-deps 2>/dev/null |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
  target_dir=${target_dir:-$here/target}
  ordo=$target_dir/release/ordo
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
# the CPU ticks (user + system) a process has used so far, and the system's tick rate.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
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
