#!/bin/sh
# Seed 004's "development vs production" table: the same 14 ms loop timed quiet and then beside busy
# threads on one CPU, bucketed at the seed's millisecond edges. Usage: examples/probe/seed004.sh [SAMPLES]
# (ORDO=path/to/ordo to use a built binary; CPU=k to pick the CPU; default the last one.)
set -eu
ORDO=${ORDO:-ordo}
SAMPLES=${1:-500}
CPU=${CPU:-$(($(nproc) - 1))}
exec "$ORDO" probe loop --compare --work 14ms --samples "$SAMPLES" \
    --cpu "$CPU" --load 2 --buckets 11,18,24,50,75
