//! [`Archiver`]: ships each sealed segment of a [`LogDir`] to the object store
//! once, in order, checks it, then lists it in the manifest.

use std::path::Path as FsPath;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};
use tokio::sync::watch;
use walcodec::{Dialect, LogDir, LogPosition, RetentionHold};

use crate::error::ArchiveError;
use crate::manifest::{self, now_ms, Manifest, SegmentEntry, Stored};
use crate::part_reader::{PartReader, ReadAll};
use crate::scan::SegmentScan;
use crate::store::{Bucket, RetryPolicy};

/// Default size of one part of a multipart upload, and the size from which a
/// segment is uploaded in parts: 8 MiB.
pub const DEFAULT_PART_BYTES: usize = 8 << 20;
/// Default parts of one segment in flight at once: 4.
pub const DEFAULT_PARTS_IN_FLIGHT: usize = 4;

type Progress = Arc<dyn Fn(u64) + Send + Sync>;

/// Segments uploading at once: the one finishing (its last parts, completion and
/// check) and the next, reading its first parts meanwhile.
const UPLOADS_AT_ONCE: usize = 2;
/// Segments uploaded or uploading and not listed yet, at most: the one being
/// listed and the [`UPLOADS_AT_ONCE`] after it.
const UNLISTED: usize = UPLOADS_AT_ONCE + 1;

/// Where the upload side sends each segment, uploaded and checked, to be listed
/// (with its place among the [`UNLISTED`]).
type Listed = tokio::sync::mpsc::UnboundedSender<(SegmentEntry, tokio::sync::OwnedSemaphorePermit)>;

/// Archives a [`LogDir`] to an object store, continuously: each sealed segment is
/// uploaded once, in order, its upload checked, then listed in the archive's
/// manifest (with its size, CRC-32C, record count and where its records end; the
/// manifest also records the log's dialect and start, all a
/// [`restore`](crate::restore) needs).
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use object_store::local::LocalFileSystem;
/// use walcodec::LogDir;
/// use walcodec_archive::Archiver;
///
/// let log = LogDir::builder().retain_bytes(1 << 30).open("/var/lib/app/log").await?;
/// let store = Arc::new(LocalFileSystem::new_with_prefix("/mnt/backup")?);
/// let archiver = Arc::new(Archiver::new(store, "app/log".into()));
/// // Before the first append: retention keeps what is not archived yet.
/// archiver.hold(&log);
/// let task = tokio::spawn({
///     let (archiver, log) = (Arc::clone(&archiver), log.clone());
///     async move { archiver.run(&log).await }
/// });
/// log.append(b"event").await?;
/// println!("archived up to {}", *archiver.archived_end().borrow());
/// # drop(task);
/// # Ok(())
/// # }
/// ```
///
/// # What "archived" means
///
/// A segment is archived when its object is in the store with the segment's
/// size (a `HEAD` checks it; with [`verify_by_reading`](Self::verify_by_reading),
/// its bytes are read back and their CRC-32C compared) *and* the manifest listing
/// it has been written. Before uploading, its bytes are read through walcodec's
/// decoder in the log's dialect: a segment whose fragments fail their CRC, or that
/// does not end as a sealed segment must, is refused ([`ArchiveError::BadSegment`])
/// rather than archived.
///
/// # Crashes and cancellation
///
/// The manifest is the only record of what is archived, and it is written after
/// the object it lists. Cancelling [`run`](Self::run) at any await point, or
/// killing the process, leaves at worst objects not yet listed (up to three: the
/// segment being listed and the two uploading behind it): the next run uploads
/// them again under the same names and lists each once.
///
/// # Pipelining
///
/// A segment's upload begins once the one before it has read its last part:
/// reading and checking it overlap with the end of that upload (its last parts,
/// its completion, the `HEAD` that checks it) and with the listing before.
/// Segments are still listed one at a time, in order, each only after its own
/// object was uploaded and checked; a segment whose upload fails for good is
/// never listed, nor is any behind it. Memory: at most two segments' parts in
/// flight (each upload's [`parts`](Self::parts) in flight and the one it reads).
///
/// # Retention
///
/// An archiver [`hold`](Self::hold)s the log's retention
/// ([`LogDir::hold_retention`]): [`retain_bytes`](walcodec::LogDirOptions::retain_bytes),
/// [`retain_age`](walcodec::LogDirOptions::retain_age) and
/// [`purge_before`](LogDir::purge_before) never delete a segment before it is
/// archived. The hold lives as long as the `Archiver`, across failed runs.
///
/// # One archiver per prefix
///
/// Each manifest write is conditional on the manifest this archiver last read or
/// wrote (an e-tag precondition; see [`ArchiveError::Conflict`]): a second
/// archiver of the same prefix stops with [`ArchiveError::Conflict`] at its first
/// write after the other's, instead of overwriting it. Bucket retention
/// ([`Archive::apply_retention`](crate::Archive::apply_retention)) run meanwhile
/// is taken in: the archiver goes on from the trimmed manifest. On stores without
/// conditional writes (`LocalFileSystem`) the check is a `HEAD` just before the
/// write, which misses two writes within one round trip of each other. The one
/// segment object a second archiver uploaded before it stopped may replace the
/// first's object of the same number: [`verify`](crate::Archive::verify) names
/// it and [`restore`](crate::restore) refuses it by its checksum, never restoring
/// the other log's records.
pub struct Archiver {
    bucket: Bucket,
    part_bytes: usize,
    parts_in_flight: usize,
    active_every: Option<Duration>,
    read_back: bool,
    archived: watch::Sender<LogPosition>,
    hold: Mutex<Option<RetentionHold>>,
    progress: Option<Progress>,
}

