//! The store's durability rules, each checked where it could break: the flush
//! callback waits for the sync (and carries its error), entries are readable
//! before that, truncations and purges never take the vote with them, a purge past
//! the last entry survives a reopen, and replication reads run beside appends.

use crate::support;

use std::fs::File;
use std::io;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{RaftLogReader, Vote};
use support::{entry, is_genuine, log_id, Entry, TypeConfig};
use walcodec::testing::{DirStorage, FileStorage, Storage};
use walcodec::LogDirOptions;
use walcodec_raft::LogStore;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Pass,
    Hold,
    Fail,
}

/// Segment syncs that pass, wait until released, or fail.
#[derive(Debug, Default)]
struct Gate {
    mode: Mutex<Option<Mode>>,
    changed: Condvar,
    syncs_held: Mutex<u64>,
}

impl Gate {
    fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap() = Some(mode);
        self.changed.notify_all();
    }

    fn wait_sync(&self) -> io::Result<()> {
        let mut mode = self.mode.lock().unwrap();
        let mut counted = false;
        loop {
            match mode.unwrap_or(Mode::Pass) {
                Mode::Pass => return Ok(()),
                Mode::Fail => return Err(io::Error::other("injected sync failure")),
                Mode::Hold => {
                    if !counted {
                        *self.syncs_held.lock().unwrap() += 1;
                        counted = true;
                    }
                    mode = self.changed.wait(mode).unwrap();
                }
            }
        }
    }
}

#[derive(Debug)]
struct GatedDir(Arc<Gate>);

impl DirStorage for GatedDir {
    fn storage(&self, file: File) -> Box<dyn Storage> {
        Box::new(GatedFile {
            inner: FileStorage::new(file),
            gate: Arc::clone(&self.0),
        })
    }
}

struct GatedFile {
    inner: FileStorage,
    gate: Arc<Gate>,
}

impl Storage for GatedFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.gate.wait_sync()?;
        self.inner.sync()
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)
    }
}

