//! Streaming a 64 MiB record in and out, beside whole-record decode and encode of the
//! same record in the same run. Goal: streaming at least 0.9x of whole-record.
//!
//! - `decode_whole`: `LogReader::next_record`, the record assembled into one buffer
//!   (one copy of the payload).
//! - `read_stream`: `LogReader::next_record_reader`, read 64 KiB at a time into the
//!   caller's buffer (one copy of the payload), a block or two of memory.
//! - `encode_whole`: `LogEncoder::encode_record` into a reused buffer (one copy).
//! - `write_stream`: a `LogWriter`'s `RecordWriter` fed 64 KiB at a time, into a
//!   reused `Vec` (two copies: into the fragment, then into the sink) and into
//!   `tokio::io::sink()` (one copy, as for a file: the encoder's buffer would still
//!   have to be written out).
//!
//! ```text
//! cargo bench -p walcodec-benches --bench streaming -- --warm-up-time 1 --measurement-time 3
//! ```

use std::hint::black_box;

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use futures::executor::block_on;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use walcodec::{LogDecoder, LogEncoder, LogReader, LogWriter};

const RECORD_BYTES: usize = 64 << 20;
const CHUNK_BYTES: usize = 64 << 10;

fn record() -> Vec<u8> {
    let mut state = 0x1234_5678_9abc_def1u64;
    (0..RECORD_BYTES)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

fn streaming(c: &mut Criterion) {
    let record = record();
    let mut log = BytesMut::new();
    LogEncoder::new().encode_record(&record, &mut log);
    let decoder = LogDecoder::builder()
        .max_record_bytes(2 * RECORD_BYTES)
        .build();

    let mut group = c.benchmark_group("streaming/64MiB");
    group.throughput(Throughput::Bytes(RECORD_BYTES as u64));
    group.sample_size(10);

    group.bench_function("decode_whole", |b| {
        b.iter(|| {
            block_on(async {
                let mut reader = LogReader::new(&log[..], decoder.clone());
                let record = reader.next_record().await.unwrap().unwrap();
                black_box(record.data.len())
            })
        })
    });

    let mut chunk = vec![0u8; CHUNK_BYTES];
    group.bench_function("read_stream", |b| {
        b.iter(|| {
            block_on(async {
                let mut reader = LogReader::new(&log[..], decoder.clone());
                let mut record = reader.next_record_reader().await.unwrap().unwrap();
                let mut total = 0;
                loop {
                    let n = record.read(&mut chunk).await.unwrap();
                    if n == 0 {
                        break;
                    }
                    total += black_box(&chunk[..n]).len();
                }
                total
            })
        })
    });

    let mut out = BytesMut::with_capacity(RECORD_BYTES + RECORD_BYTES / 1000);
    group.bench_function("encode_whole", |b| {
        b.iter(|| {
            out.clear();
            LogEncoder::new().encode_record(&record, &mut out);
            black_box(out.len())
        })
    });

    let mut sink = Vec::with_capacity(RECORD_BYTES + RECORD_BYTES / 1000);
    group.bench_function("write_stream_to_vec", |b| {
        b.iter(|| {
            sink.clear();
            block_on(async {
                let mut writer = LogWriter::new(&mut sink);
                let mut out = writer.record_writer().unwrap();
                for piece in record.chunks(CHUNK_BYTES) {
                    out.write_all(piece).await.unwrap();
                }
                black_box(out.finish().await.unwrap())
            })
        })
    });

    group.bench_function("write_stream_to_sink", |b| {
        b.iter(|| {
            block_on(async {
                let mut writer = LogWriter::new(tokio::io::sink());
                let mut out = writer.record_writer().unwrap();
                for piece in record.chunks(CHUNK_BYTES) {
                    out.write_all(piece).await.unwrap();
                }
                black_box(out.finish().await.unwrap())
            })
        })
    });
    group.finish();
}

criterion_group!(benches, streaming);
criterion_main!(benches);
