//! The log codec beside a peer and beside the hardware bound, in one run.
//!
//! For each record size (100 B, 1 KiB, 32 KiB, 1 MiB), about 4 MiB of records per
//! iteration, in memory:
//!
//! | id                        | what                                                        |
//! |---------------------------|-------------------------------------------------------------|
//! | `bound_crc32c_copy`       | crc32c (`crc32c` crate) of every record plus one copy of it |
//! | `encode_walcodec`         | `LogEncoder::encode_record` into a reused `BytesMut`       |
//! | `encode_hidane`           | hidane-core's `export::log::Writer` into a reused `Vec`     |
//! | `decode_walcodec`         | `LogDecoder::decode` over the whole log in one buffer       |
//! | `decode_walcodec_framed_8KiB`, `_64KiB` | `FramedRead` with an 8 KiB / 64 KiB buffer over an in-memory reader returning at most that much per read: one copy more than `decode_walcodec` (reader to buffer) |
//! | `decode_hidane`           | hidane-core's `export::log::records` over the whole log     |
//! | `crc32c_only`, `crc_fast_only`, `copy_only` | the two halves of the bound, and the crc with the `crc-fast` crate: whether the codec is bound by its crc |
//!
//! Every id reports bytes of records per second. `scripts/plot.py` turns the results
//! into ratios (records/s follow from the record size) and `docs/throughput.svg`.
//!
//! ```text
//! cargo bench --bench codec -- --warm-up-time 1 --measurement-time 3
//! ```

use std::borrow::Cow;
use std::hint::black_box;

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use futures::StreamExt;
use hidane_core::export::log as hidane;
use tokio_util::codec::{Decoder, FramedRead};
use walcodec::{LogDecoder, LogEncoder};

#[path = "../../common/mod.rs"]
mod common;

use common::{encode_log, records, MemoryReader, RECORD_SIZES};

/// The crc32c of `data` with the crc-fast crate.
fn crc_fast_crc32c(data: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(data)
}

fn codec(c: &mut Criterion) {
    for (name, size) in RECORD_SIZES {
        let records = records(size);
        let record_bytes: usize = records.iter().map(Vec::len).sum();
        let log = encode_log(&records);

        // Checked once, outside the timings: the peer writes the same bytes, and each
        // decoder returns every record.
        let hidane_log = hidane::write_all(records.iter().map(Vec::as_slice));
        assert!(hidane_log == log[..], "hidane-core wrote different bytes");
        assert_eq!(hidane::records(&log).count(), records.len());
        assert_eq!(
            crc_fast_crc32c(&records[0]),
            crc32c::crc32c(&records[0]),
            "crc-fast disagrees with crc32c"
        );

        let mut group = c.benchmark_group(format!("codec/{name}"));
        group.throughput(Throughput::Bytes(record_bytes as u64));

        // The bound: what any encoder or copying decoder must at least do.
        let mut copy = Vec::with_capacity(record_bytes);
        group.bench_function("bound_crc32c_copy", |b| {
            b.iter(|| {
                copy.clear();
                let mut crc = 0;
                for record in &records {
                    crc ^= crc32c::crc32c(record);
                    copy.extend_from_slice(record);
                }
                black_box((crc, copy.as_ptr()))
            })
        });

        let mut dst = BytesMut::with_capacity(log.len());
        group.bench_function("encode_walcodec", |b| {
            b.iter(|| {
                dst.clear();
                let mut encoder = LogEncoder::new();
                for record in &records {
                    encoder.encode_record(record, &mut dst);
                }
                black_box(dst.as_ptr())
            })
        });

        let mut out = Vec::with_capacity(log.len());
        group.bench_function("encode_hidane", |b| {
            b.iter(|| {
                out.clear();
                let mut writer = hidane::Writer::new(std::mem::take(&mut out));
                for record in &records {
                    writer.add_record(record).expect("a Vec takes every write");
                }
                out = writer.into_inner();
                black_box(out.as_ptr())
            })
        });

        // Copying the log into a fresh buffer is setup, outside the timed region; the
        // buffer is handed back so that freeing it is not timed either.
        group.bench_function("decode_walcodec", |b| {
            b.iter_batched(
                || BytesMut::from(&log[..]),
                |mut src| {
                    let mut decoder = LogDecoder::new();
                    let mut decoded = 0;
                    while let Some(record) = decoder.decode(&mut src).expect("valid log") {
                        decoded += record.len();
                    }
                    (src, decoded)
                },
                BatchSize::PerIteration,
            )
        });

        for (read_name, read_size) in [("8KiB", 8 << 10), ("64KiB", 64 << 10)] {
            group.bench_function(format!("decode_walcodec_framed_{read_name}"), |b| {
                b.iter(|| {
                    let reader = MemoryReader {
                        data: log.clone(),
                        read_size,
                    };
                    // A caller that wants 64 KiB reads gives FramedRead a buffer that
                    // size: with the default 8 KiB, no read can return more.
                    let mut framed =
                        FramedRead::with_capacity(reader, LogDecoder::new(), read_size);
                    futures::executor::block_on(async {
                        let mut decoded = 0;
                        while let Some(record) = framed.next().await {
                            decoded += record.expect("valid log").len();
                        }
                        black_box(decoded)
                    })
                })
            });
        }

        group.bench_function("decode_hidane", |b| {
            b.iter(|| {
                let mut decoded = 0;
                for record in hidane::records(&log) {
                    let record: Cow<'_, [u8]> = record.expect("valid log");
                    decoded += record.len();
                }
                black_box(decoded)
            })
        });

        group.bench_function("crc32c_only", |b| {
            b.iter(|| {
                let mut crc = 0;
                for record in &records {
                    crc ^= crc32c::crc32c(record);
                }
                black_box(crc)
            })
        });

        group.bench_function("crc_fast_only", |b| {
            b.iter(|| {
                let mut crc = 0;
                for record in &records {
                    crc ^= crc_fast_crc32c(record);
                }
                black_box(crc)
            })
        });

        group.bench_function("copy_only", |b| {
            b.iter(|| {
                copy.clear();
                for record in &records {
                    copy.extend_from_slice(record);
                }
                black_box(copy.as_ptr())
            })
        });
        group.finish();
    }
}

criterion_group!(benches, codec);
criterion_main!(benches);
