//! `AsyncLogWriter`: durable appends from many tasks, made durable together by group
//! commit.
//!
//! # How a record travels
//!
//! 1. `append` takes room in the bounded queue (a [`Semaphore`] counting queued
//!    bytes), then, under one short `std::sync::Mutex`, encodes the record into the
//!    shared buffer with the [`LogEncoder`] (which gives its [`Position`] at once) and
//!    registers a waiter (a oneshot) tagged with the record's end offset.
//! 2. One flusher thread takes, under that same lock, the waiters whose records end
//!    inside the next batch *and* the batch's bytes, so every waiter it releases had
//!    all its bytes in what it wrote (Pebble's rule: take the waiters before reading
//!    how far the buffer is filled). Then, off the lock, it writes the batch and
//!    syncs it (`fdatasync`) on the std file: one write + sync in flight, ever.
//! 3. After the sync it releases those waiters and the queue room. Everything that
//!    arrived during the sync is the next batch.
//!
//! The flusher is a dedicated OS thread rather than a task that calls
//! `spawn_blocking` per batch: the sync blocks anyway; an append's round trip crosses
//! two thread hand-offs instead of four (one when it finds the flusher still spinning
//! after the previous batch, see [`WriterOptions::idle_spin`]), and each costs tens of
//! microseconds on a VM; and the thread does not depend on the runtime staying up, so
//! records already queued are still written when the runtime shuts down or the last
//! handle is dropped.
//!
//! # Failures
//!
//! A failed write or sync stops the writer for good (it is *poisoned*): the waiters of
//! the failed batch get the I/O error (so does a record that begins in it and ends
//! past it, being larger than a batch), every record queued after it gets
//! [`Error::Poisoned`], and so does every later call. The writer then cuts the file
//! back to where the batch began; if that fails too, [`AsyncLogWriter::open`] does it
//! on reopen. Retrying a failed `fsync` is unsound (the kernel may have dropped the
//! dirty pages and report the next sync as a success), so the writer never does.

mod flush;
mod options;
pub(crate) mod record_writer;
pub(crate) mod report;
mod storage;
mod stream;

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Seek, SeekFrom};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::sync::{oneshot, watch, Semaphore};

pub use options::WriterOptions;
pub use storage::{FileStorage, Storage};

use crate::codec::encoder::LogEncoder;
use crate::error::Error;
use crate::format::Position;
use crate::observe;
use crate::reader::repair::recover_file;
use report::WriterObserver;

/// Appends records to a log file durably, from any number of tasks, with group
/// commit: records that arrive while a sync runs share the next sync.
///
/// Cheap to clone; all clones append to the same log. [`append`](Self::append)
/// resolves only once a sync covering the record has succeeded. The bytes in the file
/// are exactly what [`LogEncoder`] produces for the records in position order.
///
/// ```
/// # #[tokio::main]
/// # async fn main() -> Result<(), walcodec::Error> {
/// use walcodec::AsyncLogWriter;
///
/// let dir = tempfile::tempdir()?;
/// let log = AsyncLogWriter::create(dir.path().join("000001.log")).await?;
/// let mut tasks = Vec::new();
/// for task in 0..8 {
///     let log = log.clone();
///     tasks.push(tokio::spawn(async move {
///         log.append(format!("event from task {task}")).await
///     }));
/// }
/// for task in tasks {
///     let position = task.await.unwrap()?; // on disk now
///     assert!(position.end > position.start);
/// }
/// let stats = log.stats();
/// assert_eq!(stats.records, 8);
/// assert!(stats.syncs <= 8);
/// assert_eq!(log.close().await?, stats.durable_len);
/// # Ok(())
/// # }
/// ```
///
/// Dropping the last handle without [`close`](Self::close) never blocks: the flusher
/// thread writes and syncs what is queued on its own, then closes the file.
#[derive(Clone)]
pub struct AsyncLogWriter {
    handle: Arc<Handle>,
}

/// Held by every clone; the last one dropped tells the flusher to finish.
struct Handle {
    shared: Arc<Shared>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.closing = true;
        drop(state);
        self.shared.signal(Signal::Flag);
        self.shared.signal(Signal::Notify);
    }
}

