#!/usr/bin/env bash
# Flake hunt: runs the test suite N times in a row (default 20) while a parallel
# I/O load (a `dd conv=fsync` loop writing 64 MiB at a time) competes for the disk,
# and reports the failures per test. A test that fails here and not on a quiet
# machine depends on timing: zero is the goal. Not part of CI (it takes hours for
# the whole workspace); run it before a release, or on the modules you suspect:
#
#   scripts/flake-hunt.sh [N] [FILTER...]
#
# FILTER picks tests of the core crate's `all` binary (say `wake_interval::`
# `logdir::`); with none, every test binary of the workspace runs (the README's
# command). The binaries are built once, then run N times; each run's output goes
# to target/flake-hunt/run-K.log.
#
# FLAKE_HUNT_BINARY=PATH runs that prebuilt test binary instead (say a copy of
# target/ci/deps/all-HASH, the core crate's `all` binary), N times, with the
# FILTERs as its arguments, and builds nothing: a hunt can then go on while the
# tree is rebuilt. The binary is copied first, so a rebuild cannot swap it midway.
# It runs from the repository's root, as `cargo test` runs the core crate's tests.
#
# FLAKE_HUNT_OUT=DIR puts the logs there instead (two hunts side by side).
#
# RUST_TEST_THREADS=4 (twice the cores of a 2-core machine) runs more tests at once,
# so each meets more contention, not less. On 2 cores under the load a whole run
# takes about 8 minutes (461-481 s), so 20 runs take about two and a half hours.
#
# The summary lists, per failing test, the runs it failed in, and each run's time.
set -euo pipefail
runs="${1:-20}"
shift || true
cd "$(dirname "$0")/.."
out="${FLAKE_HUNT_OUT:-target/flake-hunt}"
mkdir -p "$out"
rm -f "$out"/run-*.log

# The README's features, so that every test the README command runs is hunted too.
features=cli,zstd,tracing,metrics,replica-auth
if [[ -n "${FLAKE_HUNT_BINARY:-}" ]]; then
    binary="$out/$(basename "$FLAKE_HUNT_BINARY")"
    cp "$FLAKE_HUNT_BINARY" "$binary"
    echo "hunting with $FLAKE_HUNT_BINARY (copied to $binary) $*"
    run() { "$binary" "$@"; }
elif (($# > 0)); then
    cargo test --profile ci --features "$features" --test all --no-run
    run() { cargo test --profile ci --features "$features" --test all -- "$@"; }
else
    cargo test --profile ci --workspace --features "$features" --no-run
    run() { cargo test --profile ci --workspace --features "$features" --no-fail-fast; }
fi

# The load: fsync'd writes on the disk the tests' temporary directories use.
load_dir="$(mktemp -d "${TMPDIR:-/tmp}/flake-hunt-load.XXXXXX")"
(
    while true; do
        dd if=/dev/zero of="$load_dir/load" bs=1M count=64 conv=fsync status=none
    done
) &
load=$!
trap 'kill "$load" 2>/dev/null; wait "$load" 2>/dev/null; rm -rf "$load_dir"' EXIT

echo "$(nproc) cores; load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
failed_runs=0
for ((k = 1; k <= runs; k++)); do
    log="$out/run-$k.log"
    started=$SECONDS
    if run "$@" >"$log" 2>&1; then
        echo "run $k/$runs: ok in $((SECONDS - started)) s (load $(cut -d' ' -f1 /proc/loadavg))"
    else
        failed_runs=$((failed_runs + 1))
        echo "run $k/$runs: FAILED ($(grep -c '\.\.\. FAILED$' "$log" || true) tests) in" \
            "$((SECONDS - started)) s (load $(cut -d' ' -f1 /proc/loadavg))"
    fi
done

echo
echo "failures per test over $runs runs (under a dd conv=fsync load): count, test, runs"
for ((k = 1; k <= runs; k++)); do
    grep -h '\.\.\. FAILED$' "$out/run-$k.log" |
        sed -E "s/^test (.*) \.\.\. FAILED$/\1 $k/" || true
done | awk '{ n[$1]++; at[$1] = at[$1] " " $2 } END { for (t in n) printf "%4d  %s  (runs%s)\n", n[t], t, at[t] }' |
    sort -rn
echo "$failed_runs of $runs runs had a failure"
((failed_runs == 0))
