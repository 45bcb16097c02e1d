//! [`LogDir`]: a log that lives for months, as numbered segment files: appends,
//! rotation, truncation, identity. Its options and opening are in `options.rs`, purges
//! and retention in `retention.rs`, recovery, reading and replication in their own files.

pub(crate) mod dialect;
pub(crate) mod fs;
pub(crate) mod history;
mod hold;
mod listing;
pub(crate) mod lock;
mod options;
pub(crate) mod quorum;
mod reader;
pub(crate) mod recovery;
mod recycle;
pub(crate) mod report;
mod retention;
pub(crate) mod segment;
pub(crate) mod ship;
mod truncate;
mod wake;

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{watch, RwLock, RwLockReadGuard};

pub use crate::log_id::LogId;
pub use crate::position::{LogPosition, ParsePositionError};
pub use fs::{DirStorage, OsDirStorage};
pub use history::{Epoch, History};
pub use hold::RetentionHold;
pub use listing::{SegmentInfo, SegmentList};
pub use options::LogDirOptions;
pub use reader::{DirReader, DirRecord};

use fs::blocking;
use segment::segment_path;

use crate::error::Error;
use crate::writer::AsyncLogWriter;
use report::DirObserver;

/// [`LogDirOptions::DEFAULT_WAKE_INTERVAL`](crate::LogDirOptions::DEFAULT_WAKE_INTERVAL) (1 ms) at the crate's root, where it
/// was first specified.
pub const DEFAULT_WAKE_INTERVAL: Duration = LogDirOptions::DEFAULT_WAKE_INTERVAL;

/// A durable log in a directory of numbered segment files: append with group
/// commit from many tasks, rotate, purge, truncate, read and follow across
/// segments. Cheap to clone; all clones append to the same log.
///
/// A directory holds segments `000001.log`, `000002.log`, … (at least six digits,
/// as LevelDB and RocksDB name their logs). Each is an ordinary log file that any
/// LevelDB-format reader reads as it is (in the dialect of
/// [`LogDirOptions::dialect`](crate::LogDirOptions::dialect): with `Dialect::Pebble`, each is Pebble's WAL
/// `NNNNNN.log`); a record never spans two segments. The
/// last segment is *active*: an [`AsyncLogWriter`](crate::AsyncLogWriter) appends to it with group commit.
/// The others are *sealed*: complete, synced, never written again.
///
/// ```text
///  000004.log   000005.log   000006.log   000007.log  LOCK
///  sealed       sealed       sealed       active  <- appends
///  ^ purge_before drops whole sealed segments from the front
/// ```
///
/// A [`LogPosition`] (segment, offset) names a point in the whole log;
/// [`append`](LogDir::append) returns the one just past its record, a checkpoint
/// that [`read_from`](LogDir::read_from) resumes after.
///
/// ```
/// # #[tokio::main]
/// # async fn main() -> Result<(), walcodec::Error> {
/// use walcodec::{LogDir, LogPosition};
///
/// let dir = tempfile::tempdir()?;
/// let log = LogDir::builder().max_segment_bytes(4096).open(dir.path()).await?;
/// let mut checkpoint = LogPosition::START;
/// for i in 0..100 {
///     let end = log.append(format!("event {i}")).await?; // durable now
///     if i == 49 {
///         checkpoint = end;
///     }
/// }
/// // Everything up to the checkpoint is applied elsewhere: drop the whole segments
/// // before it, then replay what follows it.
/// log.purge_before(checkpoint).await?;
/// let mut reader = log.read_from(checkpoint)?;
/// let first = reader.next_record().await.unwrap()?;
/// assert_eq!(first.data, "event 50");
/// log.close().await?;
/// # Ok(())
/// # }
/// ```
///
/// # Rotation
///
/// An append that would push the active segment past
/// [`max_segment_bytes`](crate::LogDirOptions::max_segment_bytes) (counting the most its
/// record can encode to) first seals it: appends already in it finish, the writer
/// closes (a final sync), the next segment is created, synced and its directory
/// entry synced, and only then do appends go on, in the order they arrived. A lone
/// record larger than the limit gets a segment of its own.
///
/// # Durability
///
/// `Ok` means on disk: the record is covered by an `fdatasync`, the segment's
/// directory entry by a directory sync, a purge's deletions by a directory sync. A
/// truncation is first decided by a durable `HISTORY` file that names it, which
/// `open` finishes, so a crash leaves the log before or after it, never in between.
///
/// # Identity and history
///
/// Every log has a [`log_id`](Self::log_id) and a [`history`](Self::history) of
/// epochs, kept in its `HISTORY` file (see [`History`]), so that another log, or
/// a fork of this one, can be told from a copy.
#[derive(Clone)]
pub struct LogDir {
    inner: Arc<Inner>,
}

