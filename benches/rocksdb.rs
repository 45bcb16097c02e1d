//! Decoding RocksDB's WAL formats, each beside its reference in the same run:
//!
//! - recyclable records (11-byte headers with the log number) against the same
//!   records in the legacy format: goal at least 0.95x of its throughput;
//! - zstd-compressed records (RocksDB's `wal_compression`) against zstd alone
//!   inflating the very same frames into buffers of the right size: goal at least
//!   0.9x.
//!
//! Each iteration decodes about 4 MiB of records of one size, in memory.
//!
//! ```text
//! cargo bench -p walcodec-benches --features zstd --bench rocksdb -- --warm-up-time 1 --measurement-time 3
//! cargo bench -p walcodec-benches --features zstd --bench rocksdb -- zzz_nomatch   # the paired table only
//! ```
//!
//! After criterion's groups, a paired table: each side and its reference take turns
//! for `ROUNDS` rounds of about `ROUND_TIME` each, and the ratio printed is the median
//! of the per-round ratios, so that a machine whose speed drifts between criterion's
//! groups (a shared 2-core VM) moves both sides alike.

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, BatchSize, Criterion, Throughput};
use tokio_util::codec::Decoder;
use walcodec::{Dialect, LogDecoder, LogDecoderBuilder, LogEncoder, LogEncoderBuilder};

mod common;

use common::{records, RECORD_SIZES};

const LOG_NUMBER: u64 = 42;

fn encode(records: &[Vec<u8>], builder: &LogEncoderBuilder) -> Bytes {
    let mut encoder = builder.build();
    let mut log = BytesMut::new();
    for record in records {
        encoder.encode_record(record, &mut log);
    }
    log.freeze()
}

/// Decodes the whole log, returning the bytes decoded (so nothing is optimized away).
fn decode_all(mut src: BytesMut, builder: &LogDecoderBuilder) -> usize {
    let mut decoder = builder.build();
    let mut total = 0;
    while let Some(record) = decoder.decode_eof(&mut src).expect("a clean log") {
        total += record.len();
    }
    total
}

/// A log of `size`-byte records in the legacy format and the same records in the
/// recyclable one, with the decoders of each, and the records' bytes.
struct RecyclableCase {
    legacy: Bytes,
    recycled: Bytes,
    leveldb: LogDecoderBuilder,
    rocksdb: LogDecoderBuilder,
    record_bytes: usize,
}

fn recyclable_case(size: usize) -> RecyclableCase {
    let records = records(size);
    let record_bytes: usize = records.iter().map(Vec::len).sum();
    let legacy = encode(&records, &LogEncoder::builder());
    let recycled = encode(&records, LogEncoder::builder().recyclable(LOG_NUMBER));
    let leveldb = LogDecoder::builder();
    let mut rocksdb = LogDecoder::builder();
    rocksdb.dialect(Dialect::RocksDb).log_number(LOG_NUMBER);
    assert_eq!(
        decode_all(BytesMut::from(&recycled[..]), &rocksdb),
        record_bytes
    );
    RecyclableCase {
        legacy,
        recycled,
        leveldb,
        rocksdb,
        record_bytes,
    }
}

fn recyclable(c: &mut Criterion) {
    for (name, size) in RECORD_SIZES {
        let case = recyclable_case(size);
        let mut group = c.benchmark_group(format!("rocksdb_recyclable/{name}"));
        group.throughput(Throughput::Bytes(case.record_bytes as u64));
        group.bench_function("reference_legacy", |b| {
            b.iter_batched(
                || BytesMut::from(&case.legacy[..]),
                |src| black_box(decode_all(src, &case.leveldb)),
                BatchSize::SmallInput,
            )
        });
        group.bench_function("recyclable", |b| {
            b.iter_batched(
                || BytesMut::from(&case.recycled[..]),
                |src| black_box(decode_all(src, &case.rocksdb)),
                BatchSize::SmallInput,
            )
        });
        group.finish();
    }
}

/// A log of `size`-byte zstd-compressed records, its decoder, the same frames taken
/// out of the log, and the records' bytes.
#[cfg(feature = "zstd")]
struct CompressedCase {
    log: Bytes,
    builder: LogDecoderBuilder,
    frames: Vec<Vec<u8>>,
    record_bytes: usize,
}

