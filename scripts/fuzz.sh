#!/usr/bin/env bash
# The long run of every fuzz target (docs/design.md, "Fuzzing"). `cargo test` runs each target briefly with
# a fixed seed; this runs each for a time budget, in rounds of many cases with a new seed per round (the
# first seed is random unless given, and printed), then prints a summary: rounds, cases, seconds and cases
# per second per target. A failing round stops its target and prints the command that replays it; the
# script then exits 1. Targets are found, not listed here: every test named `fuzz…` or in a `fuzz…`
# module of the test binaries below (the crates' unit tests, and serve's integration tests).
#
#   scripts/fuzz.sh                 # 60 s per target, rounds of 20000 cases, random seed
#   scripts/fuzz.sh -t 600 hpack    # 10 min for each target whose name contains "hpack"
#   scripts/fuzz.sh -s 42 -c 5000   # replayable: seed 42, rounds of 5000
#   scripts/fuzz.sh -r              # release build (faster cases, a much longer first build)
set -euo pipefail
cd "$(dirname "$0")/.."

secs=60
cases=20000
seed=""
profile=()
usage() { sed -n '2,13s/^# \{0,1\}//p' "$0"; }
while getopts "t:c:s:rh" opt; do
    case "$opt" in
    t) secs=$OPTARG ;;
    c) cases=$OPTARG ;;
    s) seed=$OPTARG ;;
    r) profile=(--release) ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
filter="${1:-}"
for v in "$secs" "$cases" ${seed:+"$seed"}; do
    [[ "$v" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: expected a whole number, got '$v'" >&2; exit 2; }
done
[ -n "$seed" ] || seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
echo "fuzz: first seed $seed, ${secs}s per target, rounds of $cases cases${filter:+, targets matching '$filter'}"

# package, then the cargo flags that pick its test binary
packages=(
    "ordo-http1|--lib"
    "ordo-h2client|--lib"
    "ordo-serve|--lib"
    "ordo-serve|--test it"
    "ordo-bench|--lib"
    "ordo-tune|--lib"
    "ordo-util|--lib --features toml"
)
now_ms() { date +%s%3N; }
summary=()
failed=0
for entry in "${packages[@]}"; do
    pkg=${entry%%|*}
    read -r -a flags <<<"${entry#*|}"
    echo "fuzz: building $pkg's tests (${flags[*]})"
    bin=$(cargo test -p "$pkg" "${flags[@]}" "${profile[@]}" --no-run --message-format=json 2>/dev/null |
        grep -o '"executable":"[^"]*"' | tail -1 | cut -d'"' -f4)
    if [ -z "$bin" ]; then
        echo "fuzz: $pkg's tests do not build; run: cargo test -p $pkg ${flags[*]} --no-run" >&2
        exit 1
    fi
    dir="crates/${pkg#ordo-}"
    mapfile -t targets < <("$bin" --list 2>/dev/null | sed -n 's/: test$//p' | grep -E '(^|::)fuzz' || true)
    for t in "${targets[@]}"; do
        [[ -z "$filter" || "$t" == *"$filter"* ]] || continue
        n=0
        rounds=0
        s=$seed
        status=ok
        start=$(now_ms)
        while :; do
            if ! out=$(cd "$dir" && ORDO_FUZZ_CASES=$cases ORDO_FUZZ_SEED=$s \
                "$bin" --exact "$t" --nocapture --test-threads=1 2>&1); then
                status=FAILED
                failed=1
                echo "$out" | grep -v '^ *[0-9]*: \|^ *at ' | tail -40
                echo "fuzz: $t FAILED; replay: ORDO_FUZZ_SEED=$s ORDO_FUZZ_CASES=$cases cargo test -p $pkg ${flags[*]} ${profile[*]} $t -- --exact"
                break
            fi
            ran=$(sed -n 's/.*ordo-fuzz: cases=\([0-9]*\).*/\1/p' <<<"$out" | head -1)
            n=$((n + ${ran:-0}))
            rounds=$((rounds + 1))
            s=$((s + 1))
            (($(now_ms) - start >= secs * 1000)) && break
        done
        ms=$(($(now_ms) - start))
        rate=$((ms > 0 ? n * 1000 / ms : 0))
        line=$(printf '%-72s %-7s %6d %10d %8.1f %10d' "$pkg ${t}" "$status" "$rounds" "$n" "$((ms))e-3" "$rate")
        echo "$line"
        summary+=("$line")
    done
done
echo
printf '%-72s %-7s %6s %10s %8s %10s\n' "target" "result" "rounds" "cases" "seconds" "cases/s"
printf '%s\n' "${summary[@]}"
exit $failed