impl fmt::Debug for LogDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogDir")
            .field("dir", &self.inner.dir)
            .field("end", &*self.inner.end.borrow())
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for Inner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inner")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    dir: PathBuf,
    options: LogDirOptions,
    /// The active segment. Appends hold it shared until their record is durable;
    /// rotation and truncation hold it exclusively, so they see no append in flight
    /// and appends that arrive meanwhile wait in order (tokio's lock is fair).
    active: RwLock<Active>,
    catalog: Mutex<Catalog>,
    /// The durable end of the whole log.
    end: watch::Sender<LogPosition>,
    /// One purge (or truncation) at a time.
    purging: tokio::sync::Mutex<()>,
    /// The directory's `flock`; released by `close`.
    lock: Mutex<Option<std::fs::File>>,
    /// Events and metrics (features `tracing`, `metrics`).
    observer: DirObserver,
    /// Synchronous replicas' acknowledgements.
    quorum: Arc<quorum::Quorum>,
}

impl Inner {
    fn catalog(&self) -> MutexGuard<'_, Catalog> {
        self.catalog.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn dir(&self) -> &Path {
        &self.dir
    }

    fn subscribe(&self) -> watch::Receiver<LogPosition> {
        self.end.subscribe()
    }

    fn quorum(&self) -> &Arc<quorum::Quorum> {
        &self.quorum
    }

    /// Raises the published durable end to `position` (never lowers it: appends
    /// finish in any order).
    fn publish(&self, position: LogPosition) {
        // Most appends of a batch find the batch's end already published: a shared
        // look first, so they do not all queue for the write lock.
        if *self.end.borrow() >= position {
            return;
        }
        self.end.send_if_modified(|end| {
            if position > *end {
                *end = position;
                true
            } else {
                false
            }
        });
    }
}

/// The segments the directory holds, shared with readers for pinning.
#[derive(Debug)]
pub(crate) struct Catalog {
    /// The oldest segment kept.
    first: u64,
    /// The active segment.
    active: u64,
    /// Sealed segments and their lengths.
    sealed: BTreeMap<u64, u64>,
    /// Where the records of sealed Pebble segments end, before their EOF trailers
    /// (other segments' records end at their lengths).
    ends: BTreeMap<u64, u64>,
    /// Segments readers still need, with how many readers need each.
    pins: BTreeMap<u64, usize>,
    /// The same for connected replicas: kept up to
    /// [`replica_retain_bytes`](crate::LogDirOptions::replica_retain_bytes).
    replica_pins: BTreeMap<u64, usize>,
    /// Every truncation so far, for readers to check their position against.
    truncations: Vec<LogPosition>,
    /// The log's id and history, as its `HISTORY` file holds them.
    history: history::HistoryFile,
    /// The end of the last segment purged: positions from there to the start of
    /// `first` hold no record, so reading from them starts at `first`.
    purged_through: LogPosition,
    /// Purged files kept for reuse, by their old numbers, oldest first.
    pool: Vec<u64>,
}

impl Catalog {
    /// The segment bytes from `from` to `to` (0 when `to` is not past `from`);
    /// purged segments count from the first one kept.
    fn bytes_between(&self, from: LogPosition, to: LogPosition) -> u64 {
        let from = from.max(LogPosition::new(self.first, 0));
        if to <= from {
            return 0;
        }
        if from.segment == to.segment {
            return to.offset - from.offset;
        }
        let whole: u64 = self
            .sealed
            .range(from.segment..to.segment)
            .map(|(_, &len)| len)
            .sum();
        (whole + to.offset).saturating_sub(from.offset)
    }

