#!/bin/sh
# The probes' own overhead (docs/probe.md records the figures):
#  - the per-sample reads `ordo probe loop` makes around each timed sample (getrusage, schedstat, clocks),
#  - the loop's time with and without those reads, as a ratio, at 0.1 ms, 1 ms and 14 ms of work,
#  - one `ordo probe pid` / `ordo bench --server-pid` sample of a process with 1, 16 and 64 threads.
# Both sides of every ratio run in the same invocation, interleaved. Usage: bench/probe-overhead.sh
set -eu
cd "$(dirname "$0")/.."
echo "# $(uname -sr), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
cargo run --quiet --release -p ordo-probe --example overhead
