#!/usr/bin/env bash
# ordo serve's adaptive concurrency (`workers = "auto"`) against the best fixed `workers` of a sweep, on
# ordo's synthetic backend with a knee that moves: 64 requests at once for PHASE seconds, then 16, then 64
# again (`capacity` schedule, a c-server FIFO queue; SERVICE_MS per request). Issue 12's checks:
#   - after each capacity change the limit is within ±10% of the knee in ≤ 10 s (and stays, probes aside);
#   - throughput ≥ 95% of the best fixed `workers`, and p99 ≤ that setting's p99;
#   - class shares (stride, weights 4:2:1) within 5% of the weights in every SHARE_WINDOW (2 s) of the run.
# Every run: `ordo serve` (threads = 1, stride over three classes, one synthetic route), `ordo bench` closed
# loop with CLIENTS clients split equally over the classes (so every class stays backlogged), /status polled
# every 0.25 s for the limit and the classes' completed requests. Throughput and latency leave out the first
# WARMUP seconds of every run (server start-up: the limiter's first probe and climb take about a second);
# the limit and the shares are judged over the whole run, both capacity changes included. The fixed sweep runs first, then each
# limiter algorithm. Prints a table per run and the ratios; writes the bench JSON of every run, a `series`
# document with the limit over time and the class shares per second, and an HTML page from `ordo report`,
# all under OUT.
#
#   bench/adaptive-knee.sh                                   # ~6 min: PHASE=15, 5 fixed settings, 2 algorithms
#   PHASE=20 SWEEP="32 64 96" ALGORITHMS=gradient bench/adaptive-knee.sh
#   ORDO_BENCH_NO_BUILD=1 ...                                 # use the release binary already built
#   PORT=18281 ADMIN_PORT=18282 PRIO=0 ...                    # other ports; no raised priority
#
# Needs curl and jq (ORDO_SETUP_PEERS=1 ./scripts/setup.sh). Everything it starts is killed on every exit
# path; the load average is printed before and after (the figures are only as quiet as the machine).
set -euo pipefail

PHASE=${PHASE:-15}
SERVICE_MS=${SERVICE_MS:-40}
SHARE_WINDOW=${SHARE_WINDOW:-2}
WARMUP=${WARMUP:-2}
CLIENTS=${CLIENTS:-384}
SWEEP=${SWEEP:-"16 32 64 96 128"}
ALGORITHMS=${ALGORITHMS:-"gradient aimd"}
PORT=${PORT:-18181}
ADMIN_PORT=${ADMIN_PORT:-18182}
# Server and client run at this nice value (root may go below 0), so that other work on a shared machine
# does not stretch the round trips the limiter reads: its sleeps overrun by milliseconds when a build holds
# the core, which looks like queueing to a latency-driven limiter. PRIO=0 to measure without.
PRIO=${PRIO:--10}
HIGH=64
LOW=16

. "$(dirname "$0")/lib.sh"
bench_init adaptive-knee curl jq awk
OUT=${OUT:-$here/ordo-results/adaptive-knee}
bench_build --bin ordo
bench_ports_free "$PORT" "$ADMIN_PORT"

mkdir -p "$OUT"

duration=$((3 * PHASE))
cat > "$tmp/mix.toml" <<EOF
assign = "clients"
[[class]]
name = "a"
url = "/a/sleep?ms=$SERVICE_MS"
[[class]]
name = "b"
url = "/b/sleep?ms=$SERVICE_MS"
[[class]]
name = "c"
url = "/c/sleep?ms=$SERVICE_MS"
EOF

write_config() { # $1 = file, $2 = workers value (a number or "auto"), $3 = algorithm (auto only)
  {
    echo "listen = \"127.0.0.1:$PORT\""
    echo "threads = 1"
    echo "workers = $2"
    echo "policy = \"stride\""
    echo "queue_cap = 100000"
    echo "queue_timeout = \"0s\""
    echo "[limits]"
    echo "max_connections = 100000"
    echo "[admin]"
    echo "listen = \"127.0.0.1:$ADMIN_PORT\""
    if [ -n "${3:-}" ]; then
      echo "[limiter]"
      echo "algorithm = \"$3\""
    fi
    bench_three_classes
    echo "[[routes]]"
    echo "prefix = \"/\""
    echo "synthetic = { capacity = [{ at = \"0s\", servers = $HIGH }, { at = \"${PHASE}s\", servers = $LOW }, { at = \"$((2 * PHASE))s\", servers = $HIGH }] }"
  } > "$1"
}

