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

/// Where a gated storage's first sync stands: the test waits until it has begun,
/// and lets it finish.
struct SyncGate {
    entered: Option<tokio::sync::oneshot::Sender<()>>,
    release: std::sync::mpsc::Receiver<()>,
}

/// The test's side of a [`SyncGate`].
struct GateHandle {
    entered: tokio::sync::oneshot::Receiver<()>,
    release: std::sync::mpsc::Sender<()>,
}

impl GateHandle {
    /// Waits until the gated sync has begun (a hang guard, not a measure).
    async fn until_entered(&mut self) {
        tokio::time::timeout(Duration::from_secs(30), &mut self.entered)
            .await
            .expect("the gated sync never began")
            .unwrap();
    }

    fn release(&self) {
        self.release.send(()).unwrap();
    }
}

fn sync_gate() -> (SyncGate, GateHandle) {
    let (entered_tx, entered_rx) = tokio::sync::oneshot::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel();
    (
        SyncGate {
            entered: Some(entered_tx),
            release: release_rx,
        },
        GateHandle {
            entered: entered_rx,
            release: release_tx,
        },
    )
}

/// A file whose first sync, with a gate, blocks until the test releases it, and
/// whose sync number `fail_sync` (counting from 0) fails with EIO.
struct SlowStorage {
    inner: FileStorage,
    gate: Option<SyncGate>,
    fail_sync: Option<usize>,
    syncs: Arc<AtomicUsize>,
}

impl SlowStorage {
    fn new(path: &Path, gate: Option<SyncGate>, fail_sync: Option<usize>) -> SlowStorage {
        let file = std::fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(path)
            .unwrap();
        SlowStorage {
            inner: FileStorage::new(file),
            gate,
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
        if let Some(mut gate) = self.gate.take() {
            let _ = gate.entered.take().unwrap().send(());
            gate.release.recv().expect("the test released the gate");
        }
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

/// A writer whose first sync waits at a gate, and one append that leads (a new
/// writer's flusher counts as idle from the start, so the first append may write its
/// own batch); returns once that append is inside its sync, with the writer, the
/// append and the gate.
async fn leading_append(
    path: &Path,
) -> (
    AsyncLogWriter,
    tokio::task::JoinHandle<Result<Position, Error>>,
    GateHandle,
) {
    let (gate, mut handle) = sync_gate();
    let storage = SlowStorage::new(path, Some(gate), None);
    let log = WriterOptions::new()
        .idle_spin(Duration::ZERO)
        .from_storage(Box::new(storage), 0)
        .unwrap();
    let leader = {
        let log = log.clone();
        tokio::spawn(async move { log.append(make_record(0, 0)).await })
    };
    handle.until_entered().await;
    (log, leader, handle)
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
    let (log, leader, gate) = leading_append(&path).await;
    // The leader is inside its sync: each of these appends, polled once, is queued
    // behind it (the log grows by its record) and waits.
    let records: Vec<Vec<u8>> = (1..=8u32).map(|task| make_record(task, 0)).collect();
    let mut followers: Vec<_> = records
        .iter()
        .map(|record| Box::pin(futures::future::maybe_done(log.append(record))))
        .collect();
    for follower in &mut followers {
        let before = log.stats().len;
        assert!(futures::poll!(follower.as_mut()).is_pending());
        assert!(log.stats().len > before, "queued when first polled");
    }
    let stats = log.stats();
    assert_eq!(
        (stats.led_writes, stats.writes, stats.syncs),
        (0, 0, 0),
        "{stats:?}"
    );
    gate.release();
    let first = leader.await.unwrap().unwrap();
    assert_eq!(first.start, 0);
    let mut positions = Vec::new();
    for mut follower in followers {
        follower.as_mut().await;
        positions.push(follower.as_mut().take_output().unwrap().unwrap());
    }
    let stats = log.stats();
    assert_eq!(stats.led_writes, 1, "{stats:?}");
    assert_eq!(stats.records, 9);
    // The eight queued during the leader's sync shared the flusher's batch.
    assert_eq!((stats.writes, stats.syncs), (2, 2), "{stats:?}");
    assert_eq!(stats.largest_batch_records, 8, "{stats:?}");
    log.close().await.unwrap();
    // The file holds each record at the position its append returned, in the order
    // the appends were queued.
    let read = read_log(&path, true).await;
    assert_eq!(read.len(), 9);
    assert_eq!(read[0].0, first);
    for (i, (position, record)) in positions.iter().zip(&records).enumerate() {
        assert_eq!(read[i + 1].0, *position);
        assert_eq!(&read[i + 1].1[..], &record[..]);
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
    let storage = SlowStorage::new(&path, None, Some(5));
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
    let (log, leader, gate) = leading_append(&path).await;
    // Polled once, `close` has begun (no append is taken after this) and waits.
    let mut close = Box::pin(log.close());
    assert!(futures::poll!(close.as_mut()).is_pending());
    assert!(matches!(log.append(b"late").await, Err(Error::Closed)));
    assert!(!leader.is_finished(), "the leader is still inside its sync");
    gate.release();
    let len = tokio::time::timeout(Duration::from_secs(30), close)
        .await
        .expect("no hang")
        .unwrap();
    let position = leader.await.unwrap().unwrap();
    assert_eq!(len, position.end);
    assert_eq!(log.stats().led_writes, 1);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), len);
    assert_eq!(read_log(&path, true).await.len(), 1);
}
