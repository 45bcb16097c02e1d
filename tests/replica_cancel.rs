//! A `Replica` is cancellation-safe: `sync_from` dropped at any of its await
//! points leaves nothing running that writes afterwards, and what comes next works.
//!
//! The replica's storage (the directory seam, `Replica::open_with_storage`) counts
//! its calls from the start of a sync and stalls the k-th (before it acts) until
//! the test lets it go; the test drops `sync_from` while that call is stalled, for
//! every k a sync makes, and then:
//!
//! - promotes the replica (or closes it, or drops it and opens the directory as a
//!   `LogDir`), appends 3 records, each acknowledged, closes and reopens: the 3
//!   records end the log, after a prefix of the primary's. The stalled call is
//!   let go once the appends are acknowledged (or after a moment, when the
//!   promotion waits for it, as it must): a write of the dropped sync that lands
//!   after them would write over them.
//! - or syncs again on a new connection: it resumes after the last complete record
//!   and ends byte-identical to the primary (a dropped sync that removed the new
//!   replica's first segment, or created its next one, must not make every later
//!   sync fail).

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use walcodec::testing::{DirStorage, OsDirStorage, Storage};
use walcodec::{DirReader, Error, LogDir, LogPosition, Replica};

/// How long a stalled call waits for the promotion (or open) to finish before it
/// is let go anyway: a fixed replica waits for the call, so it cannot finish
/// before. Not an assertion: only how long the test lets a broken replica race.
const GRACE: Duration = Duration::from_millis(100);

/// Longer than a `LogDir` waits for a busy lock (500 ms): a promotion that let
/// the directory's lock wait for the stalled call, not waiting itself, would
/// fail with `Error::Locked`.
const LONG_STALL: Duration = Duration::from_millis(800);

/// The calls a replica's storage made since `start`, and the one to stall.
#[derive(Debug, Default)]
struct Stall {
    calls: AtomicUsize,
    /// What each call since `start` was.
    kinds: Mutex<Vec<&'static str>>,
    /// Stall the call of this number (from 1), 0 for none.
    at: AtomicUsize,
    /// The stalled call has begun (and waits for `release`).
    reached: Notify,
    /// The stalled call has returned.
    finished: Notify,
    release: Mutex<bool>,
    released: Condvar,
}

impl Stall {
    fn start(&self, at: usize) {
        self.calls.store(0, Ordering::SeqCst);
        self.kinds.lock().unwrap().clear();
        *self.release.lock().unwrap() = false;
        self.at.store(at, Ordering::SeqCst);
    }

    fn let_go(&self) {
        *self.release.lock().unwrap() = true;
        self.released.notify_all();
    }

    /// Counts a call; the stalled one waits here for `let_go`, then `f` runs.
    fn call<T>(&self, kind: &'static str, f: impl FnOnce() -> T) -> T {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        self.kinds.lock().unwrap().push(kind);
        if n != self.at.load(Ordering::SeqCst) {
            return f();
        }
        self.reached.notify_one();
        let released = self.release.lock().unwrap();
        // Bounded, so a broken replica cannot hang the test.
        let (released, _) = self
            .released
            .wait_timeout_while(released, Duration::from_secs(30), |r| !*r)
            .unwrap();
        drop(released);
        let out = f();
        self.finished.notify_one();
        out
    }
}

#[derive(Debug)]
struct Stalling(Arc<Stall>);

impl DirStorage for Stalling {
    fn create(&self, path: &Path) -> std::io::Result<std::fs::File> {
        self.0.call("create", || OsDirStorage.create(path))
    }
    fn sync_file(&self, file: &std::fs::File) -> std::io::Result<()> {
        self.0.call("sync_file", || OsDirStorage.sync_file(file))
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.0.call("sync_dir", || OsDirStorage.sync_dir(dir))
    }
    fn remove(&self, path: &Path) -> std::io::Result<()> {
        self.0.call("remove", || OsDirStorage.remove(path))
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.0.call("rename", || OsDirStorage.rename(from, to))
    }
    fn storage(&self, file: std::fs::File) -> Box<dyn Storage> {
        Box::new(StallingFile {
            inner: OsDirStorage.storage(file),
            stall: self.0.clone(),
        })
    }
}

