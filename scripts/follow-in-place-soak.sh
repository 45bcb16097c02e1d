#!/usr/bin/env bash
# Followers of logs written in place, at soak size: a writer in a child process
# appends N records (default 100,000) to a preallocated file, a recycled WAL, both,
# and to LogDirs of 256 KiB segments preallocated, recycling with purges, and both;
# a LogTailer / DirReader in the test process must read every record once, in
# order, at the positions the child acknowledged (tests/tailing_in_place.rs). Then
# ROUNDS (default 20) rounds of the writer killed with SIGKILL and reopened under
# the follower.
#
#   scripts/follow-in-place-soak.sh [RECORDS] [ROUNDS]
set -euo pipefail
records="${1:-100000}"
rounds="${2:-20}"
cd "$(dirname "$0")/.."
WALCODEC_IN_PLACE_RECORDS="$records" cargo test --release --test all -- \
    tailing_in_place:: --skip a_killed_writer 2>&1 | grep -E "^test |test result|panicked"
for round in $(seq 1 "$rounds"); do
    cargo test --release --test all -- --exact \
        tailing_in_place::a_killed_writer_reopened_is_followed_without_a_gap 2>&1 |
        grep -E "test result|panicked" | sed "s/^/round $round: /"
done
