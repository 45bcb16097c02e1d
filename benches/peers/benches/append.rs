//! Non-durable appends to a file: walcodec beside commitlog and beside the bound, in
//! one run.
//!
//! An append here is done when its bytes are handed to the OS (a `write` returned),
//! not when they are on disk: that is what commitlog's `append_msg` gives. For each
//! record size (100 B, 1 KiB, 32 KiB, 1 MiB):
//!
//! | id                        | what                                                       |
//! |---------------------------|------------------------------------------------------------|
//! | `bound_write`             | one `write` of the bare record per append, on a std file   |
//! | `walcodec_encode_write`   | `LogEncoder::encode_record` into a reused buffer, then one `write` of the framed record |
//! | `commitlog`               | `CommitLog::append_msg` (one `write` per message plus an entry in its mmapped index) |
//!
//! Throughput is record bytes per second; one iteration is one append. Each sample
//! starts on a new, empty log, created and removed outside the timed region.
//!
//! ```text
//! cargo bench --bench append -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Files go to `WALCODEC_BENCH_DIR`, else the system temp dir.

use std::fs::File;
use std::hint::black_box;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use bytes::BytesMut;
use commitlog::{CommitLog, LogOptions};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use walcodec::LogEncoder;

const RECORD_SIZES: [(&str, usize); 4] = [
    ("100B", 100),
    ("1KiB", 1 << 10),
    ("32KiB", 32 << 10),
    ("1MiB", 1 << 20),
];

/// Distinct records cycled through, so the data is not one repeated buffer.
const DISTINCT_RECORDS: usize = 16;

fn bench_dir() -> PathBuf {
    std::env::var_os("WALCODEC_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

fn records(size: usize) -> Vec<Vec<u8>> {
    common::pseudo_random_records(size, DISTINCT_RECORDS, 0x2545_f491_4f6c_dd1d)
}

#[path = "../../common/mod.rs"]
mod common;

fn append(c: &mut Criterion) {
    for (name, size) in RECORD_SIZES {
        let records = records(size);
        let mut group = c.benchmark_group(format!("append/{name}"));
        group.throughput(Throughput::Bytes(size as u64));
        group.sample_size(20);

        group.bench_function("bound_write", |b| {
            b.iter_custom(|iters| {
                let dir = tempfile::tempdir_in(bench_dir()).unwrap();
                let mut file = File::create(dir.path().join("bound")).unwrap();
                let start = Instant::now();
                for i in 0..iters {
                    file.write_all(&records[i as usize % DISTINCT_RECORDS])
                        .unwrap();
                }
                start.elapsed()
            })
        });

        group.bench_function("walcodec_encode_write", |b| {
            b.iter_custom(|iters| {
                let dir = tempfile::tempdir_in(bench_dir()).unwrap();
                let mut file = File::create(dir.path().join("000001.log")).unwrap();
                let mut encoder = LogEncoder::new();
                let mut buf = BytesMut::with_capacity(encoder.encoded_len(size) + 64);
                let start = Instant::now();
                for i in 0..iters {
                    buf.clear();
                    let position =
                        encoder.encode_record(&records[i as usize % DISTINCT_RECORDS], &mut buf);
                    file.write_all(&buf).unwrap();
                    black_box(position);
                }
                let elapsed = start.elapsed();
                assert_eq!(
                    file.metadata().unwrap().len(),
                    encoder.offset(),
                    "every append reached the file"
                );
                elapsed
            })
        });

        group.bench_function("commitlog", |b| {
            b.iter_custom(|iters| {
                let dir = tempfile::tempdir_in(bench_dir()).unwrap();
                let mut options = LogOptions::new(dir.path());
                // Its default cap (1 MB) is below the largest record here.
                options.message_max_bytes(2 << 20);
                let mut log = CommitLog::new(options).unwrap();
                let start = Instant::now();
                for i in 0..iters {
                    let offset = log
                        .append_msg(&records[i as usize % DISTINCT_RECORDS])
                        .unwrap();
                    black_box(offset);
                }
                let elapsed = start.elapsed();
                assert_eq!(log.next_offset(), iters, "every append reached the log");
                elapsed
            })
        });
        group.finish();
    }
}

criterion_group!(benches, append);
criterion_main!(benches);