impl std::fmt::Debug for Archiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Archiver")
            .field("store", &self.bucket.store)
            .field("prefix", &self.bucket.prefix)
            .field("archived_end", &*self.archived.borrow())
            .finish_non_exhaustive()
    }
}

/// What [`Archiver::push_dir`] uploaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PushSummary {
    /// Segments archived by this call.
    pub segments: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The archive's end afterwards.
    pub archived_end: LogPosition,
}

impl Archiver {
    /// An archiver of a log into `store` under `prefix` (the manifest is
    /// `prefix/manifest.json`).
    pub fn new(store: Arc<dyn ObjectStore>, prefix: Path) -> Archiver {
        Archiver {
            bucket: Bucket::new(store, prefix),
            part_bytes: DEFAULT_PART_BYTES,
            parts_in_flight: DEFAULT_PARTS_IN_FLIGHT,
            active_every: None,
            read_back: false,
            archived: watch::channel(LogPosition::START).0,
            hold: Mutex::new(None),
            progress: None,
        }
    }

    /// How requests are bounded and retried (see [`RetryPolicy`]).
    pub fn retry(mut self, policy: RetryPolicy) -> Archiver {
        self.bucket.retry = policy;
        self
    }

    /// Segments longer than `bytes` are uploaded in parts of `bytes` (default
    /// [`DEFAULT_PART_BYTES`]; S3 wants at least 5 MiB but for the last part),
    /// `in_flight` parts at once (default [`DEFAULT_PARTS_IN_FLIGHT`]).
    pub fn parts(mut self, bytes: usize, in_flight: usize) -> Archiver {
        self.part_bytes = bytes.max(1);
        self.parts_in_flight = in_flight.max(1);
        self
    }

    /// Also upload the active segment's durable prefix every `interval`, when it
    /// grew, so that losing the disk loses at most `interval` of acknowledged
    /// records, not a whole segment.
    ///
    /// Cost: each interval in which the log grew takes one upload of the *whole*
    /// durable prefix so far (one PUT, or a multipart upload of its parts) and one
    /// PUT of the manifest; each rotation one DELETE of the superseded prefix. With
    /// 64 MiB segments filled in an hour and a 10 s interval, that is 720 uploads
    /// and 720 manifest writes an hour, and on average half a segment per upload
    /// (about 23 GiB an hour of transfer for 64 MiB of log): pick a long interval
    /// or smaller segments ([`max_segment_bytes`](walcodec::LogDirOptions::max_segment_bytes))
    /// where requests or transfer are billed.
    pub fn active_every(mut self, interval: Duration) -> Archiver {
        self.active_every = Some(interval);
        self
    }