impl fmt::Debug for AsyncLogWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.handle.shared.lock();
        f.debug_struct("AsyncLogWriter")
            .field("len", &state.encoder.offset())
            .field("durable_len", &state.durable_len)
            .field("closing", &state.closing)
            .field("poisoned", &state.failure.is_some())
            .finish_non_exhaustive()
    }
}

impl AsyncLogWriter {
    /// Options to configure a writer, then open it: see [`WriterOptions`].
    pub fn options() -> WriterOptions {
        WriterOptions::new()
    }

    /// Creates a new log at `path` with the default options: see
    /// [`WriterOptions::create`].
    pub async fn create(path: impl AsRef<Path>) -> Result<AsyncLogWriter, Error> {
        WriterOptions::new().create(path).await
    }

    /// Opens (or creates) the log at `path`, repairing a torn tail, with the default
    /// options: see [`WriterOptions::open`].
    pub async fn open(path: impl AsRef<Path>) -> Result<AsyncLogWriter, Error> {
        WriterOptions::new().open(path).await
    }

    /// Appends to an open file holding a valid log of `len` bytes, with the default
    /// options: see [`WriterOptions::from_file`].
    pub async fn from_file(file: tokio::fs::File, len: u64) -> Result<AsyncLogWriter, Error> {
        WriterOptions::new().from_file(file, len).await
    }

    /// Appends one record and resolves once it is durable: written and covered by a
    /// successful `fdatasync`. Returns where the record sits in the log.
    ///
    /// Waits first if the queue is full. Dropping the future before it resolves does
    /// not take the record back once it is queued; whether it is durable is then
    /// unknown until a later [`sync`](Self::sync).
    ///
    /// # Errors
    /// - [`Error::Io`]: a write or sync of bytes of this record failed. The record
    ///   may be in the file, wholly or in part (a record larger than
    ///   [`max_batch_bytes`](WriterOptions::max_batch_bytes) is written across
    ///   several batches); a part is cut when the log is reopened with
    ///   [`open`](Self::open). The writer is poisoned.
    /// - [`Error::Poisoned`]: an earlier batch failed before any byte of this record
    ///   was written; it is not in the file.
    /// - [`Error::Closed`]: [`close`](Self::close) was called.
    /// - [`Error::RecordTooLarge`]: the record is larger than
    ///   [`WriterOptions::max_record_bytes`] (64 MiB by default, what readers accept
    ///   by default).
    pub async fn append(&self, record: impl AsRef<[u8]>) -> Result<Position, Error> {
        let mut position = None;
        let done = self
            .submit(std::slice::from_ref(&record), true, |p| position = Some(p))
            .await?;
        self.wait(done).await?;
        Ok(position.expect("one record was encoded"))
    }

