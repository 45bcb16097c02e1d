//! An append that finds the writer idle writes and syncs its own batch
//! (`WriterOptions::leader_writes`): when it does, what it leaves for the flusher, and
//! that every promise of `append` holds on that path too.

use crate::writer_support;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use walcodec::testing::{FileStorage, Storage};
use walcodec::{AsyncLogWriter, Error, Position, WriterOptions};
use writer_support::{encode_all, make_record, make_record_sized, read_log};

fn temp_log() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    (dir, path)
}

/// A file whose syncs take `sync_delay` and whose sync number `fail_sync` (counting
/// from 0) fails with EIO.
struct SlowStorage {
    inner: FileStorage,
    sync_delay: Duration,
    fail_sync: Option<usize>,
    syncs: Arc<AtomicUsize>,
}

impl SlowStorage {
    fn new(path: &Path, sync_delay: Duration, fail_sync: Option<usize>) -> SlowStorage {
        let file = std::fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(path)
            .unwrap();
        SlowStorage {
            inner: FileStorage::new(file),
            sync_delay,
            fail_sync,
            syncs: Arc::new(AtomicUsize::new(0)),
        }
    }
}

impl Storage for SlowStorage {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }

    fn sync(&mut self) -> io::Result<()> {
        std::thread::sleep(self.sync_delay);
        let n = self.syncs.fetch_add(1, Ordering::SeqCst);
        if Some(n) == self.fail_sync {
            return Err(io::Error::from_raw_os_error(5));
        }
        self.inner.sync()
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)
    }
}

/// A writer whose syncs take `sync_delay`, and one append started once its flusher
/// sleeps, so that the append leads; returns the writer and that append.
async fn leading_append(
    path: &Path,
    sync_delay: Duration,
) -> (
    AsyncLogWriter,
    tokio::task::JoinHandle<Result<Position, Error>>,
) {
    let storage = SlowStorage::new(path, sync_delay, None);
    let log = WriterOptions::new()
        .idle_spin(Duration::ZERO)
        .from_storage(Box::new(storage), 0)
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let leader = {
        let log = log.clone();
        tokio::spawn(async move { log.append(make_record(0, 0)).await })
    };
    (log, leader)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_appender_writes_its_own_batches() {
    let (_dir, path) = temp_log();
    let log = AsyncLogWriter::create(&path).await.unwrap();
    let durable = log.durable_end();
    let mut records = Vec::new();
    for seq in 0..200u32 {
        // Some records span blocks, so led batches cross block edges too.
        let len = if seq % 50 == 7 { 70_000 } else { 100 };
        let record = make_record_sized(0, seq, len);
        let position = log.append(&record).await.unwrap();
        // Durable, and said so, when the append returns.
        assert!(*durable.borrow() >= position.end);
        records.push(record);
    }
    let stats = log.stats();
    assert_eq!(stats.led_writes, 200, "{stats:?}");
    assert_eq!(stats.syncs, stats.writes, "{stats:?}");
    assert_eq!(stats.records, 200);
    log.close().await.unwrap();
    let file = std::fs::read(&path).unwrap();
    assert_eq!(file, encode_all(records.iter().map(|r| &r[..])));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_batch_leads_too() {
    let (_dir, path) = temp_log();
    let log = AsyncLogWriter::create(&path).await.unwrap();
    let mut records = Vec::new();
    for round in 0..50u32 {
        let batch: Vec<Vec<u8>> = (0..3).map(|i| make_record(round, i)).collect();
        let positions = log.append_batch(&batch).await.unwrap();
        assert_eq!(positions.len(), 3);
        records.extend(batch);
    }
    assert_eq!(log.stats().led_writes, 50, "{:?}", log.stats());
    log.close().await.unwrap();
    let file = std::fs::read(&path).unwrap();
    assert_eq!(file, encode_all(records.iter().map(|r| &r[..])));
}

/// `block_in_place` would panic on a current-thread runtime: there every batch goes
/// through the flusher.
#[tokio::test(flavor = "current_thread")]
async fn a_current_thread_runtime_never_leads() {
    let (_dir, path) = temp_log();
    let log = AsyncLogWriter::create(&path).await.unwrap();
    for seq in 0..50 {
        log.append(make_record(0, seq)).await.unwrap();
    }
    let stats = log.stats();
    assert_eq!(stats.led_writes, 0);
    assert_eq!(stats.records, 50);
    log.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turned_off_every_batch_goes_through_the_flusher() {
    let (_dir, path) = temp_log();
    let log = WriterOptions::new()
        .leader_writes(false)
        .create(&path)
        .await
        .unwrap();
    for seq in 0..50 {
        log.append(make_record(0, seq)).await.unwrap();
    }
    assert_eq!(log.stats().led_writes, 0);
    assert_eq!(log.stats().records, 50);
    log.close().await.unwrap();
}

/// Sync pacing asks records to wait for company: a leader would defeat it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_pacing_turns_leading_off() {
    let (_dir, path) = temp_log();
    let log = WriterOptions::new()
        .min_sync_interval(Duration::from_micros(100))
        .create(&path)
        .await
        .unwrap();
    for seq in 0..20 {
        log.append(make_record(0, seq)).await.unwrap();
    }
    assert_eq!(log.stats().led_writes, 0);
    log.close().await.unwrap();
}

/// While a leader syncs, others queue; the flusher writes them together after it,
/// and nobody's append is lost, reordered or left waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn appends_during_a_led_sync_go_to_the_flusher_together() {
    let (_dir, path) = temp_log();
    let (log, leader) = leading_append(&path, Duration::from_millis(30)).await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    let mut followers = Vec::new();
    for task in 1..=8u32 {
        let log = log.clone();
        followers.push(tokio::spawn(async move {
            log.append(make_record(task, 0)).await
        }));
    }
    let first = leader.await.unwrap().unwrap();
    assert_eq!(first.start, 0);
    let mut positions: Vec<(Position, u32)> = Vec::new();
    for (i, follower) in followers.into_iter().enumerate() {
        positions.push((follower.await.unwrap().unwrap(), i as u32 + 1));
    }
    let stats = log.stats();
    assert_eq!(stats.led_writes, 1, "{stats:?}");
    assert_eq!(stats.records, 9);
    // The eight queued during the leader's sync shared the flusher's batch.
    assert_eq!(stats.writes, 2, "{stats:?}");
    assert_eq!(stats.largest_batch_records, 8, "{stats:?}");
    log.close().await.unwrap();
    // The file holds each record at the position its append returned.
    let read = read_log(&path, true).await;
    assert_eq!(read.len(), 9);
    assert_eq!(read[0].0, first);
    for (position, task) in positions {
        let (_, data) = read.iter().find(|(p, _)| *p == position).unwrap();
        assert_eq!(&data[..], &make_record(task, 0)[..]);
    }
}

/// A record larger than a batch: the leader writes the first part, the flusher the
/// rest, and the append resolves once its end is durable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_larger_than_a_batch_is_finished_by_the_flusher() {
    let (_dir, path) = temp_log();
    let log = WriterOptions::new()
        .max_batch_bytes(4096)
        .create(&path)
        .await
        .unwrap();
    let mut records = Vec::new();
    for seq in 0..5u32 {
        let record = make_record_sized(0, seq, 20_000);
        let position = log.append(&record).await.unwrap();
        assert_eq!(log.stats().durable_len, position.end);
        records.push(record);
    }
    let stats = log.stats();
    assert!(stats.led_writes >= 1, "{stats:?}");
    assert!(stats.writes > stats.led_writes, "{stats:?}");
    log.close().await.unwrap();
    let file = std::fs::read(&path).unwrap();
    assert_eq!(file, encode_all(records.iter().map(|r| &r[..])));
}

