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

pub use storage::{FileStorage, Storage};
pub use stream::DEFAULT_STREAM_STALL_TIMEOUT;

use crate::codec::encoder::LogEncoder;
use crate::decoder::DEFAULT_MAX_RECORD_BYTES;
use crate::error::Error;
use crate::format::Position;
use crate::observe;
use crate::reader::repair::recover_file;
use report::WriterObserver;

/// Default cap on the bytes one write + sync covers: 1 MiB.
pub const DEFAULT_MAX_BATCH_BYTES: usize = 1024 * 1024;

/// Default bound on encoded bytes queued and not yet written: 4 MiB.
pub const DEFAULT_MAX_QUEUED_BYTES: usize = 4 * 1024 * 1024;

/// Default step of [`WriterOptions::preallocate`]: 1 MiB.
pub const DEFAULT_PREALLOCATE_BYTES: u64 = 1 << 20;

/// Default time the flusher watches for new work before sleeping: 50 µs.
pub const DEFAULT_IDLE_SPIN: Duration = Duration::from_micros(50);

/// Default sync latency from which feature `tracing` warns of a slow sync: 1 s.
pub const DEFAULT_SLOW_SYNC_THRESHOLD: Duration = Duration::from_secs(1);

/// Configures an [`AsyncLogWriter`], then opens it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), walcodec::Error> {
/// use std::time::Duration;
/// use walcodec::AsyncLogWriter;
///
/// let dir = tempfile::tempdir()?;
/// let log = AsyncLogWriter::options()
///     .max_batch_bytes(256 * 1024)
///     .min_sync_interval(Duration::from_micros(200))
///     .open(dir.path().join("000001.log"))
///     .await?;
/// log.append(b"configured").await?;
/// log.close().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct WriterOptions {
    max_batch_bytes: usize,
    max_queued_bytes: usize,
    min_sync_interval: Option<Duration>,
    idle_spin: Duration,
    preallocate: u64,
    max_record_bytes: usize,
    format: crate::codec::encoder::LogFormat,
    stream_stall_timeout: Duration,
    leader_writes: bool,
    name: String,
    slow_sync_threshold: Duration,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            max_batch_bytes: DEFAULT_MAX_BATCH_BYTES,
            max_queued_bytes: DEFAULT_MAX_QUEUED_BYTES,
            min_sync_interval: None,
            idle_spin: DEFAULT_IDLE_SPIN,
            preallocate: DEFAULT_PREALLOCATE_BYTES,
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
            format: crate::codec::encoder::LogFormat::leveldb(),
            stream_stall_timeout: DEFAULT_STREAM_STALL_TIMEOUT,
            leader_writes: true,
            name: String::new(),
            slow_sync_threshold: DEFAULT_SLOW_SYNC_THRESHOLD,
        }
    }
}

/// What the setters return, so `LogDirOptions::writer(WriterOptions::new().idle_spin(..))`
/// takes a chain of setters without a `.clone()`.
impl From<&mut WriterOptions> for WriterOptions {
    fn from(options: &mut WriterOptions) -> WriterOptions {
        options.clone()
    }
}

/// A copy of shared options.
impl From<&WriterOptions> for WriterOptions {
    fn from(options: &WriterOptions) -> WriterOptions {
        options.clone()
    }
}

impl WriterOptions {
    /// The defaults: 1 MiB batches, 4 MiB of queue, no minimum sync interval, 50 µs of
    /// idle spin, 1 MiB of preallocation.
    pub fn new() -> WriterOptions {
        WriterOptions::default()
    }

