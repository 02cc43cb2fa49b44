#!/usr/bin/env bash
# A/A experiments on a real workload (issue 24, "How it is checked"): how often does `ordo tune` call two
# identical configurations significantly different? Each trial is a whole `ordo tune run` into a fresh
# store: the built-in `ordo serve` (synthetic backend, CPU work per request) loaded by the built-in bench,
# with one knob, `param:tag` = ["a", "b"], that only changes a query parameter the backend ignores (one letter) — the two
# configurations do the same work. The runner's adaptive stopping and confirmatory block decide as they do for
# any experiment; `ordo tune show --json` then says whether "b" differs significantly from "a". Prints each
# trial's verdict, the false-positive rate with its 95% Wilson interval, and whether it is compatible with
# the 5% the docs promise (the rate must not lie wholly above 5%).
#
#   bench/tune-aa.sh                          # TRIALS=40, 1 s runs: about 20-40 minutes
#   TRIALS=10 DURATION=500ms bench/tune-aa.sh # a quick look
#   ORDO_BENCH_NO_BUILD=1 ...                  # use the release binary already built
#
# Runs alternate between the configurations as the runner schedules them; other work on the machine is
# noise the test must survive, so quote the load average printed at the start and the end.
set -euo pipefail

TRIALS=${TRIALS:-40}
DURATION=${DURATION:-1s}
CONNECTIONS=${CONNECTIONS:-8}
CPU_US=${CPU_US:-50}
REPEAT_MIN=${REPEAT_MIN:-3}
REPEAT_MAX=${REPEAT_MAX:-10}
CI=${CI:-0.02}

. "$(dirname "$0")/lib.sh"
bench_init tune-aa jq
bench_build --bin ordo

cat > "$tmp/serve.toml" <<EOF
listen = "127.0.0.1:8080"
workers = 64
[[routes]]
prefix = "/"
synthetic = {}
EOF

experiment() { # $1 = trial -> the experiment file on stdout
  cat <<EOF
name = "aa-$1"
seed = $((1000 + $1))

[target]
builtin = "ordo-serve"
config = "serve.toml"

[[workload]]
name = "web"
url = "http://127.0.0.1:{port}/cpu?us=$CPU_US&aa={tag}"
connections = $CONNECTIONS
duration = "$DURATION"

[knobs]
"param:tag" = ["a", "b"]

[repeat]
min = $REPEAT_MIN
max = $REPEAT_MAX
ci = $CI

[score]
objective = "maximize"
metric = "web.throughput"
EOF
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs" >&2
significant=0
done_trials=0
t_start=$(date +%s)
for i in $(seq 1 "$TRIALS"); do
  experiment "$i" > "$tmp/aa.toml"
  db="$tmp/aa-$i.db"
  if ! "$ordo" tune run "$tmp/aa.toml" --db "$db" --no-progress -q > "$tmp/run.out" 2>&1; then
    echo "trial $i: ordo tune run failed: $(tail -n 3 "$tmp/run.out")" >&2
    continue
  fi
  json=$("$ordo" tune show "$db" --json)
  sig=$(echo "$json" | jq -r '[.analysis.comparisons[] | select(.significant)] | length')
  detail=$(echo "$json" | jq -r '.analysis.comparisons[0] | "p = \(.p_holm * 1000 | round / 1000), b/a - 1 = \(.rel * 1000 | round / 10)%"')
  runs=$(echo "$json" | jq -r '[.analysis.configs[].metrics.score.n | tostring] | join(" + ")')
  done_trials=$((done_trials + 1))
  if [ "${sig:-0}" -gt 0 ]; then significant=$((significant + 1)); verdict="SIGNIFICANT"; else verdict="no difference"; fi
  echo "trial $i/$TRIALS: $verdict ($detail; runs $runs)"
  rm -f "$db" "$db.journal"
done
t_end=$(date +%s)
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

awk -v k="$significant" -v n="$done_trials" -v secs="$((t_end - t_start))" 'BEGIN {
  if (n == 0) { print "no trial completed"; exit 1 }
  p = k / n; z = 1.96; d = 1 + z * z / n
  c = (p + z * z / (2 * n)) / d; h = z * sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
  lo = c - h; hi = c + h; if (lo < 0) lo = 0
  printf "\nA/A experiments called significant: %d of %d = %.1f%% (95%% Wilson interval %.1f%%-%.1f%%), %d s in all\n", k, n, 100 * p, 100 * lo, 100 * hi, secs
  if (lo > 0.05) print "verdict: ABOVE the 5% the docs promise (the whole interval is above 5%)"
  else if (p > 0.05) print "verdict: compatible with 5% (the rate is above 5% but its interval includes it: more trials to tell)"
  else print "verdict: within the 5% the docs promise"
}'
