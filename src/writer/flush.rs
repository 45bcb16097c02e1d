//! The batch path: take the next batch from the queue, write and sync it, release its
//! waiters. Two kinds of thread walk it, never at once:
//!
//! - the flusher thread, which drains the queue for as long as there is work, and
//! - an appending task that finds the writer idle (the *leader*, as in LevelDB's and
//!   RocksDB's write paths): it writes and syncs its own record on its own thread
//!   (inside [`tokio::task::block_in_place`]), so a lone appender's round trip is a
//!   write and a sync with no thread hand-off. What arrives meanwhile is handed to
//!   the flusher when the leader is done.
//!
//! Who may touch the file is decided under the state lock: the flusher when
//! [`State::flusher`] is busy, a leader while [`State::leading`] is set (only taken
//! while the flusher sleeps). [`Io`] has a mutex of its own only so that it can be
//! shared; it is never contended.

use std::io;
use std::mem;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bytes::BytesMut;

use super::storage::{self, Storage};
use super::{Entry, Error, Failure, Flusher, Shared, Signal, State, WriterOptions};

/// The file and how far it is allocated; held by whoever writes a batch.
pub(super) struct Io {
    pub(super) storage: Box<dyn Storage>,
    /// File length including preallocated zeros.
    pub(super) allocated: u64,
}

/// Where a batch that cannot take all the queued bytes ends: on a page boundary of
/// the file. A batch cut inside a record can become durable on its own (its sync,
/// or a preallocation step's), and a crash or power cut may then lose the rest of
/// the record, leaving its fragment cut short by zeros (preallocated space) from
/// the batch's end. A reader takes such a fragment for a torn write only when the
/// zeros begin at a sector boundary inside it, the shape a disk leaves; anywhere
/// else it is damage, and reopening the log would fail. Cut at a page boundary,
/// every durable point inside a record is one.
const BATCH_ALIGN_BYTES: u64 = 4096;

/// How many of the `queued` bytes (the log from `start` on) the next batch takes:
/// all of them if they fit in `max_batch`, else up to the last page boundary within
/// `max_batch` (or the first one past `start`, for a cap below a page).
fn batch_len(start: u64, queued: usize, max_batch: usize) -> usize {
    if queued <= max_batch {
        return queued;
    }
    let cap_end = start + max_batch as u64;
    let aligned = cap_end - cap_end % BATCH_ALIGN_BYTES;
    let end = if aligned > start {
        aligned
    } else {
        (start / BATCH_ALIGN_BYTES + 1) * BATCH_ALIGN_BYTES
    };
    ((end - start) as usize).min(queued)
}

/// The bytes of one batch, taken from the queue together with the entries a sync
/// of them releases.
pub(super) struct Batch {
    start: u64,
    end: u64,
    bytes: BytesMut,
    /// The batch took the whole queue buffer, which goes back as the spare.
    whole: bool,
    /// Some entry taken has a waiter: the batch is synced.
    must_sync: bool,
    /// Written by an appending task rather than the flusher thread.
    led: bool,
}

impl State {
    /// Takes the next batch and, into `taken`, the entries that end inside it.
    ///
    /// The waiters and the bytes are taken under one lock: every waiter taken here
    /// ends at or before the batch's end, so the sync that follows covers all of its
    /// bytes (Pebble's rule).
    fn take_batch(&mut self, max_batch: usize, taken: &mut Vec<Entry>) -> Batch {
        let start = self.buf_start;
        let n = batch_len(start, self.buf.len(), max_batch);
        let end = start + n as u64;
        let covered = self.pending.partition_point(|e| e.end <= end);
        let first = taken.len();
        taken.extend(self.pending.drain(..covered));
        let waiters = taken[first..].iter().filter(|e| e.waiter.is_some()).count();
        self.pending_waiters -= waiters;
        self.last_batch_waiters = waiters;
        let whole = n == self.buf.len();
        let bytes = if whole {
            mem::replace(&mut self.buf, mem::take(&mut self.spare))
        } else {
            self.buf.split_to(n)
        };
        self.buf_start = end;
        Batch {
            start,
            end,
            bytes,
            whole,
            must_sync: waiters > 0,
            led: false,
        }
    }

