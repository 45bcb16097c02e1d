//! RecordIO encode and decode throughput beside tokio-util's `LengthDelimitedCodec`
//! (a 4-byte binary length prefix) on the same records, in the same run.
//!
//! `cargo bench --bench recordio -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec};
use walcodec::RecordIoCodec;

/// (label, record size, record count): about 1 MiB and 4 MiB of payload per run.
const CASES: [(&str, usize, usize); 2] = [("100B", 100, 10_000), ("64KiB", 64 * 1024, 64)];

fn records(size: usize, count: usize) -> Vec<Bytes> {
    (0..count)
        .map(|i| Bytes::from(vec![(i % 251) as u8; size]))
        .collect()
}

fn encode_all<C>(codec: &mut C, records: &[Bytes], dst: &mut BytesMut)
where
    C: for<'a> Encoder<&'a [u8]>,
    for<'a> <C as Encoder<&'a [u8]>>::Error: std::fmt::Debug,
{
    dst.clear();
    for record in records {
        codec.encode(&record[..], dst).unwrap();
    }
}

fn decode_all<C: Decoder<Item = R>, R>(mut codec: C, src: &mut BytesMut, count: usize)
where
    C::Error: std::fmt::Debug,
{
    let mut n = 0;
    while let Some(record) = codec.decode(src).unwrap() {
        black_box(record);
        n += 1;
    }
    assert_eq!(n, count);
}

fn encode(c: &mut Criterion) {
    for (label, size, count) in CASES {
        let records = records(size, count);
        let mut group = c.benchmark_group(format!("encode_{label}"));
        group.throughput(Throughput::Bytes((size * count) as u64));
        let mut dst = BytesMut::with_capacity(count * (size + 32));
        group.bench_function("walcodec_recordio", |b| {
            let mut codec = RecordIoCodec::new();
            b.iter(|| {
                encode_all(&mut codec, &records, &mut dst);
                black_box(&dst);
            })
        });
        group.bench_function("tokio_length_delimited", |b| {
            let mut codec = LengthDelimitedCodec::new();
            b.iter(|| {
                encode_all(&mut codec, &records, &mut dst);
                black_box(&dst);
            })
        });
        group.finish();
    }
}

fn decode(c: &mut Criterion) {
    for (label, size, count) in CASES {
        let records = records(size, count);
        let mut recordio = BytesMut::new();
        encode_all(&mut RecordIoCodec::new(), &records, &mut recordio);
        let mut length_delimited = BytesMut::new();
        encode_all(
            &mut LengthDelimitedCodec::new(),
            &records,
            &mut length_delimited,
        );

        let mut group = c.benchmark_group(format!("decode_{label}"));
        group.throughput(Throughput::Bytes((size * count) as u64));
        group.bench_function("walcodec_recordio", |b| {
            b.iter_batched_ref(
                || recordio.clone(),
                |src| decode_all(RecordIoCodec::new(), src, count),
                BatchSize::LargeInput,
            )
        });
        group.bench_function("tokio_length_delimited", |b| {
            b.iter_batched_ref(
                || length_delimited.clone(),
                |src| decode_all(LengthDelimitedCodec::new(), src, count),
                BatchSize::LargeInput,
            )
        });
        group.finish();
    }
}

criterion_group!(benches, encode, decode);
criterion_main!(benches);