    /// Appends several records contiguously, in order, and resolves once all are
    /// durable. They share one write and one sync when they fit in `max_batch_bytes`
    /// (a sync already running when they arrive is not theirs).
    ///
    /// Errors as [`append`](Self::append); on an error none of the records is known to
    /// be durable. An empty batch returns at once.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), walcodec::Error> {
    /// # let dir = tempfile::tempdir()?;
    /// use walcodec::AsyncLogWriter;
    ///
    /// let log = AsyncLogWriter::create(dir.path().join("000001.log")).await?;
    /// // A transaction's records, next to each other in the log, durable together.
    /// let positions = log.append_batch([&b"begin"[..], b"put k v", b"commit"]).await?;
    /// assert_eq!(positions[1].start, positions[0].end);
    /// log.close().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn append_batch<I>(&self, records: I) -> Result<Vec<Position>, Error>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        let records: Vec<I::Item> = records.into_iter().collect();
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let mut positions = Vec::with_capacity(records.len());
        let done = self.submit(&records, true, |p| positions.push(p)).await?;
        self.wait(done).await?;
        Ok(positions)
    }

    /// Appends one record without waiting for it to be durable, like LevelDB's
    /// `WriteOptions::sync = false`: resolves as soon as the record is queued (waiting
    /// only for queue room). The flusher writes it to the file soon after, without a
    /// sync; it is durable once a later [`sync`](Self::sync), [`append`](Self::append)
    /// or [`close`](Self::close) resolves.
    ///
    /// Errors as [`append`](Self::append), except that a failure of the write of this
    /// very record surfaces at the next `sync`, `append` or `close`.
    pub async fn append_buffered(&self, record: impl AsRef<[u8]>) -> Result<Position, Error> {
        let mut position = None;
        self.submit(std::slice::from_ref(&record), false, |p| position = Some(p))
            .await?;
        Ok(position.expect("one record was encoded"))
    }

    /// Resolves once every record appended before this call is durable.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), walcodec::Error> {
    /// # let dir = tempfile::tempdir()?;
    /// use walcodec::AsyncLogWriter;
    ///
    /// let log = AsyncLogWriter::create(dir.path().join("000001.log")).await?;
    /// // Many records without waiting for each one's sync, then one sync for all.
    /// for i in 0..100u32 {
    ///     log.append_buffered(i.to_le_bytes()).await?;
    /// }
    /// log.sync().await?;
    /// assert_eq!(log.stats().records, 100);
    /// # log.close().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn sync(&self) -> Result<(), Error> {
        let shared = &self.handle.shared;
        let done = {
            let mut state = shared.lock();
            if let Some(refusal) = state.refusal() {
                return Err(refusal);
            }
            let end = state.encoder.offset();
            if end == state.durable_len {
                return Ok(());
            }
            let (tx, rx) = oneshot::channel();
            state.pending.push_back(Entry {
                end,
                records: 0,
                waiter: Some(tx),
            });
            state.pending_waiters += 1;
            let signal = state.flusher_signal(shared.max_batch_bytes);
            drop(state);
            shared.signal(signal);
            Some(rx)
        };
        self.wait(done).await
    }

    /// Writes and syncs everything queued, closes the file and returns the log's final
    /// length. Appends from any clone fail with [`Error::Closed`] from now on; those
    /// already queued complete. Calling `close` again returns the same length.
    ///
    /// In Pebble's WAL-sync [`format`](WriterOptions::format) the log ends with
    /// Pebble's EOF trailer, as its `LogWriter` closes a WAL: readers in Pebble's
    /// dialect stop there cleanly, and the length returned includes it.
    ///
    /// # Errors
    /// [`Error::Poisoned`] when a write or sync failed, before or during the close.
    pub async fn close(&self) -> Result<u64, Error> {
        let shared = &self.handle.shared;
        let closed = {
            let mut state = shared.lock();
            if let Some(failure) = &state.failure {
                return Err(failure.poisoned());
            }
            if state.finished {
                return Ok(state.written_len);
            }
            if !state.closing && state.encoder.format().is_wal_sync() {
                let State { encoder, buf, .. } = &mut *state;
                encoder.encode_eof_trailer(buf);
            }
            state.closing = true;
            let (tx, rx) = oneshot::channel();
            state.closers.push(tx);
            rx
        };
        // Appends waiting for queue room give up now; the flusher drains the rest.
        shared.queue.close();
        shared.signal(Signal::Flag);
        shared.signal(Signal::Notify);
        closed.await.unwrap_or_else(|_| Err(shared.refusal()))
    }

    /// The durable length of the log, as a [`watch::Receiver`]: it changes after each
    /// sync that makes more bytes durable, so a follower or a replicator waits on
    /// [`changed`](watch::Receiver::changed) instead of polling [`stats`](Self::stats).
    /// Every byte before the value is on disk; no byte after it is known to be.
    ///
    /// ```
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), walcodec::Error> {
    /// let dir = tempfile::tempdir()?;
    /// let log = walcodec::AsyncLogWriter::create(dir.path().join("000001.log")).await?;
    /// let mut durable = log.durable_end();
    /// let position = log.append(b"event").await?;
    /// durable.wait_for(|&end| end >= position.end).await.unwrap();
    /// # Ok(())
    /// # }
    /// ```
    pub fn durable_end(&self) -> watch::Receiver<u64> {
        self.handle.shared.durable_end.subscribe()
    }

    /// Counters of what the writer has done so far.
    pub fn stats(&self) -> WriterStats {
        let state = self.handle.shared.lock();
        let c = &state.counters;
        WriterStats {
            records: c.records,
            bytes: c.bytes,
            writes: c.writes,
            syncs: c.syncs,
            largest_batch_records: c.largest_batch_records,
            largest_batch_bytes: c.largest_batch_bytes,
            led_writes: c.led_writes,
            paced_rounds: c.paced_rounds,
            last_sync_latency: c.last_sync_latency,
            max_sync_latency: c.max_sync_latency,
            len: state.encoder.offset(),
            durable_len: state.durable_len,
        }
    }

    /// Queues `records` contiguously, reporting each position, and, when `sync`, returns
    /// the receiver its last record's waiter completes.
    async fn submit<R: AsRef<[u8]>>(
        &self,
        records: &[R],
        sync: bool,
        mut on_position: impl FnMut(Position),
    ) -> Result<Option<oneshot::Receiver<Result<(), Error>>>, Error> {
        let shared = &self.handle.shared;
        let mut estimate = 0usize;
        for record in records {
            let len = record.as_ref().len();
            if len > shared.max_record_bytes {
                return Err(Error::RecordTooLarge {
                    offset: shared.lock().encoder.offset(),
                    size: len as u64,
                    max: shared.max_record_bytes,
                });
            }
            estimate = estimate.saturating_add(shared.format.max_encoded_len(len));
        }
        // Room in the queue, capped so a record larger than the queue still fits alone.
        let permits = estimate.min(shared.max_queued_bytes);
        let mut state = loop {
            match shared.queue.acquire_many(permits as u32).await {
                // Returned by the flusher once the bytes are written, not on drop.
                Ok(permit) => permit.forget(),
                Err(_) => return Err(shared.refusal()),
            }
            // A streamed record holds the end of the log: wait behind it, with the
            // queue room given back for the stream's fragments. (The guard lives in
            // its own block so the future holds none across the wait.)
            let behind = shared.stream_done.notified();
            let mut behind = std::pin::pin!(behind);
            {
                let state = shared.lock();
                if let Some(refusal) = state.refusal() {
                    drop(state);
                    shared.queue.add_permits(permits);
                    return Err(refusal);
                }
                if !state.streaming {
                    break state;
                }
                behind.as_mut().enable();
            }
            shared.queue.add_permits(permits);
            behind.await;
        };
        let start = state.encoder.offset();
        let durable_len = state.durable_len;
        let State { encoder, buf, .. } = &mut *state;
        // Pebble's WAL-sync format: each fragment promises what is durable now, as
        // Pebble's `LogWriter` takes its synced offset when it emits a fragment.
        encoder.set_synced_offset(durable_len);
        for record in records {
            on_position(encoder.encode_record(record.as_ref(), buf));
        }
        let end = encoder.offset();
        let kept = ((end - start) as usize).min(permits);
        state.queued_permits += kept;
        let (waiter, done) = if sync {
            let (tx, rx) = oneshot::channel();
            state.pending_waiters += 1;
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        state.pending.push_back(Entry {
            end,
            records: records.len() as u64,
            waiter,
        });
        if sync && state.may_lead(shared) && flush::can_block_here() {
            let mut taken = Vec::new();
            let batch = state.take_lead(shared.max_batch_bytes, &mut taken);
            drop(state);
            if permits > kept {
                shared.queue.add_permits(permits - kept);
            }
            flush::lead(shared, batch, taken);
            return Ok(done);
        }
        let signal = state.flusher_signal(shared.max_batch_bytes);
        drop(state);
        if permits > kept {
            shared.queue.add_permits(permits - kept);
        }
        shared.signal(signal);
        Ok(done)
    }

    async fn wait(&self, done: Option<oneshot::Receiver<Result<(), Error>>>) -> Result<(), Error> {
        match done {
            None => Ok(()),
            Some(rx) => rx
                .await
                .unwrap_or_else(|_| Err(self.handle.shared.refusal())),
        }
    }
}

/// What a writer has done, from [`AsyncLogWriter::stats`].
///
/// A *batch* is one round of the flusher that wrote bytes: one write, then one sync
/// unless every record in it was appended with
/// [`append_buffered`](AsyncLogWriter::append_buffered).
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriterStats {
    /// Records written to the file.
    pub records: u64,
    /// Bytes written to the file (headers and trailers included).
    pub bytes: u64,
    /// Batches written.
    pub writes: u64,
    /// Syncs (`fdatasync`) completed.
    pub syncs: u64,
    /// Records in the largest batch.
    pub largest_batch_records: u64,
    /// Bytes in the largest batch.
    pub largest_batch_bytes: u64,
    /// Batches an appending task wrote itself (see [`WriterOptions::leader_writes`]);
    /// the flusher thread wrote the others.
    pub led_writes: u64,
    /// Rounds the flusher held back to keep syncs
    /// [`min_sync_interval`](WriterOptions::min_sync_interval) apart, each counted
    /// once, when it starts to wait: what shows the pacing at work (records waiting
    /// for company), where the other counters only show its result.
    pub paced_rounds: u64,
    /// How long the last sync took.
    pub last_sync_latency: Option<Duration>,
    /// How long the slowest sync took.
    pub max_sync_latency: Option<Duration>,
    /// Length of the log including queued records: where the next record goes.
    pub len: u64,
    /// Length of the log known to be durable.
    pub durable_len: u64,
}

impl WriterStats {
    /// Records per batch, on average (0 before the first batch).
    pub fn average_batch_records(&self) -> f64 {
        ratio(self.records, self.writes)
    }

    /// Bytes per batch, on average (0 before the first batch).
    pub fn average_batch_bytes(&self) -> f64 {
        ratio(self.bytes, self.writes)
    }

    /// Syncs per record written: what group commit drives below 1.
    pub fn syncs_per_record(&self) -> f64 {
        ratio(self.syncs, self.records)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the flusher; only the flusher ever waits on it.
    wake: Condvar,
    /// Raised when something is queued while the flusher spins.
    queued: AtomicBool,
    /// How long the flusher watches for new work before it sleeps.
    idle_spin: Duration,
    /// Queue room, in encoded bytes.
    queue: Semaphore,
    max_batch_bytes: usize,
    max_queued_bytes: usize,
    min_sync_interval: Option<Duration>,
    /// Step by which the file is grown ahead of the log; 0 when it is not.
    preallocate: u64,
    max_record_bytes: usize,
    /// The format records are encoded in (for estimates of their encoded size).
    format: crate::codec::encoder::LogFormat,
    /// See [`WriterOptions::stream_stall_timeout`].
    stream_stall_timeout: Duration,
    /// Held by a streamed append for its whole record: one at a time.
    stream_gate: tokio::sync::Mutex<()>,
    /// Wakes the appends that waited behind a streamed record.
    stream_done: tokio::sync::Notify,
    /// The durable length, published after each sync for [`AsyncLogWriter::durable_end`].
    durable_end: watch::Sender<u64>,
    /// See [`WriterOptions::leader_writes`].
    leader_writes: bool,
    /// The file: used by the flusher thread, or by an append that leads.
    io: Mutex<flush::Io>,
    /// Events and metrics (features `tracing`, `metrics`).
    observer: WriterObserver,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock; if something did, the state is still
        // consistent enough to report a failure from.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Why calls are refused now that a waiter was dropped or the queue closed.
    fn refusal(&self) -> Error {
        self.lock().refusal().unwrap_or(Error::Closed)
    }
}

/// What the flusher is doing, so appenders wake it only when it would act.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flusher {
    /// Writing or about to look at the queue: no wake needed.
    Busy,
    /// Watching [`Shared::queued`] for a short while before sleeping.
    Spinning,
    /// Asleep on [`Shared::wake`], waiting for work.
    Idle,
    /// Holding back a sync for `min_sync_interval`: wake it for a full batch only.
    Pacing,
}

/// What an appender does to get the flusher's attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Signal {
    /// Nothing: the flusher will look at the queue anyway.
    None,
    /// Raise [`Shared::queued`]: the flusher is spinning on it.
    Flag,
    /// Notify [`Shared::wake`]: the flusher is asleep.
    Notify,
}

