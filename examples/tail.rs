//! Follows a log that another task is still writing.
//!
//! The writer task encodes events with `LogEncoder` and appends the bytes to the file
//! in irregular pieces (cutting headers, payloads and block trailers anywhere) with
//! short pauses, as a real writer's flushes would. The follower, a `LogTailer`, prints
//! each record as soon as its last byte is in the file: a half-written record is
//! never returned, nor taken for damage. It stops after the last event.
//!
//! ```text
//! cargo run --example tail
//! ```

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::io::AsyncWriteExt;
use walcodec::{LogEncoder, LogTailer};

const EVENTS: usize = 40;

/// The events: short ones, and now and then one that spans blocks.
fn events() -> Vec<Vec<u8>> {
    (0..EVENTS)
        .map(|i| {
            let mut event = format!("event {i}: user {} logged in", i * 7 % 13).into_bytes();
            if i % 17 == 8 {
                event.resize(35_000 + i * 100, b'.');
            }
            event
        })
        .collect()
}

/// A tiny deterministic generator for piece sizes and pauses.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, bound: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % bound
    }
}

async fn write_events(path: PathBuf) -> std::io::Result<()> {
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    for event in events() {
        encoder.encode_record(&event, &mut log);
    }
    let mut file = tokio::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .await?;
    let mut rng = Lcg(2024);
    let mut at = 0;
    while at < log.len() {
        // A few bytes (a header cut in two), a few records' worth, or a lot.
        let bound = match rng.next(6) {
            0 | 1 => 9,
            2..=4 => 300,
            _ => 12_000,
        };
        let piece = 1 + rng.next(bound) as usize;
        let end = (at + piece).min(log.len());
        file.write_all(&log[at..end]).await?;
        // A tokio file finishes its write in the background: flush hands it over.
        file.flush().await?;
        at = end;
        tokio::time::sleep(Duration::from_millis(rng.next(15))).await;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("events.log");
    // The follower opens the log before anything is written to it.
    tokio::fs::File::create(&path).await?;
    let mut tail = LogTailer::open(&path)
        .await?
        .with_poll_interval(Duration::from_millis(5));
    let writer = tokio::spawn(write_events(path.clone()));

    let started = Instant::now();
    let expected = events();
    for want in &expected {
        let record = tail.next_record().await.ok_or("the log ended")??;
        let text = String::from_utf8_lossy(&record.data);
        let label = text.split(':').next().unwrap_or_default();
        println!(
            "{:>6.1} ms  offset {:>6}..{:<6} {:>6} bytes  {label}",
            started.elapsed().as_secs_f64() * 1000.0,
            record.position.start,
            record.position.end,
            record.data.len(),
        );
        if record.data != want[..] {
            return Err(format!("expected {label:?} to be the next event").into());
        }
    }
    writer.await??;
    println!(
        "followed {EVENTS} events as they were written, in {:.0?}",
        started.elapsed()
    );
    Ok(())
}