    /// Where the records of sealed segment `segment`, `len` bytes long, end.
    fn records_end(&self, segment: u64, len: u64) -> u64 {
        self.ends.get(&segment).copied().unwrap_or(len)
    }

    fn pin(&mut self, segment: u64) {
        *self.pins.entry(segment).or_default() += 1;
    }

    /// Where reading from `from` starts: `from` itself, or the start of the first
    /// segment for [`LogPosition::START`] and for a position at or past the end of
    /// the last purged segment.
    fn resolve(&self, from: LogPosition) -> Result<LogPosition, Error> {
        resolve_start(from, self.first, self.purged_through)
    }

    fn unpin(&mut self, segment: u64) {
        unpin_in(&mut self.pins, segment);
    }

    fn pin_for_replica(&mut self, segment: u64) {
        *self.replica_pins.entry(segment).or_default() += 1;
    }

    fn unpin_for_replica(&mut self, segment: u64) {
        unpin_in(&mut self.replica_pins, segment);
    }
}

fn unpin_in(pins: &mut BTreeMap<u64, usize>, segment: u64) {
    if let Some(count) = pins.get_mut(&segment) {
        *count -= 1;
        if *count == 0 {
            pins.remove(&segment);
        }
    }
}

/// See [`Catalog::resolve`].
pub(crate) fn resolve_start(
    from: LogPosition,
    first: u64,
    purged_through: LogPosition,
) -> Result<LogPosition, Error> {
    if from.segment >= first {
        Ok(from)
    } else if from == LogPosition::START || from >= purged_through {
        Ok(LogPosition::new(first, 0))
    } else {
        Err(Error::Purged {
            segment: from.segment,
        })
    }
}

struct Active {
    segment: u64,
    writer: Option<AsyncLogWriter>,
    /// The writer's durable length, to publish a whole batch's end at once.
    durable: watch::Receiver<u64>,
    /// Upper bound of the segment's length once every append admitted is written.
    reserved: AtomicU64,
    failure: Option<Arc<Error>>,
}

impl Active {
    fn new(segment: u64, writer: AsyncLogWriter, len: u64) -> Active {
        Active {
            segment,
            durable: writer.durable_end(),
            writer: Some(writer),
            reserved: AtomicU64::new(len),
            failure: None,
        }
    }

    fn writer(&self) -> Result<&AsyncLogWriter, Error> {
        if let Some(failure) = &self.failure {
            return Err(Error::DirPoisoned {
                segment: self.segment,
                source: Arc::clone(failure),
            });
        }
        self.writer.as_ref().ok_or(Error::Closed)
    }

    /// Stops appends for good after a failed rotation or truncation step.
    fn poison(&mut self, error: Error) -> Error {
        self.writer = None;
        let failure = Arc::new(error);
        self.failure = Some(Arc::clone(&failure));
        Error::DirPoisoned {
            segment: self.segment,
            source: failure,
        }
    }
}

