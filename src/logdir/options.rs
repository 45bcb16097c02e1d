//! [`LogDirOptions`](crate::LogDirOptions): a directory's settings, and `open`, which recovers the directory
//! (finishing a crash's purge, truncation or rotation) and starts its writer.
//!
//! Apart from `mod.rs` so that the settings and the way in are read in one place; the
//! appends, rotation and reads they configure stay with [`LogDir`].

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{watch, RwLock};

use super::fs::{blocking, DirStorage, OsDirStorage};
use super::report::DirObserver;
use super::ship::ReplicaOptions;
use super::{dialect, history, lock, quorum, recovery, recycle};
use super::{Active, Catalog, Inner, LogDir};
use crate::error::Error;
use crate::format::fragment::Dialect;
use crate::observe;
use crate::position::LogPosition;
use crate::writer::WriterOptions;

/// Configures a [`LogDir`], then opens it.
///
/// ```
/// # #[tokio::main]
/// # async fn main() -> Result<(), walcodec::Error> {
/// use std::time::Duration;
/// use walcodec::{LogDir, WriterOptions};
///
/// let dir = tempfile::tempdir()?;
/// let log = LogDir::builder()
///     .max_segment_bytes(16 << 20)
///     .writer(WriterOptions::new().max_batch_bytes(256 * 1024))
///     .retain_bytes(1 << 30)
///     .retain_age(Duration::from_secs(7 * 24 * 3600))
///     .open(dir.path())
///     .await?;
/// log.close().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
#[must_use]
pub struct LogDirOptions {
    pub(super) max_segment_bytes: u64,
    pub(super) writer: WriterOptions,
    pub(super) retain_bytes: Option<u64>,
    pub(super) retain_age: Option<Duration>,
    /// Replication's knobs, set by its builder methods (in `crate::replica::options`).
    pub(crate) replica: ReplicaOptions,
    pub(super) recycle_segments: usize,
    pub(super) dialect: Dialect,
    pub(super) storage: Arc<dyn DirStorage>,
    pub(super) name: String,
}

impl fmt::Debug for LogDirOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogDirOptions")
            .field("max_segment_bytes", &self.max_segment_bytes)
            .field("writer", &self.writer)
            .field("retain_bytes", &self.retain_bytes)
            .field("retain_age", &self.retain_age)
            .field("replica_retain_bytes", &self.replica.retain_bytes)
            .field("replica_timeout", &self.replica.timeout)
            .field("replica_wake_interval", &self.replica.wake_interval)
            .field("sync_replicas", &self.replica.sync_replicas)
            .field("recycle_segments", &self.recycle_segments)
            .field("dialect", &self.dialect)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Default for LogDirOptions {
    fn default() -> Self {
        LogDirOptions {
            max_segment_bytes: LogDirOptions::DEFAULT_MAX_SEGMENT_BYTES,
            writer: WriterOptions::new(),
            retain_bytes: None,
            retain_age: None,
            replica: ReplicaOptions::default(),
            recycle_segments: 0,
            dialect: Dialect::LevelDb,
            storage: Arc::new(OsDirStorage),
            name: String::new(),
        }
    }
}

impl LogDirOptions {
    /// Default of [`max_segment_bytes`](Self::max_segment_bytes), the size at which the
    /// active segment is sealed and the next one started: 64 MiB.
    pub const DEFAULT_MAX_SEGMENT_BYTES: u64 = 64 << 20;

    /// How long a follower in the writer's process
    /// ([`DirReader::with_wake_interval`](crate::DirReader::with_wake_interval)), or a replica's sender
    /// ([`replica_wake_interval`](Self::replica_wake_interval)), lets a busy log's
    /// commits gather before it looks again, by default: 1 ms.
    pub const DEFAULT_WAKE_INTERVAL: Duration = Duration::from_millis(1);

    /// The defaults: 64 MiB segments, the writer's defaults (1 MiB of preallocation
    /// at a time), no automatic retention.
    pub fn new() -> LogDirOptions {
        LogDirOptions::default()
    }

    /// Seal the active segment before an append would make it longer than `bytes`
    /// (default 64 MiB; at least 1). The check counts the most a record can encode
    /// to, so segments stay at or below the limit, except a segment holding one
    /// record larger than the limit on its own.
    pub fn max_segment_bytes(&mut self, bytes: u64) -> &mut Self {
        self.max_segment_bytes = bytes.max(1);
        self
    }

