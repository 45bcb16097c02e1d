#!/usr/bin/env bash
# Kills the leader of the example three-node Raft cluster (examples/raft-kv: a
# key-value service on openraft with each node's log on walcodec-raft's LogStore)
# under load, and checks that a new leader takes over within two election timeouts,
# that the old leader recovers from its log on disk, that every acknowledged write
# is on every node and that the nodes' logs hold the same entries; the old leader's
# log as it recovered it (read from its directory before it restarts) is checked
# against the others' (or, where they purged it, their state machines).
#
#   scripts/raft-kill-leader.sh            # one round (about 40 s once built)
#   scripts/raft-kill-leader.sh 5          # five rounds, each on a fresh cluster
#   scripts/raft-kill-leader.sh 1 --clients 16 --before 20
#
# Options: scripts/raft_kill_leader.py --help. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

manifest=examples/raft-kv/Cargo.toml
cargo build --release --manifest-path "$manifest" >&2
target=$(cargo metadata --format-version 1 --no-deps --manifest-path "$manifest" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
exec python3 scripts/raft_kill_leader.py --bin "$target/release/raft-kv" "$@"