    /// Check each upload by reading the object back and comparing its CRC-32C
    /// (default: a `HEAD` checks its size). Doubles the transfer.
    pub fn verify_by_reading(mut self, read_back: bool) -> Archiver {
        self.read_back = read_back;
        self
    }

    /// Calls `progress` with each chunk of bytes read and uploaded (for progress
    /// bars).
    pub fn on_progress(mut self, progress: impl Fn(u64) + Send + Sync + 'static) -> Archiver {
        self.progress = Some(Arc::new(progress));
        self
    }

    /// The end of what is archived: the start of the first segment not archived
    /// yet (`(n, 0)`, as [`LogDir::durable_end`] reads after a rotation), or with
    /// [`active_every`](Self::active_every) the end of the active segment's prefix
    /// last uploaded. Compare it with the log's durable end for the archive's lag.
    pub fn archived_end(&self) -> watch::Receiver<LogPosition> {
        self.archived.subscribe()
    }

    /// Holds `log`'s retention ([`LogDir::hold_retention`]) from now on, until
    /// segments are archived. [`run`](Self::run) does it too, but only once its
    /// future is first polled: call this before the first append when the log
    /// purges by itself.
    pub fn hold(&self, log: &LogDir) {
        let mut hold = self.hold.lock().unwrap_or_else(PoisonError::into_inner);
        if hold.is_none() {
            *hold = Some(log.hold_retention());
        }
    }

    fn release_before(&self, segment: u64) {
        if let Some(hold) = &*self.hold.lock().unwrap_or_else(PoisonError::into_inner) {
            hold.release_before(segment);
        }
    }

    /// Archives `log`'s sealed segments as they seal, until an error (a store
    /// failure that outlasts the [`RetryPolicy`], a segment that does not read
    /// back, a gap). Never returns `Ok` by itself: drop (cancel) the future to stop,
    /// at any point (see the type's docs).
    ///
    /// # Errors
    /// [`ArchiveError::Gap`] when the log no longer holds the next segment to
    /// archive (purged before an archiver held it), [`ArchiveError::Manifest`]
    /// when the prefix holds the archive of another log (another dialect, or
    /// segments past the log's end), [`ArchiveError::TruncatedBehindArchive`] when
    /// the log is truncated behind what is archived.
    pub async fn run(&self, log: &LogDir) -> Result<(), ArchiveError> {
        self.hold(log);
        let mut manifest = self
            .open_manifest(log.dialect(), log.start().segment)
            .await?;
        let mut end = log.durable_end();
        let mut ticker = self.active_every.map(|every| {
            let mut ticker = tokio::time::interval(every);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticker
        });
        loop {
            end.borrow_and_update();
            self.archive_sealed_of(log, &mut manifest).await?;
            match &mut ticker {
                Some(ticker) => {
                    tokio::select! {
                        _ = end.changed() => {}
                        _ = ticker.tick() => self.upload_active(log, &mut manifest).await?,
                    }
                }
                None => {
                    let _ = end.changed().await;
                }
            }
        }
    }

    /// Archives every segment of `log` sealed now, then returns the archive's end.
    /// What [`run`](Self::run) does each time a segment seals; for a caller that
    /// archives at moments of its own (before a planned shutdown, after a
    /// [`rotate`](LogDir::rotate)).
    ///
    /// # Errors
    /// As [`run`](Self::run).
    pub async fn archive_sealed(&self, log: &LogDir) -> Result<LogPosition, ArchiveError> {
        self.hold(log);
        let mut manifest = self
            .open_manifest(log.dialect(), log.start().segment)
            .await?;
        self.archive_sealed_of(log, &mut manifest).await?;
        Ok(*self.archived.borrow())
    }

