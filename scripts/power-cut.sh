#!/usr/bin/env bash
# Simulated power loss: N cuts (default 10000) of an AsyncLogWriter's run on the
# power-cut simulator (tests/power_support), with and without preallocation
# (tests/power_cut.rs). Prints the seed (replay: POWER_CUT_SEED=...), acknowledged
# records checked, records lost (must be 0), and the reordered images a reader
# refuses as damage. POWER_CUT_STRICT=1 fails on those too.
#
#   scripts/power-cut.sh [CUTS]
set -euo pipefail
cuts="${1:-10000}"
cd "$(dirname "$0")/.."
POWER_CUT_CUTS="$cuts" cargo test --release --test power_cut -- \
    --exact power_cuts_lose_no_acknowledged_record --nocapture 2>&1 |
    grep -E "power cut|test result|panicked|FAILED"
