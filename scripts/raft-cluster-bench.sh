#!/usr/bin/env bash
# The Raft cluster benchmark (raft/cluster-bench, a crate of its own so that the
# RocksDB bindings stay out of walcodec's workspace): three openraft nodes in one
# process on a function-call network, clients writing through the leader, with
# walcodec-raft's LogStore, an in-memory log store (the ceiling) and a RocksDB log
# store that syncs its WAL on every append (as openraft's rocksstore-v2), side by
# side, beside a bare write + fdatasync per entry.
#
#   scripts/raft-cluster-bench.sh            # 3 rounds, 4096 writes a run: 1, 64 and
#                                            # 256 clients, then packing 16 and 64
#                                            # commands per entry (about 10 minutes)
#   scripts/raft-cluster-bench.sh short      # 1 round, 512 writes a run
#   scripts/raft-cluster-bench.sh syncs      # syncs per write, counted by strace:
#                                            # each store at 1 and 64 clients
#   scripts/raft-cluster-bench.sh groups     # store level, many groups on one node:
#                                            # SharedLog, a LogStore per group and one
#                                            # shared RocksDB (WAL synced per write
#                                            # batch), 1, 16, 64 and 256 groups
#                                            # (WALCODEC_BENCH_GROUPS, WALCODEC_BENCH_DIR,
#                                            # WALCODEC_BENCH_ROUNDS; WALCODEC_BENCH_STORES=
#                                            # rocksdb leaves out the store per group)
#   scripts/raft-cluster-bench.sh groups-cluster  # three nodes, each in every one of
#                                            # 64 groups (leaders spread): a SharedLog
#                                            # per node against a LogStore per group
#                                            # (--groups, --writes, --rounds, --dir)
#   scripts/raft-cluster-bench.sh test       # the crate's tests: openraft's suite on
#                                            # the in-memory and RocksDB stores, a
#                                            # small run of every store
#
# Further arguments go to the benchmark (--rounds, --writes, --clients, --stores,
# --pack, --pack-clients, --dir: see raft/cluster-bench/src/main.rs). The nodes'
# logs go to the temp directory unless --dir (or TMPDIR) says otherwise: put them on
# the disk you mean to measure, not a tmpfs.
#
# RocksDB is Debian's librocksdb (linked through ROCKSDB_LIB_DIR, so nothing of
# RocksDB is compiled here); bindgen needs libclang. Both are installed if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-full}"
[ $# -gt 0 ] && shift

need=()
[ -e /usr/include/rocksdb/c.h ] || need+=(librocksdb-dev)
dpkg -s libclang-dev >/dev/null 2>&1 || need+=(libclang-dev)
if [ "$mode" = syncs ]; then command -v strace >/dev/null || need+=(strace); fi
if [ ${#need[@]} -gt 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
lib=$(dpkg -L librocksdb-dev | grep '/librocksdb\.so$' | head -1)
export ROCKSDB_LIB_DIR=$(dirname "$lib")

manifest=raft/cluster-bench/Cargo.toml
if [ "$mode" = test ]; then
    exec cargo test --release --manifest-path "$manifest" --features rocksdb "$@"
fi
if [ "$mode" = groups ] || [ "$mode" = groups-cluster ]; then
    exec cargo run --release --manifest-path "$manifest" --features rocksdb --bin "${mode/-/_}" -- "$@"
fi
cargo build --release --manifest-path "$manifest" --features rocksdb
bin=raft/cluster-bench/target/release/walcodec-raft-cluster-bench

case "$mode" in
full) "$bin" "$@" ;;
short) "$bin" --rounds 1 --writes 512 "$@" ;;
syncs)
    # One run per store and client count under strace. The benchmark syncs a marker
    # file (mark-start, mark-end) around the timed writes; the syncs between the
    # marks are counted per node by the path of their file (strace -y).
    writes=512
    trace=$(mktemp)
    echo "| store | clients | client writes | syncs: node 0 (leader) | node 1 | node 2 | leader syncs per write | all syncs per write |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
    for clients in 1 64; do
        for store in logstore rocksdb memory; do
            strace -f -qq -y -e trace=fsync,fdatasync,sync_file_range -o "$trace" \
                "$bin" --rounds 1 --writes "$writes" --clients "$clients" --stores "$store" \
                --pack "" --no-bare "$@" >/dev/null 2>&1
            awk -v store="$store" -v clients="$clients" -v writes="$writes" '
                /resumed>/ { next }
                /mark-start/ { on = 1; next }
                /mark-end/ { on = 0; next }
                on && /(fsync|fdatasync|sync_file_range)\(/ {
                    if (match($0, /\/node-[0-9]/)) n[substr($0, RSTART + 6, 1)]++
                }
                END {
                    all = n[0] + n[1] + n[2]
                    printf "| %s | %d | %d | %d | %d | %d | %.2f | %.2f |\n", store, clients, writes,
                        n[0], n[1], n[2], n[0] / writes, all / writes
                }' "$trace"
        done
    done
    rm -f "$trace"
    ;;
*) echo "usage: $0 [full|short|syncs|groups|groups-cluster|test] [benchmark flags]" >&2; exit 2 ;;
esac