    /// Group-commit settings of the active segment's writer (see [`WriterOptions`](crate::WriterOptions)).
    /// A [`format`](crate::WriterOptions::format) with a log number (recyclable, or
    /// Pebble's) is refused by [`open`](Self::open): each segment is its own log,
    /// numbered as its file ([`dialect`](Self::dialect) and
    /// [`recycle_segments`](Self::recycle_segments) write them so).
    /// Segments are preallocated as [`WriterOptions::preallocate`](crate::WriterOptions::preallocate) says (by default
    /// 1 MiB at a time, and never more than `max_segment_bytes` at a time; a sealed
    /// segment is cut to its length): pass `WriterOptions::new().preallocate(0)`
    /// to grow them with each write instead. A reader in another process
    /// ([`DirReader::open`](crate::DirReader::open)) takes the zeros ahead of the writer for space not
    /// written yet: it waits at the last record before them and reads what the
    /// writer fills them with. Readers in the writer's process never read past the
    /// durable end.
    ///
    /// Takes what the [`WriterOptions`](crate::WriterOptions) setters return (`&mut WriterOptions`) as
    /// well as an owned value, so a chain of setters needs no `.clone()`.
    pub fn writer(&mut self, options: impl Into<WriterOptions>) -> &mut Self {
        self.writer = options.into();
        self
    }

    /// The log's name (default empty): the `log` label of its metrics (feature
    /// `metrics`) and the `log` field of its events (feature `tracing`). Its
    /// writers carry it too, unless [`WriterOptions::name`](crate::WriterOptions::name) names them.
    pub fn name(&mut self, name: impl Into<String>) -> &mut Self {
        self.name = name.into();
        self
    }

    /// The writer options of a segment: [`writer`](Self::writer)'s, named after
    /// the log unless they name themselves, preallocating at most a segment at a
    /// time (zeros past the segment's end would be written only to be cut when it
    /// is sealed).
    pub(super) fn segment_writer(&self) -> WriterOptions {
        let mut writer = self.writer.clone();
        if writer.name_in_use().is_empty() {
            writer.name(self.name.clone());
        }
        let step = writer.preallocate_in_use();
        if step > self.max_segment_bytes {
            writer.preallocate(self.max_segment_bytes);
        }
        writer
    }

    /// After each rotation, purge the oldest sealed segments while all segments
    /// together hold more than `bytes` (default: no limit). Segments a reader still
    /// needs are kept.
    pub fn retain_bytes(&mut self, bytes: u64) -> &mut Self {
        self.retain_bytes = Some(bytes);
        self
    }

    /// After each rotation, purge the sealed segments sealed longer than `age` ago
    /// (by their modification time; default: no limit). Segments a reader still
    /// needs are kept. [`LogDir::enforce_retention`] applies it on demand.
    pub fn retain_age(&mut self, age: Duration) -> &mut Self {
        self.retain_age = Some(age);
        self
    }

    /// Keep up to `n` purged segment files and reuse them for new segments instead
    /// of creating files (default 0: off), as RocksDB's `recycle_log_file_num`
    /// does. Appending into a file that is already long enough only overwrites
    /// data, so each sync commits no file size: the saving of
    /// [`WriterOptions::preallocate`](crate::WriterOptions::preallocate) without writing zeros first.
    ///
    /// With recycling on, every new segment is written in RocksDB's recyclable
    /// format ([`LogFormat::recyclable`](crate::LogFormat::recyclable)) with its own
    /// number in every header: the bytes a reused file still holds from its
    /// earlier use carry another number, so every reader (this crate's, RocksDB's,
    /// `walcodec` with `--dialect auto`) takes them for the end of the segment,
    /// never for records. A compressed writer
    /// [`format`](crate::WriterOptions::format) (`LogFormat::zstd`) stays compressed, as
    /// RocksDB's WAL compression is with recycling. A sealed segment is cut to its
    /// length. Only files written
    /// in that format, with their own number, are ever pooled; others are deleted
    /// as usual. Pooled files are `NNNNNN.log.recycle` (not segment names); on
    /// [`open`](Self::open) those beyond `n` are deleted.
    ///
    /// As with preallocation, a reader in another process that follows the active
    /// segment ([`DirReader::open`](crate::DirReader::open) with [`follow`](crate::DirReader::follow)) takes the
    /// old bytes ahead of the writer for space not written yet, and reads what the
    /// writer writes over them.
    pub fn recycle_segments(&mut self, n: usize) -> &mut Self {
        self.recycle_segments = n;
        self
    }