    /// Archives the segments of the log directory at `dir` that the archive does
    /// not hold yet, without opening it (the command line's `push`):
    ///
    /// - while a writer has the directory open (its `LOCK` is held, by this
    ///   process or another), every segment but the last, which the writer may
    ///   still be appending to;
    /// - when no writer has it open, the last segment too, whole, as the archive's
    ///   *active prefix* (`active/`, as [`active_every`](Self::active_every)
    ///   uploads it), not as a sealed segment: a closed log's last segment is
    ///   complete, but opening the log again appends to it, and a later push then
    ///   archives it again, longer, until it seals. The directory's lock is held
    ///   meanwhile, so no writer opens it during the push.
    ///
    /// # Errors
    /// As [`run`](Self::run); [`ArchiveError::Io`] when `dir` cannot be read;
    /// [`ArchiveError::BadSegment`] when the last segment of a directory no writer
    /// has open ends in a torn record (a writer was killed: open the log with
    /// [`LogDir::open`], which cuts it, then push), after the sealed segments were
    /// archived.
    pub async fn push_dir(&self, dir: impl AsRef<FsPath>) -> Result<PushSummary, ArchiveError> {
        let dir = dir.as_ref().to_path_buf();
        // Taken before listing: no writer opens the directory from now on.
        let closed = try_lock(&dir).await?;
        let listed = {
            let listing = dir.clone();
            tokio::task::spawn_blocking(move || walcodec::LogDir::list(listing))
                .await
                .map_err(|e| ArchiveError::io(&dir, std::io::Error::other(e)))??
        };
        listed.check()?;
        let dialect = match tokio::fs::read_to_string(dir.join("DIALECT")).await {
            Ok(text) if text.trim() == "pebble" => Dialect::Pebble,
            Ok(text) => {
                return Err(ArchiveError::io(
                    dir.join("DIALECT"),
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("unknown dialect {:?}", text.trim()),
                    ),
                ))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Dialect::LevelDb,
            Err(e) => return Err(ArchiveError::io(dir.join("DIALECT"), e)),
        };
        let first = listed.segments.first().map_or(1, |s| s.number);
        let mut manifest = self.open_manifest(dialect, first).await?;
        let last = listed.segments.last().map(|s| (s.number, s.len));
        let sealed: Vec<(u64, u64)> = match listed.segments.split_last() {
            Some((_, sealed)) => sealed.iter().map(|s| (s.number, s.len)).collect(),
            None => Vec::new(),
        };
        let before = manifest.manifest.segments.len();
        self.archive_segments(&dir, &sealed, dialect, first, &mut manifest)
            .await?;
        let mut active_bytes = 0;
        if let (Some(_lock), Some((number, len))) = (&closed, last) {
            let listed = manifest.manifest.active.filter(|a| a.number == number);
            if len > 0
                && number == manifest.manifest.next_segment()
                && listed.is_none_or(|a| a.size != len)
            {
                let path = dir.join(manifest::walcodec_segment_name(number));
                self.put_active(&path, number, len, dialect, &mut manifest)
                    .await?;
                active_bytes = len;
            }
        }
        drop(closed);
        let added = &manifest.manifest.segments[before..];
        Ok(PushSummary {
            segments: added.len() as u64 + u64::from(active_bytes > 0),
            bytes: added.iter().map(|s| s.size).sum::<u64>() + active_bytes,
            archived_end: self.archived_end().borrow().to_owned(),
        })
    }

    /// The archive's manifest, created (and stored) for a log of `dialect` whose
    /// oldest segment is `first` when there is none yet.
    async fn open_manifest(&self, dialect: Dialect, first: u64) -> Result<Stored, ArchiveError> {
        let stored = match Stored::load(&self.bucket).await? {
            Some(stored) => {
                let manifest = &stored.manifest;
                if (manifest.dialect() == Dialect::Pebble) != (dialect == Dialect::Pebble) {
                    return Err(ArchiveError::Manifest {
                        object: self.bucket.path(manifest::MANIFEST).to_string(),
                        reason: format!(
                            "the archive holds {} segments; the log is {}",
                            manifest.dialect,
                            manifest::dialect_name(dialect)
                        ),
                    });
                }
                stored
            }
            None => {
                let mut stored = Stored::new(Manifest::new(dialect, first));
                stored.save(&self.bucket).await?;
                stored
            }
        };
        self.release_before(stored.manifest.next_segment());
        self.publish(&stored.manifest);
        Ok(stored)
    }

