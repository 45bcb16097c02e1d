//! Fault injection: write errors (EIO, ENOSPC), short writes, writes of zero bytes and
//! sync errors at every step of a run. The waiters of the failed batch get the error,
//! every later call is refused with `Error::Poisoned`, and reopening the log gives a
//! clean prefix of what was appended that holds every acknowledged record.

use crate::writer_support;

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use walcodec::testing::{FileStorage, Storage};
use walcodec::{AsyncLogWriter, Error, WriterOptions};
use writer_support::{encode_all, make_record, make_record_sized, read_log, verify};

const EIO: i32 = 5;
const ENOSPC: i32 = 28;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    /// The `at`-th write fails with this errno, writing nothing.
    WriteError(i32),
    /// The `at`-th write writes half its bytes and reports so; the next write fails.
    ShortThenError(i32),
    /// The `at`-th write reports zero bytes written.
    ZeroWrite,
    /// The `at`-th sync fails with this errno.
    SyncError(i32),
    /// Every write takes at most 100 bytes: not a failure, the writer must go on.
    ShortWrites,
}

impl Fault {
    /// The error kind callers see for this fault.
    fn kind(self) -> io::ErrorKind {
        match self {
            Fault::WriteError(errno) | Fault::ShortThenError(errno) | Fault::SyncError(errno) => {
                io::Error::from_raw_os_error(errno).kind()
            }
            Fault::ZeroWrite => io::ErrorKind::WriteZero,
            Fault::ShortWrites => unreachable!("not a failure"),
        }
    }
}

#[derive(Debug, Default)]
struct Trace {
    writes: usize,
    syncs: usize,
    fired: bool,
    /// Bytes written so far and the offset the last successful sync covered.
    written: u64,
    synced: u64,
    /// The bytes the failed sync should have covered.
    failed_range: Option<(u64, u64)>,
    truncations: Vec<u64>,
}

/// A file behind a script of failures.
struct FaultyStorage {
    inner: FileStorage,
    fault: Fault,
    at: usize,
    /// Fail truncation too, so the failed batch's bytes stay in the file.
    fail_truncate: bool,
    /// Make each sync this slow, so that batches fill up.
    sync_delay: Duration,
    pending_error: Option<i32>,
    trace: Arc<Mutex<Trace>>,
}

impl FaultyStorage {
    fn new(path: &Path, fault: Fault, at: usize) -> (FaultyStorage, Arc<Mutex<Trace>>) {
        let file = std::fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(path)
            .unwrap();
        let trace = Arc::new(Mutex::new(Trace::default()));
        let storage = FaultyStorage {
            inner: FileStorage::new(file),
            fault,
            at,
            fail_truncate: false,
            sync_delay: Duration::ZERO,
            pending_error: None,
            trace: Arc::clone(&trace),
        };
        (storage, trace)
    }
}

impl Storage for FaultyStorage {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut trace = self.trace.lock().unwrap();
        let index = trace.writes;
        trace.writes += 1;
        if let Some(errno) = self.pending_error.take() {
            return Err(io::Error::from_raw_os_error(errno));
        }
        let take = match self.fault {
            Fault::WriteError(errno) if index == self.at => {
                trace.fired = true;
                return Err(io::Error::from_raw_os_error(errno));
            }
            Fault::ZeroWrite if index == self.at => {
                trace.fired = true;
                return Ok(0);
            }
            Fault::ShortThenError(errno) if index == self.at && buf.len() > 1 => {
                trace.fired = true;
                self.pending_error = Some(errno);
                buf.len() / 2
            }
            Fault::ShortWrites => buf.len().min(100),
            _ => buf.len(),
        };
        let mut rest = &buf[..take];
        while !rest.is_empty() {
            let n = self.inner.write(rest)?;
            rest = &rest[n..];
        }
        trace.written += take as u64;
        Ok(take)
    }

    fn sync(&mut self) -> io::Result<()> {
        std::thread::sleep(self.sync_delay);
        let mut trace = self.trace.lock().unwrap();
        let index = trace.syncs;
        trace.syncs += 1;
        if let Fault::SyncError(errno) = self.fault {
            if index == self.at {
                trace.fired = true;
                trace.failed_range = Some((trace.synced, trace.written));
                return Err(io::Error::from_raw_os_error(errno));
            }
        }
        self.inner.sync()?;
        trace.synced = trace.written;
        Ok(())
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.trace.lock().unwrap().truncations.push(len);
        if self.fail_truncate {
            return Err(io::Error::from_raw_os_error(EIO));
        }
        self.inner.truncate(len)
    }
}

