#!/usr/bin/env bash
# RocksDB reads what walcodec writes: writes one WAL per RocksDB format (legacy,
# recyclable, zstd, recyclable + zstd) with examples/rocksdb_wal.rs, then checks that
# RocksDB's own `ldb dump_wal --header --print_value` prints exactly the expected
# records (sequence, count, size, physical offset, every key and value) and reports
# nothing. Installs Debian's rocksdb-tools (about 6 s) when `ldb` is missing.
#
#   scripts/rocksdb-check.sh [OUT_DIR]    (default: a temporary directory)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v ldb >/dev/null 2>&1; then
  echo "== installing rocksdb-tools"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q rocksdb-tools >/dev/null
fi

out=${1:-$(mktemp -d)}
# Built as the README's test command builds (the whole workspace, its features, zstd
# among them), so that after that command, which builds every example, there is
# nothing to build here.
cargo build --profile ci --quiet --workspace --features cli,zstd,tracing,metrics,replica-auth --example rocksdb_wal
target=$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
"$target/ci/examples/rocksdb_wal" "$out"

failed=0
checked=0
for log in "$out"/*/[0-9]*.log; do
  # ldb takes the log number from the file name, as RocksDB does.
  ldb dump_wal --walfile="$log" --header --print_value >"$log.ldb.out" 2>"$log.ldb.err" || {
    echo "FAIL $log: ldb exited $?"
    failed=$((failed + 1))
    continue
  }
  checked=$((checked + 1))
  if ! cmp -s "$log.ldb.out" "$log.expected.txt"; then
    echo "FAIL $log: ldb prints other records"
    diff <(cut -c1-160 "$log.expected.txt") <(cut -c1-160 "$log.ldb.out") | head -10
    failed=$((failed + 1))
  elif [ -s "$log.ldb.err" ]; then
    echo "FAIL $log: ldb reports: $(head -c 300 "$log.ldb.err")"
    failed=$((failed + 1))
  else
    echo "ok   $log: $(($(wc -l <"$log.ldb.out") - 1)) records read back by ldb"
  fi
done
[ "$checked" -gt 0 ] || { echo "no WAL checked"; exit 1; }
echo "$((checked - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
