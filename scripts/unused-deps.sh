#!/usr/bin/env bash
# Lists dependencies a package declares but its code never names — what cargo-machete does, in a few lines of
# shell, so CI does not build a tool for it. A [dependencies] entry must be named (`name::`, `use name`,
# `name!`) in src/ or build.rs; a [dev-dependencies] entry in src/, tests/, benches/ or examples/.
# Exits 1 when it finds one. A dependency needed without being named (a feature switch, a linked C
# library) can say so on its line with the comment `# used: <why>`.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
for manifest in Cargo.toml crates/*/Cargo.toml; do
    dir=$(dirname "$manifest")
    section=""
    while IFS= read -r line; do
        case "$line" in
        \[*\]*) section="${line%%]*}]"; continue ;;
        esac
        case "$section" in
        "[dependencies]") where=(src build.rs) ;;
        "[dev-dependencies]") where=(src tests benches examples) ;;
        *) continue ;;
        esac
        [[ "$line" =~ ^([A-Za-z0-9_-]+)[[:space:]]*(\.workspace[[:space:]]*=|=) ]] || continue
        [[ "$line" == *"# used:"* ]] && continue
        dep="${BASH_REMATCH[1]}"
        ident="${dep//-/_}"
        paths=()
        for w in "${where[@]}"; do
            [[ -e "$dir/$w" ]] && paths+=("$dir/$w")
        done
        if ((${#paths[@]} == 0)) ||
            ! grep -rqE "(^|[^A-Za-z0-9_])${ident}(::|!|;|[[:space:]]+as[[:space:]]|[[:space:]]*\{)" --include='*.rs' "${paths[@]}"; then
            echo "$manifest: ${section} ${dep} is declared but never used"
            status=1
        fi
    done <"$manifest"
done
exit $status
