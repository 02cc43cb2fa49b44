#!/usr/bin/env bash
# Class isolation in ordo serve (issue 10): does flooding a low class far past capacity raise the top class's
# p99? For each workload (WORKLOADS: `sleep` = SLEEP_MS of waiting per request, `cpu` = CPU_US of CPU per
# request) and each policy (POLICIES), the top class's p99 is measured alone and then while FLOOD_CLIENTS
# clients flood the low class (a closed loop: its requests queue in ordo), and the ratio printed:
#   - "reserved": the top class has workers reserved to it (`reserved_workers`), CPU work runs on the
#     blocking pool — what ordo does now (target: top p99 under flood ≤ 1.10 × alone);
#   - for `cpu` only, "idle" and "nice" (unless KERNEL=0): as "reserved", and the low class's CPU work runs
#     at a lower kernel priority — `thread_policy = "idle"` (SCHED_IDLE) or `nice = LOW_NICE` — so the
#     kernel, not only ordo's queue, gives the cores to the top class first;
#   - for `cpu` only, "cpuset" when TOP_CPUS and LOW_CPUS are given (cpulists, e.g. whole cores with their SMT
#     siblings): as "idle", and each class's CPU work runs only on its own CPUs (`cpus`), so a top-class
#     request never shares a core (or its hyperthread sibling) with a low-class burner;
#   - "before" (unless BEFORE=0): nothing reserved and, for `cpu`, the CPU burned on the I/O thread
#     (`inline_cpu = true`) — how ordo behaved before, for comparison.
# The top class is TOP_CLIENTS closed-loop clients, with as many reserved workers (at most workers − 1).
# `ordo serve` runs with THREADS serving threads (default 1); `sleep` uses SLEEP_WORKERS workers, `cpu`
# CPU_WORKERS (cores + 1: CPU work has its knee near the core count). SERVER_CPUS / CLIENT_CPUS (e.g. 0-7 and
# 8-15 on 16 cores) pin the server and the load generators to disjoint CPUs; CPU_WORKERS then counts the
# server's CPUs. Each case is measured ROUNDS times, alone then flooded, and the
# medians used; with more than one round the last column gives the range of the rounds' own ratios (the
# host's CPU speed moves by more than 10% between batches: use ROUNDS ≥ 6 before reading a ratio near 1.10).
#
#   bench/class-isolation.sh                       # ~5 min
#   POLICIES="priority stride" WORKLOADS=cpu ROUNDS=3 DURATION=10 bench/class-isolation.sh
#   ORDO_BENCH_NO_BUILD=1 ...                        # use the release binary already built
#   PORT=18291 PRIO=0 ...                            # another port; no raised priority
#   KERNEL=0 BEFORE=0 ...                            # only the "reserved" mode
#   THREADS=8 SERVER_CPUS=0-7 CLIENT_CPUS=8-15 ...   # many cores (issue 22: the 16-core device machine)
#   TOP_CPUS=0-1 LOW_CPUS=2-7 ...                    # also the "cpuset" mode (bench/device.sh picks whole cores)
#
# Needs curl and jq. Everything it starts is killed on every exit path.
set -euo pipefail

