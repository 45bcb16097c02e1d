//! [`WriterOptions`]: how an [`AsyncLogWriter`] batches, syncs, preallocates and
//! names itself, and the ways to open one (create, open and recover, from a file, from a
//! storage seam).

use super::*;

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
    pub(super) max_batch_bytes: usize,
    pub(super) max_queued_bytes: usize,
    pub(super) min_sync_interval: Option<Duration>,
    pub(super) idle_spin: Duration,
    pub(super) preallocate: u64,
    pub(super) max_record_bytes: usize,
    pub(super) format: crate::codec::encoder::LogFormat,
    pub(super) stream_stall_timeout: Duration,
    pub(super) leader_writes: bool,
    pub(super) name: String,
    pub(super) slow_sync_threshold: Duration,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            max_batch_bytes: WriterOptions::DEFAULT_MAX_BATCH_BYTES,
            max_queued_bytes: WriterOptions::DEFAULT_MAX_QUEUED_BYTES,
            min_sync_interval: None,
            idle_spin: WriterOptions::DEFAULT_IDLE_SPIN,
            preallocate: WriterOptions::DEFAULT_PREALLOCATE_BYTES,
            max_record_bytes: crate::decoder::LogDecoder::DEFAULT_MAX_RECORD_BYTES,
            format: crate::codec::encoder::LogFormat::leveldb(),
            stream_stall_timeout: WriterOptions::DEFAULT_STREAM_STALL_TIMEOUT,
            leader_writes: true,
            name: String::new(),
            slow_sync_threshold: WriterOptions::DEFAULT_SLOW_SYNC_THRESHOLD,
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
    /// Default of [`max_batch_bytes`](Self::max_batch_bytes), the cap on the bytes one
    /// write + sync covers: 1 MiB.
    pub const DEFAULT_MAX_BATCH_BYTES: usize = 1024 * 1024;

    /// Default of [`max_queued_bytes`](Self::max_queued_bytes), the bound on encoded
    /// bytes queued and not yet written: 4 MiB.
    pub const DEFAULT_MAX_QUEUED_BYTES: usize = 4 * 1024 * 1024;

    /// Default step of [`preallocate`](Self::preallocate): 1 MiB.
    pub const DEFAULT_PREALLOCATE_BYTES: u64 = 1 << 20;

    /// Default of [`idle_spin`](Self::idle_spin), the time the flusher watches for new
    /// work before sleeping: 50 µs.
    pub const DEFAULT_IDLE_SPIN: Duration = Duration::from_micros(50);

    /// Default of [`slow_sync_threshold`](Self::slow_sync_threshold), the sync latency
    /// from which feature `tracing` warns of a slow sync: 1 s.
    pub const DEFAULT_SLOW_SYNC_THRESHOLD: Duration = Duration::from_secs(1);

    /// Default of [`stream_stall_timeout`](Self::stream_stall_timeout): 10 s.
    pub const DEFAULT_STREAM_STALL_TIMEOUT: Duration = Duration::from_secs(10);

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
    /// [`DEFAULT_PREALLOCATE_BYTES`](Self::DEFAULT_PREALLOCATE_BYTES), 1 MiB; `preallocate(0)` turns it off, and the
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
    /// [`LogDecoder::DEFAULT_MAX_RECORD_BYTES`](crate::decoder::LogDecoder::DEFAULT_MAX_RECORD_BYTES), 64 MiB): a larger one fails with
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
    /// (default [`DEFAULT_STREAM_STALL_TIMEOUT`](Self::DEFAULT_STREAM_STALL_TIMEOUT), 10 s). Other appends wait behind a
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
    /// [`DEFAULT_SLOW_SYNC_THRESHOLD`](Self::DEFAULT_SLOW_SYNC_THRESHOLD), 1 s). Without the feature it has no effect.
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
        (self
            .max_queued_bytes
            .max(WriterOptions::DEFAULT_MAX_QUEUED_BYTES)
            + self
                .max_batch_bytes
                .max(WriterOptions::DEFAULT_MAX_BATCH_BYTES)
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
