#!/usr/bin/env bash
# Kills a leader of the example three-node Raft cluster (examples/raft-kv: a
# key-value service on openraft, each node running 4 Raft groups whose logs share
# one walcodec-raft SharedLog) under load, and checks, in every group: a new leader
# within two election timeouts, every acknowledged write on every node and once in
# each node's log, the nodes' logs equal; and the killed node's log as it was on
# disk after the kill (read before it restarts, so before any snapshot replaces
# it) non-empty, without a hole, holding every entry it had flushed (by its
# leader's replication metrics) and, up to what was known committed, the same
# entries as the others'. Nothing compared fails the round.
#
#   scripts/raft-kill-leader.sh --quick    # one short round (about 12 s once built)
#   scripts/raft-kill-leader.sh            # one round (about 30 s once built)
#   scripts/raft-kill-leader.sh 5          # five rounds, each on a fresh cluster
#   scripts/raft-kill-leader.sh 1 --groups 8 --clients 2
#   scripts/raft-kill-leader.sh 1 --own-log  # one group per node, a LogStore of its own
#
# Options: scripts/raft_kill_leader.py --help. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

manifest=examples/raft-kv/Cargo.toml
cargo build --release --manifest-path "$manifest" >&2
target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$manifest" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
exec python3 scripts/raft_kill_leader.py --bin "$target/release/raft-kv" "$@"
