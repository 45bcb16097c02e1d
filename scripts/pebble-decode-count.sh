#!/usr/bin/env bash
# Decoding WAL-sync records against legacy ones, counted: the decoder's instructions
# (callgrind, collecting inside `decode_eof` only) for 4 MiB of records of each size,
# with the bytes and fragments a record takes in each format. Repeatable on a loaded
# machine, unlike the timed pairs of `cargo bench -p walcodec-benches --bench pebble`.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p walcodec-benches --bin pebble_decode_count
bin=target/release/pebble_decode_count
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
count() {
    valgrind --tool=callgrind --toggle-collect='*decode_eof*' \
        --callgrind-out-file="$out/cg" "$bin" "$1" "$2" 2>"$out/err" >/dev/null
    grep -o 'Collected : [0-9]*' "$out/err" | awk '{print $3}'
    grep -E "^$2 " "$out/err" >&2
}
echo "| record | legacy instructions | WAL-sync instructions | legacy / WAL-sync |"
echo "|---:|---:|---:|---:|"
for size in 100 1024 32768 1048576; do
    legacy=$(count "$size" legacy)
    wal_sync=$(count "$size" wal_sync)
    ratio=$(awk -v a="$legacy" -v b="$wal_sync" 'BEGIN { printf "%.3f", a / b }')
    echo "| $size B | $legacy | $wal_sync | ${ratio}x |"
done