    /// The dialect segments are written in (default [`Dialect::LevelDb`]):
    ///
    /// - `Dialect::LevelDb`: the [`writer`](Self::writer)'s format, LevelDB's
    ///   unless told otherwise (RocksDB's recyclable one when
    ///   [`recycle_segments`](Self::recycle_segments) is on);
    /// - `Dialect::RocksDb`: RocksDB's recyclable format, segment `N` as log `N`
    ///   ([`LogFormat::recyclable`](crate::LogFormat::recyclable)), recycling or not;
    /// - `Dialect::Pebble`: Pebble's WAL-sync format, segment `N` as log `N`
    ///   ([`LogFormat::pebble`](crate::LogFormat::pebble)), as Pebble writes its
    ///   `NNNNNN.log` WALs: each fragment carries the segment's durable end when it
    ///   was encoded, and a sealed segment (and the active one on
    ///   [`close`](LogDir::close)) ends with Pebble's EOF trailer, which reopening
    ///   cuts before appending. Recovery, readers, recycling and the CLI read such
    ///   segments in Pebble's dialect, with its rule for torn versus corrupt (damage
    ///   is corruption when a later fragment promises a synced offset past it). A
    ///   sealed segment must end with the trailer ([`Error::BadSegment`]
    ///   otherwise). Segments stay at or below
    ///   [`max_segment_bytes`](Self::max_segment_bytes) trailer included.
    ///
    /// A Pebble directory is marked so by a `DIALECT` file, written durably before
    /// its first segment, which readers in other processes
    /// ([`DirReader::open`](crate::DirReader::open), `walcodec dump DIR`) go by. [`open`](Self::open)
    /// refuses a directory of the other kind with [`Error::WrongDialect`]: Pebble's
    /// segments opened without `Dialect::Pebble`, or LevelDB's/RocksDB's (a
    /// directory with records and no `DIALECT` file) opened with it. A directory
    /// that holds no record yet takes the dialect asked for. A Pebble directory is
    /// not shipped by replication ([`LogDir::serve_replica`] refuses it with
    /// [`Error::WrongDialect`]); a compressed writer
    /// [`format`](crate::WriterOptions::format) is refused with it.
    ///
    /// ```
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), walcodec::Error> {
    /// use walcodec::{Dialect, LogDir, LogPosition};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let log = LogDir::builder().dialect(Dialect::Pebble).open(dir.path()).await?;
    /// log.append(b"a WAL-sync record").await?;
    /// log.close().await?; // 000001.log ends with Pebble's EOF trailer
    ///
    /// let mut reader = walcodec::DirReader::open(dir.path(), LogPosition::START).await?;
    /// assert_eq!(reader.next_record().await.unwrap()?.data, "a WAL-sync record");
    /// // Opened without the dialect, the directory is refused, never misread.
    /// assert!(matches!(
    ///     LogDir::open(dir.path()).await,
    ///     Err(walcodec::Error::WrongDialect { .. })
    /// ));
    /// # Ok(())
    /// # }
    /// ```
    pub fn dialect(&mut self, dialect: Dialect) -> &mut Self {
        self.dialect = dialect;
        self
    }

    /// The dialect set by [`dialect`](Self::dialect).
    pub(crate) fn dialect_in_use(&self) -> Dialect {
        self.dialect
    }

    /// Whether segments are Pebble's.
    pub(crate) fn pebble(&self) -> bool {
        self.dialect == Dialect::Pebble
    }

    /// The format of a new segment `number`: Pebble's with its number in Pebble's
    /// dialect, recyclable with its number in RocksDB's or when recycling, else the
    /// writer's.
    pub(super) fn new_segment_format(&self, number: u64) -> crate::codec::encoder::LogFormat {
        if self.pebble() {
            crate::codec::encoder::LogFormat::pebble(number)
        } else if self.recycle_segments > 0 || self.dialect == Dialect::RocksDb {
            self.recyclable_format(number)
        } else {
            self.writer.format_in_use()
        }
    }

    /// Recyclable headers with segment `number`'s log number, compressed as the
    /// writer's format is (RocksDB's WAL compression works with either header).
    pub(super) fn recyclable_format(&self, number: u64) -> crate::codec::encoder::LogFormat {
        recycle::recyclable_format(number, self.writer.format_in_use().is_compressed())
    }

    /// The bytes a segment may hold before its last, sealing, write: Pebble's
    /// segments end with the EOF trailer, after zeros to the block's end when
    /// fewer than a trailer's bytes are left in it.
    pub(super) fn max_appended_bytes(&self) -> u64 {
        if self.pebble() {
            self.max_segment_bytes
                .saturating_sub(2 * dialect::EOF_TRAILER_BYTES - 1)
                .max(1)
        } else {
            self.max_segment_bytes
        }
    }

    /// Replaces the file-system steps (fault injection). A testing hook, not a
    /// stable API.
    #[doc(hidden)]
    pub fn dir_storage(&mut self, storage: Arc<dyn DirStorage>) -> &mut Self {
        self.storage = storage;
        self
    }

    /// Opens the log directory at `path`, creating it (and its first segment) when
    /// it does not exist, and recovers it:
    ///
    /// - a truncation a crash interrupted is finished, and so is a purge (the
    ///   segments its durable `PURGED` file covers are deleted);
    /// - the segments must be consecutive numbers: a hole is
    ///   [`Error::MissingSegment`];
    /// - every sealed segment must read cleanly to its end
    ///   ([`Error::BadSegment`] otherwise);
    /// - the last segment's torn tail is cut, as [`AsyncLogWriter::open`](crate::AsyncLogWriter::open) does,
    ///   pages a power cut lost in its unsynced end included.
    ///
    /// Files that are not segments are left alone. Takes the directory's lock:
    /// [`Error::Locked`] when another `LogDir`, in this process or another, has it
    /// open.
    pub async fn open(&self, path: impl AsRef<Path>) -> Result<LogDir, Error> {
        let format = self.writer.format_in_use();
        if let Some(number) = format.log_number() {
            // Readers read segment N as log N: one number for every segment would
            // make all but one of them read as another log's bytes.
            return Err(Error::Io(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "a LogDir numbers each segment's log itself: a writer format with \
                     log number {number} is refused; use dialect(Dialect::Pebble) for \
                     Pebble's WAL-sync segments, dialect(Dialect::RocksDb) or \
                     recycle_segments(n) for recyclable ones, each with its own number"
                ),
            )));
        }
        if self.pebble() && format.is_compressed() {
            return Err(Error::Io(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "Pebble's WAL-sync segments have no compression: a compressed writer \
                 format is refused with dialect(Dialect::Pebble)",
            )));
        }
        let dir = path.as_ref().to_path_buf();
        observe::within(observe::open_span(&dir), self.open_at(dir.clone())).await
    }

    /// The directory's history as its writer keeps it, durable: a new log's (or
    /// an older directory's, made before logs had one) with a new id and one epoch
    /// at the start of its oldest segment; the epochs that start past the end (a
    /// replica's copy of its primary's, which it did not reach) dropped.
    async fn own_history(
        &self,
        dir: &Path,
        found: Option<history::HistoryFile>,
        first: u64,
        end: LogPosition,
    ) -> Result<history::HistoryFile, Error> {
        let (mut file, mut changed) = match found {
            Some(file) => (file, false),
            None => (history::HistoryFile::new(LogPosition::new(first, 0)), true),
        };
        changed |= file.history.trim_after(end);
        if file.history.epochs.is_empty() {
            file.history.begin(LogPosition::new(first, 0));
            changed = true;
        }
        if changed {
            let (dir, storage, write) =
                (dir.to_path_buf(), Arc::clone(&self.storage), file.clone());
            blocking(move || history::write(&dir, &write, &*storage)).await?;
        }
        Ok(file)
    }

    async fn open_at(&self, dir: PathBuf) -> Result<LogDir, Error> {
        let lock = lock::create_and_lock(&dir, &self.storage).await?;
        let recovered = observe::within(
            observe::recovery_span(&dir),
            recovery::recover_named(
                &self.name,
                &dir,
                &self.storage,
                self.writer.unsynced_window(),
                self.recycle_segments,
                self.pebble(),
            ),
        )
        .await?;
        let observer = DirObserver::new(&self.name);
        observer.recovered(
            &dir,
            recovered.sealed.len(),
            recovered.active,
            recovered.active_len,
            recovered.purged_through,
        );
        observer.size(
            recovered.sealed.len() + 1,
            recovered.sealed.values().sum::<u64>() + recovered.active_len,
        );
        let storage = self.storage.storage(recovered.active_file);
        let writer = self
            .segment_writer()
            .format(
                recovered
                    .active_format
                    .unwrap_or_else(|| self.new_segment_format(recovered.active)),
            )
            .from_storage(storage, recovered.active_len)?;
        let first = recovered
            .sealed
            .keys()
            .next()
            .copied()
            .unwrap_or(recovered.active);
        let end = LogPosition::new(recovered.active, recovered.active_len);
        let history = self
            .own_history(&dir, recovered.history, first, end)
            .await?;
        Ok(LogDir {
            inner: Arc::new(Inner {
                dir,
                options: self.clone(),
                active: RwLock::new(Active::new(recovered.active, writer, recovered.active_len)),
                catalog: Mutex::new(Catalog {
                    first,
                    active: recovered.active,
                    sealed: recovered.sealed,
                    ends: recovered.ends,
                    pins: BTreeMap::new(),
                    replica_pins: BTreeMap::new(),
                    truncations: Vec::new(),
                    history,
                    purged_through: recovered.purged_through,
                    pool: recovered.pool,
                }),
                end: watch::channel(end).0,
                purging: tokio::sync::Mutex::new(()),
                lock: Mutex::new(Some(lock)),
                observer,
                quorum: Arc::new(quorum::Quorum::new(
                    self.replica.sync_replicas,
                    self.replica.timeout,
                )),
            }),
        })
    }
}

impl LogDirOptions {
    /// The bytes of segments kept for connected replicas beyond what purges leave.
    pub(super) fn replica_retain_limit(&self) -> u64 {
        self.replica.retain_limit(self.max_segment_bytes)
    }
}
