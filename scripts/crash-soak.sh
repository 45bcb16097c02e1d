#!/usr/bin/env bash
# Crash soak: N cycles of "a child process appends from many tasks, is killed with
# SIGKILL at a random moment, the log is reopened and checked" (tests/durability.rs).
# Prints cycles, acknowledged records, records lost (must be 0) and torn tails cut.
#
#   scripts/crash-soak.sh [CYCLES]    (default 300)
set -euo pipefail
cycles="${1:-300}"
cd "$(dirname "$0")/.."
WALCODEC_CRASH_CYCLES="$cycles" cargo test --release --test all -- \
    --exact durability::crash_recovery_keeps_every_acknowledged_record --nocapture 2>&1 |
    grep -E "crash soak|lost acknowledged|test result|panicked|FAILED"
