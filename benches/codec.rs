//! Encode and decode throughput of the log codec, beside a bound measured in the same
//! run: crc32c of the same record bytes plus one copy of them, the least work any
//! encoder or (copying) decoder must do.
//!
//! Each iteration handles about 4 MiB of records of one size (100 B, 1 KiB, 32 KiB,
//! 1 MiB), in memory. Goal: at least 0.9 of the bound from 1 KiB up, 0.75 at 100 B.
//!
//! `decode` hands out single-fragment records as views of its input (no copy) and
//! copies fragmented ones once. `floor_crc_in_place_and_view` is the least such a
//! decoder must do: checksum each fragment where it lies and hand it out as a view.
//! For small records the view's two atomic reference count updates cost more than
//! copying 100 bytes, so at 100 B this floor sits below the crc + copy bound. `framed_read_*` also pays `FramedRead`'s copy from the
//! reader into its buffer: one copy more than `decode` for every record.
//!
//! ```text
//! cargo bench --bench codec -- --warm-up-time 1 --measurement-time 3
//! ```

use std::hint::black_box;

use bytes::{Buf, BytesMut};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use futures::StreamExt;
use tokio_util::codec::{Decoder, FramedRead};
use walcodec::format::fragment_crc_in_place;
use walcodec::{LogDecoder, LogEncoder, BLOCK_SIZE, HEADER_SIZE};

mod common;

use common::{encode_log, records, MemoryReader, RECORD_SIZES};

fn codec(c: &mut Criterion) {
    for (name, size) in RECORD_SIZES {
        let records = records(size);
        let record_bytes: usize = records.iter().map(Vec::len).sum();
        let log = encode_log(&records);

        let mut group = c.benchmark_group(format!("codec/{name}"));
        group.throughput(Throughput::Bytes(record_bytes as u64));

        // The bound: what any encoder or copying decoder must at least do.
        let mut copy = Vec::with_capacity(record_bytes);
        group.bench_function("bound_crc32c_and_copy", |b| {
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

        // A second reference for decoding: the least a decoder that copies nothing
        // must do, checksum each fragment where it lies and hand it out as a view
        // (one atomic reference count up, one down when the record is dropped).
        group.bench_function("floor_crc_in_place_and_view", |b| {
            b.iter_batched(
                || BytesMut::from(&log[..]),
                |mut src| {
                    let mut offset = 0;
                    let mut crc = 0;
                    let mut decoded = 0;
                    while src.len() >= HEADER_SIZE {
                        let block_left = BLOCK_SIZE - offset % BLOCK_SIZE;
                        if block_left < HEADER_SIZE {
                            src.advance(block_left);
                            offset += block_left;
                            continue;
                        }
                        let fragment_len =
                            HEADER_SIZE + usize::from(u16::from_le_bytes([src[4], src[5]]));
                        crc ^= fragment_crc_in_place(&src[HEADER_SIZE - 1..fragment_len]);
                        let mut fragment = src.split_to(fragment_len).freeze();
                        fragment.advance(HEADER_SIZE);
                        decoded += fragment.len();
                        offset += fragment_len;
                    }
                    (src, crc, decoded)
                },
                BatchSize::PerIteration,
            )
        });

        let mut dst = BytesMut::with_capacity(log.len());
        group.bench_function("encode", |b| {
            b.iter(|| {
                dst.clear();
                let mut encoder = LogEncoder::new();
                for record in &records {
                    encoder.encode_record(record, &mut dst);
                }
                black_box(dst.as_ptr())
            })
        });

        // Copying the log into a fresh buffer is setup, outside the timed region; the
        // buffer is handed back so that freeing it is not timed either.
        group.bench_function("decode", |b| {
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
            group.bench_function(format!("framed_read_{read_name}_reads"), |b| {
                b.iter(|| {
                    let reader = MemoryReader {
                        data: log.clone(),
                        read_size,
                    };
                    let mut framed = FramedRead::new(reader, LogDecoder::new());
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
        group.finish();

        // Every variant decodes every record (checked once, outside the timings).
        let mut src = BytesMut::from(&log[..]);
        let mut decoder = LogDecoder::new();
        let mut count = 0;
        while decoder.decode(&mut src).expect("valid log").is_some() {
            count += 1;
        }
        assert_eq!(count, records.len());
    }
}

criterion_group!(benches, codec);
criterion_main!(benches);