    /// Writes the manifest. When bucket retention
    /// ([`Archive::apply_retention`](crate::Archive::apply_retention)) rewrote it
    /// meanwhile (it only drops segments from the front), goes on from its
    /// manifest; any other change is another writer's: [`ArchiveError::Conflict`].
    async fn save(&self, stored: &mut Stored) -> Result<(), ArchiveError> {
        loop {
            let conflict = match stored.save(&self.bucket).await {
                Err(conflict @ ArchiveError::Conflict { .. }) => conflict,
                other => return other,
            };
            let (Some(base), Some(theirs)) = (&stored.base, Stored::load(&self.bucket).await?)
            else {
                return Err(conflict);
            };
            let ours = &stored.manifest;
            let trimmed = theirs.manifest.deleted_before;
            let only_retention = theirs.manifest.version == base.version
                && theirs.manifest.dialect == base.dialect
                && theirs.manifest.start == base.start
                && theirs.manifest.active == base.active
                && trimmed >= base.deleted_before
                && trimmed < ours.next_segment()
                && theirs.manifest.segments[..]
                    == base
                        .segments
                        .iter()
                        .copied()
                        .filter(|s| s.number >= trimmed)
                        .collect::<Vec<_>>()[..];
            if !only_retention {
                return Err(conflict);
            }
            let mut merged = ours.clone();
            merged.deleted_before = trimmed;
            merged.segments.retain(|s| s.number >= trimmed);
            *stored = Stored {
                manifest: merged,
                ..theirs
            };
        }
    }

    fn publish(&self, manifest: &Manifest) {
        let mut end = manifest.archived_end();
        if let Some(active) = &manifest.active {
            end = end.max(active.end());
        }
        self.archived.send_if_modified(|archived| {
            let changed = *archived != end;
            *archived = end;
            changed
        });
    }

    async fn archive_sealed_of(
        &self,
        log: &LogDir,
        manifest: &mut Stored,
    ) -> Result<(), ArchiveError> {
        let archived = manifest.manifest.archived_end();
        let log_end = log.end();
        if log_end < archived {
            return Err(ArchiveError::TruncatedBehindArchive {
                log_end,
                archived_end: archived,
            });
        }
        let mut segments = log.segments();
        segments.pop(); // the active one
        self.archive_segments(
            log.path(),
            &segments,
            log.dialect(),
            log.start().segment,
            manifest,
        )
        .await
    }

    /// Archives those of `sealed` (segments of `dir`, oldest first, with their
    /// lengths; `first` the oldest the directory keeps) the manifest does not list.
    ///
    /// Uploads run as a pipeline beside the listings: the next segment's upload
    /// begins as soon as the one before it has read its last part, so reading
    /// and checking it overlaps with the end of that upload (its last parts, the
    /// completion, the `HEAD` that checks it) and with the listing of the one
    /// before (the manifest write and its check). At most
    /// [`UPLOADS_AT_ONCE`] uploads run at once and at most [`UNLISTED`]
    /// segments wait, uploaded or uploading, for their listing. Listings still go
    /// in order, each after its object was uploaded and checked; an upload
    /// whose predecessor's upload or listing failed is left unlisted (and
    /// uploaded again by the next run, as after a crash).
    async fn archive_segments(
        &self,
        dir: &FsPath,
        sealed: &[(u64, u64)],
        dialect: Dialect,
        first: u64,
        stored: &mut Stored,
    ) -> Result<(), ArchiveError> {
        let next = stored.manifest.next_segment();
        if sealed.last().is_none_or(|&(last, _)| last < next) {
            // All listed already: what `run` finds at most of its wake-ups.
            return Ok(());
        }
        let (listed, listings) = tokio::sync::mpsc::unbounded_channel();
        let (uploaded, listing) = tokio::join!(
            self.upload_segments(dir, sealed, dialect, first, next, listed),
            self.list_segments(listings, stored)
        );
        // A failed listing stops the uploads: its error is the one to report.
        listing?;
        uploaded
    }