DURATION=${DURATION:-8}
ROUNDS=${ROUNDS:-1}
POLICIES=${POLICIES:-"fcfs priority stride"}
WORKLOADS=${WORKLOADS:-"sleep cpu"}
SLEEP_MS=${SLEEP_MS:-10}
CPU_US=${CPU_US:-2000}
SLEEP_WORKERS=${SLEEP_WORKERS:-16}
THREADS=${THREADS:-1}
SERVER_CPUS=${SERVER_CPUS:-}
CLIENT_CPUS=${CLIENT_CPUS:-}
server_cores=$(nproc)
if [ -n "$SERVER_CPUS" ]; then server_cores=$((${SERVER_CPUS#*-} - ${SERVER_CPUS%-*} + 1)); fi
CPU_WORKERS=${CPU_WORKERS:-$((server_cores + 1))}
TOP_CLIENTS=${TOP_CLIENTS:-2}
FLOOD_CLIENTS=${FLOOD_CLIENTS:-200}
BEFORE=${BEFORE:-1}
KERNEL=${KERNEL:-1}
LOW_NICE=${LOW_NICE:-19}
TOP_CPUS=${TOP_CPUS:-}
LOW_CPUS=${LOW_CPUS:-}
PORT=${PORT:-18191}
# Server and clients run at this nice value (root may go below 0), so that other work on a shared machine
# (builds) does not stretch the latencies measured; PRIO=0 to measure without. At -10 builds still took a
# share of the cores from the top class, alone and flooded alike, which hid the flood's effect in noise
# (docs/overload.md, "Measured").
PRIO=${PRIO:--20}

. "$(dirname "$0")/lib.sh"
bench_init class-isolation curl jq awk
OUT=${OUT:-$here/ordo-results/class-isolation}
bench_build --bin ordo
bench_ports_free "$PORT"

mkdir -p "$OUT"

# $1 = file, $2 = policy, $3 = workload, $4 = mode (reserved|idle|nice|cpuset|before)
write_config() {
  local workers reserved inline low_prio="" top_cpus=""
  if [ "$3" = cpu ]; then workers=$CPU_WORKERS; else workers=$SLEEP_WORKERS; fi
  if [ "$4" = before ]; then
    reserved=0; inline=true
  else
    reserved=$((TOP_CLIENTS < workers ? TOP_CLIENTS : workers - 1)); inline=false
  fi
  if [ "$3" = sleep ]; then inline=false; fi
  case $4 in
    idle) low_prio='thread_policy = "idle"' ;;
    nice) low_prio="nice = $LOW_NICE" ;;
    cpuset) low_prio="thread_policy = \"idle\"
cpus = \"$LOW_CPUS\""; top_cpus="cpus = \"$TOP_CPUS\"" ;;
  esac
  cat > "$1" <<EOF
listen = "127.0.0.1:$PORT"
threads = $THREADS
workers = $workers
policy = "$2"
queue_cap = 100000
queue_timeout = "0s"
[limits]
max_connections = 100000
[admin]
enabled = false
[[classes]]
name = "low"
weight = 1
priority = 0
$low_prio
[[classes]]
name = "top"
weight = 4
priority = 10
reserved_workers = $reserved
$top_cpus
[[rules]]
class = "top"
path_prefix = "/top"
[[routes]]
prefix = "/"
synthetic = { inline_cpu = $inline }
EOF
}

work_path() { if [ "$1" = cpu ]; then echo "cpu?us=$CPU_US"; else echo "sleep?ms=$SLEEP_MS"; fi; }

# taskset prefixes for the server and the clients (empty when not pinned)
server_pin=(); client_pin=()
[ -n "$SERVER_CPUS" ] && server_pin=(taskset -c "$SERVER_CPUS")
[ -n "$CLIENT_CPUS" ] && client_pin=(taskset -c "$CLIENT_CPUS")

start_server() { # $1 = config; sets server
  nice -n "$PRIO" ${server_pin[@]+"${server_pin[@]}"} "$ordo" serve --config "$1" 2>>"$tmp/serve.log" &
  server=$!
  pids+=("$server")
  for _ in $(seq 1 100); do
    curl -fs -o /dev/null "http://127.0.0.1:$PORT/top/" && return 0
    sleep 0.05
  done
  echo "class-isolation: server did not come up: $(tail -n 2 "$tmp/serve.log")" >&2
  exit 1
}

# $1 = workload, $2 = out JSON: the top class's closed loop for DURATION seconds
run_top() {
  nice -n "$PRIO" ${client_pin[@]+"${client_pin[@]}"} "$ordo" bench -c "$TOP_CLIENTS" -d "${DURATION}s" --warmup 1s --no-progress --save "$2" \
    "http://127.0.0.1:$PORT/top/$(work_path "$1")" > /dev/null
}

p99() { jq -r '.summary.latency.percentiles[] | select(.p == 99) | .ms' "$1"; }