fn temp_log() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    (dir, path)
}

/// One call of the sequential script, with the records it appended.
#[derive(Debug)]
struct Call {
    records: Vec<Vec<u8>>,
    /// Whether an `Ok` means the records are durable.
    durable: bool,
    result: Result<(), Error>,
}

/// A fixed mix of every kind of call, one at a time.
async fn run_script(log: &AsyncLogWriter) -> Vec<Call> {
    let mut calls = Vec::new();
    let mut seq = 0;
    // Sizes from a few bytes to one that spans several small batches.
    let mut next = || {
        seq += 1;
        make_record_sized(0, seq, [20, 150, 1200, 60, 300][seq as usize % 5])
    };
    for step in 0..24 {
        let call = match step % 6 {
            0 | 1 => {
                let record = next();
                let result = log.append(&record).await.map(drop);
                Call {
                    records: vec![record],
                    durable: true,
                    result,
                }
            }
            2 => {
                let records: Vec<_> = (0..5).map(|_| next()).collect();
                let result = log.append_batch(&records).await.map(drop);
                Call {
                    records,
                    durable: true,
                    result,
                }
            }
            3 | 4 => {
                let record = next();
                let result = log.append_buffered(&record).await.map(drop);
                Call {
                    records: vec![record],
                    durable: false,
                    result,
                }
            }
            _ => Call {
                records: vec![],
                durable: true,
                result: log.sync().await,
            },
        };
        calls.push(call);
    }
    let result = log.close().await.map(drop);
    calls.push(Call {
        records: vec![],
        durable: true,
        result,
    });
    calls
}

/// How the script's batches reach the file: written by the appending task itself
/// when the writer is idle (the default on a multi-thread runtime), or all by the
/// flusher thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BatchPath {
    Leader,
    FlusherOnly,
}

/// Runs the script with `fault` at step `at` and checks everything a caller relies on.
/// Returns whether the fault fired.
async fn check_script(
    fault: Fault,
    at: usize,
    fail_truncate: bool,
    max_batch: usize,
    path_taken: BatchPath,
) -> bool {
    let (_dir, path) = temp_log();
    let (mut storage, trace) = FaultyStorage::new(&path, fault, at);
    storage.fail_truncate = fail_truncate;
    let mut options = WriterOptions::new();
    if fail_truncate {
        // A preallocating writer (the default) cuts its zeros on close, which a
        // truncate rigged to fail would fail even when the fault never fires.
        options.preallocate(0);
    }
    let log = options
        .max_batch_bytes(max_batch)
        .leader_writes(path_taken == BatchPath::Leader)
        .from_storage(Box::new(storage), 0)
        .unwrap();
    let calls = tokio::time::timeout(Duration::from_secs(20), run_script(&log))
        .await
        .expect("no call hangs");
    let fired = trace.lock().unwrap().fired;
    let context = format!(
        "{fault:?} at {at}, truncate fails: {fail_truncate}, batch {max_batch}, {path_taken:?}"
    );
    let stats = log.stats();
    if path_taken == BatchPath::FlusherOnly {
        assert_eq!(stats.led_writes, 0, "{context}");
    }

    let first_error = calls.iter().position(|c| c.result.is_err());
    if !fired || fault == Fault::ShortWrites {
        assert_eq!(first_error, None, "{context}: {calls:?}");
    } else {
        let first = first_error.unwrap_or_else(|| panic!("{context}: the failure was lost"));
        match &calls[first].result {
            Err(Error::Io(e)) => assert_eq!(e.kind(), fault.kind(), "{context}"),
            // The failed batch held only buffered records: the next call learns of it.
            Err(Error::Poisoned { source, .. }) => {
                assert_eq!(source.kind(), fault.kind(), "{context}")
            }
            other => panic!("{context}: {other:?}"),
        }
        for call in &calls[first + 1..] {
            assert!(
                matches!(call.result, Err(Error::Poisoned { .. })),
                "{context}: a call after the failure: {:?}",
                call.result
            );
        }
    }

    let before_reopen = std::fs::metadata(&path).unwrap().len();
    // Reopen: the tail is repaired and the log reads cleanly.
    let reopened = AsyncLogWriter::open(&path).await.unwrap();
    // The reopened writer preallocates (by default): its zeros follow the log.
    let mut file = std::fs::read(&path).unwrap();
    let len = reopened.stats().len as usize;
    assert!(
        file[len..].iter().all(|&b| b == 0),
        "{context}: zeros after the repaired log"
    );
    file.truncate(len);
    let attempted: Vec<&[u8]> = calls
        .iter()
        .take(first_error.map_or(calls.len(), |i| i + 1))
        .flat_map(|c| c.records.iter().map(|r| &r[..]))
        .collect();
    let stream = encode_all(attempted.iter().copied());
    assert_eq!(file, stream[..file.len()], "{context}: not a prefix");
    let read = read_log(&path, true).await;
    if let Some((position, _)) = read.last() {
        assert_eq!(
            position.end,
            file.len() as u64,
            "{context}: ends at a record"
        );
    }
    // Every record up to the last one acknowledged as durable is there (the file is
    // a prefix of the stream, so these are the very records).
    let last_durable = calls.iter().rposition(|c| c.durable && c.result.is_ok());
    let must_have: usize = calls[..last_durable.map_or(0, |i| i + 1)]
        .iter()
        .map(|c| c.records.len())
        .sum();
    assert!(
        read.len() >= must_have,
        "{context}: acknowledged records lost"
    );
    if first_error.is_none() {
        assert_eq!(read.len(), attempted.len(), "{context}");
    }
    if fired && !fail_truncate && fault != Fault::ShortWrites {
        // The failed batch was taken back: the file ended where it began, after the
        // last sync and any buffered records written since.
        let trace = trace.lock().unwrap();
        assert_eq!(trace.truncations, vec![before_reopen], "{context}");
        if let Some((synced, _)) = trace.failed_range {
            assert!(synced <= before_reopen, "{context}");
        }
    }

    // Appends after reopening read back.
    let extra = make_record(9, 9);
    reopened.append(&extra).await.unwrap();
    reopened.close().await.unwrap();
    let after = read_log(&path, true).await;
    assert_eq!(after.len(), read.len() + 1);
    assert_eq!(after.last().unwrap().1, extra);
    fired
}

