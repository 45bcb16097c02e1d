//! A group's read in flight while a rewrite moves its entries, at every step of
//! both, in a fixed order (the pause points of [`crate::pause`]).
//!
//! A rewrite is three steps the reader can see: its copies appended at the head
//! of the log ([`Point::RewriteAppended`]), the group's index pointed at them
//! ([`Point::RewriteMoved`]), the old segments deleted ([`Point::Deleted`], at
//! once or after the ops queued then are durable). A read is a look at the
//! index, then reads of the files, entry by entry. Each case lets the rewrite
//! complete `s` steps, has the read look its entries up (and, for
//! [`Point::ReadEntry`], read the first one), lets the rewrite complete `t >= s`
//! steps, then lets the read finish: it must return exactly the entries asked
//! for. With `s < 2` and `t = 3` a read that has read nothing yet holds
//! positions in segments that are gone when it goes on (it must look again:
//! `LogReader::read`); one that has read an entry holds a reader of the log,
//! which keeps those segments. With `s >= 2` it reads the copies.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, RaftLogReader};
use tokio::sync::{mpsc, oneshot};
use walcodec::LogDirOptions;

use crate::pause::{self, Arrival, Point};
use crate::{SharedLog, SharedLogBuilder};

use std::io::Cursor;

openraft::declare_raft_types!(TypeConfig:);

/// The group read while it is rewritten.
const LAGGING: u64 = 7;
/// Its entries: about 3 KiB of records, in segments 1 and 2.
const ENTRIES: u64 = 40;
const LAST_OLD_SEGMENT: u64 = 2;
/// The group whose writes and purges fill the log with dead records.
const BUSY: u64 = 1;

fn builder() -> SharedLogBuilder {
    let mut options = LogDirOptions::new();
    options.max_segment_bytes(2048);
    let mut builder = SharedLog::builder();
    builder.log_dir(&options).rewrite_threshold(6 << 10);
    builder
}

fn entry(group: u64, index: u64) -> Entry<TypeConfig> {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 0), index),
        payload: EntryPayload::Normal(format!("group {group} entry {index}: {:x<40}", "")),
    }
}

/// The busy group appends and purges until `stop`, or for at most `rounds`
/// rounds (then a rewrite that never came fails the test instead of hanging it).
async fn drive(shared: SharedLog, stop: Arc<AtomicBool>, rounds: u64) {
    let mut store = shared.store::<TypeConfig>(BUSY).await.unwrap();
    let mut next = 0;
    for _ in 0..rounds {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        store
            .blocking_append((next..next + 4).map(|i| entry(BUSY, i)))
            .await
            .unwrap();
        next += 4;
        if next > 24 {
            store
                .purge(LogId::new(CommittedLeaderId::new(1, 0), next - 13))
                .await
                .unwrap();
        }
    }
    let _ = store.close().await;
}

/// The rewrite's progress: how many of its steps are done, and the writer held
/// at the last one.
struct Rewrite {
    arrivals: mpsc::UnboundedReceiver<Arrival>,
    steps: u8,
    held: Option<oneshot::Sender<()>>,
}

impl Rewrite {
    /// Lets the writer go on until `steps` steps of the rewrite are done, and
    /// holds it there.
    async fn advance(&mut self, steps: u8, driver: &mut tokio::task::JoinHandle<()>) {
        while self.steps < steps {
            if let Some(go) = self.held.take() {
                let _ = go.send(());
            }
            let (point, cut, go) = tokio::select! {
                arrival = self.arrivals.recv() => arrival.unwrap(),
                _ = &mut *driver => panic!("no rewrite came (step {} of 3)", self.steps + 1),
            };
            self.held = Some(go);
            self.steps = match (point, self.steps) {
                (Point::RewriteAppended, 0) => 1,
                (Point::RewriteMoved, 1) => 2,
                // The deletion the rewrite allows: past the lagging group's
                // old segments.
                (Point::Deleted, 2) if cut > LAST_OLD_SEGMENT => 3,
                // Segments that held only dead records, deleted before the
                // rewrite.
                (Point::Deleted, _) => self.steps,
                (point, steps) => panic!("{point:?} after {steps} steps of a rewrite"),
            };
        }
    }
}

