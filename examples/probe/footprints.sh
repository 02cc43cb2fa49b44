#!/bin/sh
# Seed 004's memory-footprint table: the 14 ms loop with 1 MB, 500 MB and 900 MB held and touched before
# every sample, beside one busy thread on the same CPU. Needs about 1 GB of free memory.
# Usage: examples/probe/footprints.sh [SAMPLES]   (ORDO=..., CPU=... as in seed004.sh)
set -eu
ORDO=${ORDO:-ordo}
SAMPLES=${1:-300}
CPU=${CPU:-$(($(nproc) - 1))}
exec "$ORDO" probe loop --footprints 1,500,900 --work 14ms --samples "$SAMPLES" \
    --cpu "$CPU" --load 1 --buckets 11,18,24,50,75,100