#[cfg(feature = "zstd")]
fn compressed_case(size: usize) -> CompressedCase {
    use walcodec::fragment::{FragmentRules, Parsed, Part};
    use walcodec::BLOCK_SIZE;

    // Text-like records: they compress about 3:1, as WriteBatches of keys and values
    // often do.
    let records: Vec<Vec<u8>> = records(size)
        .into_iter()
        .map(|record| {
            record
                .iter()
                .map(|b| b"abcdefgh"[usize::from(b % 8)])
                .collect()
        })
        .collect();
    let record_bytes: usize = records.iter().map(Vec::len).sum();
    let log = encode(&records, LogEncoder::builder().zstd());
    let mut builder = LogDecoder::builder();
    builder.dialect(Dialect::RocksDb);
    assert_eq!(decode_all(BytesMut::from(&log[..]), &builder), record_bytes);

    // The same frames, taken out of the log with the fragment layer.
    let rules = FragmentRules::new(Dialect::RocksDb);
    let mut frames = Vec::new();
    let mut frame = Vec::new();
    let mut at = 0;
    while at < log.len() {
        let block_left = BLOCK_SIZE - at % BLOCK_SIZE;
        match rules.parse(&log[at..], block_left) {
            Parsed::Fragment(fragment) => {
                if let Some(part) = fragment.part() {
                    frame.extend_from_slice(&log[at..][fragment.payload_range()]);
                    if matches!(part, Part::Full | Part::Last) {
                        frames.push(std::mem::take(&mut frame));
                    }
                }
                at += fragment.len();
            }
            Parsed::Trailer { len } | Parsed::ZeroFill { len } => at += len,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(frames.len(), records.len());
    CompressedCase {
        log,
        builder,
        frames,
        record_bytes,
    }
}

/// zstd alone inflating every frame into a buffer of the record's size.
#[cfg(feature = "zstd")]
fn zstd_alone(
    frames: &[Vec<u8>],
    size: usize,
    decompressor: &mut zstd::bulk::Decompressor,
) -> usize {
    let mut total = 0;
    for frame in frames {
        total += decompressor.decompress(frame, size).unwrap().len();
    }
    total
}

#[cfg(feature = "zstd")]
fn compressed(c: &mut Criterion) {
    for (name, size) in RECORD_SIZES {
        let case = compressed_case(size);
        let mut group = c.benchmark_group(format!("rocksdb_zstd/{name}"));
        group.throughput(Throughput::Bytes(case.record_bytes as u64));
        let mut decompressor = zstd::bulk::Decompressor::new().unwrap();
        group.bench_function("reference_zstd_alone", |b| {
            b.iter(|| black_box(zstd_alone(&case.frames, size, &mut decompressor)))
        });
        group.bench_function("decode", |b| {
            b.iter_batched(
                || BytesMut::from(&case.log[..]),
                |src| black_box(decode_all(src, &case.builder)),
                BatchSize::SmallInput,
            )
        });
        group.finish();
    }
}

#[cfg(not(feature = "zstd"))]
fn compressed(_: &mut Criterion) {}

/// Rounds of the paired table, and about how long each side runs in one.
const ROUNDS: usize = 21;
const ROUND_TIME: Duration = Duration::from_millis(60);

/// The time of `iters` runs of `run`, each on a fresh copy of `log` made before the
/// clock starts (as criterion's `iter_batched` does).
fn timed(iters: usize, log: &[u8], run: &mut dyn FnMut(BytesMut) -> usize) -> Duration {
    let copies: Vec<BytesMut> = (0..iters).map(|_| BytesMut::from(log)).collect();
    let start = Instant::now();
    for copy in copies {
        black_box(run(copy));
    }
    start.elapsed()
}

/// The median over `ROUNDS` of (reference time / candidate time), each round running
/// both sides for about `ROUND_TIME`, in turns.
fn paired(reference: &mut dyn FnMut() -> Duration, candidate: &mut dyn FnMut() -> Duration) -> f64 {
    let mut ratios: Vec<f64> = (0..ROUNDS)
        .map(|_| reference().as_secs_f64() / candidate().as_secs_f64())
        .collect();
    ratios.sort_by(f64::total_cmp);
    ratios[ROUNDS / 2]
}

/// How many runs of a side fill about `ROUND_TIME`, from one run.
fn iters_for(one_run: Duration) -> usize {
    (ROUND_TIME.as_secs_f64() / one_run.as_secs_f64().max(1e-6)).clamp(1.0, 1000.0) as usize
}

fn paired_table() {
    println!();
    println!(
        "paired: {ROUNDS} rounds of about {} ms each side; throughput ratios (reference's \
         time / this one's), medians of the per-round ratios",
        ROUND_TIME.as_millis()
    );
    println!();
    println!(
        "| record | recyclable / legacy (goal 0.95x) | zstd decode / zstd alone (goal 0.9x) |"
    );
    println!("|---:|---:|---:|");
    for (name, size) in RECORD_SIZES {
        let case = recyclable_case(size);
        let legacy = |n| timed(n, &case.legacy, &mut |src| decode_all(src, &case.leveldb));
        let recycled = |n| timed(n, &case.recycled, &mut |src| decode_all(src, &case.rocksdb));
        let (n_legacy, n_recycled) = (iters_for(legacy(1)), iters_for(recycled(1)));
        let recyclable_ratio = paired(&mut || legacy(n_legacy), &mut || recycled(n_recycled));
        // Per run: the rounds ran different numbers of each.
        let recyclable_ratio = recyclable_ratio * n_recycled as f64 / n_legacy as f64;
        #[cfg(feature = "zstd")]
        let zstd_cell = {
            let case = compressed_case(size);
            let mut decompressor = zstd::bulk::Decompressor::new().unwrap();
            let mut alone = |n: usize| {
                let start = Instant::now();
                for _ in 0..n {
                    black_box(zstd_alone(&case.frames, size, &mut decompressor));
                }
                start.elapsed()
            };
            let decode = |n| timed(n, &case.log, &mut |src| decode_all(src, &case.builder));
            let (n_alone, n_decode) = (iters_for(alone(1)), iters_for(decode(1)));
            let ratio = paired(&mut || alone(n_alone), &mut || decode(n_decode));
            format!("{:.2}x", ratio * n_decode as f64 / n_alone as f64)
        };
        #[cfg(not(feature = "zstd"))]
        let zstd_cell = "(feature zstd)".to_string();
        println!("| {name} | {recyclable_ratio:.2}x | {zstd_cell} |");
    }
}

criterion_group!(benches, recyclable, compressed);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    // Not in `cargo bench --no-run`, nor when criterion only lists or tests.
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--list" || a == "--test") {
        paired_table();
    }
}
