#!/usr/bin/env bash
# The search's goals (issue 13), checked two ways in one invocation:
#   1. synthetic response surfaces with seeded noise, many seeds each (crates/tune/examples/search_bench.rs):
#      how often the search lands within 2% of the grid optimum with a fifth of the grid's trials, how much
#      of the reported gain the re-check keeps (over the seeds that reported a gain; a seed with nothing to
#      keep is counted apart, never as 100% kept — issue 24), and random search with the same budget for
#      reference;
#   2. a real serve+bench workload (examples/tune/search.toml, no root needed): the same knobs run once as
#      the full grid and once as the search, and the search's best compared with the grid's optimum as the
#      grid measured them.
# The machine's load matters for 2: `uptime` is printed with the figures.
#
#   bench/tune-search.sh                  # REPS=100 seeds per surface, the real workload once
#   REPS=20 SKIP_REAL=1 bench/tune-search.sh
#   SKIP_SYNTH=1 SCORE=target.cpu_us_per_req OBJECTIVE=minimize bench/tune-search.sh
#                                         # score the real workload by the server's CPU per request, which
#                                         # other processes on a busy machine disturb less than req/s
#   ORDO_BENCH_NO_BUILD=1 ...             # use the release binaries already built
#
# Everything it writes goes to a temp dir, removed on every exit path.
set -euo pipefail

REPS=${REPS:-100}
FRACTION=${FRACTION:-0.2}
NOISE=${NOISE:-0.02}
SKIP_REAL=${SKIP_REAL:-0}
SKIP_SYNTH=${SKIP_SYNTH:-0}
SCORE=${SCORE:-}
OBJECTIVE=${OBJECTIVE:-maximize}

. "$(dirname "$0")/lib.sh"
bench_init tune-search
bench_build --bin ordo
bench_build -p ordo-tune --example search_bench
sim=$target_dir/release/examples/search_bench

echo "== uptime: $(uptime)"
if [ "$SKIP_SYNTH" != 1 ]; then
  echo "== 1. synthetic surfaces: $REPS seeds, budget ${FRACTION} of the grid, ${NOISE} run-to-run noise"
  "$sim" "$REPS" "$FRACTION" "$NOISE"
fi

if [ "$SKIP_REAL" = 1 ]; then
  exit 0
fi
echo
echo "== 2. real workload: examples/tune/search.toml as a grid and as a search (ordo serve + ordo bench)"
cp "$here/examples/tune/search.toml" "$here/examples/tune/serve.toml" "$tmp/"
# The same file as a full factorial: the design section says kind = "full" and has no budget.
sed -e 's/^kind = "search"/kind = "full"/' -e '/^budget = /d' "$tmp/search.toml" > "$tmp/grid.toml"
if [ -n "$SCORE" ]; then
  for f in "$tmp/search.toml" "$tmp/grid.toml"; do
    printf '\n[score]\nmetric = "%s"\nobjective = "%s"\n' "$SCORE" "$OBJECTIVE" >> "$f"
  done
  echo "score: $SCORE ($OBJECTIVE)"
fi
start=$(date +%s)
"$ordo" tune run --no-progress --db "$tmp/grid.db" "$tmp/grid.toml" > "$tmp/grid.log"
mid=$(date +%s)
"$ordo" tune run --no-progress --db "$tmp/search.db" "$tmp/search.toml" > "$tmp/search.log"
end=$(date +%s)
grid_runs=$(grep -c '^\[' "$tmp/grid.log" || true)
search_runs=$(grep -c '^\[' "$tmp/search.log" || true)
echo "grid:   $grid_runs runs in $((mid - start)) s"
echo "search: $search_runs runs in $((end - mid)) s (trials, then the re-check)"
"$sim" stores "$tmp/grid.db" "$tmp/search.db"
echo "== uptime: $(uptime)"