# One run: $1 = name, $2 = workers, $3 = algorithm. Leaves $tmp/$1.poll ("t limit probing a b c rtt_ms
# baseline_ms" per line)
# and $OUT/$1.json (ordo bench).
run() {
  local name=$1 cfg="$tmp/$1.toml" server poller
  write_config "$cfg" "$2" "${3:-}"
  nice -n "$PRIO" "$ordo" serve --config "$cfg" 2>>"$tmp/serve.log" &
  server=$!
  pids+=("$server")
  local up=0
  for _ in $(seq 1 100); do
    kill -0 "$server" 2>/dev/null || break
    curl -fs -o /dev/null "http://127.0.0.1:$ADMIN_PORT/status" && { up=1; break; }
    sleep 0.05
  done
  # (a port another program holds would otherwise be measured in ordo's place)
  if [ "$up" != 1 ] || ! kill -0 "$server" 2>/dev/null; then
    echo "adaptive-knee: server did not come up (PORT=$PORT ADMIN_PORT=$ADMIN_PORT): $(tail -n 2 "$tmp/serve.log")" >&2
    exit 1
  fi
  : > "$tmp/$name.poll"
  (
    while :; do
      curl -fs "http://127.0.0.1:$ADMIN_PORT/status" 2>/dev/null \
        | jq -r '"\(.uptime_s) \(.lanes[0].limit) \(.lanes[0].probing) \(.classes | map(.completed) | join(" ")) \(.lanes[0].last_rtt_ms // 0) \(.lanes[0].baseline_ms // 0)"' \
          >> "$tmp/$name.poll" 2>/dev/null || true
      sleep 0.25
    done
  ) &
  poller=$!
  pids+=("$poller")
  nice -n "$PRIO" "$ordo" bench -c "$CLIENTS" --warmup "${WARMUP}s" -d "$((duration - WARMUP))s" --mix "$tmp/mix.toml" --no-progress \
    --save "$OUT/$name.json" \
    "http://127.0.0.1:$PORT/" > "$tmp/$name.bench.txt"
  kill "$poller" "$server" 2>/dev/null || true
  wait "$poller" "$server" 2>/dev/null || true
  cp "$tmp/$name.poll" "$OUT/$name.poll"
}

# Worst relative error of any class's share of the completions in any SHARE_WINDOW seconds, against 4:2:1.
share_error() { # $1 = poll file
  awk -v win="$SHARE_WINDOW" 'BEGIN { w[1] = 4/7; w[2] = 2/7; w[3] = 1/7; worst = 0 }
       { t = $1; sec = int(t / win); if (!(sec in first)) { first[sec] = 1; ts[++n] = sec; a[sec] = $4; b[sec] = $5; c[sec] = $6 } }
       END {
         for (i = 2; i <= n; i++) {
           s0 = ts[i-1]; s1 = ts[i]; if (s1 != s0 + 1) continue
           da = a[s1] - a[s0]; db = b[s1] - b[s0]; dc = c[s1] - c[s0]; tot = da + db + dc
           if (tot < 50) continue
           e1 = da / tot / w[1] - 1; e2 = db / tot / w[2] - 1; e3 = dc / tot / w[3] - 1
           for (k = 1; k <= 3; k++) { e = (k == 1 ? e1 : (k == 2 ? e2 : e3)); if (e < 0) e = -e; if (e > worst) worst = e }
         }
         printf "%.3f", worst
       }' "$1"
}

# Seconds after `from` until the limit is within ±10% of `knee` for good (until `to`), probes aside; "never".
settle() { # $1 = poll file, $2 = from, $3 = to, $4 = knee
  awk -v from="$2" -v to="$3" -v k="$4" '
    $1 >= from && $1 < to && $3 == "false" {
      ok = ($2 >= 0.9 * k && $2 <= 1.1 * k)
      if (ok && since == "") since = $1
      if (!ok) since = ""
    }
    END { if (since == "") print "never"; else printf "%.2fs", since - from }' "$1"
}