    /// Whether an append that just queued a record may write it itself: the flusher
    /// waits for work (so nothing else is queued or in flight: the first append
    /// queued while it waits either leads or marks it busy), no one else leads, and
    /// no sync pacing asks for records to wait for company.
    ///
    /// And the last batch released at most one waiter. Under load (many appenders,
    /// batches of several) the flusher, spinning between batches, picks up what the
    /// woken appenders queue; a leader there would sync its one record alone while
    /// the others queue behind it, and hand them to the flusher after: two syncs where
    /// one would do (measured: 16 tasks fell from 7.5x to 5x the per-record baseline).
    pub(super) fn may_lead(&self, shared: &Shared) -> bool {
        shared.leader_writes
            && matches!(self.flusher, Flusher::Idle | Flusher::Spinning)
            && self.last_batch_waiters <= 1
            && !self.leading
            && shared.min_sync_interval.is_none()
            && self.failure.is_none()
    }

    /// Takes the whole queue for the appender that leads: see [`lead`].
    pub(super) fn take_lead(&mut self, max_batch: usize, taken: &mut Vec<Entry>) -> Batch {
        debug_assert!(!self.leading);
        self.leading = true;
        let mut batch = self.take_batch(max_batch, taken);
        batch.led = true;
        batch
    }
}

/// Whether this task may block its thread with [`tokio::task::block_in_place`]:
/// only on a multi-thread runtime (it panics on a current-thread one).
pub(super) fn can_block_here() -> bool {
    tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
}

/// Writes and syncs `batch` (taken with [`State::take_lead`]) on this task's thread,
/// releases its waiters, then wakes the flusher if more arrived meanwhile.
pub(super) fn lead(shared: &Arc<Shared>, batch: Batch, mut taken: Vec<Entry>) {
    // Declared after `taken`, so that on unwind it poisons the writer before the
    // waiters are dropped and their tasks look at it.
    let mut guard = LeadGuard {
        shared,
        done: false,
    };
    let ok = tokio::task::block_in_place(|| flush(shared, batch, &mut taken));
    guard.done = true;
    let mut state = shared.lock();
    state.leading = false;
    let signal = if ok && (state.has_work() || state.closing) {
        // The flusher sleeps while a leader writes: wake it for what is left.
        state.flusher_signal(usize::MAX)
    } else {
        Signal::None
    };
    drop(state);
    shared.signal(signal);
}

/// Poisons the writer if a leading append unwinds in the middle of its batch.
struct LeadGuard<'a> {
    shared: &'a Arc<Shared>,
    done: bool,
}

impl Drop for LeadGuard<'_> {
    fn drop(&mut self) {
        if !self.done {
            let error = io::Error::other("an append writing its batch panicked");
            fail(self.shared, Vec::new(), error);
        }
    }
}

