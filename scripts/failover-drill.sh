#!/usr/bin/env bash
# Failover drill: three processes of examples/failover_node.rs over TCP on
# 127.0.0.1, a primary with sync_replicas(1) and two replicas. Each round SIGKILLs
# the primary under load, promotes the replica with the highest end, and points
# the other replica and the old primary (rewound if it diverged) at it; at the
# end, every acknowledged record must be in the log exactly once and the three
# directories byte-identical.
#
#   scripts/failover-drill.sh                 # 5 rounds of 3 s of load
#   scripts/failover-drill.sh --quick         # 2 rounds of 1 s (CI)
#   scripts/failover-drill.sh --rounds 20 --tasks 64 --keep
#
# Options: scripts/failover_drill.py --help. Exits non-zero on any failure.
# Built with the features of the README's test command, so after that command
# (which builds every example) the build here has nothing to do.
set -euo pipefail
cd "$(dirname "$0")/.."

features=cli,zstd,tracing,metrics,replica-auth
cargo build --profile ci --workspace --features "$features" --example failover_node >&2
target=$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
args=()
for arg in "$@"; do
    if [ "$arg" = --quick ]; then
        args+=(--rounds 2 --load 1)
    else
        args+=("$arg")
    fi
done
exec python3 scripts/failover_drill.py --bin "$target/ci/examples/failover_node" "${args[@]}"
