//! [`LogDir`]: a log that lives for months, as numbered segment files; its
//! options, positions, recovery, reading and retention.

mod dialect;
mod fs;
mod history;
mod hold;
mod listing;
mod lock;

mod quorum;
mod reader;
mod recovery;
mod recycle;
mod replica;
mod report;
mod segment;
mod wake;

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use tokio::sync::{watch, RwLock, RwLockReadGuard};

pub use crate::log_id::LogId;
pub use crate::position::{LogPosition, ParsePositionError};
pub use fs::{DirStorage, OsDirStorage};
pub use history::{Epoch, History};
pub use hold::RetentionHold;
pub use listing::{SegmentInfo, SegmentList};
pub use reader::{DirReader, DirRecord};
pub use replica::{Replica, ShipStats, SyncEnd, PROTOCOL_VERSION};

use fs::blocking;
use segment::segment_path;

use crate::error::Error;
use crate::format::fragment::Dialect;
use crate::observe;
use crate::reader::LogReader;
use crate::writer::AsyncLogWriter;
use crate::writer::WriterOptions;
use report::DirObserver;

/// [`LogDirOptions::DEFAULT_WAKE_INTERVAL`] (1 ms) at the crate's root, where it
/// was first specified.
pub const DEFAULT_WAKE_INTERVAL: Duration = LogDirOptions::DEFAULT_WAKE_INTERVAL;

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
    max_segment_bytes: u64,
    writer: WriterOptions,
    retain_bytes: Option<u64>,
    retain_age: Option<Duration>,
    replica_retain_bytes: Option<u64>,
    replica_timeout: Duration,
    replica_wake_interval: Duration,
    sync_replicas: usize,
    #[cfg(feature = "replica-auth")]
    replica_secret: Option<replica::auth::Secret>,
    recycle_segments: usize,
    dialect: Dialect,
    storage: Arc<dyn DirStorage>,
    name: String,
}

