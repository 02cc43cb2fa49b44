#!/bin/sh
# Generate seed 002's static files (2 KB, 80 KB, 10 MB) in a temporary directory next to copies of the
# experiment and serve config, then run the experiment. Extra arguments go to `ordo tune run`
# (e.g. --dry-run, --db results.db).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
ordo=${ORDO:-ordo}
dir=$(mktemp -d "${TMPDIR:-/tmp}/ordo-seed002.XXXXXX")
trap 'rm -rf "$dir"' EXIT INT TERM
mkdir "$dir/www"
head -c 2048 /dev/zero | tr '\0' 'a' > "$dir/www/2k.bin"
head -c 81920 /dev/zero | tr '\0' 'b' > "$dir/www/80k.bin"
head -c 10485760 /dev/zero | tr '\0' 'c' > "$dir/www/10m.bin"
cp "$here/seed002.toml" "$here/seed002-serve.toml" "$dir/"
"$ordo" tune run "$dir/seed002.toml" "$@"