stat() { jq -r "$2" "$OUT/$1.json"; }
p99() { stat "$1" '.summary.latency.percentiles[] | select(.p == 99) | .ms'; }
rps() { stat "$1" '.summary.rps'; }
failed() { stat "$1" '.summary.failed.total'; }
non2xx() { stat "$1" '.summary.non_2xx'; }
class_p99() { jq -r '[.classes[] | (.latency.percentiles[] | select(.p == 99) | .ms | tostring)] | join("/")' "$OUT/$1.json"; }

echo "load before: $(uptime | sed 's/.*load average: //') on $(nproc) CPUs; capacity $HIGH/$LOW/$HIGH for ${PHASE}s each, ${SERVICE_MS} ms per request, $CLIENTS clients" >&2
runs=()
for w in $SWEEP; do
  echo "fixed workers = $w..." >&2
  run "fixed-$w" "$w"
  runs+=("fixed-$w")
done
for a in $ALGORITHMS; do
  echo "workers = auto ($a)..." >&2
  run "auto-$a" '"auto"' "$a"
  runs+=("auto-$a")
done
load_after=$(uptime | sed 's/.*load average: //')
echo "load after: $load_after" >&2

echo
printf '%-15s %10s %10s %22s %12s %8s %8s\n' "run" "req/s" "p99 ms" "p99 a/b/c ms" "share err" "failed" "non-2xx"
best=""; best_rps=0
for r in "${runs[@]}"; do
  printf '%-15s %10.0f %10.1f %22s %11.1f%% %8s %8s\n' "$r" "$(rps "$r")" "$(p99 "$r")" "$(class_p99 "$r")" \
    "$(awk -v e="$(share_error "$tmp/$r.poll")" 'BEGIN { print 100 * e }')" "$(failed "$r")" "$(non2xx "$r")"
  if [[ $r == fixed-* ]] && awk -v a="$(rps "$r")" -v b="$best_rps" 'BEGIN { exit !(a > b) }'; then
    best=$r; best_rps=$(rps "$r")
  fi
done
echo "(share err: the worst relative error of a class's share of the completions in any ${SHARE_WINDOW} s window, against 4:2:1)"
echo
echo "best fixed by req/s: $best"
for a in $ALGORITHMS; do
  r="auto-$a"
  printf '%-15s limit settles within ±10%% of the knee after: start %s (knee %d), down %s (knee %d), up %s (knee %d)   [target ≤ 10 s each way]\n' "$r" \
    "$(settle "$tmp/$r.poll" 0 "$PHASE" "$HIGH")" "$HIGH" \
    "$(settle "$tmp/$r.poll" "$PHASE" "$((2 * PHASE))" "$LOW")" "$LOW" \
    "$(settle "$tmp/$r.poll" "$((2 * PHASE))" "$duration" "$HIGH")" "$HIGH"
  printf '%-15s ratio req/s auto/best fixed: %.3f [target ≥ 0.95]   ratio p99 auto/best fixed: %.3f [target ≤ 1]   share err %.1f%% [target ≤ 5%%]\n' "$r" \
    "$(awk -v a="$(rps "$r")" -v b="$best_rps" 'BEGIN { print a / b }')" \
    "$(awk -v a="$(p99 "$r")" -v b="$(p99 "$best")" 'BEGIN { print a / b }')" \
    "$(awk -v e="$(share_error "$tmp/$r.poll")" 'BEGIN { print 100 * e }')"
done

