#!/bin/sh
# `ordo probe pid` on a process of your own: start a shell loop that sleeps 10 ms at a time next to a busy
# loop, watch it for 3 seconds (text), then once more as JSON lines, and stop both.
# Usage: examples/probe/watch-pid.sh   (ORDO=path/to/ordo to use a built binary)
set -eu
ORDO=${ORDO:-ordo}
sh -c 'while :; do sleep 0.01; done' &
SLEEPER=$!
sh -c 'while :; do :; done' &
SPINNER=$!
trap 'kill $SLEEPER $SPINNER 2>/dev/null || true' EXIT INT TERM
"$ORDO" probe pid "$SLEEPER" --interval 1s --duration 3s
"$ORDO" probe pid "$SPINNER" --interval 500ms --duration 1s --json