/// One case: see the module's doc.
async fn case(root: &Path, s: u8, t: u8, reader_point: Point) {
    let dir = root.join(format!("{s}-{t}-{reader_point:?}"));
    let shared = builder().open(&dir).await.unwrap();
    let mut lagging = shared.store::<TypeConfig>(LAGGING).await.unwrap();
    for first in (0..ENTRIES).step_by(8) {
        lagging
            .blocking_append((first..first + 8).map(|i| entry(LAGGING, i)))
            .await
            .unwrap();
    }
    lagging.close().await.unwrap();
    shared.close().await.unwrap();
    // Reopened: the entries are read from the segments, not from memory.
    let shared = builder().open(&dir).await.unwrap();
    let path = shared.path().to_path_buf();
    let mut lagging = shared.store::<TypeConfig>(LAGGING).await.unwrap();
    let mut rewrite = Rewrite {
        arrivals: pause::install(
            &path,
            &[Point::RewriteAppended, Point::RewriteMoved, Point::Deleted],
        ),
        steps: 0,
        held: None,
    };
    let old_segments: Vec<PathBuf> = (1..=LAST_OLD_SEGMENT)
        .map(|n| path.join(format!("{n:06}.log")))
        .collect();
    assert!(old_segments.iter().all(|s| s.exists()));
    let mut read_gate = pause::install(&path, &[reader_point]);
    let stop = Arc::new(AtomicBool::new(false));
    let mut driver = tokio::spawn(async {});
    let start_driver = || tokio::spawn(drive(shared.clone(), Arc::clone(&stop), 5000));
    if s > 0 {
        driver = start_driver();
        rewrite.advance(s, &mut driver).await;
    }
    let mut reader = lagging.get_log_reader().await;
    let read = tokio::spawn(async move { reader.try_get_log_entries(0..ENTRIES).await });
    let (point, _, go_read) = read_gate.recv().await.unwrap();
    assert_eq!(point, reader_point);
    // Its looks again (if any) go through.
    pause::remove(&path, &[reader_point]);
    drop(read_gate);
    if s == 0 {
        driver = start_driver();
    }
    rewrite.advance(t, &mut driver).await;
    if t == 3 {
        // A read that looked up the old records and has read nothing yet
        // holds positions only: the segments they are in are gone (it must
        // look again). One that has read an old record holds a reader of the
        // log, which keeps the segments it still needs (LogDir::purge_before).
        let kept = old_segments.iter().filter(|s| s.exists()).count();
        if s < 2 && reader_point == Point::ReadEntry {
            assert_eq!(kept, old_segments.len(), "the reader keeps them");
        } else {
            assert_eq!(kept, 0, "the old segments are gone");
        }
    }
    go_read.send(()).unwrap();
    let entries = read.await.unwrap().unwrap_or_else(|e| {
        panic!("read during a rewrite (looked up after {s} steps, went on after {t}): {e}")
    });
    let expected: Vec<_> = (0..ENTRIES).map(|i| entry(LAGGING, i)).collect();
    assert_eq!(
        entries, expected,
        "read during a rewrite (looked up after {s} steps, went on after {t})"
    );

    pause::remove(
        &path,
        &[Point::RewriteAppended, Point::RewriteMoved, Point::Deleted],
    );
    if let Some(go) = rewrite.held.take() {
        let _ = go.send(());
    }
    drop(rewrite);
    stop.store(true, Ordering::Relaxed);
    driver.await.unwrap();
    // And read again once all is done.
    let again = lagging.try_get_log_entries(0..ENTRIES).await.unwrap();
    assert_eq!(again, expected);
    lagging.close().await.unwrap();
    shared.close().await.unwrap();
}

#[tokio::test]
async fn a_read_in_flight_gets_its_entries_at_every_step_of_a_rewrite() {
    let root = tempfile::tempdir().unwrap();
    for reader_point in [Point::ReadLookedUp, Point::ReadEntry] {
        for s in 0..=3 {
            for t in s..=3 {
                case(root.path(), s, t, reader_point).await;
            }
        }
    }
}