    /// The upload side of [`archive_segments`](Self::archive_segments): uploads
    /// `sealed` from segment `next` on, and sends each entry, uploaded and
    /// checked, in order, to `listed`. Returns once every upload begun has been
    /// sent or has failed, or when the listings stopped.
    async fn upload_segments(
        &self,
        dir: &FsPath,
        sealed: &[(u64, u64)],
        dialect: Dialect,
        first: u64,
        mut next: u64,
        listed: Listed,
    ) -> Result<(), ArchiveError> {
        let unlisted = Arc::new(tokio::sync::Semaphore::new(UNLISTED));
        let start = next;
        let mut todo = sealed
            .iter()
            .copied()
            .filter(move |&(number, _)| number >= start);
        let mut upcoming = todo.next();
        let mut uploads = futures::stream::FuturesOrdered::new();
        // The newest upload's reading, until it has read its last part.
        let mut reading: Option<tokio::sync::oneshot::Receiver<()>> = None;
        let mut permit = None;
        let mut gap = None;
        loop {
            if let Some((number, _)) = upcoming.filter(|_| gap.is_none()) {
                if number > next || first > next {
                    gap = Some(ArchiveError::Gap {
                        segment: next,
                        reason: format!(
                            "the log directory {} no longer holds it (it starts at segment \
                             {first}): it was purged before it was archived",
                            dir.display()
                        ),
                    });
                    continue;
                }
            }
            if uploads.is_empty() {
                // Nothing reading (an upload that ends has read its parts, or failed).
                reading = None;
                if gap.is_some() || upcoming.is_none() {
                    return gap.map_or(Ok(()), Err);
                }
            }
            let may_start = gap.is_none()
                && upcoming.is_some()
                && reading.is_none()
                && uploads.len() < UPLOADS_AT_ONCE;
            if may_start {
                if let (Some((number, len)), Some(permit)) = (upcoming, permit.take()) {
                    let (read, read_all) = tokio::sync::oneshot::channel();
                    reading = Some(read_all);
                    uploads.push_back(self.upload_segment(dir, number, len, dialect, read, permit));
                    next = number + 1;
                    upcoming = todo.next();
                    continue;
                }
            }
            tokio::select! {
                _ = listed.closed() => return Ok(()),
                Some(done) = uploads.next(), if !uploads.is_empty() => {
                    // In order: every upload begun before this one was sent already.
                    if listed.send(done?).is_err() {
                        return Ok(());
                    }
                }
                _ = async { reading.as_mut().expect("guarded").await }, if reading.is_some() => {
                    // Read to its end, or failed (its error comes out in order).
                    reading = None;
                }
                acquired = Arc::clone(&unlisted).acquire_owned(), if may_start && permit.is_none() => {
                    permit = Some(acquired.expect("the semaphore is never closed"));
                }
            }
        }
    }

    /// Uploads sealed segment `number` of `dir`; says on `read` when its last
    /// part has been read. `permit` is its place among the [`UNLISTED`].
    async fn upload_segment(
        &self,
        dir: &FsPath,
        number: u64,
        len: u64,
        dialect: Dialect,
        read: tokio::sync::oneshot::Sender<()>,
        permit: tokio::sync::OwnedSemaphorePermit,
    ) -> Result<(SegmentEntry, tokio::sync::OwnedSemaphorePermit), ArchiveError> {
        let path = dir.join(manifest::walcodec_segment_name(number));
        let read = ReadAll::new(read);
        let entry = self
            .upload_file(&path, number, len, dialect, true, &read)
            .await?;
        Ok((entry, permit))
    }

    /// The listing side of [`archive_segments`](Self::archive_segments): lists
    /// each entry as it comes, until the uploads stop or a listing fails.
    async fn list_segments(
        &self,
        mut listings: tokio::sync::mpsc::UnboundedReceiver<(
            SegmentEntry,
            tokio::sync::OwnedSemaphorePermit,
        )>,
        stored: &mut Stored,
    ) -> Result<(), ArchiveError> {
        while let Some((entry, _unlisted)) = listings.recv().await {
            self.list_segment(entry, stored).await?;
        }
        Ok(())
    }