async fn open_gated(path: &std::path::Path, gate: &Arc<Gate>) -> LogStore<TypeConfig> {
    LogStore::<TypeConfig>::builder()
        .log_dir(
            LogDirOptions::new()
                .dir_storage(Arc::new(GatedDir(Arc::clone(gate))))
                .clone(),
        )
        .open(path)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_are_readable_at_once_but_flushed_only_after_the_sync() {
    let dir = tempfile::tempdir().unwrap();
    let gate = Arc::new(Gate::default());
    let mut store = open_gated(dir.path(), &gate).await;
    let mut reader = store.get_log_reader().await;
    gate.set(Mode::Hold);
    let append = tokio::spawn(async move {
        store
            .blocking_append((0..3).map(|i| entry(1, i)))
            .await
            .map(|()| store)
    });
    // Readable from memory while the sync is held...
    let entries = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let entries = reader.try_get_log_entries(0..3).await.unwrap();
            if entries.len() == 3 {
                return entries;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("entries readable before their sync");
    assert!(entries.iter().all(is_genuine));
    // ...while the callback has not fired.
    tokio::time::timeout(Duration::from_secs(10), async {
        while *gate.syncs_held.lock().unwrap() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the sync was reached");
    // Not a synchronisation: the sync is held until the gate opens below, so a
    // correct store's callback cannot fire however long this pause is; the pause
    // only gives a store that fires it early the time to show it.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !append.is_finished(),
        "flush callback fired before the sync"
    );
    gate.set(Mode::Pass);
    let mut store = append.await.unwrap().expect("flushed once synced");
    let state = store.get_log_state().await.unwrap();
    assert_eq!(state.last_log_id, Some(log_id(1, 2)));
    // Durable: read back from the segment after a reopen.
    store.close().await.unwrap();
    let mut store = LogStore::<TypeConfig>::open(dir.path()).await.unwrap();
    let entries = store.try_get_log_entries(0..3).await.unwrap();
    assert_eq!(entries.len(), 3);
    assert!(entries.iter().all(is_genuine));
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_sync_reaches_the_callback_and_poisons_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let gate = Arc::new(Gate::default());
    let mut store = open_gated(dir.path(), &gate).await;
    store.save_vote(&Vote::new(3, 1)).await.unwrap();
    store
        .blocking_append((0..2).map(|i| entry(3, i)))
        .await
        .unwrap();
    gate.set(Mode::Fail);
    let err = store
        .blocking_append((2..4).map(|i| entry(3, i)))
        .await
        .expect_err("the callback must carry the sync's error");
    assert!(err.to_string().contains("injected sync failure"), "{err}");
    // Every later write fails too: nothing may land after a lost one.
    gate.set(Mode::Pass);
    assert!(store.save_vote(&Vote::new(4, 1)).await.is_err());
    assert!(store.truncate(log_id(3, 1)).await.is_err());
    assert!(store.close().await.is_err());
    drop(store);

    // Close released the directory: reopening works at once, and what was
    // acknowledged is there.
    let mut store = LogStore::<TypeConfig>::open(dir.path()).await.unwrap();
    assert_eq!(store.read_vote().await.unwrap(), Some(Vote::new(3, 1)));
    let entries = store.try_get_log_entries(0..2).await.unwrap();
    assert_eq!(entries.len(), 2);
    store.close().await.unwrap();
}

#[tokio::test]
async fn truncate_and_purge_never_take_the_vote_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let options = LogDirOptions::new().max_segment_bytes(300).clone();
    let mut store = LogStore::<TypeConfig>::builder()
        .log_dir(options.clone())
        .open(dir.path())
        .await
        .unwrap();
    store
        .blocking_append((0..20).map(|i| entry(1, i)))
        .await
        .unwrap();
    store.save_vote(&Vote::new(2, 3)).await.unwrap();
    // The vote's record sits after entries the truncation removes...
    store.truncate(log_id(1, 10)).await.unwrap();
    store
        .blocking_append((10..40).map(|i| entry(2, i)))
        .await
        .unwrap();
    // ...and in a segment the purge deletes.
    store.purge(log_id(2, 35)).await.unwrap();
    store.close().await.unwrap();
    let segments = walcodec::LogDir::list(dir.path()).unwrap();
    assert!(
        segments.segments[0].number > 1,
        "the purge deleted whole segments"
    );

    let mut store = LogStore::<TypeConfig>::builder()
        .log_dir(options)
        .open(dir.path())
        .await
        .unwrap();
    assert_eq!(store.read_vote().await.unwrap(), Some(Vote::new(2, 3)));
    let state = store.get_log_state().await.unwrap();
    assert_eq!(state.last_purged_log_id, Some(log_id(2, 35)));
    assert_eq!(state.last_log_id, Some(log_id(2, 39)));
    let entries: Vec<Entry> = store.try_get_log_entries(..).await.unwrap();
    let indexes: Vec<u64> = entries.iter().map(|e| e.log_id.index).collect();
    assert_eq!(indexes, [36, 37, 38, 39]);
    assert!(entries.iter().all(is_genuine));
    store.close().await.unwrap();
}

#[tokio::test]
async fn purge_past_the_last_entry_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = LogStore::<TypeConfig>::open(dir.path()).await.unwrap();
    store
        .blocking_append((0..5).map(|i| entry(1, i)))
        .await
        .unwrap();
    // As after installing a snapshot that ends past the log.
    store.purge(log_id(3, 9)).await.unwrap();
    store.close().await.unwrap();

    let mut store = LogStore::<TypeConfig>::open(dir.path()).await.unwrap();
    let state = store.get_log_state().await.unwrap();
    assert_eq!(state.last_purged_log_id, Some(log_id(3, 9)));
    assert_eq!(state.last_log_id, Some(log_id(3, 9)));
    assert!(store.try_get_log_entries(..).await.unwrap().is_empty());
    store.blocking_append([entry(3, 10)]).await.unwrap();
    store.close().await.unwrap();

    let mut store = LogStore::<TypeConfig>::open(dir.path()).await.unwrap();
    let state = store.get_log_state().await.unwrap();
    assert_eq!(state.last_purged_log_id, Some(log_id(3, 9)));
    assert_eq!(state.last_log_id, Some(log_id(3, 10)));
    store.close().await.unwrap();
}

/// The records of every segment of the log in `dir`, in order, read from the
/// files as they are (the live segment ends in preallocated zeros, a clean end).
async fn records_on_disk(dir: &std::path::Path) -> Vec<Vec<u8>> {
    use futures::TryStreamExt;
    let mut segments: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    segments.sort();
    let mut records = Vec::new();
    for segment in segments {
        let file = tokio::fs::File::open(&segment).await.unwrap();
        let decoder = walcodec::LogDecoder::builder()
            .recovery(walcodec::Recovery::TolerateTail)
            .build();
        let read: Vec<_> = walcodec::LogReader::new(file, decoder)
            .map_ok(|r| r.data.to_vec())
            .try_collect()
            .await
            .unwrap();
        records.extend(read);
    }
    records
}

/// A committed-id record as the store writes it: tag 3, then the id.
fn committed_record(id: Option<openraft::LogId<u64>>) -> Vec<u8> {
    let mut record = vec![3u8];
    record.extend(postcard::to_stdvec(&id).unwrap());
    record
}

/// `save_committed` writes nothing by itself: its record goes to disk with the next
/// write, in its place in call order (ahead of the entries appended after it), or at
/// close. Observed in the segment files between the calls.
#[tokio::test]
async fn committed_id_is_written_with_the_next_write_or_at_close() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = LogStore::<TypeConfig>::open(dir.path()).await.unwrap();
    store
        .blocking_append((0..3).map(|i| entry(1, i)))
        .await
        .unwrap();
    let after_entries = records_on_disk(dir.path()).await;
    assert_eq!(after_entries.len(), 3, "three entries");
    store.save_committed(Some(log_id(1, 1))).await.unwrap();
    assert_eq!(
        records_on_disk(dir.path()).await,
        after_entries,
        "a committed id alone writes nothing"
    );
    store.blocking_append([entry(1, 3)]).await.unwrap();
    let after_next = records_on_disk(dir.path()).await;
    assert_eq!(
        after_next.len(),
        5,
        "the next write took the committed id along"
    );
    assert_eq!(after_next[..3], after_entries[..]);
    // Where it was given: ahead of the entry appended after it (a power cut keeps a
    // prefix, and the id names entries already durable).
    assert_eq!(after_next[3], committed_record(Some(log_id(1, 1))));
    assert_eq!(after_next[4][0], 1, "then the entry");
    store.save_committed(Some(log_id(1, 2))).await.unwrap();
    assert_eq!(records_on_disk(dir.path()).await, after_next);
    store.close().await.unwrap();
    let closed = records_on_disk(dir.path()).await;
    assert_eq!(closed.len(), 6, "close wrote the waiting committed id");
    assert_eq!(closed[..5], after_next[..]);
    assert_eq!(closed[5], committed_record(Some(log_id(1, 2))));
    let mut store = LogStore::<TypeConfig>::open(dir.path()).await.unwrap();
    assert_eq!(store.read_committed().await.unwrap(), Some(log_id(1, 2)));
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_reads_run_beside_appends() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = LogStore::<TypeConfig>::builder()
        .log_dir(LogDirOptions::new().max_segment_bytes(4096).clone())
        .open(dir.path())
        .await
        .unwrap();
    let total = 3000u64;
    let mut readers = Vec::new();
    for r in 0..3 {
        let mut reader = store.get_log_reader().await;
        readers.push(tokio::spawn(async move {
            let mut reads = 0u64;
            let mut from = r;
            loop {
                let entries: Vec<Entry> = reader
                    .limited_get_log_entries(from, from + 50)
                    .await
                    .unwrap();
                for (k, e) in entries.iter().enumerate() {
                    assert_eq!(e.log_id.index, from + k as u64, "entries in order");
                    assert!(is_genuine(e));
                }
                reads += 1;
                match entries.last() {
                    Some(last) if last.log_id.index + 1 >= total => return reads,
                    // Onwards, but not past what is there yet.
                    Some(last) if last.log_id.index > from => {
                        from = (from + 7).min(last.log_id.index)
                    }
                    _ => tokio::time::sleep(Duration::from_millis(1)).await,
                }
            }
        }));
    }
    let mut next = 0;
    while next < total {
        let n = (1 + next % 17).min(total - next);
        store
            .blocking_append((next..next + n).map(|i| entry(1, i)))
            .await
            .unwrap();
        next += n;
    }
    for reader in readers {
        let reads = tokio::time::timeout(Duration::from_secs(60), reader)
            .await
            .expect("readers reach the end")
            .unwrap();
        assert!(reads > 1);
    }
    store.close().await.unwrap();
}

