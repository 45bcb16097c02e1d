//! Following a live log: records appear as soon as they are complete, partial writes
//! are kept across EOF, and an in-progress write is never taken for damage.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use futures::StreamExt;
use rand_free::Lcg;
use tokio::io::AsyncWriteExt;
use walcodec::{LogDecoder, LogEncoder, LogTailer, Recovery, BLOCK_SIZE};

mod rand_free {
    /// A tiny deterministic generator, so the write pattern is reproducible.
    pub struct Lcg(pub u64);
    impl Lcg {
        pub fn next(&mut self, bound: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % bound.max(1)
        }
    }
}

fn records(count: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Lcg(seed);
    (0..count)
        .map(|i| {
            let len = match rng.next(4) {
                0 => rng.next(16) as usize,
                1 => BLOCK_SIZE - 20 + rng.next(30) as usize,
                2 => rng.next(70_000) as usize,
                _ => rng.next(2000) as usize,
            };
            let mut record = (i as u32).to_le_bytes().to_vec();
            record.extend((0..len).map(|j| (j * 13 + i) as u8));
            record
        })
        .collect()
}

/// Appends the encoded log in random-sized pieces, flushing and pausing between them.
async fn write_in_pieces(path: std::path::PathBuf, log: BytesMut, seed: u64) {
    let mut file = tokio::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .await
        .unwrap();
    let mut rng = Lcg(seed);
    let mut at = 0;
    while at < log.len() {
        let piece = match rng.next(5) {
            0 => 1 + rng.next(3) as usize, // splits headers and trailers
            1 => 1 + rng.next(7) as usize,
            2 => 1 + rng.next(100) as usize,
            _ => 1 + rng.next(40_000) as usize,
        };
        let end = (at + piece).min(log.len());
        file.write_all(&log[at..end]).await.unwrap();
        file.flush().await.unwrap();
        at = end;
        if rng.next(3) == 0 {
            tokio::time::sleep(Duration::from_micros(rng.next(2000))).await;
        }
    }
}

async fn follow_while_written(seed: u64, recovery: Recovery) {
    let records = records(120, seed);
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    let positions: Vec<_> = records
        .iter()
        .map(|r| encoder.encode_record(r, &mut log))
        .collect();

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.log");
    std::fs::write(&path, b"").unwrap();

    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink = reports.clone();
    let mut builder = LogDecoder::builder();
    builder
        .recovery(recovery)
        .on_corruption(move |c| sink.lock().unwrap().push(c.to_string()));
    let mut tail = LogTailer::open_at(&path, 0, &builder)
        .await
        .unwrap()
        .with_poll_interval(Duration::from_millis(1));

    let writer = tokio::spawn(write_in_pieces(path.clone(), log, seed ^ 0xdead));
    for (i, expected) in records.iter().enumerate() {
        let record = tokio::time::timeout(Duration::from_secs(20), tail.next())
            .await
            .expect("the tailer keeps up")
            .expect("a tailer does not end")
            .expect("an in-progress write is not an error");
        assert_eq!(&record.data[..], &expected[..], "record {i}");
        assert_eq!(record.position, positions[i]);
    }
    writer.await.unwrap();
    assert!(
        reports.lock().unwrap().is_empty(),
        "{:?}",
        reports.lock().unwrap()
    );
    assert!(!tail.decoder().has_incomplete_tail());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_a_log_written_in_random_pieces() {
    for seed in 1..=4 {
        follow_while_written(seed, Recovery::TolerateTail).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_mode_reports_nothing_while_following() {
    follow_while_written(99, Recovery::SkipCorrupted).await;
}

/// At EOF the tailer waits (it does not end), and it waits by sleeping: with the clock
/// paused, it only advances when time does.
#[tokio::test(start_paused = true)]
async fn waits_with_the_poll_interval() {
    let mut log = BytesMut::new();
    LogEncoder::new().encode_record(b"only", &mut log);
    let mut tail = LogTailer::new(&log[..log.len() - 2], LogDecoder::new())
        .with_poll_interval(Duration::from_secs(3600));
    let waited = tokio::time::timeout(Duration::from_secs(7200), tail.next()).await;
    assert!(waited.is_err(), "a partial record is kept, never returned");
    assert!(!tail.decoder().has_incomplete_tail());
}