impl fmt::Debug for LogDirOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogDirOptions")
            .field("max_segment_bytes", &self.max_segment_bytes)
            .field("writer", &self.writer)
            .field("retain_bytes", &self.retain_bytes)
            .field("retain_age", &self.retain_age)
            .field("replica_retain_bytes", &self.replica_retain_bytes)
            .field("replica_timeout", &self.replica_timeout)
            .field("replica_wake_interval", &self.replica_wake_interval)
            .field("sync_replicas", &self.sync_replicas)
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
            replica_retain_bytes: None,
            replica_timeout: replica::DEFAULT_TIMEOUT,
            replica_wake_interval: LogDirOptions::DEFAULT_WAKE_INTERVAL,
            sync_replicas: 0,
            #[cfg(feature = "replica-auth")]
            replica_secret: None,
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
    /// ([`DirReader::with_wake_interval`]), or a replica's sender
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

    /// Group-commit settings of the active segment's writer (see [`WriterOptions`]).
    /// A [`format`](WriterOptions::format) with a log number (recyclable, or
    /// Pebble's) is refused by [`open`](Self::open): each segment is its own log,
    /// numbered as its file ([`dialect`](Self::dialect) and
    /// [`recycle_segments`](Self::recycle_segments) write them so).
    /// Segments are preallocated as [`WriterOptions::preallocate`] says (by default
    /// 1 MiB at a time, and never more than `max_segment_bytes` at a time; a sealed
    /// segment is cut to its length): pass `WriterOptions::new().preallocate(0)`
    /// to grow them with each write instead. A reader in another process
    /// ([`DirReader::open`]) takes the zeros ahead of the writer for space not
    /// written yet: it waits at the last record before them and reads what the
    /// writer fills them with. Readers in the writer's process never read past the
    /// durable end.
    ///
    /// Takes what the [`WriterOptions`] setters return (`&mut WriterOptions`) as
    /// well as an owned value, so a chain of setters needs no `.clone()`.
    pub fn writer(&mut self, options: impl Into<WriterOptions>) -> &mut Self {
        self.writer = options.into();
        self
    }

    /// The log's name (default empty): the `log` label of its metrics (feature
    /// `metrics`) and the `log` field of its events (feature `tracing`). Its
    /// writers carry it too, unless [`WriterOptions::name`] names them.
    pub fn name(&mut self, name: impl Into<String>) -> &mut Self {
        self.name = name.into();
        self
    }

    /// The writer options of a segment: [`writer`](Self::writer)'s, named after
    /// the log unless they name themselves, preallocating at most a segment at a
    /// time (zeros past the segment's end would be written only to be cut when it
    /// is sealed).
    fn segment_writer(&self) -> WriterOptions {
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

    /// Keep at most `bytes` of segments for connected replicas beyond what purges
    /// leave, so a slow or stalled replica cannot fill the disk. The default is
    /// 16 segments' worth (16 × [`max_segment_bytes`](Self::max_segment_bytes),
    /// 1 GiB with the default 64 MiB segments): a limit that grows with the
    /// segments the log is configured for, enough for a replica that restarts or
    /// rides out a network blip to catch up, and small beside the disk of a
    /// machine that holds 64 MiB segments; a replica that stays connected but
    /// takes bytes slower than the log grows (within its timeout, so never cut off
    /// for stalling) would otherwise pin every segment from its position on,
    /// forever. `u64::MAX` keeps every segment a replica needs (no limit).
    ///
    /// A replica served by [`LogDir::serve_replica`] pins the segment it is being
    /// sent and every later one against purges ([`purge_before`](LogDir::purge_before),
    /// [`retain_bytes`](Self::retain_bytes), [`retain_age`](Self::retain_age)). At
    /// each purge, the sealed segments it would delete but a connected replica
    /// still needs are kept while together they hold at most `bytes`; past that,
    /// the oldest of them are deleted until the rest fit, and each replica that
    /// needed one is cut off: its [`serve_replica`](LogDir::serve_replica) and
    /// [`sync_from`](crate::Replica::sync_from) fail with
    /// [`Error::ReplicaTooFarBehind`] (so does every later connection of it: seed
    /// it again), after sending no byte read once the segment was released. With
    /// [`retain_bytes`](Self::retain_bytes), the sealed segments then hold at most
    /// about `retain_bytes + bytes`. A [`DirReader`]'s pins are not limited.
    pub fn replica_retain_bytes(&mut self, bytes: u64) -> &mut Self {
        self.replica_retain_bytes = Some(bytes);
        self
    }

    /// How long [`LogDir::serve_replica`] waits for a replica (default 10 s): for
    /// its hello, and for it to take each message (a replica that reads nothing
    /// while the socket's buffers are full). An idle primary sends a heartbeat
    /// every quarter of it, at most every 500 ms, so keep it at most the replicas'
    /// own [`Replica::set_timeout`](crate::Replica::set_timeout) (a replica whose
    /// timeout is shorter than the heartbeat interval takes an idle primary for a
    /// stalled one). Past it, `serve_replica` fails with
    /// [`Error::ReplicaProtocol`]. A zero duration is taken as 1 ms.
    pub fn replica_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.replica_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// How long [`serve_replica`](LogDir::serve_replica) lets a busy log's commits
    /// gather before it sends them (default [`DEFAULT_WAKE_INTERVAL`](Self::DEFAULT_WAKE_INTERVAL), 1 ms): it
    /// is woken by the durable end as an in-process
    /// [`DirReader`](DirReader::with_wake_interval) is, and for the same reason.
    /// While the log keeps growing, a replica receives (and syncs) at most one
    /// batch per interval instead of one per commit, which saves the primary a
    /// wake, a read and a send per commit and the replica a sync, at the cost of
    /// up to that much replication lag; the first commit after a quiet spell is
    /// sent at once. `Duration::ZERO` sends every commit as it is made durable.
    pub fn replica_wake_interval(&mut self, interval: Duration) -> &mut Self {
        self.replica_wake_interval = interval;
        self
    }

    /// Acknowledge an append (and an [`append_batch`](LogDir::append_batch)) only
    /// once its records are durable on the primary *and* on `n` connected replicas
    /// (default 0: replication is asynchronous). Each replica served by
    /// [`LogDir::serve_replica`] acknowledges its own durable end after each sync;
    /// [`LogDir::replicated_end`] watches the end `n` of them hold. Group commit
    /// keeps working: the records of one commit travel together and one
    /// acknowledgement of each replica serves them all.
    ///
    /// When fewer than `n` replicas have been connected for
    /// [`replica_timeout`](Self::replica_timeout) or longer (counted from
    /// [`open`](Self::open), and from the moment the count last fell below `n`),
    /// appends fail with [`Error::ReplicasUnavailable`], those waiting and new ones
    /// alike, never acknowledged as replicated when they are not; they succeed
    /// again once enough replicas are back. A replica that owes an acknowledgement
    /// for `replica_timeout` is disconnected, so a stalled one counts as gone.
    ///
    /// A failed append's outcome is unknown: its record is written on the primary
    /// before the wait (it may be durable there, and reaches the replicas once
    /// they return, as every record does), and the log is not poisoned. Treat the
    /// error as a timeout: retry idempotently, or read the log back.
    ///
    /// The cost: every append waits for a network round trip and a sync on the
    /// replica as well as its own sync (see the figures of `examples/replica_lag`
    /// with `SYNC_REPLICAS`).
    pub fn sync_replicas(&mut self, n: usize) -> &mut Self {
        self.sync_replicas = n;
        self
    }

    /// Require every replica served by [`LogDir::serve_replica`] to prove it knows
    /// `secret`, and prove it to them in turn, before anything else is said
    /// (feature `replica-auth`): a challenge answered with an HMAC-SHA256 of both
    /// ends' random nonces, compared in constant time; the secret never crosses the
    /// wire. A peer without it fails with [`Error::ReplicaAuthentication`] before
    /// it can read the log's end, pin a segment or be sent a byte of the log; a
    /// replica given the secret ([`Replica::set_secret`]) refuses a primary that
    /// does not know it, so a fake primary cannot feed it records. Set the same
    /// secret on both ends (32 random bytes, say).
    ///
    /// This keeps out strays and impostors, not an attacker on the path of a live
    /// connection (the messages after the handshake carry no MAC, and travel in
    /// the clear): over a network you do not trust, run replication over TLS with
    /// client certificates (see `examples/replicate_tls.rs`), with or without a
    /// secret.
    #[cfg(feature = "replica-auth")]
    pub fn replica_secret(&mut self, secret: impl AsRef<[u8]>) -> &mut Self {
        self.replica_secret = Some(replica::auth::Secret::new(secret.as_ref()));
        self
    }

    /// Keep up to `n` purged segment files and reuse them for new segments instead
    /// of creating files (default 0: off), as RocksDB's `recycle_log_file_num`
    /// does. Appending into a file that is already long enough only overwrites
    /// data, so each sync commits no file size: the saving of
    /// [`WriterOptions::preallocate`] without writing zeros first.
    ///
    /// With recycling on, every new segment is written in RocksDB's recyclable
    /// format ([`LogFormat::recyclable`](crate::LogFormat::recyclable)) with its own
    /// number in every header: the bytes a reused file still holds from its
    /// earlier use carry another number, so every reader (this crate's, RocksDB's,
    /// `walcodec` with `--dialect auto`) takes them for the end of the segment,
    /// never for records. A compressed writer
    /// [`format`](WriterOptions::format) (`LogFormat::zstd`) stays compressed, as
    /// RocksDB's WAL compression is with recycling. A sealed segment is cut to its
    /// length. Only files written
    /// in that format, with their own number, are ever pooled; others are deleted
    /// as usual. Pooled files are `NNNNNN.log.recycle` (not segment names); on
    /// [`open`](Self::open) those beyond `n` are deleted.
    ///
    /// As with preallocation, a reader in another process that follows the active
    /// segment ([`DirReader::open`] with [`follow`](DirReader::follow)) takes the
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
    /// ([`DirReader::open`], `walcodec dump DIR`) go by. [`open`](Self::open)
    /// refuses a directory of the other kind with [`Error::WrongDialect`]: Pebble's
    /// segments opened without `Dialect::Pebble`, or LevelDB's/RocksDB's (a
    /// directory with records and no `DIALECT` file) opened with it. A directory
    /// that holds no record yet takes the dialect asked for. A Pebble directory is
    /// not shipped by replication ([`LogDir::serve_replica`] refuses it with
    /// [`Error::WrongDialect`]); a compressed writer
    /// [`format`](WriterOptions::format) is refused with it.
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
    fn new_segment_format(&self, number: u64) -> crate::codec::encoder::LogFormat {
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
    fn recyclable_format(&self, number: u64) -> crate::codec::encoder::LogFormat {
        recycle::recyclable_format(number, self.writer.format_in_use().is_compressed())
    }

    /// The bytes a segment may hold before its last, sealing, write: Pebble's
    /// segments end with the EOF trailer, after zeros to the block's end when
    /// fewer than a trailer's bytes are left in it.
    fn max_appended_bytes(&self) -> u64 {
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
    /// - the last segment's torn tail is cut, as [`AsyncLogWriter::open`] does,
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
                    self.sync_replicas,
                    self.replica_timeout,
                )),
            }),
        })
    }
}

