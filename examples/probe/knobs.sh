#!/bin/sh
# The probe thread's own scheduling knobs — the ones `ordo tune` sweeps — beside two busy threads on one
# CPU: default, a 3 ms per-task slice (Linux >= 6.12), nice -5 (root), SCHED_BATCH and SCHED_FIFO (root).
# Each line is the same loop; compare the p99 and the run-queue wait share.
# Usage: examples/probe/knobs.sh [SAMPLES]   (ORDO=..., CPU=... as in seed004.sh)
set -eu
ORDO=${ORDO:-ordo}
SAMPLES=${1:-200}
CPU=${CPU:-$(($(nproc) - 1))}
for knob in "" "--slice 3ms" "--nice -5" "--policy batch" "--policy fifo:10"; do
    echo "== ${knob:-defaults}"
    # shellcheck disable=SC2086
    "$ORDO" probe loop --work 5ms --samples "$SAMPLES" --cpu "$CPU" --load 2 $knob \
        | grep -E "^  (elapsed|run-queue)|where the time went|took" || echo "(not permitted here)"
done
