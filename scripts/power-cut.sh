#!/usr/bin/env bash
# Simulated power loss: N cuts (default 10000) on the power-cut simulator
# (tests/power_support):
#   file: an AsyncLogWriter's run, with and without preallocation (tests/power_cut.rs);
#   dir:  a LogDir appending, rotating and purging, whole directory modelled: its
#         files and its entries (tests/logdir_power_cut.rs);
#   all:  both (the default), N cuts each.
# Prints the seed (replay: POWER_CUT_SEED=...), acknowledged records checked, records
# lost (must be 0), and reopens refused. POWER_CUT_STRICT=1 fails on a refused reopen
# of a reordered image (the dir run always fails on one).
#
#   scripts/power-cut.sh [CUTS] [file|dir|all]
set -euo pipefail
cuts="${1:-10000}"
what="${2:-all}"
cd "$(dirname "$0")/.."
if [[ "$what" == file || "$what" == all ]]; then
    POWER_CUT_CUTS="$cuts" cargo test --release --test all -- \
        --exact power_cut::power_cuts_lose_no_acknowledged_record --nocapture 2>&1 |
        grep -E "power cut|test result|panicked|FAILED"
fi
if [[ "$what" == dir || "$what" == all ]]; then
    LOGDIR_POWER_CUT_CUTS="$cuts" cargo test --release --test all -- \
        --exact logdir_power_cut::logdir_power_cuts_lose_no_acknowledged_record --nocapture 2>&1 |
        grep -E "power cut|test result|panicked|FAILED"
fi