/// Runs the script with the fault at every step until a run where it never fires.
/// Batches are capped at 1 MiB, then at 512 bytes so that records span batches.
/// The four ways (two batch paths, two batch caps) run at once, each on its own
/// files, so that their syncs overlap; each goes through its steps in order.
async fn at_every_step(fault: Fault, fail_truncate: bool) {
    let ways = [BatchPath::Leader, BatchPath::FlusherOnly]
        .into_iter()
        .flat_map(|path| [1 << 20, 512].map(|max_batch| (path, max_batch)));
    futures::future::join_all(ways.map(|(path, max_batch)| async move {
        let mut fired = 0;
        for at in 0.. {
            if !check_script(fault, at, fail_truncate, max_batch, path).await {
                break;
            }
            fired += 1;
        }
        assert!(
            fired >= 5,
            "{fault:?} fired at only {fired} steps ({path:?}, batch {max_batch})"
        );
    }))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_eio_at_every_step() {
    at_every_step(Fault::WriteError(EIO), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_enospc_at_every_step() {
    at_every_step(Fault::WriteError(ENOSPC), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_write_then_error_at_every_step() {
    at_every_step(Fault::ShortThenError(EIO), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_write_then_error_with_failed_truncate_leaves_a_repairable_tail() {
    at_every_step(Fault::ShortThenError(ENOSPC), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_byte_write_at_every_step() {
    at_every_step(Fault::ZeroWrite, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_error_at_every_step() {
    at_every_step(Fault::SyncError(EIO), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_error_with_failed_truncate_at_every_step() {
    at_every_step(Fault::SyncError(EIO), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_writes_are_completed() {
    for max_batch in [1 << 20, 512] {
        for path in [BatchPath::Leader, BatchPath::FlusherOnly] {
            assert!(!check_script(Fault::ShortWrites, 0, false, max_batch, path).await);
        }
    }
}

/// Many tasks; a sync fails while batches are full. The failed batch's bytes stay in
/// the file (truncation fails too), so batch membership can be read back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_waiter_of_a_failed_batch_gets_the_error() {
    for at in [0, 3, 10] {
        let (_dir, path) = temp_log();
        let (mut storage, trace) = FaultyStorage::new(&path, Fault::SyncError(EIO), at);
        storage.fail_truncate = true;
        storage.sync_delay = Duration::from_millis(2);
        let log = WriterOptions::new()
            .from_storage(Box::new(storage), 0)
            .unwrap();

        let mut tasks = Vec::new();
        for task in 0..64u32 {
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                let mut results = Vec::new();
                for seq in 0..40u32 {
                    results.push(((task, seq), log.append(make_record(task, seq)).await));
                }
                results
            }));
        }
        let mut results: HashMap<(u32, u32), Result<walcodec::Position, Error>> = HashMap::new();
        for task in tasks {
            let mut poisoned = false;
            for (id, result) in task.await.unwrap() {
                // Once a task has seen an error, all its later appends are refused.
                if poisoned {
                    assert!(matches!(result, Err(Error::Poisoned { .. })), "{result:?}");
                }
                poisoned |= result.is_err();
                results.insert(id, result);
            }
        }
        let (failed_start, failed_end) = trace.lock().unwrap().failed_range.unwrap();
        assert_eq!(trace.lock().unwrap().truncations, vec![failed_start]);

        drop(log);
        let reopened = AsyncLogWriter::open(&path).await.unwrap();
        let read = read_log(&path, true).await;
        reopened.close().await.unwrap();
        let mut in_file = 0;
        let mut in_failed_batch = 0;
        for (position, record) in &read {
            let id = verify(record).unwrap();
            in_file += 1;
            match results.get(&id).unwrap() {
                Ok(acked) => {
                    assert_eq!(acked, position);
                    assert!(position.end <= failed_start);
                }
                Err(Error::Io(e)) => {
                    assert_eq!(e.raw_os_error(), Some(EIO));
                    assert!(position.start >= failed_start && position.end <= failed_end);
                    in_failed_batch += 1;
                }
                Err(other) => panic!("a record in the file got {other:?}"),
            }
        }
        assert!(in_failed_batch >= 1);
        let io_errors = results
            .values()
            .filter(|r| matches!(r, Err(Error::Io(_))))
            .count();
        // Plus, when the batch was cut inside a record, that record: its first part
        // was written (and is cut on reopen, being torn).
        assert!(
            (in_failed_batch..=in_failed_batch + 1).contains(&io_errors),
            "exactly the failed batch gets EIO: {io_errors} errors, {in_failed_batch} in it"
        );
        let acked = results.values().filter(|r| r.is_ok()).count();
        // Everything else was refused and never written.
        assert_eq!(in_file, acked + in_failed_batch);
        assert!(read.iter().all(|(position, _)| position.end <= failed_end));
        for result in results.values() {
            if let Err(Error::Poisoned { offset, source }) = result {
                assert_eq!(*offset, failed_start);
                assert_eq!(source.raw_os_error(), Some(EIO));
            }
        }
    }
}

/// A record larger than `max_batch_bytes` is written across several batches. When a
/// write or sync of any part of it fails, part of it may be in the file, so its append
/// gets the I/O error itself (it used to get `Poisoned`, which says nothing of the call
/// was written); only the calls after it get `Poisoned`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_larger_than_a_batch_gets_the_error_of_any_failed_part() {
    const BATCH: usize = 4096;
    let kept = make_record_sized(1, 0, 40);
    let large = make_record_sized(1, 1, 18_000);
    // Write 0 and sync 0 are the first record's; writes 1 to 5 carry the large one
    // in parts that end on 4 KiB boundaries, and only the last part is synced (sync 1).
    let faults = [
        Fault::WriteError(ENOSPC),
        Fault::ShortThenError(ENOSPC),
        Fault::ZeroWrite,
    ]
    .into_iter()
    .flat_map(|fault| (1..=5).map(move |at| (fault, at)))
    .chain([(Fault::SyncError(EIO), 1)]);
    for (fault, at) in faults {
        for fail_truncate in [false, true] {
            let context = format!("{fault:?} at {at}, truncate fails: {fail_truncate}");
            let (_dir, path) = temp_log();
            let (mut storage, trace) = FaultyStorage::new(&path, fault, at);
            storage.fail_truncate = fail_truncate;
            let log = WriterOptions::new()
                .max_batch_bytes(BATCH)
                .from_storage(Box::new(storage), 0)
                .unwrap();
            let kept_at = log.append(&kept).await.unwrap();
            match log.append(&large).await {
                Err(Error::Io(e)) => assert_eq!(e.kind(), fault.kind(), "{context}"),
                other => panic!("{context}: {other:?}"),
            }
            assert!(trace.lock().unwrap().fired, "{context}");
            match log.append(&kept).await {
                Err(Error::Poisoned { offset, source }) => {
                    assert_eq!(offset, kept_at.end, "{context}");
                    assert_eq!(source.kind(), fault.kind(), "{context}");
                }
                other => panic!("{context}: {other:?}"),
            }
            drop(log);
            let reopened = AsyncLogWriter::open(&path).await.unwrap();
            reopened.close().await.unwrap();
            let read = read_log(&path, true).await;
            // Only a failed sync whose batch could not be taken back leaves the whole
            // record; any part of it is cut.
            let whole = matches!(fault, Fault::SyncError(_)) && fail_truncate;
            assert_eq!(read.len(), 1 + usize::from(whole), "{context}");
            assert_eq!(read[0].1, kept, "{context}");
            if whole {
                assert_eq!(read[1].1, large, "{context}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poisoned_writer_refuses_everything_and_close_reports_it() {
    let (_dir, path) = temp_log();
    let (storage, _trace) = FaultyStorage::new(&path, Fault::WriteError(ENOSPC), 1);
    let log = WriterOptions::new()
        .from_storage(Box::new(storage), 0)
        .unwrap();
    log.append(b"kept").await.unwrap();
    match log.append(b"lost").await {
        Err(Error::Io(e)) => assert_eq!(e.raw_os_error(), Some(ENOSPC)),
        other => panic!("{other:?}"),
    }
    for result in [
        log.append(b"x").await.map(drop),
        log.append_buffered(b"x").await.map(drop),
        log.append_batch([b"x"]).await.map(drop),
        log.sync().await,
        log.close().await.map(drop),
    ] {
        match result {
            Err(e @ Error::Poisoned { .. }) => {
                let message = e.to_string();
                assert!(message.contains("offset 11") && message.contains("reopen"));
                let source = std::error::Error::source(&e).unwrap().to_string();
                assert!(source.contains("No space left"), "{source}");
            }
            other => panic!("{other:?}"),
        }
    }
    drop(log);
    let reopened = AsyncLogWriter::open(&path).await.unwrap();
    assert_eq!(reopened.stats().len, 11);
    reopened.close().await.unwrap();
}

/// A file that has room for one preallocation step and no more.
struct OneStepOfRoom {
    inner: FileStorage,
    steps: usize,
}

impl Storage for OneStepOfRoom {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.inner.sync()
    }
    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)
    }
    fn preallocate(&mut self, from: u64, to: u64) -> io::Result<()> {
        self.steps += 1;
        if self.steps > 1 {
            return Err(io::Error::from_raw_os_error(ENOSPC));
        }
        self.inner.preallocate(from, to)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_preallocation_fails_the_batch_and_cuts_the_zeros() {
    const STEP: u64 = 64 * 1024;
    let (_dir, path) = temp_log();
    let file = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .open(&path)
        .unwrap();
    let storage = OneStepOfRoom {
        inner: FileStorage::new(file),
        steps: 0,
    };
    let log = WriterOptions::new()
        .preallocate(STEP)
        .from_storage(Box::new(storage), 0)
        .unwrap();
    let mut acked = Vec::new();
    let failed_at = loop {
        let record = make_record_sized(3, acked.len() as u32, 10_000);
        match log.append(&record).await {
            Ok(position) => {
                assert!(position.end <= STEP, "acknowledged past the only step");
                acked.push(record);
            }
            Err(Error::Io(e)) => {
                assert_eq!(e.raw_os_error(), Some(ENOSPC));
                break acked.len();
            }
            Err(other) => panic!("{other:?}"),
        }
    };
    assert_eq!(failed_at, 6, "the seventh record is the first past 64 KiB");
    assert!(matches!(
        log.append(b"x").await,
        Err(Error::Poisoned { .. })
    ));
    drop(log);
    // The failed batch and the zeros ahead of it are gone: the file is the log.
    assert_eq!(
        std::fs::read(&path).unwrap(),
        encode_all(acked.iter().map(|r| &r[..]))
    );
}

/// A disk with room for `capacity` bytes, in memory: a write that crosses the limit
/// is cut short there and the next one fails with ENOSPC, as `write(2)` does; a
/// preallocation that crosses it fails outright.
struct FullDisk {
    file: Arc<Mutex<Vec<u8>>>,
    position: usize,
    capacity: usize,
    full: Arc<Mutex<bool>>,
}

impl FullDisk {
    fn enospc(&self) -> io::Error {
        *self.full.lock().unwrap() = true;
        io::Error::from_raw_os_error(ENOSPC)
    }
}

impl Storage for FullDisk {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let room = self.capacity.saturating_sub(self.position);
        if room == 0 {
            return Err(self.enospc());
        }
        let n = buf.len().min(room);
        let end = self.position + n;
        let mut file = self.file.lock().unwrap();
        if file.len() < end {
            file.resize(end, 0);
        }
        file[self.position..end].copy_from_slice(&buf[..n]);
        self.position = end;
        Ok(n)
    }
    fn sync(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.file.lock().unwrap().truncate(len as usize);
        self.position = len as usize;
        Ok(())
    }
    fn preallocate(&mut self, _from: u64, to: u64) -> io::Result<()> {
        if to as usize > self.capacity {
            return Err(self.enospc());
        }
        self.file.lock().unwrap().resize(to as usize, 0);
        Ok(())
    }
}

/// Many tasks append until the disk is full, with batches of every size and with and
/// without preallocation: in every run some append gets ENOSPC itself (the appends of
/// the failed batch, a record larger than a batch included), the rest get `Poisoned`,
/// and every acknowledged record is in the file. Issue 17 saw runs where every waiter
/// got `Poisoned`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_gives_its_error_to_the_appends_of_the_failed_batch() {
    use bytes::BytesMut;
    use tokio_util::codec::Decoder;

    let sizes = [1 << 20, 64 * 1024, 4096, 512];
    for run in 0..100 {
        let max_batch = sizes[run % sizes.len()];
        let preallocate = if run % 3 == 0 { 32 * 1024 } else { 0 };
        let context = format!("run {run}, batch {max_batch}, preallocate {preallocate}");
        let full = Arc::new(Mutex::new(false));
        let file = Arc::new(Mutex::new(Vec::new()));
        let storage = FullDisk {
            file: Arc::clone(&file),
            position: 0,
            capacity: 50_000 + run * 7_919,
            full: Arc::clone(&full),
        };
        let log = WriterOptions::new()
            .max_batch_bytes(max_batch)
            .preallocate(preallocate)
            .from_storage(Box::new(storage), 0)
            .unwrap();
        let mut tasks = Vec::new();
        for task in 0..8u32 {
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                let mut results = Vec::new();
                for seq in 0..400u32 {
                    let result = log.append(make_record(task, seq)).await;
                    let stop = result.is_err();
                    results.push(((task, seq), result));
                    if stop {
                        break;
                    }
                }
                results
            }));
        }
        let mut results = HashMap::new();
        for task in tasks {
            results.extend(task.await.unwrap());
        }
        drop(log);
        assert!(*full.lock().unwrap(), "{context}: the disk never filled");
        let io_errors = results
            .values()
            .filter(|r| matches!(r, Err(Error::Io(e)) if e.raw_os_error() == Some(ENOSPC)))
            .count();
        assert!(io_errors >= 1, "{context}: no append got ENOSPC");
        for result in results.values() {
            match result {
                Ok(_) | Err(Error::Io(_)) => {}
                Err(Error::Poisoned { source, .. }) => {
                    assert_eq!(source.raw_os_error(), Some(ENOSPC), "{context}")
                }
                Err(other) => panic!("{context}: {other:?}"),
            }
        }
        // Every task saw the failure, so the failed batch was taken back already.
        // The file's bytes: a torn tail is the end of the log.
        let mut decoder = walcodec::LogDecoder::builder()
            .input(walcodec::LogInput::File)
            .build();
        let mut buf = BytesMut::from(&file.lock().unwrap()[..]);
        let mut in_file = std::collections::HashSet::new();
        while let Some(record) = decoder.decode_eof(&mut buf).unwrap() {
            in_file.insert(verify(&record).unwrap());
        }
        for (id, result) in &results {
            if result.is_ok() {
                assert!(in_file.contains(id), "{context}: acknowledged {id:?} lost");
            }
        }
    }
}