/// Writes `batch`, syncs it when it must, and releases the entries in `taken`.
/// Returns false when a write or sync failed: the writer is then poisoned.
fn flush(shared: &Shared, batch: Batch, taken: &mut Vec<Entry>) -> bool {
    let mut io = shared.io.lock().unwrap_or_else(PoisonError::into_inner);
    let sync_start = Instant::now();
    let mut sync_latency = None;
    let Io { storage, allocated } = &mut *io;
    let result = grow(&mut **storage, allocated, batch.end, shared.preallocate)
        .and_then(|()| storage::write_all(&mut **storage, &batch.bytes))
        .and_then(|()| {
            if batch.must_sync {
                let started = Instant::now();
                storage.sync()?;
                sync_latency = Some(started.elapsed());
            }
            Ok(())
        });
    if let Err(error) = result {
        // Take the failed batch back so the file is a clean prefix at once; if
        // this fails too, `open` cuts the torn tail on reopen.
        let _ = io.storage.truncate(batch.start);
        drop(io);
        // A record larger than what one batch covers may begin in this batch and
        // end in the next: some of its bytes were written, so its append gets the
        // error itself; `Poisoned` is only for records no byte of which was.
        // Entries are contiguous, so only the first one still pending can.
        let written_from = taken.last().map_or(batch.start, |e| e.end);
        if written_from < batch.end {
            let mut state = shared.lock();
            if let Some(straddling) = state.pending.pop_front() {
                taken.push(straddling);
            }
        }
        fail(shared, mem::take(taken), error);
        return false;
    }
    drop(io);
    publish(shared, batch, taken, sync_start, sync_latency);
    true
}

/// Records a batch that was written (and synced when it had to be), then releases
/// its waiters and its queue room.
fn publish(
    shared: &Shared,
    batch: Batch,
    taken: &mut Vec<Entry>,
    sync_start: Instant,
    sync_latency: Option<Duration>,
) {
    let n = batch.bytes.len();
    let mut state = shared.lock();
    state.written_len = batch.end;
    if batch.must_sync {
        state.durable_len = batch.end;
        state.last_sync_start = Some(sync_start);
    }
    let records: u64 = taken.iter().map(|e| e.records).sum();
    let c = &mut state.counters;
    c.records += records;
    if n > 0 {
        c.writes += 1;
        c.bytes += n as u64;
        c.largest_batch_records = c.largest_batch_records.max(records);
        c.largest_batch_bytes = c.largest_batch_bytes.max(n as u64);
        c.led_writes += u64::from(batch.led);
    }
    if let Some(latency) = sync_latency {
        c.syncs += 1;
        c.last_sync_latency = Some(latency);
        c.max_sync_latency = c.max_sync_latency.max(Some(latency));
    }
    // Permits track bytes, except for a record larger than the whole queue, which
    // holds fewer: never return more than are held, and all once the queue is empty.
    let release = if state.buf.is_empty() {
        state.queued_permits
    } else {
        state.queued_permits.min(n)
    };
    state.queued_permits -= release;
    let queued_bytes = state.buf.len();
    if !batch.led && !state.has_work() {
        // The flusher is about to watch for work: say so before the waiters wake,
        // or an appender woken here would find it still busy and queue behind it
        // rather than lead.
        state.flusher = Flusher::Spinning;
    }
    if batch.whole {
        // Keep the buffer for the next swap unless one huge record grew it.
        let mut bytes = batch.bytes;
        if bytes.capacity()
            <= 2 * shared
                .max_batch_bytes
                .max(WriterOptions::DEFAULT_MAX_QUEUED_BYTES)
        {
            bytes.clear();
            state.spare = bytes;
        }
    }
    drop(state);

    shared
        .observer
        .batch(records, n, sync_latency, queued_bytes);
    if batch.must_sync {
        shared.durable_end.send_replace(batch.end);
    }
    shared.queue.add_permits(release);
    for entry in taken.drain(..) {
        if let Some(waiter) = entry.waiter {
            // The appender may have stopped waiting; its record is durable anyway.
            let _ = waiter.send(Ok(()));
        }
    }
}

/// Poisons the writer if the flusher thread unwinds, so no caller waits forever on a
/// thread that is gone.
struct ExitGuard {
    shared: Arc<Shared>,
    exited: bool,
}

impl Drop for ExitGuard {
    fn drop(&mut self) {
        if !self.exited {
            let error = io::Error::other("the log writer's flusher thread panicked");
            fail(&self.shared, Vec::new(), error);
        }
    }
}