impl Shared {
    fn signal(&self, signal: Signal) {
        match signal {
            Signal::None => {}
            Signal::Flag => self.queued.store(true, Ordering::Release),
            Signal::Notify => self.wake.notify_one(),
        }
    }
}

/// A group of records (or a bare sync request) waiting to be written.
struct Entry {
    /// Log offset just past the group's last byte.
    end: u64,
    /// Records in the group (0 for a sync request).
    records: u64,
    /// Completed by the sync that covers `end`; `None` for buffered appends.
    waiter: Option<oneshot::Sender<Result<(), Error>>>,
}

struct Failure {
    /// Durable length when the failure happened.
    offset: u64,
    error: Arc<io::Error>,
}

impl Failure {
    fn poisoned(&self) -> Error {
        Error::Poisoned {
            offset: self.offset,
            source: Arc::clone(&self.error),
        }
    }
}

#[derive(Default)]
struct Counters {
    records: u64,
    bytes: u64,
    writes: u64,
    syncs: u64,
    largest_batch_records: u64,
    largest_batch_bytes: u64,
    led_writes: u64,
    paced_rounds: u64,
    last_sync_latency: Option<Duration>,
    max_sync_latency: Option<Duration>,
}

struct State {
    encoder: LogEncoder,
    /// Encoded bytes not yet taken by the flusher; `buf[0]` is at log offset `buf_start`.
    buf: BytesMut,
    buf_start: u64,
    /// An empty buffer to swap in for `buf` when a batch takes all of it.
    spare: BytesMut,
    /// In order of `end`, which only grows.
    pending: VecDeque<Entry>,
    /// Entries in `pending` with a waiter: a sync is owed.
    pending_waiters: usize,
    /// Queue permits held by bytes in `buf` or in the flusher's hands.
    queued_permits: usize,
    written_len: u64,
    durable_len: u64,
    flusher: Flusher,
    /// No more appends: `close` was called or the last handle dropped.
    closing: bool,
    /// The flusher has exited.
    finished: bool,
    closers: Vec<oneshot::Sender<Result<u64, Error>>>,
    failure: Option<Failure>,
    counters: Counters,
    /// A streamed record holds the end of the log: other records wait.
    streaming: bool,
    /// An append writes a batch itself (see [`flush`]); the flusher sleeps meanwhile.
    leading: bool,
    /// When the last sync began (for `min_sync_interval`).
    last_sync_start: Option<Instant>,
    /// Entries with a waiter in the last batch taken: what tells a lone appender
    /// from a group (see [`State::may_lead`]).
    last_batch_waiters: usize,
}

