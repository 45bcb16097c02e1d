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

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, BatchSize, Criterion, Throughput};
use tokio_util::codec::Decoder;
use walcodec::{Dialect, LogDecoder, LogDecoderBuilder, LogEncoder, LogEncoderBuilder};

mod common;

use common::{pseudo_random_records, records, BYTES_PER_ITERATION, RECORD_SIZES};

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

fn decode_all(mut src: BytesMut, builder: &LogDecoderBuilder) -> usize {
    let mut decoder = builder.build();
    let mut total = 0;
    while let Some(record) = decoder.decode_eof(&mut src).expect("a clean log") {
        total += record.len();
    }
    total
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

/// Records of 3/4 to 5/4 of `size`, about `BYTES_PER_ITERATION` in all.
fn spread_records(size: usize) -> Vec<Vec<u8>> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64 ^ size as u64;
    let mut total = 0;
    let mut sizes = Vec::new();
    while total < BYTES_PER_ITERATION {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let len = size * 3 / 4 + (state % (size as u64 / 2 + 1)) as usize;
        total += len;
        sizes.push(len);
    }
    pseudo_random_records(size * 5 / 4, sizes.len(), state)
        .into_iter()
        .zip(sizes)
        .map(|(mut record, len)| {
            record.truncate(len);
            record
        })
        .collect()
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

const ROUNDS: usize = 21;
const ROUND_TIME: Duration = Duration::from_millis(60);

fn timed(iters: usize, log: &[u8], run: &mut dyn FnMut(BytesMut) -> usize) -> Duration {
    let copies: Vec<BytesMut> = (0..iters).map(|_| BytesMut::from(log)).collect();
    let start = Instant::now();
    for copy in copies {
        black_box(run(copy));
    }
    start.elapsed()
}

fn iters_for(one_run: Duration) -> usize {
    (ROUND_TIME.as_secs_f64() / one_run.as_secs_f64().max(1e-6)).clamp(1.0, 1000.0) as usize
}

/// WAL-sync / legacy throughput: the median over `ROUNDS` of the per-round ratios.
fn ratio(case: &Case) -> f64 {
    let legacy = |n| timed(n, &case.legacy, &mut |src| decode_all(src, &case.leveldb));
    let wal_sync = |n| timed(n, &case.wal_sync, &mut |src| decode_all(src, &case.pebble));
    let (n_legacy, n_wal_sync) = (iters_for(legacy(1)), iters_for(wal_sync(1)));
    let mut ratios: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let reference = legacy(n_legacy).as_secs_f64() / n_legacy as f64;
            reference / (wal_sync(n_wal_sync).as_secs_f64() / n_wal_sync as f64)
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    ratios[ROUNDS / 2]
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