/// The flusher: one batch at a time, one write + sync in flight, until closing and
/// drained or a failure.
pub(super) fn run_flusher(shared: Arc<Shared>) {
    // Declared before the guard so that, on unwind, the guard poisons the state before
    // these waiters are dropped and their tasks look at it.
    let mut taken: Vec<Entry> = Vec::new();
    let mut guard = ExitGuard {
        shared: Arc::clone(&shared),
        exited: false,
    };
    let max_batch = shared.max_batch_bytes;

    let mut spun = false;
    let mut state = shared.lock();
    loop {
        if state.failure.is_some() {
            // A leading append failed and poisoned the writer.
            guard.exited = true;
            return;
        }
        if state.leading {
            // An append writes a batch itself; it wakes us if work is left.
            state = sleep(&shared, state);
            continue;
        }
        if !state.has_work() {
            if state.closing {
                break;
            }
            if !spun && !shared.idle_spin.is_zero() {
                // A task that just got its acknowledgement usually appends again within
                // microseconds: watch for it before sleeping, which saves the thread
                // wake-up (tens of microseconds) on the path of an appender that
                // cannot write its record itself.
                spun = true;
                state.flusher = Flusher::Spinning;
                shared.queued.store(false, Ordering::Relaxed);
                drop(state);
                let until = Instant::now() + shared.idle_spin;
                while !shared.queued.load(Ordering::Acquire) && Instant::now() < until {
                    std::thread::yield_now();
                }
                state = shared.lock();
                continue;
            }
            state = sleep(&shared, state);
            continue;
        }
        spun = false;
        if let (Some(interval), Some(last)) = (shared.min_sync_interval, state.last_sync_start) {
            let due = last + interval;
            let now = Instant::now();
            if now < due
                && state.pending_waiters > 0
                && state.buf.len() < max_batch
                && !state.closing
            {
                // Counted once per round: a wait cut short (by a spurious wake-up or
                // a record that leaves the batch short of full) comes back here
                // still pacing.
                if state.flusher != Flusher::Pacing {
                    state.counters.paced_rounds += 1;
                }
                state.flusher = Flusher::Pacing;
                state = shared
                    .wake
                    .wait_timeout(state, due - now)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
                continue;
            }
        }
        state.flusher = Flusher::Busy;
        let batch = state.take_batch(max_batch, &mut taken);
        drop(state);
        if !flush(&shared, batch, &mut taken) {
            guard.exited = true;
            return;
        }
        state = shared.lock();
    }

    // Closing and drained. Records appended without a sync were written but may not be
    // durable yet: sync them before letting go of the file.
    let unsynced = state.written_len > state.durable_len;
    let len = state.written_len;
    drop(state);
    let closed = close_file(&shared, len, unsynced);
    guard.exited = true;
    if let Err(error) = closed {
        fail(&shared, Vec::new(), error);
        return;
    }
    let mut state = shared.lock();
    state.durable_len = state.written_len;
    state.finished = true;
    let len = state.written_len;
    let closers = mem::take(&mut state.closers);
    drop(state);
    shared.durable_end.send_replace(len);
    for closer in closers {
        let _ = closer.send(Ok(len));
    }
}

/// The flusher sleeps until an appender, a leader, `close` or a failure wakes it.
fn sleep<'a>(shared: &'a Shared, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
    state.flusher = Flusher::Idle;
    shared
        .wake
        .wait(state)
        .unwrap_or_else(PoisonError::into_inner)
}

/// Syncs what was written without a sync, gives back the zeros ahead of the log (so
/// the closed file is exactly the log), and closes the file.
fn close_file(shared: &Shared, len: u64, unsynced: bool) -> io::Result<()> {
    let mut io = shared.io.lock().unwrap_or_else(PoisonError::into_inner);
    if unsynced {
        io.storage.sync()?;
    }
    if io.allocated > len {
        io.storage.truncate(len)?;
        io.allocated = len;
    }
    // Dropping the storage closes the file now rather than with the last handle.
    io.storage = Box::new(Closed);
    Ok(())
}

