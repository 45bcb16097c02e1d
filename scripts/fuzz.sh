#!/usr/bin/env bash
# Runs every fuzz target (or the one named) for SECONDS each (default 60) and prints
# its inputs per second, installing cargo-fuzz if missing. Needs the nightly
# toolchain. Seeds the corpora with small pieces of the test vectors:
#
#   scripts/fuzz.sh 60                 every target, 60 s each
#   scripts/fuzz.sh 1800 log_decoder   one target
#
# Each target has its own -max_len: small inputs keep them at thousands of inputs a
# second; whole logs go to log_decoder_large alone.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
only=${2:-}

command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked

max_len() {
  case "$1" in
    log_decoder_large) echo 140000 ;;
    log_roundtrip) echo 256 ;;
    *) echo 4096 ;;
  esac
}

# Build flags. The crate forbids unsafe code, so AddressSanitizer finds nothing in it
# and costs about 3x: off (-s none). The log targets also go without
# -trace-compares: it instruments every loop comparison of the crc32c crate's
# checksum loop, which then takes most of each run (about 5x fewer inputs a second);
# edge coverage and valid seeds still guide them. recordio keeps it.
flags() {
  case "$1" in
    log_* | rocksdb_* | replica_*) echo "-s none --no-trace-compares" ;;
    *) echo "-s none" ;;
  esac
}

seed() { mkdir -p "fuzz/corpus/$1" && cat > "fuzz/corpus/$1/$2"; }

# log_decoder: [lead][chunk count][chunks][log]. Lead 0 and whole (two zero bytes)
# before the first 2,000 bytes of each vector; lead 200 (\xc8) before the 1,800 bytes
# that start 200 bytes before the end of its first block, so they land there again.
# log_decoder_large: [mode][chunk count][chunks][log], a whole vector.
for f in tests/data/writers/*/000001.log tests/data/leveldb-db/wal/000003.log; do
  [ -s "$f" ] || continue
  name=$(basename "$(dirname "$f")")
  size=$(stat -c %s "$f")
  { printf '\x00\x00'; head -c 2000 "$f"; } | seed log_decoder "$name-head"
  if [ "$size" -gt 32568 ]; then
    { printf '\xc8\x00'; dd if="$f" iflag=skip_bytes,count_bytes skip=32568 count=1800 status=none; } |
      seed log_decoder "$name-edge"
  fi
  if [ "$size" -le 140000 ]; then
    { printf '\x00\x00'; cat "$f"; } | seed log_decoder_large "$name"
  fi
done
# rocksdb_decoder: [flags][chunk count][chunks][log]: each RocksDB vector's start
# read as it is (flags 0), and its second block behind a recyclable start of log 9
# (flags 1).
for f in tests/data/rocksdb-wal/*/*.log; do
  name=$(basename "$(dirname "$f")")-$(basename "$f" .log)
  { printf '\x00\x00'; head -c 3000 "$f"; } | seed rocksdb_decoder "$name-head"
  { printf '\x01\x00'; dd if="$f" iflag=skip_bytes,count_bytes skip=32700 count=1500 status=none; } |
    seed rocksdb_decoder "$name-edge"
done
printf '\x003\nfoo0\n5\nhello' | seed recordio seed
# replica_sync: [mode][split][chunk][size pairs][damage]: a stream built from records
# (modes 2, 3), with small and large messages; a raw stream after a valid hello (1).
printf '\x02\x02\x03\x10\x00\xff\x03\x40\x01\x00\x00\x80\x06' | seed replica_sync structured
printf '\x02\x01\x00\x10\x00\xff\x02' | seed replica_sync small-messages
printf '\x01S\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00D\x05\x00\x00\x00abcde' | seed replica_sync raw
# log_roundtrip: record sizes (byte, shift pairs), then damage triples.
printf '\x10\x00\xff\x7f\x00\x00\x01\x00' | seed log_roundtrip sizes
printf '\x10\x00\xff\x7f\x00\x00\x01\x00\x00\x05\x01\x80' | seed log_roundtrip damaged

for target in $(cargo +nightly fuzz list); do
  [ -z "$only" ] || [ "$target" = "$only" ] || continue
  len=$(max_len "$target")
  echo "== $target: ${seconds}s, $(flags "$target") -max_len=$len"
  # shellcheck disable=SC2046 # the flags are words
  cargo +nightly fuzz run $(flags "$target") "$target" -- -max_total_time="$seconds" -max_len="$len" 2>&1 |
    grep -E "DONE|Done [0-9]+ runs|ERROR|panicked|SUMMARY" |
    awk '{ print } /^Done [0-9]+ runs in/ { printf "   %s: %d inputs/s\n", t, $2 / $5 }' t="$target" || true
done