    /// Lists segment `entry`, uploaded and checked, in the manifest (the one after
    /// the last listed); releases the log's retention up to it.
    async fn list_segment(
        &self,
        entry: SegmentEntry,
        stored: &mut Stored,
    ) -> Result<(), ArchiveError> {
        let manifest = &mut stored.manifest;
        debug_assert_eq!(entry.number, manifest.next_segment());
        manifest.segments.push(entry);
        let superseded = manifest
            .active
            .filter(|active| active.number <= entry.number);
        if superseded.is_some() {
            manifest.active = None;
        }
        self.save(stored).await?;
        if let Some(active) = superseded {
            self.delete_quietly(&manifest::active_object(active.number, active.size))
                .await;
        }
        self.release_before(stored.manifest.next_segment());
        self.publish(&stored.manifest);
        Ok(())
    }

    /// Uploads the active segment's durable prefix when it grew since the last.
    async fn upload_active(&self, log: &LogDir, stored: &mut Stored) -> Result<(), ArchiveError> {
        let end = log.end();
        let manifest = &stored.manifest;
        if end.offset == 0 || end.segment < manifest.next_segment() {
            return Ok(());
        }
        if manifest.active.is_some_and(|active| active.end() >= end) {
            return Ok(());
        }
        if end.segment != manifest.next_segment() {
            // Sealed segments are still waiting: they go first.
            return Ok(());
        }
        let path = log
            .path()
            .join(manifest::walcodec_segment_name(end.segment));
        self.put_active(&path, end.segment, end.offset, log.dialect(), stored)
            .await
    }

    /// Uploads the first `len` bytes of the active segment `number`, at `path`,
    /// as the archive's active prefix, replacing the last one.
    async fn put_active(
        &self,
        path: &FsPath,
        number: u64,
        len: u64,
        dialect: Dialect,
        stored: &mut Stored,
    ) -> Result<(), ArchiveError> {
        // Each prefix gets an object of its own (named by its size): the one the
        // manifest lists is never overwritten, so a crash or a failed manifest
        // write between the upload and the listing leaves the last prefix listed
        // whole and readable.
        let object = manifest::active_object(number, len);
        let entry = self
            .upload_file(path, number, len, dialect, false, &ReadAll::unwatched())
            .await?;
        let replaced = stored.manifest.active.replace(entry);
        self.save(stored).await?;
        if let Some(old) =
            replaced.filter(|old| manifest::active_object(old.number, old.size) != object)
        {
            self.delete_quietly(&manifest::active_object(old.number, old.size))
                .await;
        }
        self.publish(&stored.manifest);
        Ok(())
    }

    async fn delete_quietly(&self, object: &str) {
        let path = self.bucket.path(object);
        // Best effort: an object left over is never listed, so never read.
        let _ = self
            .bucket
            .request(&format!("DELETE {path}"), self.bucket.store.delete(&path))
            .await;
    }

    /// Uploads the first `len` bytes of segment file `path` to its object (the
    /// sealed segment's, or with `sealed` false the active prefix's of `len`
    /// bytes), checks the upload, and returns its manifest entry; says on `read`
    /// when its last part has been read. Retried whole as the policy allows.
    async fn upload_file(
        &self,
        path: &FsPath,
        number: u64,
        len: u64,
        dialect: Dialect,
        sealed: bool,
        read: &ReadAll,
    ) -> Result<SegmentEntry, ArchiveError> {
        let object = if sealed {
            manifest::segment_object(number)
        } else {
            manifest::active_object(number, len)
        };
        let location = &self.bucket.path(&object);
        self.bucket
            .retry(|| async move {
                let scanned = self
                    .upload_once(path, number, len, location, dialect, read)
                    .await?;
                let scanned =
                    scanned
                        .finish(sealed)
                        .map_err(|reason| ArchiveError::BadSegment {
                            segment: number,
                            reason,
                        })?;
                self.verify_upload(location, number, scanned.len, scanned.crc32c)
                    .await?;
                Ok(SegmentEntry {
                    number,
                    size: scanned.len,
                    crc32c: scanned.crc32c,
                    records_end: scanned.records_end,
                    records: scanned.records,
                    archived_at_ms: now_ms(),
                })
            })
            .await
    }

