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
//! ```

use std::hint::black_box;

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
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

fn recyclable(c: &mut Criterion) {
    for (name, size) in RECORD_SIZES {
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

        let mut group = c.benchmark_group(format!("rocksdb_recyclable/{name}"));
        group.throughput(Throughput::Bytes(record_bytes as u64));
        group.bench_function("reference_legacy", |b| {
            b.iter_batched(
                || BytesMut::from(&legacy[..]),
                |src| black_box(decode_all(src, &leveldb)),
                BatchSize::SmallInput,
            )
        });
        group.bench_function("recyclable", |b| {
            b.iter_batched(
                || BytesMut::from(&recycled[..]),
                |src| black_box(decode_all(src, &rocksdb)),
                BatchSize::SmallInput,
            )
        });
        group.finish();
    }
}

#[cfg(feature = "zstd")]
fn compressed(c: &mut Criterion) {
    use walcodec::fragment::{FragmentRules, Parsed, Part};
    use walcodec::BLOCK_SIZE;

    for (name, size) in RECORD_SIZES {
        // Text-like records: they compress about 3:1, as WriteBatches of keys and
        // values often do.
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

        let mut group = c.benchmark_group(format!("rocksdb_zstd/{name}"));
        group.throughput(Throughput::Bytes(record_bytes as u64));
        let mut decompressor = zstd::bulk::Decompressor::new().unwrap();
        group.bench_function("reference_zstd_alone", |b| {
            b.iter(|| {
                let mut total = 0;
                for frame in &frames {
                    total += decompressor.decompress(frame, size).unwrap().len();
                }
                black_box(total)
            })
        });
        group.bench_function("decode", |b| {
            b.iter_batched(
                || BytesMut::from(&log[..]),
                |src| black_box(decode_all(src, &builder)),
                BatchSize::SmallInput,
            )
        });
        group.finish();
    }
}

#[cfg(not(feature = "zstd"))]
fn compressed(_: &mut Criterion) {}

criterion_group!(benches, recyclable, compressed);
criterion_main!(benches);
