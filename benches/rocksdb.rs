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
//!
//! The table has the recyclable ratio three times:
//!
//! - in memory, records all of one size (criterion's groups above): each run decodes
//!   a copy of the log made beforehand, out of cache by the time it is read. When
//!   every record has the same size, every fragment starts the same number of bytes
//!   after the one before (1,031 bytes for 1 KiB legacy records, 1,035 recyclable),
//!   and that one stride decides how well the hardware prefetches: legacy records of
//!   1,028 bytes, whose stride is the recyclable one's, read no faster than
//!   recyclable ones of 1,024, and strides a few bytes apart move a file read by up
//!   to 20%. The format is not what this column's 1 KiB cell measures;
//! - in memory, records from 3/4 to 5/4 of the size, as a WAL's records are: no one
//!   stride decides;
//! - from files, as a user reads a log: `LogReader::open_at` over a page-cached
//!   file of `FILE_MIB` MiB in each format, of the spread records.
//!   `WALCODEC_BENCH_DIR` (default: the system temp dir) holds the files.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, BatchSize, Criterion, Throughput};
use walcodec::{Dialect, LogDecoder, LogDecoderBuilder, LogEncoder, LogEncoderBuilder, LogReader};

mod common;
#[path = "common/paired.rs"]
mod paired;

use common::{records, RECORD_SIZES};
use paired::{decode_all, iters_for, paired, spread_records, timed, ROUNDS, ROUND_TIME};

const LOG_NUMBER: u64 = 42;

fn encode(records: &[Vec<u8>], builder: &LogEncoderBuilder) -> Bytes {
    let mut encoder = builder.build();
    let mut log = BytesMut::new();
    for record in records {
        encoder.encode_record(record, &mut log);
    }
    log.freeze()
}

/// A log of `size`-byte records in the legacy format and the same records in the
/// recyclable one, with the decoders of each, and the records' bytes.
struct RecyclableCase {
    legacy: Bytes,
    recycled: Bytes,
    leveldb: LogDecoderBuilder,
    rocksdb: LogDecoderBuilder,
    record_bytes: usize,
    records: Vec<Vec<u8>>,
}

fn recyclable_case(records: Vec<Vec<u8>>) -> RecyclableCase {
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
        records,
    }
}

fn recyclable(c: &mut Criterion) {
    for (name, size) in RECORD_SIZES {
        let case = recyclable_case(records(size));
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
/// Size of each file the file column reads: the records of one size, again and
/// again.
const FILE_MIB: usize = 64;

/// The legacy and recyclable logs of `case` written as files of about `FILE_MIB`
/// MiB each (the same records repeated), in `dir`.
fn write_files(case: &RecyclableCase, dir: &Path) -> (PathBuf, PathBuf) {
    let repeat = (FILE_MIB << 20) / case.legacy.len().max(1);
    let write = |name: &str, builder: &LogEncoderBuilder| {
        let path = dir.join(name);
        let mut encoder = builder.build();
        let mut log = BytesMut::new();
        for _ in 0..repeat.max(1) {
            for record in &case.records {
                encoder.encode_record(record, &mut log);
            }
        }
        std::fs::write(&path, &log).unwrap();
        path
    };
    (
        write("000042.legacy.log", &LogEncoder::builder()),
        write(
            "000042.recycled.log",
            LogEncoder::builder().recyclable(LOG_NUMBER),
        ),
    )
}

/// Reads every record of the file at `path` through `LogReader::open_at`,
/// returning the records' bytes.
async fn read_file(path: &Path, builder: &LogDecoderBuilder) -> usize {
    let mut reader = LogReader::open_at(path, 0, builder).await.unwrap();
    let mut total = 0;
    while let Some(record) = reader.next_record().await {
        total += record.unwrap().data.len();
    }
    total
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
        "| record | recyclable / legacy, in memory (goal 0.95x) | the same, sizes of 3/4 to 5/4 \
         | files ({FILE_MIB} MiB, `LogReader`), sizes of 3/4 to 5/4 | zstd decode / zstd alone \
         (goal 0.9x) |"
    );
    println!("|---:|---:|---:|---:|---:|");
    let dir = std::env::var_os("WALCODEC_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(dir).unwrap();
    for (name, size) in RECORD_SIZES {
        let fixed = in_memory_ratio(&recyclable_case(records(size)));
        let spread = recyclable_case(spread_records(size));
        let spread_ratio = in_memory_ratio(&spread);
        let file_ratio = file_ratio(&spread, dir.path());
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
        println!("| {name} | {fixed:.2}x | {spread_ratio:.2}x | {file_ratio:.2}x | {zstd_cell} |");
    }
}

/// Recyclable / legacy throughput of whole-buffer decodes of `case`'s logs.
fn in_memory_ratio(case: &RecyclableCase) -> f64 {
    let legacy = |n| timed(n, &case.legacy, &mut |src| decode_all(src, &case.leveldb));
    let recycled = |n| timed(n, &case.recycled, &mut |src| decode_all(src, &case.rocksdb));
    let (n_legacy, n_recycled) = (iters_for(legacy(1)), iters_for(recycled(1)));
    let ratio = paired(&mut || legacy(n_legacy), &mut || recycled(n_recycled));
    // Per run: the rounds ran different numbers of each.
    ratio * n_recycled as f64 / n_legacy as f64
}

/// Recyclable / legacy throughput of `LogReader`s over page-cached files of
/// `case`'s records, written in `dir`.
fn file_ratio(case: &RecyclableCase, dir: &Path) -> f64 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (legacy_file, recycled_file) = write_files(case, dir);
    let read_timed = |path: &Path, builder: &LogDecoderBuilder| {
        let start = Instant::now();
        black_box(runtime.block_on(read_file(path, builder)));
        start.elapsed()
    };
    assert_eq!(
        runtime.block_on(read_file(&legacy_file, &case.leveldb)),
        runtime.block_on(read_file(&recycled_file, &case.rocksdb)),
    );
    paired(&mut || read_timed(&legacy_file, &case.leveldb), &mut || {
        read_timed(&recycled_file, &case.rocksdb)
    })
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
