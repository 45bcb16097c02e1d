//! Decoding Pebble's WAL-sync records (19-byte headers carrying the log number and
//! a synced offset) against the same records in the legacy format, in the same run:
//! goal at least 0.95x of the legacy throughput from 1 KiB up.
//!
//! ```text
//! cargo bench -p walcodec-benches --bench pebble -- --warm-up-time 1 --measurement-time 3
//! cargo bench -p walcodec-benches --bench pebble -- zzz_nomatch   # the paired table only
//! ```
//!
//! After criterion's groups, a paired table as `benches/rocksdb.rs` prints: both
//! sides take turns for `ROUNDS` rounds and the median per-round ratio is printed,
//! for records all of one size and for records of 3/4 to 5/4 of it.
//!
//! `scripts/pebble-decode-count.sh` counts the same decodes (callgrind
//! instructions, bytes and fragments a record): the side of the comparison a
//! loaded machine cannot skew.

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, BatchSize, Criterion, Throughput};
use walcodec::{Dialect, LogDecoder, LogDecoderBuilder, LogEncoder, LogEncoderBuilder};

mod common;
#[path = "common/paired.rs"]
mod paired;

use common::{records, RECORD_SIZES};
use paired::{decode_all, iters_for, paired, spread_records, timed, ROUNDS, ROUND_TIME};

const LOG_NUMBER: u64 = 42;

/// The log of `records`, each fragment of a WAL-sync log promising the end of the
/// record before it, as a writer syncing each record does.
fn encode(records: &[Vec<u8>], builder: &LogEncoderBuilder) -> Bytes {
    let mut encoder = builder.build();
    let mut log = BytesMut::new();
    for record in records {
        encoder.set_synced_offset(encoder.offset());
        encoder.encode_record(record, &mut log);
    }
    log.freeze()
}

struct Case {
    legacy: Bytes,
    wal_sync: Bytes,
    leveldb: LogDecoderBuilder,
    pebble: LogDecoderBuilder,
    record_bytes: usize,
}

fn case(records: Vec<Vec<u8>>) -> Case {
    let record_bytes = records.iter().map(Vec::len).sum();
    let legacy = encode(&records, &LogEncoder::builder());
    let wal_sync = encode(&records, LogEncoder::builder().pebble(LOG_NUMBER));
    let mut pebble = LogDecoder::builder();
    pebble.dialect(Dialect::Pebble).log_number(LOG_NUMBER);
    assert_eq!(
        decode_all(BytesMut::from(&wal_sync[..]), &pebble),
        record_bytes
    );
    Case {
        legacy,
        wal_sync,
        leveldb: LogDecoder::builder(),
        pebble,
        record_bytes,
    }
}

fn wal_sync(c: &mut Criterion) {
    for (name, size) in RECORD_SIZES {
        let case = case(records(size));
        let mut group = c.benchmark_group(format!("pebble/{name}"));
        group.throughput(Throughput::Bytes(case.record_bytes as u64));
        group.bench_function("legacy", |b| {
            b.iter_batched(
                || BytesMut::from(&case.legacy[..]),
                |src| decode_all(src, &case.leveldb),
                BatchSize::LargeInput,
            )
        });
        group.bench_function("wal_sync", |b| {
            b.iter_batched(
                || BytesMut::from(&case.wal_sync[..]),
                |src| decode_all(src, &case.pebble),
                BatchSize::LargeInput,
            )
        });
        group.finish();
    }
}

/// WAL-sync / legacy throughput: the median over `ROUNDS` of the per-round ratios.
fn ratio(case: &Case) -> f64 {
    let legacy = |n| timed(n, &case.legacy, &mut |src| decode_all(src, &case.leveldb));
    let wal_sync = |n| timed(n, &case.wal_sync, &mut |src| decode_all(src, &case.pebble));
    let (n_legacy, n_wal_sync) = (iters_for(legacy(1)), iters_for(wal_sync(1)));
    let ratio = paired(&mut || legacy(n_legacy), &mut || wal_sync(n_wal_sync));
    // Per run: the rounds ran different numbers of each.
    ratio * n_wal_sync as f64 / n_legacy as f64
}

fn paired_table() {
    println!();
    println!(
        "paired: {ROUNDS} rounds of about {} ms each side; WAL-sync / legacy throughput, \
         medians of the per-round ratios",
        ROUND_TIME.as_millis()
    );
    println!();
    println!("| record | all of one size | sizes of 3/4 to 5/4 |");
    println!("|---:|---:|---:|");
    for (name, size) in RECORD_SIZES {
        let fixed = ratio(&case(records(size)));
        let spread = ratio(&case(spread_records(size)));
        println!("| {name} | {fixed:.2}x | {spread:.2}x |");
    }
}

criterion_group!(benches, wal_sync);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--list" || a == "--test") {
        paired_table();
    }
}