impl State {
    fn new(len: u64, format: crate::codec::encoder::LogFormat) -> State {
        State {
            encoder: LogEncoder::builder().format(format).offset(len).build(),
            buf: BytesMut::new(),
            buf_start: len,
            spare: BytesMut::new(),
            pending: VecDeque::new(),
            pending_waiters: 0,
            queued_permits: 0,
            written_len: len,
            durable_len: len,
            // Its first look at the queue needs no wake-up.
            flusher: Flusher::Idle,
            closing: false,
            finished: false,
            closers: Vec::new(),
            failure: None,
            counters: Counters::default(),
            streaming: false,
            leading: false,
            last_sync_start: None,
            last_batch_waiters: 0,
        }
    }

    fn refusal(&self) -> Option<Error> {
        match &self.failure {
            Some(failure) => Some(failure.poisoned()),
            None if self.closing => Some(Error::Closed),
            None => None,
        }
    }

    /// How an appender that just queued something tells the flusher, if it must;
    /// marks the flusher busy then, so that the appenders behind do not tell it again.
    fn flusher_signal(&mut self, max_batch_bytes: usize) -> Signal {
        if self.leading {
            // The leader hands what is left to the flusher when it is done.
            return Signal::None;
        }
        let signal = match self.flusher {
            Flusher::Busy => Signal::None,
            Flusher::Spinning => Signal::Flag,
            Flusher::Idle => Signal::Notify,
            Flusher::Pacing if self.buf.len() >= max_batch_bytes => Signal::Notify,
            Flusher::Pacing => Signal::None,
        };
        if signal != Signal::None {
            self.flusher = Flusher::Busy;
        }
        signal
    }

    fn has_work(&self) -> bool {
        !self.buf.is_empty() || self.pending_waiters > 0
    }
}