/// A led sync that fails: that append gets the I/O error, every later call
/// `Poisoned`, the flusher is not left waiting for a leader that is gone, and the
/// file is cut back to what was durable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_led_sync_poisons_the_writer() {
    let (_dir, path) = temp_log();
    let storage = SlowStorage::new(&path, Duration::ZERO, Some(5));
    let log = WriterOptions::new()
        .from_storage(Box::new(storage), 0)
        .unwrap();
    let mut durable = 0;
    let mut failed = None;
    for seq in 0..10 {
        match log.append(make_record(0, seq)).await {
            Ok(position) => durable = position.end,
            Err(error) => {
                failed = Some((seq, error));
                break;
            }
        }
    }
    let (seq, error) = failed.expect("the sixth sync fails");
    assert_eq!(seq, 5);
    assert!(
        matches!(error, Error::Io(ref e) if e.raw_os_error() == Some(5)),
        "{error:?}"
    );
    assert_eq!(log.stats().led_writes, 5);
    let later = tokio::time::timeout(Duration::from_secs(10), log.append(b"after"))
        .await
        .expect("no hang");
    assert!(matches!(later, Err(Error::Poisoned { .. })), "{later:?}");
    let closed = tokio::time::timeout(Duration::from_secs(10), log.close())
        .await
        .expect("no hang");
    assert!(matches!(closed, Err(Error::Poisoned { .. })), "{closed:?}");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), durable);
}

/// `close` while a leader syncs waits for it, then closes: the leader's record is in
/// the closed log.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn close_during_a_led_sync_waits_for_it() {
    let (_dir, path) = temp_log();
    let (log, leader) = leading_append(&path, Duration::from_millis(50)).await;
    tokio::time::sleep(Duration::from_millis(15)).await;
    let len = tokio::time::timeout(Duration::from_secs(10), log.close())
        .await
        .expect("no hang")
        .unwrap();
    let position = leader.await.unwrap().unwrap();
    assert_eq!(len, position.end);
    assert_eq!(log.stats().led_writes, 1);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), len);
    assert!(matches!(log.append(b"late").await, Err(Error::Closed)));
}