#[tokio::test]
async fn limited_reads_stop_at_the_byte_budget_but_never_return_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = LogStore::<TypeConfig>::builder()
        .max_read_bytes(100)
        .open(dir.path())
        .await
        .unwrap();
    store
        .blocking_append((0..50).map(|i| entry(1, i)))
        .await
        .unwrap();
    let mut reader = store.get_log_reader().await;
    // 34 bytes an entry record, header included: the third reaches 100 bytes,
    // and the read stops there.
    let limited: Vec<Entry> = reader.limited_get_log_entries(10, 50).await.unwrap();
    let indexes: Vec<u64> = limited.iter().map(|e| e.log_id.index).collect();
    assert_eq!(indexes, [10, 11, 12]);
    // try_get_log_entries has no budget.
    let all: Vec<Entry> = reader.try_get_log_entries(10..50).await.unwrap();
    assert_eq!(all.len(), 40);
    store.close().await.unwrap();

    // A budget smaller than one entry still returns one.
    let mut store = LogStore::<TypeConfig>::builder()
        .max_read_bytes(1)
        .open(dir.path())
        .await
        .unwrap();
    let one: Vec<Entry> = store
        .get_log_reader()
        .await
        .limited_get_log_entries(10, 50)
        .await
        .unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].log_id, log_id(1, 10));
    store.close().await.unwrap();
}

