#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60), installing cargo-fuzz if
# missing. Seeds the corpora from the test vectors. Needs the nightly toolchain.
#   scripts/fuzz.sh 300
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}

command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked

# log_decoder takes one byte of chunk-count then chunk sizes; a zero byte means
# "whole": prefix each vector with it so the seed is the log itself.
mkdir -p fuzz/corpus/log_decoder
for f in tests/data/writers/*/000001.log tests/data/leveldb-db/wal/000003.log; do
  [ -f "$f" ] || continue
  [ "$(stat -c %s "$f")" -le 200000 ] || continue
  { printf '\x00'; cat "$f"; } > "fuzz/corpus/log_decoder/$(basename "$(dirname "$f")").log"
done
mkdir -p fuzz/corpus/recordio && printf '\x003\nfoo0\n5\nhello' > fuzz/corpus/recordio/seed

for target in $(cargo +nightly fuzz list); do
  echo "== $target: ${seconds}s"
  cargo +nightly fuzz run "$target" -- -max_total_time="$seconds" -max_len=140000 2>&1 \
    | grep -E "^#[0-9]+.*DONE|stat::number_of_executed_units|Done [0-9]+ runs|ERROR|panicked" || true
done
