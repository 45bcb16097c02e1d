//! Processes one log in N concurrent tokio tasks, one split each, and checks the
//! result against a sequential read of the same log.
//!
//! ```text
//! cargo run --release --example parallel_read            # builds a 64 MiB sample log
//! cargo run --release --example parallel_read -- PATH 8 # an existing log, 8 splits
//! ```

use std::path::PathBuf;
use std::time::Instant;

use bytes::BytesMut;
use walcodec::{split_ranges, LogDecoder, LogEncoder, LogReader};

/// What each task computes over its records: a count, a byte total and an
/// order-independent checksum, so the splits can be combined and compared.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Summary {
    records: u64,
    bytes: u64,
    checksum: u64,
}

impl Summary {
    fn add(&mut self, start: u64, data: &[u8]) {
        self.records += 1;
        self.bytes += data.len() as u64;
        self.checksum = self
            .checksum
            .wrapping_add(u64::from(crc32c::crc32c(data)) ^ start.rotate_left(17));
    }

    fn merge(&mut self, other: Summary) {
        self.records += other.records;
        self.bytes += other.bytes;
        self.checksum = self.checksum.wrapping_add(other.checksum);
    }
}

async fn summarize(path: PathBuf, range: std::ops::Range<u64>) -> Result<Summary, walcodec::Error> {
    let mut reader = LogReader::open_range(&path, range, &LogDecoder::builder()).await?;
    let mut summary = Summary::default();
    while let Some(record) = reader.next_record().await {
        let record = record?;
        summary.add(record.position.start, &record.data);
    }
    Ok(summary)
}

fn write_sample_log(path: &PathBuf) -> std::io::Result<()> {
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    while log.len() < 64 << 20 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let len = match state % 10 {
            0 => (state >> 8) as usize % 200_000,
            1..=3 => (state >> 8) as usize % 32_768,
            _ => (state >> 8) as usize % 512,
        };
        let record: Vec<u8> = (0..len).map(|i| (i as u64 ^ state) as u8).collect();
        encoder.encode_record(&record, &mut log);
    }
    std::fs::write(path, &log)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let scratch = tempfile::tempdir()?;
    let path = match args.next() {
        Some(path) => PathBuf::from(path),
        None => {
            let path = scratch.path().join("sample.log");
            write_sample_log(&path)?;
            path
        }
    };
    let parts: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(4);
    let len = std::fs::metadata(&path)?.len();

    let started = Instant::now();
    let sequential = summarize(path.clone(), 0..u64::MAX).await?;
    let sequential_time = started.elapsed();

    let started = Instant::now();
    let tasks: Vec<_> = split_ranges(len, parts)
        .into_iter()
        .map(|range| tokio::spawn(summarize(path.clone(), range)))
        .collect();
    let mut parallel = Summary::default();
    for task in tasks {
        parallel.merge(task.await??);
    }
    let parallel_time = started.elapsed();

    println!(
        "{}: {} bytes, {} records, {} payload bytes",
        path.display(),
        len,
        sequential.records,
        sequential.bytes
    );
    println!("sequential: {sequential_time:?}; {parts} splits: {parallel_time:?}");
    if parallel != sequential {
        return Err(format!("splits disagree: {parallel:?} vs {sequential:?}").into());
    }
    println!("splits agree with the sequential read");
    Ok(())
}
