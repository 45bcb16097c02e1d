#!/usr/bin/env bash
# Raft log store crash soak: N rounds of "a child process applies random storage
# operations (append, vote, committed, truncate, purge) to a walcodec_raft::LogStore,
# is killed with SIGKILL at a random moment, the store is reopened and checked"
# (raft/tests/crash.rs). Any acknowledged entry lost, vote gone back, or half an
# operation fails the run.
#
#   scripts/raft-crash-soak.sh [ROUNDS]    (default 1000)
set -euo pipefail
rounds="${1:-1000}"
cd "$(dirname "$0")/.."
WALCODEC_RAFT_CRASH_CYCLES="$rounds" cargo test --release -p walcodec-raft --test all -- \
    --exact crash::crashes_keep_every_acknowledged_operation --nocapture 2>&1 |
    grep -E "raft crash test seed|raft crash soak|test result|panicked|FAILED|round"