/// A durable log in a directory of numbered segment files: append with group
/// commit from many tasks, rotate, purge, truncate, read and follow across
/// segments. Cheap to clone; all clones append to the same log.
///
/// A directory holds segments `000001.log`, `000002.log`, … (at least six digits,
/// as LevelDB and RocksDB name their logs). Each is an ordinary log file that any
/// LevelDB-format reader reads as it is (in the dialect of
/// [`LogDirOptions::dialect`]: with `Dialect::Pebble`, each is Pebble's WAL
/// `NNNNNN.log`); a record never spans two segments. The
/// last segment is *active*: an [`AsyncLogWriter`] appends to it with group commit.
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
/// [`max_segment_bytes`](LogDirOptions::max_segment_bytes) (counting the most its
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
    pub(crate) fn catalog(&self) -> MutexGuard<'_, Catalog> {
        self.catalog.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<LogPosition> {
        self.end.subscribe()
    }

    pub(crate) fn quorum(&self) -> &Arc<quorum::Quorum> {
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
    pub(crate) first: u64,
    /// The active segment.
    pub(crate) active: u64,
    /// Sealed segments and their lengths.
    pub(crate) sealed: BTreeMap<u64, u64>,
    /// Where the records of sealed Pebble segments end, before their EOF trailers
    /// (other segments' records end at their lengths).
    pub(crate) ends: BTreeMap<u64, u64>,
    /// Segments readers still need, with how many readers need each.
    pub(crate) pins: BTreeMap<u64, usize>,
    /// The same for connected replicas: kept up to
    /// [`replica_retain_bytes`](LogDirOptions::replica_retain_bytes).
    pub(crate) replica_pins: BTreeMap<u64, usize>,
    /// Every truncation so far, for readers to check their position against.
    pub(crate) truncations: Vec<LogPosition>,
    /// The log's id and history, as its `HISTORY` file holds them.
    pub(crate) history: history::HistoryFile,
    /// The end of the last segment purged: positions from there to the start of
    /// `first` hold no record, so reading from them starts at `first`.
    pub(crate) purged_through: LogPosition,
    /// Purged files kept for reuse, by their old numbers, oldest first.
    pub(crate) pool: Vec<u64>,
}