/// What [`Io`] holds once the file is closed: nothing writes after the flusher
/// has finished, but a handle may outlive it.
struct Closed;

impl Storage for Closed {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::Error::other("the log file is closed"))
    }

    fn sync(&mut self) -> io::Result<()> {
        Err(io::Error::other("the log file is closed"))
    }

    fn truncate(&mut self, _: u64) -> io::Result<()> {
        Err(io::Error::other("the log file is closed"))
    }
}

/// Makes the file at least `end` bytes long, in whole steps of `step` zero bytes,
/// before a batch ending at `end` is written (nothing when `step` is 0).
pub(super) fn grow(
    storage: &mut dyn Storage,
    allocated: &mut u64,
    end: u64,
    step: u64,
) -> io::Result<()> {
    if step == 0 || end <= *allocated {
        return Ok(());
    }
    let to = end.div_ceil(step).saturating_mul(step);
    storage.preallocate(*allocated, to)?;
    *allocated = to;
    Ok(())
}

/// Poisons the writer: the waiters in `batch` (every record with bytes in the failed
/// batch) get the error, everything queued after it and every later call gets
/// [`Error::Poisoned`]. Wakes the flusher, which exits.
fn fail(shared: &Shared, batch: Vec<Entry>, error: io::Error) {
    let mut state = shared.lock();
    let error = Arc::new(error);
    if state.failure.is_none() {
        shared.observer.poisoned(state.durable_len, &error);
        state.failure = Some(Failure {
            offset: state.durable_len,
            error: Arc::clone(&error),
        });
    }
    let queued: Vec<Entry> = state.pending.drain(..).collect();
    state.pending_waiters = 0;
    state.buf.clear();
    state.queued_permits = 0;
    state.finished = true;
    let closers = mem::take(&mut state.closers);
    let failure = state.failure.as_ref().expect("set above");
    let (offset, source) = (failure.offset, Arc::clone(&failure.error));
    drop(state);
    shared.wake.notify_one();

    // Appends waiting for queue room wake up and see the failure.
    shared.queue.close();
    let poisoned = || Error::Poisoned {
        offset,
        source: Arc::clone(&source),
    };
    for entry in batch {
        if let Some(waiter) = entry.waiter {
            let _ = waiter.send(Err(Error::Io(copy_io_error(&error))));
        }
    }
    for entry in queued {
        if let Some(waiter) = entry.waiter {
            let _ = waiter.send(Err(poisoned()));
        }
    }
    for closer in closers {
        let _ = closer.send(Err(poisoned()));
    }
}

/// An `io::Error` for each waiter: the OS error code when there is one (so
/// `raw_os_error` and `kind` match the original), else the kind and message.
fn copy_io_error(error: &io::Error) -> io::Error {
    match error.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(error.kind(), error.to_string()),
    }
}

#[cfg(test)]
mod batch_tests {
    use super::*;

    #[test]
    fn partial_batches_end_on_a_page() {
        assert_eq!(batch_len(0, 100, 1 << 20), 100);
        assert_eq!(batch_len(0, 3 << 20, 1 << 20), 1 << 20);
        assert_eq!(batch_len(100, 3 << 20, 1 << 20), (1 << 20) - 100);
        // A cap below a page: up to the next page boundary.
        assert_eq!(batch_len(100, 10_000, 1), 4096 - 100);
        assert_eq!(batch_len(4096, 10_000, 1), 4096);
        assert_eq!(batch_len(4000, 50, 1), 50);
        for start in [0u64, 7, 4095, 4096, 123_457] {
            for cap in [1usize, 1000, 4096, 5000, 1 << 20] {
                let n = batch_len(start, 10 << 20, cap);
                assert!(n > 0);
                assert_eq!((start + n as u64) % BATCH_ALIGN_BYTES, 0, "{start} {cap}");
            }
        }
    }
}