struct StallingFile {
    inner: Box<dyn Storage>,
    stall: Arc<Stall>,
}

impl Storage for StallingFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let inner = &mut self.inner;
        self.stall.call("write", || inner.write(buf))
    }
    fn sync(&mut self) -> std::io::Result<()> {
        let inner = &mut self.inner;
        self.stall.call("sync", || inner.sync())
    }
    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        let inner = &mut self.inner;
        self.stall.call("truncate", || inner.truncate(len))
    }
}

fn record(i: usize) -> Vec<u8> {
    let len = match i % 3 {
        0 => 70_000,
        1 => 10,
        _ => 5_000,
    };
    (0..len).map(|j| (i * 31 + j) as u8).collect()
}

/// A closed primary whose first segment was purged (a new replica removes its own
/// first segment to take the primary's numbering), over three more segments.
async fn primary(dir: &Path) -> (LogDir, Vec<Vec<u8>>) {
    let log = LogDir::open(dir).await.unwrap();
    let mut records = Vec::new();
    for i in 0..9 {
        if i % 3 == 0 && i > 0 {
            log.rotate().await.unwrap();
        }
        log.append(record(i)).await.unwrap();
        records.push(record(i));
    }
    log.purge_before(LogPosition::new(2, 0)).await.unwrap();
    records.drain(..3);
    log.close().await.unwrap();
    (log, records)
}

/// Every record of the log at `dir`.
async fn read_all(dir: &Path) -> Vec<Vec<u8>> {
    let mut reader = DirReader::open(dir, LogPosition::START).await.unwrap();
    let mut out = Vec::new();
    while let Some(record) = reader.next_record().await {
        out.push(record.unwrap().data.to_vec());
    }
    out
}

/// What follows the cancelled sync.
#[derive(Debug, Clone, Copy)]
enum Then {
    Promote,
    Close,
    Drop,
    Resume,
}

/// Syncs a new replica from `log`, dropping the sync while the `k`-th storage call
/// is stalled; returns the replica, or `None` when the sync made fewer calls.
async fn cancel_at(
    log: &LogDir,
    replica_dir: &Path,
    stall: &Arc<Stall>,
    k: usize,
) -> Option<Replica> {
    let mut replica = Replica::open_with_storage(replica_dir, Arc::new(Stalling(stall.clone())))
        .await
        .unwrap();
    stall.start(k);
    let (a, b) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn({
        let log = log.clone();
        async move { log.serve_replica(a).await }
    });
    let reached = tokio::select! {
        synced = replica.sync_from(b) => {
            synced.unwrap();
            false
        }
        () = stall.reached.notified() => true,
    };
    // The sync is dropped here, with the k-th call stalled.
    serving.abort();
    let _ = serving.await;
    reached.then_some(replica)
}

async fn append_three(log: LogDir) -> Vec<Vec<u8>> {
    let mut acked = Vec::new();
    for i in 0..3 {
        let data = format!("acknowledged {i}").into_bytes();
        log.append(&data).await.unwrap();
        acked.push(data);
    }
    log.close().await.unwrap();
    acked
}