# Charts: the limit of each auto run against the knee, and every run's class shares per second.
series_points() { # $1 = poll file, $2 = column (default 2: the limit) -> [[t, value], ...] (probes included)
  awk -v col="${2:-2}" 'BEGIN { printf "[" } $col > 0 { printf "%s[%s,%s]", (k++ ? "," : ""), $1, $col } END { printf "]" }' "$1"
}
share_points() { # $1 = poll file, $2 = column (4, 5, 6) -> [[second, share], ...]
  awk -v col="$2" -v win="$SHARE_WINDOW" '{ sec = int($1 / win); if (!(sec in seen)) { seen[sec] = 1; ts[++n] = sec; v[sec] = $col; t[sec] = $4 + $5 + $6 } }
    END { printf "["; k = 0
      for (i = 2; i <= n; i++) { s0 = ts[i-1]; s1 = ts[i]; d = t[s1] - t[s0]; if (s1 != s0 + 1 || d < 50) continue
        printf "%s[%d,%.4f]", (k++ ? "," : ""), s1 * win, (v[s1] - v[s0]) / d }
      printf "]" }' "$1"
}
{
  echo "{\"kind\": \"series\", \"version\": 1, \"title\": \"Adaptive concurrency against a moving knee\","
  echo "\"subtitle\": \"capacity $HIGH/$LOW/$HIGH for ${PHASE}s each, ${SERVICE_MS} ms per request, $CLIENTS clients, stride 4:2:1; load after $load_after\","
  echo "\"charts\": [{\"caption\": \"The concurrency limit over time (0.25 s samples; dips to 2 are baseline probes) and the backend's knee (dashed).\","
  echo "\"x_label\": \"time since server start (s)\", \"y_label\": \"requests in flight\", \"series\": ["
  sep=""
  for a in $ALGORITHMS; do
    echo "$sep{\"name\": \"limit ($a)\", \"points\": $(series_points "$tmp/auto-$a.poll")}"; sep=","
  done
  echo ",{\"name\": \"knee\", \"dashed\": true, \"points\": [[0,$HIGH],[$PHASE,$HIGH],[$PHASE,$LOW],[$((2 * PHASE)),$LOW],[$((2 * PHASE)),$HIGH],[$duration,$HIGH]]}]}"
  echo ",{\"caption\": \"What the limiters measured: the mean round trip of the last window (solid) and the baseline, the round trip without queueing (dashed).\","
  echo "\"x_label\": \"time since server start (s)\", \"y_label\": \"round trip (ms)\", \"series\": ["
  sep=""
  for a in $ALGORITHMS; do
    echo "$sep{\"name\": \"window rtt ($a)\", \"points\": $(series_points "$tmp/auto-$a.poll" 7)}"; sep=","
    echo ",{\"name\": \"baseline ($a)\", \"dashed\": true, \"points\": $(series_points "$tmp/auto-$a.poll" 8)}"
  done
  echo "]}"
  for r in "${runs[@]}"; do
    echo ",{\"caption\": \"$r: each class's share of the requests completed in each ${SHARE_WINDOW} s window (weights 4:2:1 give 0.571, 0.286, 0.143).\","
    echo "\"x_label\": \"time since server start (s)\", \"y_label\": \"share of completions\", \"series\": ["
    echo "{\"name\": \"a (4)\", \"points\": $(share_points "$tmp/$r.poll" 4)},"
    echo "{\"name\": \"b (2)\", \"points\": $(share_points "$tmp/$r.poll" 5)},"
    echo "{\"name\": \"c (1)\", \"points\": $(share_points "$tmp/$r.poll" 6)}]}"
  done
  echo "], \"tables\": [{\"title\": \"Runs\", \"headers\": [\"run\", \"req/s\", \"p99 ms\", \"share error\"], \"rows\": ["
  sep=""
  for r in "${runs[@]}"; do
    echo "$sep[\"$r\", \"$(rps "$r" | awk '{ printf "%.0f", $1 }')\", \"$(p99 "$r")\", \"$(awk -v e="$(share_error "$tmp/$r.poll")" 'BEGIN { printf "%.1f%%", 100 * e }')\"]"; sep=","
  done
  echo "]}]}"
} > "$OUT/adaptive-knee.json"
jq -e . "$OUT/adaptive-knee.json" >/dev/null
bench_files=()
for r in "${runs[@]}"; do bench_files+=("$OUT/$r.json"); done
"$ordo" report "$OUT/adaptive-knee.json" "${bench_files[@]}" -o "$OUT/adaptive-knee.html" >/dev/null
echo
echo "charts: $OUT/adaptive-knee.html (from $OUT/adaptive-knee.json and the runs' bench JSON)"