# the modes of workload $1
modes_of() {
  echo reserved
  if [ "$1" = cpu ] && [ "$KERNEL" = 1 ]; then echo idle nice; fi
  if [ "$1" = cpu ] && [ -n "$TOP_CPUS" ] && [ -n "$LOW_CPUS" ]; then echo cpuset; fi
  if [ "$BEFORE" = 1 ]; then echo before; fi
}
load_before=$(uptime | sed 's/.*load average: //')
echo "load before: $load_before on $(nproc) CPUs; $ROUNDS round(s) x ${DURATION}s per measurement" >&2
declare -A alone flood flood_rps ratios
for round in $(seq 1 "$ROUNDS"); do
  for w in $WORKLOADS; do
    for p in $POLICIES; do
      for m in $(modes_of "$w"); do
        echo "round $round: $w, $p, $m..." >&2
        key="$w $p $m"
        write_config "$tmp/cfg.toml" "$p" "$w" "$m"
        start_server "$tmp/cfg.toml"
        run_top "$w" "$tmp/alone.json"
        alone[$key]="${alone[$key]:-} $(p99 "$tmp/alone.json")"
        # The flood: far more clients than workers, all queued in ordo; the top class measured meanwhile.
        nice -n "$PRIO" ${client_pin[@]+"${client_pin[@]}"} "$ordo" bench -c "$FLOOD_CLIENTS" -d "$((DURATION + 3))s" --timeout 120s --no-progress --save "$tmp/flood.json" \
          "http://127.0.0.1:$PORT/low/$(work_path "$w")" > /dev/null &
        flooder=$!
        pids+=("$flooder")
        sleep 1
        run_top "$w" "$OUT/top-$w-$p-$m.json"
        f1=$(p99 "$OUT/top-$w-$p-$m.json")
        flood[$key]="${flood[$key]:-} $f1"
        ratios[$key]="${ratios[$key]:-} $(awk -v a="$(p99 "$tmp/alone.json")" -v f="$f1" 'BEGIN { print (a > 0 ? f / a : 0) }')"
        wait "$flooder" || true
        flood_rps[$key]=$(jq -r '.summary.rps' "$tmp/flood.json")
        kill "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
      done
    done
  done
done
load_after=$(uptime | sed 's/.*load average: //')
echo "load after: $load_after" >&2
echo "(other processes on the machine, e.g. builds, compete for the same cores: quote the load average)" >&2

echo
echo "top class: $TOP_CLIENTS closed-loop clients; flood: $FLOOD_CLIENTS clients on the low class; sleep = ${SLEEP_MS} ms with $SLEEP_WORKERS workers, cpu = ${CPU_US} us with $CPU_WORKERS workers; threads = $THREADS${SERVER_CPUS:+ on CPUs $SERVER_CPUS}${CLIENT_CPUS:+, clients on CPUs $CLIENT_CPUS}"
echo "$(date -u '+%F %H:%M') UTC; load average (1/5/15 min) $load_before before, $load_after after, on $(nproc) CPUs; $ROUNDS round(s) of ${DURATION}s, medians"
printf '%-7s %-9s %-9s %14s %16s %10s %14s %18s\n' "work" "policy" "mode" "top p99 alone" "top p99 flooded" "ratio" "flood req/s" "rounds' ratios"
for w in $WORKLOADS; do
  for p in $POLICIES; do
    for m in $(modes_of "$w"); do
      key="$w $p $m"
      a=$(echo "${alone[$key]}" | median); f=$(echo "${flood[$key]}" | median)
      r=$(echo "${ratios[$key]}" | tr ' ' '\n' | awk 'NF { n++; if (n == 1 || $1 < lo) lo = $1; if (n == 1 || $1 > hi) hi = $1 }
        END { if (n > 1) printf "%.2f-%.2fx (%d)", lo, hi, n; else printf "-" }')
      printf '%-7s %-9s %-9s %11.2f ms %13.2f ms %9.2fx %14.0f %18s\n' "$w" "$p" "$m" "$a" "$f" \
        "$(awk -v a="$a" -v f="$f" 'BEGIN { print (a > 0 ? f / a : 0) }')" "${flood_rps[$key]}" "$r"
    done
  done
done
echo "(target: ratio ≤ 1.10 — \"reserved\" for sleep, \"idle\"/\"nice\" (low class at lower kernel priority) or \"cpuset\" (classes on their own CPUs) for cpu; the top class's bench JSON under flood is in $OUT)"
