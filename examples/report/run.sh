#!/usr/bin/env sh
# Render every example result into one page and print the tables: what `ordo report` makes of each kind.
set -eu
cd "$(dirname "$0")/../.."
out="${1:-/tmp/ordo-report.html}"
cargo run -q -- report \
  examples/report/demo-quick.json \
  examples/report/bench-mix.json examples/report/bench-open.json \
  examples/report/probe-compare.json examples/report/probe-pid.jsonl \
  examples/report/tune-6.8.db examples/report/tune-6.12.db \
  -o "$out"
cargo run -q -- report --text examples/report/bench-mix.json examples/report/tune-6.8.db | head -60
echo "open $out in a browser"