/// Runs `then` after a sync cancelled at the `k`-th call; `None` once the sync
/// made fewer than `k` calls, else what went wrong, if anything.
async fn run(
    log: &LogDir,
    records: &[Vec<u8>],
    k: usize,
    then: Then,
    grace: Duration,
) -> Option<Result<(), String>> {
    let root = tempfile::tempdir().unwrap();
    let replica_dir = root.path().join("replica");
    let stall = Arc::new(Stall::default());
    let mut replica = cancel_at(log, &replica_dir, &stall, k).await?;
    let describe = format!("cancelled at storage call {k}, then {then:?}");
    if let Then::Resume = then {
        stall.let_go();
        stall.finished.notified().await;
        let (a, b) = tokio::io::duplex(64 * 1024);
        let serving = tokio::spawn({
            let log = log.clone();
            async move { log.serve_replica(a).await }
        });
        let end = replica.sync_from(b).await.map(|s| s.end);
        let served = serving.await.unwrap();
        if end.as_ref().ok() != Some(&log.end()) {
            return Some(Err(format!("{describe}: ended {end:?}, served {served:?}")));
        }
        replica.close().await.unwrap();
        if read_all(&replica_dir).await != records {
            return Some(Err(format!("{describe}: not the primary's records")));
        }
        return Some(Ok(()));
    }
    let taking_over = tokio::spawn({
        let replica_dir = replica_dir.clone();
        async move {
            let log = match then {
                Then::Promote => replica.promote().await.unwrap(),
                Then::Close => {
                    replica.close().await.unwrap();
                    LogDir::open(&replica_dir).await.unwrap()
                }
                _ => {
                    drop(replica);
                    // A replica dropped mid-write keeps its directory locked until
                    // the write is done: the open may wait, or find it locked.
                    loop {
                        match LogDir::open(&replica_dir).await {
                            Ok(log) => break log,
                            Err(Error::Locked { .. }) => {
                                tokio::time::sleep(Duration::from_millis(10)).await
                            }
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
            };
            append_three(log).await
        }
    });
    // A write of the dropped sync let go after the acknowledged appends (if the
    // replica let them happen) would land over them.
    let _ = tokio::time::timeout(grace, async {
        while !taking_over.is_finished() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
    stall.let_go();
    let acked = taking_over.await.unwrap();
    stall.finished.notified().await;
    let all = read_all(&replica_dir).await;
    let (copied, last) = all.split_at(all.len().saturating_sub(3));
    if last != acked {
        return Some(Err(format!("{describe}: acknowledged appends lost")));
    }
    if copied != &records[..copied.len().min(records.len())] {
        return Some(Err(format!(
            "{describe}: not a prefix of the primary's records"
        )));
    }
    Some(Ok(()))
}

async fn every_step(then: Then) {
    let root = tempfile::tempdir().unwrap();
    let (log, records) = primary(&root.path().join("primary")).await;
    let mut failed = Vec::new();
    let mut k = 1;
    while let Some(outcome) = run(&log, &records, k, then, GRACE).await {
        failed.extend(outcome.err());
        k += 1;
    }
    assert!(failed.is_empty(), "{failed:#?}");
    // A sync of three segments makes many calls: every one was a cancel point.
    assert!(k > 10, "only {} storage calls", k - 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_dropped_at_any_step_then_promote_keeps_every_acknowledged_append() {
    every_step(Then::Promote).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_dropped_at_any_step_then_close_keeps_every_acknowledged_append() {
    every_step(Then::Close).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_dropped_at_any_step_then_drop_keeps_every_acknowledged_append() {
    every_step(Then::Drop).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_dropped_at_any_step_resumes_on_the_next_connection() {
    every_step(Then::Resume).await;
}

/// `promote` and `close` wait for the write a dropped sync left in flight, however
/// long it stalls: they neither fail nor let a `LogDir` in before it is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promote_and_close_wait_for_a_write_left_in_flight_however_long_it_stalls() {
    let root = tempfile::tempdir().unwrap();
    let (log, records) = primary(&root.path().join("primary")).await;
    // The calls of a whole sync, to find its writes.
    let stall = Arc::new(Stall::default());
    assert!(cancel_at(&log, &root.path().join("whole"), &stall, 0)
        .await
        .is_none());
    let kinds = stall.kinds.lock().unwrap().clone();
    let writes: Vec<usize> = (1..=kinds.len())
        .filter(|&k| kinds[k - 1] == "write")
        .collect();
    assert!(writes.len() >= 2, "{kinds:?}");
    let mut failed = Vec::new();
    for then in [Then::Promote, Then::Close] {
        let outcome = run(&log, &records, writes[0], then, LONG_STALL).await;
        failed.extend(outcome.expect("the same calls").err());
    }
    assert!(failed.is_empty(), "{failed:#?}");
}
