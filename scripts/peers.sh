#!/usr/bin/env bash
# walcodec beside its peers (benches/peers, a crate of its own so that hidane-core,
# okaywal and commitlog stay out of walcodec's dev-dependencies).
#
#   scripts/peers.sh          # the peer tests: byte equality with hidane-core
#   scripts/peers.sh bench    # then every peer bench (default and crc-fast builds),
#                             # the ratio tables, and docs/throughput.svg; the file
#                             # bench wants `apt-get install libleveldb-dev` for its
#                             # LevelDB C++ peer
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/benches/peers/target}

cd benches/peers
cargo test --release
[ "${1:-}" = bench ] || exit 0

short=(--warm-up-time 1 --measurement-time 3)
CRITERION_HOME=$CARGO_TARGET_DIR/criterion \
  cargo bench --bench codec --bench append -- "${short[@]}"
CRITERION_HOME=$CARGO_TARGET_DIR/criterion-crc-fast \
  cargo bench --features crc-fast --bench codec --bench append -- "${short[@]}"
cargo bench --bench durable -- "${short[@]}" | tee "$CARGO_TARGET_DIR/durable.txt"
# Reading and writing a 1 GiB log beside LevelDB's C++ log classes (built when
# libleveldb-dev is installed), on a tmpfs where there is one.
if [ -d /dev/shm ]; then export WALCODEC_BENCH_DIR=${WALCODEC_BENCH_DIR:-/dev/shm}; fi
WALCODEC_BENCH_LOG_MIB=${WALCODEC_BENCH_LOG_MIB:-1024} \
  cargo bench --bench file -- --warm-up-time 1 --measurement-time 10 | tee "$CARGO_TARGET_DIR/file.txt"

cd "$root"
python3 scripts/plot.py --criterion "$CARGO_TARGET_DIR/criterion" \
  --crc-fast "$CARGO_TARGET_DIR/criterion-crc-fast" --svg docs/throughput.svg
echo
sed -n '/paired run/,$p' "$CARGO_TARGET_DIR/durable.txt"