impl Catalog {
    /// The segment bytes from `from` to `to` (0 when `to` is not past `from`);
    /// purged segments count from the first one kept.
    pub(crate) fn bytes_between(&self, from: LogPosition, to: LogPosition) -> u64 {
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

    pub(crate) fn pin(&mut self, segment: u64) {
        *self.pins.entry(segment).or_default() += 1;
    }

    /// Where reading from `from` starts: `from` itself, or the start of the first
    /// segment for [`LogPosition::START`] and for a position at or past the end of
    /// the last purged segment.
    pub(crate) fn resolve(&self, from: LogPosition) -> Result<LogPosition, Error> {
        resolve_start(from, self.first, self.purged_through)
    }

    pub(crate) fn unpin(&mut self, segment: u64) {
        unpin_in(&mut self.pins, segment);
    }

    pub(crate) fn pin_for_replica(&mut self, segment: u64) {
        *self.replica_pins.entry(segment).or_default() += 1;
    }

    pub(crate) fn unpin_for_replica(&mut self, segment: u64) {
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

/// The default [`LogDirOptions::replica_retain_bytes`], in segments.
const DEFAULT_REPLICA_RETAIN_SEGMENTS: u64 = 16;

impl LogDirOptions {
    /// The bytes of segments kept for connected replicas beyond what purges leave.
    fn replica_retain_limit(&self) -> u64 {
        self.replica_retain_bytes.unwrap_or(
            self.max_segment_bytes
                .saturating_mul(DEFAULT_REPLICA_RETAIN_SEGMENTS),
        )
    }
}

/// The first of a purge's `victims` (sealed segments, oldest first, with their
/// lengths) to keep for the replicas pinning from `pinned` on: those it would delete
/// from `pinned` on, but for the oldest while they hold more than `limit` bytes
/// together. Every victim before the segment returned is deleted.
fn replica_keep_from(victims: &[(u64, u64)], pinned: Option<u64>, limit: u64) -> u64 {
    let Some(pinned) = pinned else {
        return u64::MAX;
    };
    let held: Vec<(u64, u64)> = victims
        .iter()
        .copied()
        .filter(|&(segment, _)| segment >= pinned)
        .collect();
    let mut bytes: u64 = held.iter().map(|&(_, len)| len).sum();
    let mut keep_from = pinned;
    for (segment, len) in held {
        if bytes <= limit {
            break;
        }
        bytes -= len;
        keep_from = segment + 1;
    }
    keep_from
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
    /// [`DirReader::open`] leaves them out). Other files are ignored.
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

    /// Configures a log directory: see [`LogDirOptions`].
    pub fn builder() -> LogDirOptions {
        LogDirOptions::new()
    }

    /// Opens (or creates) the log directory at `path` with the default options:
    /// see [`LogDirOptions::open`].
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
    /// As [`AsyncLogWriter::append`]; [`Error::DirPoisoned`] once a rotation or
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
    /// [`max_batch_bytes`](WriterOptions::max_batch_bytes), as
    /// [`AsyncLogWriter::append_batch`] does: a caller that must keep several records
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

    /// Deletes the whole segments that end at or before `pos`, oldest first, and
    /// syncs the directory; returns their numbers. Where the purge ends is made
    /// durable first (the `PURGED` file), so a crash in the middle leaves segments
    /// that [`open`](LogDirOptions::open) deletes, never a hole. Never the active segment, nor a
    /// segment a [`DirReader`] of this log still needs (those and every later one
    /// are kept), so a purge never leaves a hole.
    ///
    /// # Errors
    /// When a deletion fails, the segments before it are gone and the rest kept;
    /// when the directory sync fails, the deletions may not survive a crash. Appends
    /// are not affected either way.
    pub async fn purge_before(&self, pos: LogPosition) -> Result<Vec<u64>, Error> {
        let _purging = self.inner.purging.lock().await;
        let victims: Vec<u64> = {
            let mut catalog = self.inner.catalog();
            let limit = catalog
                .pins
                .keys()
                .next()
                .copied()
                .unwrap_or(u64::MAX)
                .min(catalog.active);
            let mut victims: Vec<(u64, u64)> = catalog
                .sealed
                .range(..limit)
                .take_while(|(&segment, &len)| {
                    LogPosition::new(segment, catalog.records_end(segment, len)) <= pos
                })
                .map(|(&segment, &len)| (segment, len))
                .collect();
            let keep_from = replica_keep_from(
                &victims,
                catalog.replica_pins.keys().next().copied(),
                self.inner.options.replica_retain_limit(),
            );
            victims.retain(|&(segment, _)| segment < keep_from);
            let victims: Vec<u64> = victims.into_iter().map(|(segment, _)| segment).collect();
            if let Some(&last) = victims.last() {
                catalog.first = last + 1;
            }
            victims
        };
        self.delete_segments(victims).await
    }

    /// Deletes `victims` (consecutive, oldest first, already behind `first`).
    async fn delete_segments(&self, victims: Vec<u64>) -> Result<Vec<u64>, Error> {
        let Some(&last) = victims.last() else {
            return Ok(victims);
        };
        let through = {
            let catalog = self.inner.catalog();
            let len = catalog.sealed.get(&last).copied().unwrap_or(0);
            // The end of its last record: a checkpoint there (before a Pebble
            // segment's EOF trailer) reads on from the next segment kept.
            LogPosition::new(last, catalog.records_end(last, len))
        };
        let dir = self.inner.dir.clone();
        let storage = Arc::clone(&self.inner.options.storage);
        let deleted = victims.clone();
        // Room in the pool: that many of the victims may be kept for reuse.
        let room = self
            .inner
            .options
            .recycle_segments
            .saturating_sub(self.inner.catalog().pool.len());
        let result = blocking(move || {
            // First where the purge ends, durably: it decides the purge, so that a
            // crash that keeps some of the deletions below and not others (a
            // directory's changes reach the disk in any order until it is synced)
            // leaves a log `open` finishes purging, never one with a hole. It also
            // lets a checkpoint there still read after a restart.
            if let Err(e) =
                recovery::write_position_file(&dir, recovery::PURGED_FILE, through, &*storage)
                    .and_then(|()| storage.sync_dir(&dir))
            {
                return Ok((Vec::new(), Err((deleted[0], e))));
            }
            let mut pooled = Vec::new();
            for &segment in &deleted {
                let path = segment_path(&dir, segment);
                // Only a file written in the recyclable format with its own number
                // is kept: its old bytes then read as the end of any later segment.
                let reusable = pooled.len() < room
                    && matches!(
                        recycle::written_as(&path, segment),
                        Ok(recycle::Written::Recyclable | recycle::Written::WalSync)
                    );
                let gone = if reusable {
                    storage
                        .rename(&path, &recycle::pooled_path(&dir, segment))
                        .map(|()| pooled.push(segment))
                } else {
                    storage.remove(&path)
                };
                match gone {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Ok((pooled, Err((segment, e)))),
                }
            }
            Ok((pooled, storage.sync_dir(&dir).map_err(|e| (u64::MAX, e))))
        })
        .await?;
        let (pooled, result) = result;
        self.inner.observer.pooled(&pooled);
        let mut catalog = self.inner.catalog();
        catalog.pool.extend(pooled);
        match result {
            Ok(()) => {
                for segment in &victims {
                    catalog.sealed.remove(segment);
                    catalog.ends.remove(segment);
                }
                catalog.purged_through = catalog.purged_through.max(through);
                drop(catalog);
                self.inner.observer.purged(&victims);
                self.report_size();
                Ok(victims)
            }
            Err((failed, e)) => {
                // Keep what was not deleted; what was is gone from the directory.
                for segment in victims.iter().filter(|&&s| s < failed) {
                    catalog.sealed.remove(segment);
                    catalog.ends.remove(segment);
                }
                if failed != u64::MAX {
                    catalog.first = failed;
                } else {
                    catalog.purged_through = catalog.purged_through.max(through);
                }
                Err(e.into())
            }
        }
    }

    /// Applies [`retain_bytes`](LogDirOptions::retain_bytes) and
    /// [`retain_age`](LogDirOptions::retain_age) now; returns the segments purged.
    /// Runs by itself after each rotation.
    pub async fn enforce_retention(&self) -> Result<Vec<u64>, Error> {
        let options = &self.inner.options;
        if options.retain_bytes.is_none() && options.retain_age.is_none() {
            return Ok(Vec::new());
        }
        let (sealed, active_len) = {
            let catalog = self.inner.catalog();
            let active = *self.inner.end.borrow();
            let active_len = if active.segment == catalog.active {
                active.offset
            } else {
                0
            };
            let sealed: Vec<(u64, u64)> = catalog.sealed.iter().map(|(&s, &l)| (s, l)).collect();
            (sealed, active_len)
        };
        let mut total: u64 = sealed.iter().map(|&(_, len)| len).sum::<u64>() + active_len;
        let mut cut = None;
        for &(segment, len) in &sealed {
            let too_big = options.retain_bytes.is_some_and(|max| total > max);
            let too_old = match options.retain_age {
                Some(age) => self.sealed_longer_than(segment, age).await,
                None => false,
            };
            if !(too_big || too_old) {
                break;
            }
            total -= len;
            cut = Some(LogPosition::new(segment, len));
        }
        let Some(cut) = cut else {
            return Ok(Vec::new());
        };
        let purged = self.purge_before(cut).await?;
        self.inner
            .observer
            .retention(&purged, options.retain_bytes, options.retain_age);
        Ok(purged)
    }

    async fn sealed_longer_than(&self, segment: u64, age: Duration) -> bool {
        let path = segment_path(&self.inner.dir, segment);
        match tokio::fs::metadata(path).await.and_then(|m| m.modified()) {
            Ok(modified) => SystemTime::now()
                .duration_since(modified)
                .is_ok_and(|elapsed| elapsed > age),
            Err(_) => false,
        }
    }

    /// Sets the segment-count and size gauges (feature `metrics`).
    fn report_size(&self) {
        let catalog = self.inner.catalog();
        let end = *self.inner.end.borrow();
        let active_len = if end.segment == catalog.active {
            end.offset
        } else {
            0
        };
        let sealed_bytes: u64 = catalog.sealed.values().sum();
        self.inner
            .observer
            .size(catalog.sealed.len() + 1, sealed_bytes + active_len);
    }

    async fn auto_retention(&self) {
        // Best effort: a failed deletion leaves the segment for the next round, and
        // must not fail the append that happened to rotate.
        let _ = self.enforce_retention().await;
    }

    /// Removes every record after `pos`, which must be a record boundary (a
    /// position [`append`](Self::append) returned, a [`DirRecord::end`], or the
    /// start of a kept segment); later appends continue from there. Segments after
    /// `pos.segment` are deleted and `pos.segment` becomes the active one again.
    ///
    /// When it removes records, a new epoch starts at `pos`
    /// ([`history`](Self::history)), durable before this returns.
    ///
    /// A crash in the middle leaves the log as it was or as truncated, never a mix:
    /// the truncation and its epoch are decided together by one durable
    /// replacement of the `HISTORY` file, which [`open`](Self::open) finishes. Readers of this log that had read past `pos`
    /// fail with [`Error::TruncatedUnderReader`].
    ///
    /// # Errors
    /// [`Error::InvalidPosition`] when `pos` is past the end or inside a record,
    /// [`Error::Purged`] when its segment is gone. A failed step poisons the log
    /// ([`Error::DirPoisoned`]); reopening finishes or undoes the truncation.
    pub async fn truncate_after(&self, pos: LogPosition) -> Result<(), Error> {
        let _purging = self.inner.purging.lock().await;
        let mut active = self.inner.active.write().await;
        let writer = active.writer()?.clone();
        writer.sync().await?;
        let end = LogPosition::new(active.segment, writer.stats().durable_len);
        let first = self.inner.catalog().first;
        if pos.segment < first {
            return Err(Error::Purged {
                segment: pos.segment,
            });
        }
        if pos > end {
            return Err(Error::InvalidPosition {
                position: pos,
                reason: "past the end of the log",
            });
        }
        if pos == end {
            return Ok(());
        }
        if !self.is_record_boundary(pos).await? {
            return Err(Error::InvalidPosition {
                position: pos,
                reason: "not the end of a record",
            });
        }
        if let Err(e) = writer.close().await {
            return Err(active.poison(e));
        }
        active.writer = None;
        let dir = self.inner.dir.clone();
        let storage = Arc::clone(&self.inner.options.storage);
        // The new epoch and the cut are decided together, by one durable
        // replacement of `HISTORY` (which `open` finishes after a crash), before
        // anything is cut: never the cut without the epoch that tells replicas.
        let mut history = self.inner.catalog().history.clone();
        history.history.begin(pos);
        let mut deciding = history.clone();
        deciding.truncate = Some(pos);
        let decided = history.clone();
        let reopened = blocking(move || {
            history::write(&dir, &deciding, &*storage)?;
            recovery::apply_truncation(&dir, pos, &*storage)?;
            history::write(&dir, &history, &*storage)?;
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(segment_path(&dir, pos.segment))?;
            std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(pos.offset))?;
            Ok(file)
        })
        .await;
        let file = match reopened {
            Ok(file) => file,
            Err(e) => return Err(active.poison(e.into())),
        };
        let writer = match self
            .start_writer(pos.segment, Some((file, pos.offset)))
            .await
        {
            Ok(writer) => writer,
            Err(e) => return Err(active.poison(e)),
        };
        *active = Active::new(pos.segment, writer, pos.offset);
        {
            let mut catalog = self.inner.catalog();
            catalog.sealed.retain(|&segment, _| segment < pos.segment);
            catalog.ends.retain(|&segment, _| segment < pos.segment);
            catalog.active = pos.segment;
            catalog.truncations.push(pos);
            catalog.history = decided;
        }
        self.inner.quorum.truncated(pos);
        self.inner.end.send_replace(pos);
        Ok(())
    }

    /// Whether a record ends exactly at `pos` (or `pos` starts its segment).
    async fn is_record_boundary(&self, pos: LogPosition) -> Result<bool, Error> {
        if pos.offset == 0 {
            return Ok(true);
        }
        let path = segment_path(&self.inner.dir, pos.segment);
        let mut reader = LogReader::open_at(
            &path,
            0,
            &dialect::segment_decoder(pos.segment, self.inner.options.pebble()),
        )
        .await?;
        while let Some(record) = reader.next_record().await {
            let end = record?.position.end;
            if end >= pos.offset {
                return Ok(end == pos.offset);
            }
        }
        Ok(false)
    }

    /// Reads the log from `from` (a checkpoint: the first record starting at or
    /// after it) up to its durable end; [`DirReader::follow`] makes it wait for
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

    /// The end of the log that [`sync_replicas`](LogDirOptions::sync_replicas)
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