#[tokio::test]
async fn a_log_this_store_did_not_write_is_refused_with_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let log = walcodec::LogDir::open(dir.path()).await.unwrap();
    log.append(b"not a raft record").await.unwrap();
    log.close().await.unwrap();
    match LogStore::<TypeConfig>::open(dir.path()).await {
        Err(walcodec_raft::Error::Decode { position, reason }) => {
            assert_eq!(position, walcodec::LogPosition::new(1, 0));
            assert!(reason.contains("tag"), "{reason}");
        }
        other => panic!("expected a decode error, got {other:?}"),
    }
    // The failed open released the directory.
    let log = walcodec::LogDir::open(dir.path()).await.unwrap();
    log.close().await.unwrap();
}

/// The latest entries stay in memory once durable (replication reads them right
/// after their flush), up to about one replication message of bytes; older ones
/// are read back from the segments. Shown by emptying the segment files behind
/// the store's back: the newest entries still read, the oldest no longer do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recent_entries_are_read_from_memory_older_ones_from_the_log() {
    let big = |i: u64| Entry {
        log_id: log_id(1, i),
        payload: openraft::EntryPayload::Normal(format!("{i}:{}", "x".repeat(64 << 10))),
    };
    let dir = tempfile::tempdir().unwrap();
    let mut store = LogStore::<TypeConfig>::open(dir.path()).await.unwrap();
    // 96 entries of 64 KiB: 6 MiB, more than the 4 MiB kept.
    for first in (0..96).step_by(8) {
        store
            .blocking_append((first..first + 8).map(big))
            .await
            .unwrap();
    }
    let mut reader = store.get_log_reader().await;
    let same = |got: &[Entry], from: u64| {
        got.iter().zip(from..).all(|(e, i)| {
            e.log_id == log_id(1, i)
                && format!("{:?}", e.payload) == format!("{:?}", big(i).payload)
        })
    };
    let all = reader.try_get_log_entries(0..96).await.unwrap();
    assert_eq!(all.len(), 96);
    assert!(
        same(&all, 0),
        "entries read from memory and from the log are the ones written"
    );

    for segment in std::fs::read_dir(dir.path()).unwrap() {
        let path = segment.unwrap().path();
        if path.extension().is_some_and(|e| e == "log") {
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(0)
                .unwrap();
        }
    }
    let newest = reader.try_get_log_entries(80..96).await.unwrap();
    assert_eq!(newest.len(), 16);
    assert!(same(&newest, 80), "the newest entries come from memory");
    assert!(
        reader.try_get_log_entries(0..8).await.is_err(),
        "the oldest entries are read from the (now empty) log: the memory kept is bounded"
    );
    drop(reader);
    let _ = store.close().await;
}