    /// The most bytes one write + sync covers (default 1 MiB; at least 1). Bytes
    /// beyond it wait for the next round; a record larger than the cap is written
    /// across several rounds and released by the sync that covers its end. A round
    /// that cannot take everything queued ends on a 4 KiB boundary of the file (the
    /// next one, for a cap below 4 KiB), so a crash between rounds cuts the log
    /// where storage itself could, which readers take for a torn tail.
    pub fn max_batch_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_batch_bytes = bytes.max(1);
        self
    }

    /// Bound on encoded bytes accepted but not yet written (default 4 MiB; between 1
    /// and `u32::MAX`). An append that does not fit waits, in arrival order, so memory
    /// stays bounded under any load. A single record larger than the bound waits for
    /// the whole queue and is then let through alone.
    pub fn max_queued_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_queued_bytes = bytes.clamp(1, u32::MAX as usize);
        self
    }

    /// Start syncs at least `interval` apart (default: none, sync as soon as the
    /// previous sync ends). Waiting lets more records join each sync: fewer syncs, at
    /// the price of up to `interval` more latency. A round is never held back past the
    /// interval, nor when a full batch is waiting or the writer is closing.
    /// `Duration::ZERO` turns it off.
    pub fn min_sync_interval(&mut self, interval: Duration) -> &mut Self {
        self.min_sync_interval = (!interval.is_zero()).then_some(interval);
        self
    }

    /// How long the flusher watches for new work, yielding its CPU, before it goes to
    /// sleep (default 50 µs; `Duration::ZERO` sleeps at once). A task that gets its
    /// acknowledgement and appends again within this time does not pay a thread
    /// wake-up: this is what keeps a lone appender's latency near a bare write + sync,
    /// for at most this much CPU time after each batch.
    pub fn idle_spin(&mut self, spin: Duration) -> &mut Self {
        self.idle_spin = spin;
        self
    }

    /// Whether an append that finds the writer idle writes and syncs its record
    /// itself (default: on). Nothing is queued or in flight then, so the task does
    /// what the flusher thread would, on its own thread, inside
    /// [`tokio::task::block_in_place`] (the runtime moves its other tasks to another
    /// thread meanwhile): a lone appender's round trip is one write and one sync, with
    /// no hand-off to the flusher and back (each costs tens of microseconds on a VM).
    /// Appends that arrive during that sync queue up, and the flusher writes them
    /// together as usual, so group commit is unchanged under load. LevelDB's and
    /// RocksDB's write paths work the same way: the first writer in line writes.
    ///
    /// Only on a multi-thread tokio runtime, and not with
    /// [`min_sync_interval`](Self::min_sync_interval); elsewhere every batch goes
    /// through the flusher. Turn it off to keep all file I/O on the flusher thread.
    /// [`WriterStats::led_writes`] counts the batches written this way.
    pub fn leader_writes(&mut self, on: bool) -> &mut Self {
        self.leader_writes = on;
        self
    }

    /// Grow the file ahead of the log, `bytes` at a time, with zeros that are written
    /// and synced before any record lands in them (default
    /// [`DEFAULT_PREALLOCATE_BYTES`], 1 MiB; `preallocate(0)` turns it off, and the
    /// file then grows with each write).
    ///
    /// Why: on a growing file every `fdatasync` must also commit the new file size
    /// (a filesystem journal commit); overwriting space that already exists only
    /// flushes data, which makes each sync markedly cheaper: durable appends of
    /// 100-byte records ran at 1.3x to 1.5x the appends/s of a growing file from one
    /// task and 1.6x to 4x from 64 (`benches/preallocate.rs`, paired rounds; the
    /// README's Performance section has the figures). okaywal (1 MiB segments
    /// written ahead), RocksDB and Pebble (`fallocate` of the WAL, recycled logs) do
    /// the same. The cost: a file takes up to one step more space on disk while the
    /// writer is open, and a step's zeros are written and synced by the append that
    /// first needs them (the first step when the file is opened).
    ///
    /// The zeros are a valid log tail: LevelDB's reader and
    /// [`LogDecoder`](crate::LogDecoder) skip zero fill without reporting it,
    /// [`AsyncLogWriter::close`] (and dropping the last handle) cuts the file back to
    /// the log's length, and [`open`](Self::open) cuts what a crash leaves behind,
    /// a record cut short inside the zeros included. A reader that opens the file
    /// after a crash (before a writer reopens it) reads the zeros as the log's clean
    /// end; `walcodec verify` says `tail: zeros`.
    ///
    /// A [`LogTailer`](crate::LogTailer) follows a live preallocated file, in this
    /// process or another: the zeros past the last record are space the writer has
    /// not reached, so it waits at that record's end and reads the records written
    /// there once they are. `walcodec verify` on the live file notes that its
    /// result is for a live log (a read that overtakes the writer may see a
    /// record's later fragments but not its start).
    ///
    /// A value below [`BLOCK_SIZE`](crate::BLOCK_SIZE) is rounded up to it. A
    /// [`LogDir`](crate::LogDir) preallocates at most its segment size at a time.
    pub fn preallocate(&mut self, bytes: u64) -> &mut Self {
        self.preallocate = if bytes == 0 {
            0
        } else {
            bytes.max(crate::format::BLOCK_SIZE as u64)
        };
        self
    }

    /// The largest record an append accepts (default
    /// [`DEFAULT_MAX_RECORD_BYTES`], 64 MiB): a larger one fails with
    /// [`Error::RecordTooLarge`] before anything is queued. [`open`](Self::open)
    /// reads the existing log with the same bound. Keep it at or below what the
    /// log's readers accept ([`LogDecoderBuilder::max_record_bytes`](crate::LogDecoderBuilder::max_record_bytes)).
    pub fn max_record_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_record_bytes = bytes;
        self
    }

    /// The step set by [`preallocate`](Self::preallocate) (0: off).
    pub(crate) fn preallocate_in_use(&self) -> u64 {
        self.preallocate
    }

    /// The format set by [`format`](Self::format).
    pub(crate) fn format_in_use(&self) -> crate::codec::encoder::LogFormat {
        self.format
    }

    /// The format records are written in (default LevelDB's): e.g.
    /// `LogFormat::leveldb().recyclable(log_number)` for a RocksDB recyclable WAL, or
    /// `LogFormat::pebble(log_number)` for Pebble's WAL-sync format (each fragment
    /// carries the writer's durable length when it was encoded; `close` writes the
    /// EOF trailer); see [`LogFormat`](crate::LogFormat). With a RocksDB format, [`open`](Self::open)
    /// reads an existing log in RocksDB's dialect with the format's log number and
    /// appends after its live records (see there).
    pub fn format(&mut self, format: crate::codec::encoder::LogFormat) -> &mut Self {
        self.format = format;
        self
    }

    /// How long a streamed append ([`AsyncLogWriter::append_stream`]) waits for its
    /// source to deliver each fragment's bytes (up to 32 KiB) before it fails
    /// (default [`DEFAULT_STREAM_STALL_TIMEOUT`], 10 s). Other appends wait behind a
    /// streamed record, so this bounds how long a stalled source holds them up.
    pub fn stream_stall_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.stream_stall_timeout = timeout;
        self
    }

    /// The writer's name (default empty): the `log` label of its metrics (feature
    /// `metrics`) and the `log` field of its events (feature `tracing`), so one
    /// process's logs can be told apart. A [`LogDir`](crate::LogDir) names its
    /// writers after itself ([`LogDirOptions::name`](crate::LogDirOptions::name))
    /// unless this is set.
    pub fn name(&mut self, name: impl Into<String>) -> &mut Self {
        self.name = name.into();
        self
    }

    /// The name set by [`name`](Self::name).
    pub(crate) fn name_in_use(&self) -> &str {
        &self.name
    }

    /// With feature `tracing`, a sync that takes this long or longer is a WARN
    /// event `slow log sync` with its latency (default
    /// [`DEFAULT_SLOW_SYNC_THRESHOLD`], 1 s). Without the feature it has no effect.
    pub fn slow_sync_threshold(&mut self, threshold: Duration) -> &mut Self {
        self.slow_sync_threshold = threshold;
        self
    }

    /// Creates a new, empty log at `path` (failing if the file exists) and syncs its
    /// directory so the new name survives a crash.
    pub async fn create(&self, path: impl AsRef<Path>) -> Result<AsyncLogWriter, Error> {
        let path = path.as_ref();
        observe::within(observe::open_span(path), self.create_at(path)).await
    }

    async fn create_at(&self, path: &Path) -> Result<AsyncLogWriter, Error> {
        let file = tokio::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .await?;
        sync_parent_dir(path).await?;
        self.from_file(file, 0).await
    }

    /// Opens the log at `path` for appending, creating it when it does not exist.
    ///
    /// An existing log is scanned first, and a torn tail or trailing zero fill after
    /// its last complete record is cut off durably (see
    /// [`repair_log`](crate::repair_log)), so records appended now are not hidden
    /// behind garbage. The encoder resumes at the repaired length, as LevelDB's writer
    /// does (`len % 32768` into the block).
    ///
    /// In a RocksDB [`format`](Self::format) the log is read in RocksDB's dialect
    /// with the format's log number, so in a recycled WAL the bytes left from the
    /// file's earlier use (fragments of another log number) are where the log ends,
    /// and are cut like a torn tail. Appends go on as RocksDB's writer would.
    ///
    /// # Errors
    /// Damage before the tail ([`Error::Corruption`]) is returned and the file is left
    /// alone: appending after it would bury good records behind bad ones. So is a
    /// log written in another format than this writer's (recyclable or legacy
    /// headers, compressed or not), as [`Error::Io`] with
    /// [`io::ErrorKind::InvalidInput`]: its readers would take the new records for
    /// damage or for the end of the log. And a recycled file with no record of the
    /// format's log number before another log's fragments: a file not yet written
    /// in its new use and a wrong log number look the same, and cutting on a wrong
    /// number would lose a whole log.
    pub async fn open(&self, path: impl AsRef<Path>) -> Result<AsyncLogWriter, Error> {
        let path = path.as_ref();
        observe::within(observe::open_span(path), self.open_at(path)).await
    }

    async fn open_at(&self, path: &Path) -> Result<AsyncLogWriter, Error> {
        let created = tokio::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .await;
        match created {
            Ok(file) => {
                sync_parent_dir(path).await?;
                self.from_file(file, 0).await
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let mut file = tokio::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(path)
                    .await?;
                let scan = recover_file(
                    &mut file,
                    self.max_record_bytes,
                    self.unsynced_window(),
                    self.format,
                )
                .await?;
                crate::reader::repair::report_tail_cut(&self.name, path, &scan);
                observe::opened(path, scan.valid_len);
                self.from_file(file, scan.valid_len).await
            }
            Err(e) => Err(e.into()),
        }
    }

    /// What a crash or power cut can leave after the last sync: at most the queue
    /// and the batch being written (with a writer's defaults at least), plus the
    /// block they end in.
    pub(crate) fn unsynced_window(&self) -> u64 {
        (self.max_queued_bytes.max(DEFAULT_MAX_QUEUED_BYTES)
            + self.max_batch_bytes.max(DEFAULT_MAX_BATCH_BYTES)
            + crate::format::BLOCK_SIZE) as u64
    }

    /// Appends to an open file that holds a valid log of exactly `len` bytes (repair
    /// its tail first, e.g. with [`repair_log`](crate::repair_log)). The file must be
    /// writable; the writer writes from offset `len` on.
    ///
    /// # Errors
    /// [`Error::Io`] with [`io::ErrorKind::InvalidInput`] when the file is not `len`
    /// bytes long: records appended after unknown bytes, or at an offset the encoder
    /// does not expect, would not read back.
    pub async fn from_file(
        &self,
        file: tokio::fs::File,
        len: u64,
    ) -> Result<AsyncLogWriter, Error> {
        let mut file = file.into_std().await;
        let step = self.preallocate;
        let (storage, allocated) = tokio::task::spawn_blocking(move || -> io::Result<_> {
            let actual = file.metadata()?.len();
            if actual != len {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "log file is {actual} bytes, not the {len} given; \
                         repair its tail before appending"
                    ),
                ));
            }
            file.seek(SeekFrom::Start(len))?;
            let mut storage = FileStorage::new(file);
            // The first step before the first append, so no append waits for it.
            let mut allocated = len;
            if let Err(e) = flush::grow(&mut storage, &mut allocated, len + 1, step) {
                let _ = storage.truncate(len);
                return Err(e);
            }
            Ok((storage, allocated))
        })
        .await
        .map_err(io::Error::other)??;
        self.start(Box::new(storage), len, allocated)
    }

    /// Starts a writer on any [`Storage`] holding a valid log of `len` bytes. A testing
    /// hook (fault injection), not a stable API.
    #[doc(hidden)]
    pub fn from_storage(
        &self,
        storage: Box<dyn Storage>,
        len: u64,
    ) -> Result<AsyncLogWriter, Error> {
        self.start(storage, len, len)
    }

    /// Starts a writer at the start of a reused file of `allocated` bytes, written
    /// over from offset 0, whose old bytes readers take for the end of the log (a
    /// recyclable format with a new log number: see `LogDir`'s recycling). Closing
    /// cuts the file to the log's length.
    pub(crate) fn start_on_reused(
        &self,
        storage: Box<dyn Storage>,
        allocated: u64,
    ) -> Result<AsyncLogWriter, Error> {
        self.start(storage, 0, allocated)
    }

    /// Starts the flusher on `storage`, which holds a log of `len` bytes and is
    /// `allocated` bytes long (more when preallocated).
    fn start(
        &self,
        storage: Box<dyn Storage>,
        len: u64,
        allocated: u64,
    ) -> Result<AsyncLogWriter, Error> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::new(len, self.format)),
            wake: Condvar::new(),
            queued: AtomicBool::new(false),
            idle_spin: self.idle_spin,
            queue: Semaphore::new(self.max_queued_bytes),
            max_batch_bytes: self.max_batch_bytes,
            max_queued_bytes: self.max_queued_bytes,
            min_sync_interval: self.min_sync_interval,
            preallocate: self.preallocate,
            max_record_bytes: self.max_record_bytes,
            format: self.format,
            stream_stall_timeout: self.stream_stall_timeout,
            stream_gate: tokio::sync::Mutex::new(()),
            stream_done: tokio::sync::Notify::new(),
            durable_end: watch::channel(len).0,
            leader_writes: self.leader_writes,
            io: Mutex::new(flush::Io { storage, allocated }),
            observer: WriterObserver::new(&self.name, self.slow_sync_threshold),
        });
        let flusher = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("walcodec-flusher".into())
            .spawn(move || flush::run_flusher(flusher))?;
        Ok(AsyncLogWriter {
            handle: Arc::new(Handle { shared }),
        })
    }
}

/// Makes a new directory entry durable: the file's own sync does not cover its name.
async fn sync_parent_dir(path: &Path) -> Result<(), Error> {
    #[cfg(unix)]
    {
        let dir = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => std::path::PathBuf::from("."),
        };
        tokio::task::spawn_blocking(move || std::fs::File::open(dir)?.sync_all())
            .await
            .map_err(io::Error::other)??;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

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