    async fn upload_once(
        &self,
        path: &FsPath,
        number: u64,
        len: u64,
        location: &Path,
        dialect: Dialect,
        read: &ReadAll,
    ) -> Result<SegmentScan, ArchiveError> {
        let mut reader = PartReader::new(path, SegmentScan::new(number, dialect));
        let part = self.part_bytes as u64;
        if len <= part {
            let bytes = reader.next(len).await?;
            read.done();
            self.bucket
                .request(
                    &format!("PUT {location}"),
                    self.bucket
                        .store
                        .put(location, PutPayload::from_bytes(bytes)),
                )
                .await?;
            self.progressed(len);
            return Ok(reader.into_scan());
        }
        // The upload is created while the first part is read.
        let creating = format!("multipart upload of {location}");
        let (upload, first) = tokio::join!(
            self.bucket
                .request(&creating, self.bucket.store.put_multipart(location)),
            reader.next(part)
        );
        let mut upload = WriteMultipart::new_with_chunk_size(upload?, self.part_bytes);
        let mut first = Some(first);
        let mut left = len;
        let result: Result<(), ArchiveError> = async {
            while left > 0 {
                let want = left.min(part);
                // Read and checked while the parts before it are on their way.
                let bytes = match first.take() {
                    Some(read) => read?,
                    None => reader.next(want).await?,
                };
                self.bucket
                    .request(
                        &format!("a part of {location}"),
                        upload.wait_for_capacity(self.parts_in_flight),
                    )
                    .await?;
                upload.put(bytes);
                left -= want;
                self.progressed(want);
            }
            read.done();
            Ok(())
        }
        .await;
        if let Err(e) = result {
            let _ = tokio::time::timeout(self.bucket.retry_timeout(), upload.abort()).await;
            return Err(e);
        }
        self.bucket
            .request(&format!("completing {location}"), upload.finish())
            .await?;
        Ok(reader.into_scan())
    }

    fn progressed(&self, bytes: u64) {
        if let Some(progress) = &self.progress {
            progress(bytes);
        }
    }

    async fn verify_upload(
        &self,
        location: &Path,
        number: u64,
        size: u64,
        crc: u32,
    ) -> Result<(), ArchiveError> {
        let corrupt = |reason: String| ArchiveError::Corrupt {
            object: location.to_string(),
            segment: number,
            reason,
        };
        if self.read_back {
            let bytes = self.bucket.get_all(location).await?;
            if bytes.len() as u64 != size {
                return Err(ArchiveError::ShortRead {
                    object: location.to_string(),
                    expected: size,
                    got: bytes.len() as u64,
                });
            }
            if crc32c::crc32c(&bytes) != crc {
                return Err(corrupt("read back with another CRC-32C".into()));
            }
            return Ok(());
        }
        // Not left to the PUT's or the completion's answer: it holds an e-tag,
        // not the size, and a body cut short on its way in (a broken proxy) is
        // stored and answered as whole; only the size the store holds tells. Its
        // round trip overlaps with the next segment's reading.
        let meta = self
            .bucket
            .request(
                &format!("HEAD {location}"),
                self.bucket.store.head(location),
            )
            .await?;
        if meta.size != size {
            // The upload failed on its way (a body cut short): upload it again.
            return Err(ArchiveError::ShortRead {
                object: location.to_string(),
                expected: size,
                got: meta.size,
            });
        }
        Ok(())
    }
}

/// Takes the log directory's lock (as [`LogDir::open`] takes it) if no writer
/// holds it: `Some` (held until dropped) when the directory is closed, `None`
/// while a writer has it open.
async fn try_lock(dir: &FsPath) -> Result<Option<std::fs::File>, ArchiveError> {
    let path = dir.join("LOCK");
    tokio::task::spawn_blocking(move || {
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
        {
            Ok(file) => file,
            Err(e) => return Err(ArchiveError::io(&path, e)),
        };
        match file.try_lock() {
            Ok(()) => Ok(Some(file)),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => Err(ArchiveError::io(&path, e)),
        }
    })
    .await
    .map_err(|e| ArchiveError::io(dir, std::io::Error::other(e)))?
}
