#!/usr/bin/env bash
# LogDir crash soak: N cycles of "a child process appends from many tasks while it
# rotates, purges and truncates, is killed with SIGKILL at a random moment, the
# directory is reopened and checked" (tests/logdir_crash.rs). Prints cycles,
# acknowledged records, purged segments and truncations a reopen finished; any lost
# record, resurrected segment or half truncation fails the run.
#
#   scripts/logdir-crash-soak.sh [CYCLES]    (default 300)
set -euo pipefail
cycles="${1:-300}"
cd "$(dirname "$0")/.."
WALCODEC_LOGDIR_CRASH_CYCLES="$cycles" cargo test --release --test all -- \
    --exact logdir_crash::logdir_crash_keeps_every_acknowledged_record --nocapture 2>&1 |
    grep -E "crash test seed|crash soak|test result|panicked|FAILED|lost|half a truncation|came back"