impl LogDir {
    /// Lists the segment files of the log directory at `path` that a reader would
    /// read, oldest first, with their lengths: the `NNNNNN.log` files after the last
    /// segment purged (those a crash kept from a purge are left out, as
    /// [`DirReader::open`](crate::DirReader::open) leaves them out). Other files are ignored.
    ///
    /// Holes are not an error here, so that a tool can report them all:
    /// [`SegmentList::holes`] lists them, [`SegmentList::check`] turns the first
    /// into [`Error::MissingSegment`]. Takes no lock and changes nothing, so it
    /// works beside a live writer (whose active segment may grow after it is
    /// listed). Blocking file-system calls: in async code, call it from
    /// [`tokio::task::spawn_blocking`].
    ///
    /// ```
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), walcodec::Error> {
    /// use walcodec::LogDir;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let log = LogDir::builder().max_segment_bytes(1024).open(dir.path()).await?;
    /// for i in 0..100 {
    ///     log.append(format!("event {i}")).await?;
    /// }
    /// log.close().await?;
    ///
    /// let listed = LogDir::list(dir.path())?;
    /// listed.check()?; // no hole
    /// assert!(listed.segments.len() > 1);
    /// assert_eq!(listed.segments[0].number, 1);
    /// assert!(listed.segments[0].path.ends_with("000001.log"));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::Io`] when `path` is not a directory or cannot be read, or its
    /// `PURGED` file is unreadable.
    pub fn list(path: impl AsRef<Path>) -> Result<SegmentList, Error> {
        listing::list(path.as_ref())
    }

    /// Reads the id and history of the log directory at `path` (see
    /// [`log_id`](Self::log_id), [`history`](Self::history)) without opening it:
    /// `None` for a directory without a `HISTORY` file (made by an older version
    /// and not opened by its writer since, or a replica that never synced). Takes
    /// no lock and changes nothing; a truncation a crash interrupted shows its new
    /// epoch. Blocking, as [`list`](Self::list).
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be read, or is damaged (its checksum).
    pub fn read_history(path: impl AsRef<Path>) -> Result<Option<(LogId, History)>, Error> {
        Ok(history::read(path.as_ref())?.map(|file| (file.log_id, file.history)))
    }

    /// Configures a log directory: see [`LogDirOptions`](crate::LogDirOptions).
    pub fn builder() -> LogDirOptions {
        LogDirOptions::new()
    }

    /// Opens (or creates) the log directory at `path` with the default options:
    /// see [`LogDirOptions::open`](crate::LogDirOptions::open).
    pub async fn open(path: impl AsRef<Path>) -> Result<LogDir, Error> {
        LogDirOptions::new().open(path).await
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// Appends one record and resolves once it is durable, with the position just
    /// past it: a checkpoint ([`read_from`](Self::read_from) it to get the records
    /// after this one).
    ///
    /// Appends from many tasks share syncs (group commit). An append that would
    /// push the active segment past `max_segment_bytes` rotates first; appends that
    /// race a rotation wait for it and go on in order.
    ///
    /// # Errors
    /// As [`AsyncLogWriter::append`](crate::AsyncLogWriter::append); [`Error::DirPoisoned`] once a rotation or
    /// truncation step failed; [`Error::Closed`] after [`close`](Self::close).
    pub async fn append(&self, record: impl AsRef<[u8]>) -> Result<LogPosition, Error> {
        let record = record.as_ref();
        if record.len() > crate::decoder::LogDecoder::DEFAULT_MAX_RECORD_BYTES {
            // Refused before it can rotate a segment for nothing.
            return Err(Error::RecordTooLarge {
                offset: self.end().offset,
                size: record.len() as u64,
                max: crate::decoder::LogDecoder::DEFAULT_MAX_RECORD_BYTES,
            });
        }
        let estimate = self
            .inner
            .options
            .new_segment_format(0)
            .max_encoded_len(record.len()) as u64;
        self.inner.quorum.check()?;
        let active = self.reserve(estimate).await?;
        let position = active.writer()?.append(record).await?;
        let end = LogPosition::new(active.segment, position.end);
        let batch_end = *active.durable.borrow();
        self.inner.publish(LogPosition::new(
            active.segment,
            batch_end.max(position.end),
        ));
        // Rotation, truncation and close go on while the replicas are waited for.
        drop(active);
        self.inner.quorum.wait(end).await?;
        Ok(end)
    }

    /// The active segment, with room reserved in it for `estimate` more bytes:
    /// rotates a segment that has no room left first. A segment that holds nothing
    /// yet takes whatever it is given, so a record larger than `max_segment_bytes`
    /// gets a segment of its own.
    async fn reserve(&self, estimate: u64) -> Result<RwLockReadGuard<'_, Active>, Error> {
        let max = self.inner.options.max_appended_bytes();
        loop {
            let active = self.inner.active.read().await;
            active.writer()?;
            let before = active.reserved.fetch_add(estimate, Ordering::Relaxed);
            if before > 0 && before.saturating_add(estimate) > max {
                active.reserved.fetch_sub(estimate, Ordering::Relaxed);
                let full = active.segment;
                drop(active);
                self.rotate_full(full).await?;
                continue;
            }
            return Ok(active);
        }
    }

    /// Appends several records contiguously, in order, in one segment, and resolves
    /// once all are durable, with each record's range (its start, and the position
    /// just past it). They share one write and one sync when they fit in
    /// [`max_batch_bytes`](crate::WriterOptions::max_batch_bytes), as
    /// [`AsyncLogWriter::append_batch`](crate::AsyncLogWriter::append_batch) does: a caller that must keep several records
    /// in order without paying a sync for each (a Raft log's entries) hands them over
    /// together. A batch that would push the active segment past `max_segment_bytes`
    /// rotates first; a batch larger than the limit gets a segment of its own. An
    /// empty batch returns at once.
    ///
    /// ```
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), walcodec::Error> {
    /// use walcodec::LogDir;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let log = LogDir::open(dir.path()).await?;
    /// let ranges = log.append_batch([&b"one"[..], b"two", b"three"]).await?;
    /// assert_eq!(ranges[1].start, ranges[0].end);
    /// let mut reader = log.read_from(ranges[1].start)?;
    /// assert_eq!(reader.next_record().await.unwrap()?.data, "two");
    /// # log.close().await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`append`](Self::append); on an error none of the records is known to be
    /// durable.
    pub async fn append_batch<I>(&self, records: I) -> Result<Vec<Range<LogPosition>>, Error>
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        let records: Vec<I::Item> = records.into_iter().collect();
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let format = self.inner.options.new_segment_format(0);
        let mut estimate = 0u64;
        for record in &records {
            let len = record.as_ref().len();
            if len > crate::decoder::LogDecoder::DEFAULT_MAX_RECORD_BYTES {
                return Err(Error::RecordTooLarge {
                    offset: self.end().offset,
                    size: len as u64,
                    max: crate::decoder::LogDecoder::DEFAULT_MAX_RECORD_BYTES,
                });
            }
            estimate = estimate.saturating_add(format.max_encoded_len(len) as u64);
        }
        self.inner.quorum.check()?;
        let active = self.reserve(estimate).await?;
        let positions = active.writer()?.append_batch(&records).await?;
        let segment = active.segment;
        let last = positions.last().map_or(0, |p| p.end);
        let batch_end = *active.durable.borrow();
        self.inner
            .publish(LogPosition::new(segment, batch_end.max(last)));
        drop(active);
        self.inner
            .quorum
            .wait(LogPosition::new(segment, last))
            .await?;
        Ok(positions
            .into_iter()
            .map(|p| LogPosition::new(segment, p.start)..LogPosition::new(segment, p.end))
            .collect())
    }

    /// Seals the active segment (its records durable, never written again) and
    /// starts the next one; returns the new segment's number. Its file and
    /// directory entry are durable before any record in it is acknowledged.
    ///
    /// # Errors
    /// A failed step poisons the log ([`Error::DirPoisoned`] for every later
    /// append); records acknowledged before are durable and reopening recovers.
    pub async fn rotate(&self) -> Result<u64, Error> {
        let mut active = self.inner.active.write().await;
        let next = self.rotate_locked(&mut active).await?;
        drop(active);
        self.auto_retention().await;
        Ok(next)
    }

    /// Rotates unless another append already rotated past `full`.
    async fn rotate_full(&self, full: u64) -> Result<(), Error> {
        let mut active = self.inner.active.write().await;
        if active.segment != full {
            return Ok(());
        }
        self.rotate_locked(&mut active).await?;
        drop(active);
        self.auto_retention().await;
        Ok(())
    }

    async fn rotate_locked(&self, active: &mut Active) -> Result<u64, Error> {
        let writer = active.writer()?.clone();
        let segment = active.segment;
        // No append is in flight (the lock is held): the records end here.
        let records_end = writer.stats().len;
        let len = match writer.close().await {
            Ok(len) => len,
            Err(e) => return Err(active.poison(e)),
        };
        active.writer = None;
        {
            let mut catalog = self.inner.catalog();
            catalog.sealed.insert(segment, len);
            if len != records_end {
                catalog.ends.insert(segment, records_end);
            }
        }
        let next = segment + 1;
        let writer = match self.start_writer(next, None).await {
            Ok(writer) => writer,
            Err(e) => return Err(active.poison(e)),
        };
        *active = Active::new(next, writer, 0);
        self.inner.catalog().active = next;
        self.inner.end.send_replace(LogPosition::new(next, 0));
        self.inner.observer.rotated(segment, len, next);
        self.report_size();
        Ok(next)
    }

    /// A writer on segment `number`: when `existing` is `None`, a pooled file
    /// reused or else a new one, durable under its new name; else that file,
    /// holding a valid log of the given length.
    async fn start_writer(
        &self,
        number: u64,
        existing: Option<(std::fs::File, u64)>,
    ) -> Result<AsyncLogWriter, Error> {
        let options = &self.inner.options;
        let storage = &options.storage;
        if let Some((file, len)) = existing {
            // A truncated segment goes on in the format it was written in.
            let path = segment_path(&self.inner.dir, number);
            let (written, compressed) =
                blocking(move || recycle::written_start(&path, number)).await?;
            let format = match written {
                recycle::Written::Recyclable => recycle::recyclable_format(number, compressed),
                recycle::Written::WalSync => crate::codec::encoder::LogFormat::pebble(number),
                recycle::Written::Unknown => options.new_segment_format(number),
                recycle::Written::Legacy | recycle::Written::Stale => {
                    options.writer.format_in_use()
                }
            };
            return options
                .segment_writer()
                .format(format)
                .from_storage(storage.storage(file), len);
        }
        let mut writer = options.segment_writer();
        writer.format(options.new_segment_format(number));
        let pooled = self.inner.catalog().pool.pop();
        if let Some(old) = pooled {
            let dir = self.inner.dir.clone();
            let fs = Arc::clone(storage);
            let file = blocking(move || {
                let path = segment_path(&dir, number);
                fs.rename(&recycle::pooled_path(&dir, old), &path)?;
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&path)?;
                // The new name must be durable before a record in it is acknowledged.
                fs.sync_dir(&dir)?;
                let len = file.metadata()?.len();
                Ok((file, len))
            })
            .await;
            let (file, allocated) = file?;
            self.inner.observer.reused(old, number);
            return writer.start_on_reused(storage.storage(file), allocated);
        }
        let file = recovery::create_segment(&self.inner.dir, number, storage).await?;
        writer.from_storage(storage.storage(file), 0)
    }

    /// Reads the log from `from` (a checkpoint: the first record starting at or
    /// after it) up to its durable end; [`DirReader::follow`](crate::DirReader::follow) makes it wait for
    /// more instead of ending. [`LogPosition::START`] reads from the oldest record
    /// kept. The reader pins the segments it still needs against purges.
    ///
    /// # Errors
    /// [`Error::Purged`] when `from`'s segment was purged;
    /// [`Error::InvalidPosition`] when it lies past the log's end.
    pub fn read_from(&self, from: LogPosition) -> Result<DirReader, Error> {
        DirReader::in_process(Arc::clone(&self.inner), from)
    }

    /// The durable end of the whole log, as a [`watch::Receiver`]: it moves on with
    /// every acknowledged append and to `(next, 0)` on rotation, and back on
    /// [`truncate_after`](Self::truncate_after). Wait on it instead of polling.
    pub fn durable_end(&self) -> watch::Receiver<LogPosition> {
        self.inner.subscribe()
    }

    /// The end of the log that [`sync_replicas`](crate::LogDirOptions::sync_replicas)
    /// (`n`) connected replicas hold, from their acknowledgements since this
    /// `LogDir` was opened (000000:0 before `n` of them acknowledged anything): an
    /// append with `n > 0` returns `Ok` once this reached its record's end. It only
    /// moves on, but for a [`truncate_after`](Self::truncate_after) below it. With
    /// `n = 0` it is the [`durable_end`](Self::durable_end).
    pub fn replicated_end(&self) -> watch::Receiver<LogPosition> {
        if self.inner.quorum.is_sync() {
            self.inner.quorum.subscribe()
        } else {
            self.inner.subscribe()
        }
    }

    /// Where the log ends now (durably).
    pub fn end(&self) -> LogPosition {
        *self.inner.end.borrow()
    }

    /// The log's identity: made at random when the log was created, kept in its
    /// directory (`HISTORY`).
    pub fn log_id(&self) -> LogId {
        self.inner.catalog().history.log_id
    }

    /// The log's epochs, oldest first: one at its creation, one more at each
    /// [`promote`](crate::Replica::promote) that made this copy the primary and at
    /// each [`truncate_after`](Self::truncate_after) that removed records. See
    /// [`History`].
    ///
    /// ```
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), walcodec::Error> {
    /// use walcodec::LogDir;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let log = LogDir::open(dir.path()).await?;
    /// let kept = log.append("kept").await?;
    /// log.append("removed").await?;
    /// assert_eq!(log.history().epochs.len(), 1);
    /// log.truncate_after(kept).await?;
    /// let history = log.history();
    /// assert_eq!(history.epochs.len(), 2);
    /// assert_eq!(history.current().unwrap().start, kept);
    /// # log.close().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn history(&self) -> History {
        self.inner.catalog().history.history.clone()
    }

    /// Starts a new epoch at the log's end, durably, before any later append:
    /// this copy of the log takes over as the primary.
    pub(crate) async fn begin_epoch(&self) -> Result<Epoch, Error> {
        // Held exclusively: no append lands before the epoch is durable.
        let active = self.inner.active.write().await;
        active.writer()?;
        let end = *self.inner.end.borrow();
        let mut file = self.inner.catalog().history.clone();
        let epoch = file.history.begin(end);
        let (dir, storage, write) = (
            self.inner.dir.clone(),
            Arc::clone(&self.inner.options.storage),
            file.clone(),
        );
        blocking(move || history::write(&dir, &write, &*storage)).await?;
        self.inner.catalog().history = file;
        drop(active);
        Ok(epoch)
    }

    /// The start of the oldest segment kept.
    pub fn start(&self) -> LogPosition {
        LogPosition::new(self.inner.catalog().first, 0)
    }

    /// The segments kept, oldest first, the active one last, with their lengths
    /// (the active one's durable length).
    pub fn segments(&self) -> Vec<(u64, u64)> {
        let catalog = self.inner.catalog();
        let end = *self.inner.end.borrow();
        let mut segments: Vec<(u64, u64)> = catalog
            .sealed
            .range(catalog.first..)
            .map(|(&s, &l)| (s, l))
            .collect();
        let active_len = if end.segment == catalog.active {
            end.offset
        } else {
            0
        };
        segments.push((catalog.active, active_len));
        segments
    }

    /// Appends already queued finish, the active segment is synced and closed, and
    /// the directory's lock is released; returns the log's end. Later appends fail
    /// with [`Error::Closed`]. Close before opening the directory again in this
    /// process: dropping the last handle also writes everything queued, but in the
    /// background.
    pub async fn close(&self) -> Result<LogPosition, Error> {
        let mut active = self.inner.active.write().await;
        let result = match active.writer() {
            Ok(writer) => {
                let writer = writer.clone();
                active.writer = None;
                // Where the records end: before the EOF trailer that closes a
                // Pebble segment, which reopening cuts (appends go on there).
                let records_end = writer.stats().len;
                match writer.close().await {
                    Ok(_) => Ok(LogPosition::new(active.segment, records_end)),
                    Err(e) => Err(e),
                }
            }
            Err(Error::Closed) => Ok(*self.inner.end.borrow()),
            Err(e) => Err(e),
        };
        drop(active);
        if let Ok(end) = result {
            self.inner.publish(end);
        }
        // Wakes whoever waits on the durable end (a replica's serve loop) even when
        // it did not move, once the log reads as closed: they stop at once, not at
        // their next timer.
        self.inner.end.send_modify(|_| {});
        self.inner
            .lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        result
    }
}
