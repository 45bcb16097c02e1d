//! [`DirReader`]: reading and following a [`LogDir`](crate::LogDir) across its
//! segments.
//!
//! Why one file of about 1,250 lines: most of it is `Walk`, one state machine (open a
//! segment, decode, doubt a live error once, check what was read against the file, wait)
//! whose steps all move the same cursor. It is the follower engine issue 38 asks
//! `LogTailer` (`reader/mod.rs`) to share; cut it along that seam when the two merge,
//! rather than spread it over files the merge would rewrite.
//!
//! One segment at a time, in number order, with a [`LogDecoder`] started at the
//! reader's offset in it. How far a segment may be read, and when it is over:
//!
//! | reader                 | readable bytes of the active segment | segment is over when            |
//! |------------------------|--------------------------------------|---------------------------------|
//! | in the writer's process| up to the durable end (watch channel)| the durable end moved past it   |
//! | another process        | up to the file's end                 | the next segment's file exists  |
//!
//! At the end of what is readable, a plain reader returns `None`; a follower waits:
//! on the writer's watch channel in its process (no polling), by polling every
//! `poll_interval` elsewhere.
//!
//! In another process the active segment may be written in place (preallocated
//! zeros, a recycled file's earlier use). How a segment's bytes after its last
//! complete record read there:
//!
//! | what follows the last record        | live segment                 | sealed segment |
//! |-------------------------------------|------------------------------|----------------|
//! | nothing, or part of a record        | wait, read again from it     | its end        |
//! | zeros, another log number's bytes   | not written yet: go back to the record's end, wait | its end |
//! | damage                              | read again once after a wait, then `BadSegment` | `BadSegment`, but a torn tail is its end |
//!
//! Nothing tells such a reader that a segment changed under it, so it watches the
//! file it reads with the `FileGuard` a [`LogTailer`](crate::LogTailer) uses: before
//! it reads on after a read that reached the file's end, the file must still be the
//! one it opened (device and inode), at least as long as the end of the last record
//! returned, and hold the same bytes before that end. A segment cut, replaced,
//! removed, or rewritten below that end fails the reader with
//! [`Error::TruncatedUnderReader`], naming it; bytes after it that changed are read
//! again.
//!
//! That check runs before a read, so it cannot see a rewrite between two reads
//! while catching up (every read full, none at the file's end). A record is
//! checked on its own when it was put together from more than one read (it starts
//! before the last read did, its first bytes held in the buffer or the decoder
//! from an earlier one): the file must still hold every byte of it, else the log
//! was cut and written again between the reads and the record would join an old
//! start to a new end; that is [`Error::TruncatedUnderReader`], never a record. A
//! record inside one read is what the file held when it was read. So the check
//! costs one read of a record's bytes per read of the file at most, and nothing
//! for the records inside a read.
//!
//! A purge by the writer's process may take the segment such a reader just
//! finished (a consumer's checkpoint at the reader's position): when its file is
//! gone, the `PURGED` file (written before anything is removed) says how far the
//! purge went. At or before the reader's position, nothing it had not returned
//! went and it goes on with the next segment; past it, it fails with
//! [`Error::Purged`].

use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use futures::Stream;
use tokio_util::codec::Decoder;

use super::segment::{list_segments, segment_path};
use super::wake::DurableWatch;
use super::Inner;
use super::LogDirOptions;
use crate::decoder::error::CodecError;
use crate::decoder::follow::LiveDoubt;
use crate::decoder::LogDecoder;
use crate::error::Error;
use crate::error::LogChange;
use crate::format::block_start;
use crate::position::LogPosition;
use crate::read_at::read_at;
use crate::reader::guard::FileGuard;
use crate::reader::LogTailer;

/// How often a follower in another process, waiting at the end of a live segment,
/// lists the directory for a later segment with a hole before it.
const HOLE_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// Bytes read from a segment file at a time.
const READ_CHUNK: usize = 64 * 1024;

/// The fewest bytes read at a time after a read in another process ran into space
/// a live segment's writer has not reached (preallocated zeros, a recycled file's
/// earlier use): it reads about twice what the writer added since it was there
/// last, doubling back to [`READ_CHUNK`] with each read that fills. A follower
/// polling every millisecond read a whole chunk of zeros on each poll.
const LIVE_READ_CHUNK: usize = 4 * 1024;

/// One record of a [`LogDir`](crate::LogDir) and where it sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirRecord {
    /// Where the record's first fragment starts.
    pub start: LogPosition,
    /// Just past the record: a checkpoint, reading from it yields the next record.
    pub end: LogPosition,
    /// The record's payload.
    pub data: Bytes,
}

/// Reads the records of a [`LogDir`](crate::LogDir) from a position on, moving
/// from segment to segment in order; with [`follow`](Self::follow), waits for new
/// records instead of ending.
///
/// From [`LogDir::read_from`](crate::LogDir::read_from) in the writer's process: it
/// never reads past the durable end, and it pins the segments it still needs so a
/// purge keeps them. From [`DirReader::open`] in any process: it reads what the
/// files hold and polls for more.
///
/// A reader fails (and then ends) rather than yield a record that is no longer in
/// the log: [`Error::TruncatedUnderReader`] when the log was cut before where it
/// had read (in another process: when the segment file being read was cut,
/// replaced, removed or rewritten in place, or rewritten under a record it was
/// putting together), [`Error::Purged`] or [`Error::MissingSegment`] when the next
/// segment is gone, [`Error::BadSegment`] on damage. Every record it returns was,
/// byte for byte, in the log at one moment. A purge up to its position (a
/// consumer's checkpoint) never fails it, even when it takes the segment it was
/// reading; only one that took records it had not returned does
/// ([`Error::Purged`]).
///
/// ```
/// # #[tokio::main]
/// # async fn main() -> Result<(), walcodec::Error> {
/// use walcodec::{LogDir, LogPosition};
///
/// let dir = tempfile::tempdir()?;
/// let log = LogDir::builder().max_segment_bytes(1024).open(dir.path()).await?;
/// let mut follower = log.read_from(LogPosition::START)?.follow();
/// let writer = {
///     let log = log.clone();
///     tokio::spawn(async move {
///         for i in 0..100 {
///             log.append(format!("record {i}")).await?;
///         }
///         Ok::<_, walcodec::Error>(())
///     })
/// };
/// for i in 0..100 {
///     let record = follower.next_record().await.unwrap()?;
///     assert_eq!(record.data, format!("record {i}"));
/// }
/// writer.await.unwrap()?;
/// assert!(log.segments().len() > 1); // it followed across rotations
/// # Ok(())
/// # }
/// ```
pub struct DirReader {
    /// The reader's state; moved into `pending` while a read is under way, so that
    /// a read dropped half-way goes on at the next one.
    walk: Option<Box<Walk>>,
    pending: Option<Pending>,
    /// A record `caught_up` read ahead, returned next.
    peeked: Option<DirRecord>,
    /// Just past the last record returned.
    position: LogPosition,
}

type Pending = Pin<Box<dyn Future<Output = (Box<Walk>, Option<Result<DirRecord, Error>>)> + Send>>;

impl fmt::Debug for DirReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DirReader")
            .field("walk", &self.walk)
            .field("reading", &self.pending.is_some())
            .field("position", &self.position)
            .finish_non_exhaustive()
    }
}

impl DirReader {
    fn new(walk: Walk) -> DirReader {
        DirReader {
            position: walk.position,
            walk: Some(Box::new(walk)),
            pending: None,
            peeked: None,
        }
    }

    pub(crate) fn in_process(inner: Arc<Inner>, from: LogPosition) -> Result<DirReader, Error> {
        Walk::in_process(inner, from).map(DirReader::new)
    }

    /// Reads the log directory at `path` from `from` on, in a process that may not
    /// be the writer's (or with no writer at all). [`LogPosition::START`] reads
    /// from the oldest segment.
    ///
    /// Without the writer's durable end to go by, it reads what the files hold: a
    /// record cut short at the end of the last segment is left for later (or for
    /// the writer's recovery to cut), never reported as damage. It does not pin
    /// segments: a purge by the writer's process may remove a segment it has not
    /// reached yet, which it then reports as [`Error::Purged`].
    ///
    /// # Errors
    /// [`Error::Purged`] when `from`'s segment was purged; [`Error::Io`] when the
    /// directory cannot be read.
    pub async fn open(path: impl AsRef<Path>, from: LogPosition) -> Result<DirReader, Error> {
        Walk::open(path, from).await.map(DirReader::new)
    }

    /// Waits for new records at the end of the log instead of ending: the stream
    /// ends only on an error. Drop the reader to stop following. Set it before the
    /// first read.
    pub fn follow(mut self) -> DirReader {
        if let Some(walk) = self.walk.as_mut() {
            walk.follow = true;
        }
        self
    }

    /// How often a follower in another process looks for new bytes and new
    /// segments (default 50 ms). A follower in the writer's process does not poll
    /// (see [`with_wake_interval`](Self::with_wake_interval)).
    /// Set it before the first read.
    pub fn with_poll_interval(mut self, interval: Duration) -> DirReader {
        if let Some(walk) = self.walk.as_mut() {
            walk.poll_interval = interval;
        }
        self
    }

    /// How long a follower in the writer's process lets a busy log's commits
    /// gather before it looks again (default [`LogDirOptions::DEFAULT_WAKE_INTERVAL`], 1 ms).
    ///
    /// It is woken by the writer's durable end, and waking a task on every commit
    /// costs a lone appending task about 10% of its appends/s. So once woken, it
    /// looks again no sooner than `interval` later, without being woken, for as
    /// long as the log keeps growing; when nothing arrived meanwhile it waits to
    /// be woken, and the first commit after a quiet spell reaches it at once.
    /// While the log is busy, records reach it up to `interval` (plus the
    /// runtime's 1 ms timer tick) after their commit. `Duration::ZERO` wakes it on
    /// every commit: the lowest latency, at that cost to the writer. A follower in
    /// another process polls instead ([`with_poll_interval`](Self::with_poll_interval)).
    /// A non-zero interval sleeps on Tokio's timer, as a polling follower does: the
    /// runtime needs its time driver (`#[tokio::main]` and `Runtime::new` have it).
    pub fn with_wake_interval(mut self, interval: Duration) -> DirReader {
        if let Some(Source::Writer { end, .. }) = self.walk.as_mut().map(|w| &mut w.source) {
            end.set_interval(interval);
        }
        self
    }

    /// Just past the last record returned (where reading started before the
    /// first): a checkpoint to resume from.
    pub fn position(&self) -> LogPosition {
        self.position
    }

    /// The next record; `None` at the end of what is readable (a follower waits
    /// instead). After an error, `None`. Dropping the returned future loses
    /// nothing: the read goes on at the next call.
    pub async fn next_record(&mut self) -> Option<Result<DirRecord, Error>> {
        futures::future::poll_fn(|cx| self.poll_record(cx)).await
    }

    /// Whether every record the log holds now has been returned: reads what is
    /// readable without waiting, and answers `false` as soon as a record is (it is
    /// kept, and the next read returns it), `true` at the end of what is readable
    /// (in the writer's process, its durable end; in another, what the files hold
    /// before space the writer has not reached). A consumer asks it before it
    /// answers "am I current?", with no timeout.
    ///
    /// ```
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), walcodec::Error> {
    /// use walcodec::{LogDir, LogPosition};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let log = LogDir::open(dir.path()).await?;
    /// log.append(b"one").await?;
    /// let mut follower = log.read_from(LogPosition::START)?.follow();
    /// assert!(!follower.caught_up().await?);
    /// assert_eq!(follower.next_record().await.unwrap()?.data, &b"one"[..]);
    /// assert!(follower.caught_up().await?);
    /// log.append(b"two").await?;
    /// assert!(!follower.caught_up().await?);
    /// # log.close().await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// What the next read would fail with; the reader is then over.
    pub async fn caught_up(&mut self) -> Result<bool, Error> {
        if self.peeked.is_some() {
            return Ok(false);
        }
        let read = futures::future::poll_fn(|cx| self.poll_walk(cx, true)).await;
        match read {
            Some(Ok(record)) => {
                self.peeked = Some(record);
                Ok(false)
            }
            Some(Err(e)) => Err(e),
            None => Ok(true),
        }
    }

    fn poll_record(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<DirRecord, Error>>> {
        if let Some(record) = self.peeked.take() {
            self.position = record.end;
            return Poll::Ready(Some(Ok(record)));
        }
        loop {
            if self.pending.is_none() {
                if let Some(read) = self.walk.as_mut().and_then(|walk| walk.next_buffered()) {
                    if let Ok(record) = &read {
                        self.position = record.end;
                    }
                    return Poll::Ready(Some(read));
                }
            }
            let read = ready!(self.poll_walk(cx, false));
            if let Some(Ok(record)) = &read {
                self.position = record.end;
            }
            // A read `caught_up` began and dropped stopped where a follower
            // waits: this one waits.
            let stopped = self
                .walk
                .as_mut()
                .is_some_and(|walk| std::mem::take(&mut walk.at_end));
            if read.is_none() && stopped {
                continue;
            }
            return Poll::Ready(read);
        }
    }

    /// Polls the read under way, or starts one (not waiting at the end of what
    /// is readable when `no_wait`).
    fn poll_walk(
        &mut self,
        cx: &mut Context<'_>,
        no_wait: bool,
    ) -> Poll<Option<Result<DirRecord, Error>>> {
        if self.pending.is_none() {
            let Some(mut walk) = self.walk.take() else {
                return Poll::Ready(None);
            };
            walk.no_wait = no_wait;
            walk.at_end = false;
            walk.looked_again = false;
            self.pending = Some(Box::pin(async move {
                let read = walk.next_record().await;
                (walk, read)
            }));
        }
        let pending = self.pending.as_mut().expect("started above");
        let (walk, read) = ready!(pending.as_mut().poll(cx));
        self.pending = None;
        self.walk = Some(walk);
        Poll::Ready(read)
    }
}

impl Stream for DirReader {
    type Item = Result<DirRecord, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().poll_record(cx)
    }
}

/// The state of a [`DirReader`], moved into the read under way and back.
#[derive(Debug)]
struct Walk {
    dir: PathBuf,
    source: Source,
    /// The segments are Pebble's (see `LogDirOptions::dialect`).
    pebble: bool,
    follow: bool,
    poll_interval: Duration,
    /// The segment being read.
    segment: u64,
    /// Where to start in `segment` when it is opened.
    start_offset: u64,
    cursor: Option<Cursor>,
    /// Just past the last record returned (or where reading started).
    position: LogPosition,
    failed: bool,
    /// Stop where a follower would wait (`caught_up`), and say so in `at_end`.
    no_wait: bool,
    at_end: bool,
    /// In `caught_up`: whether it went back once already, so that what it
    /// decodes now was read after it began.
    looked_again: bool,
    /// In another process: the segment after which the directory was last listed
    /// for a later segment (none was there), and when.
    holes_checked: Option<(u64, Instant)>,
    /// What the decoder said when [`next_buffered`](Walk::next_buffered) found no
    /// record in the buffer: the read it hands over to goes on from it.
    decoded: Option<Result<Option<Bytes>, CodecError>>,
}

#[derive(Debug)]
enum Source {
    /// In the writer's process: bounded by the durable end, pinning segments.
    Writer {
        inner: Arc<Inner>,
        end: DurableWatch,
        truncations_seen: usize,
    },
    /// Any process: what the files hold.
    Files,
}

#[derive(Debug)]
struct Cursor {
    /// Read at offsets (`read_at`): from the page cache on the task's thread.
    file: Arc<std::fs::File>,
    decoder: LogDecoder,
    buf: BytesMut,
    /// File offset just past the bytes read so far.
    read_to: u64,
    /// Where the last read began: a record that starts before it was put together
    /// from more than one read, and is checked before it is returned.
    read_from: u64,
    /// The segment is over and every byte of it is in `buf`.
    at_eof: bool,
    /// In another process: what tells that the file changed under the reader.
    guard: Option<FileGuard>,
    /// The last read reached the file's end (it got fewer bytes than it asked for):
    /// the file must be checked before the next, which may come after any change.
    reached_end: bool,
    /// Damage met past the last record of a segment written in place, read again
    /// before it is believed: where the reader went back to, and what it was.
    doubted: LiveDoubt,
    /// Bytes to read at a time ([`READ_CHUNK`], or less at a live end).
    chunk: usize,
    /// Where the reader last went back to at the end of what the writer wrote.
    live_end: Option<u64>,
    /// In another process, until the reader first sees the segment sealed: what it
    /// read past the last record may be older than the writer's last writes (a
    /// recycled file's earlier use, zeros, a read that raced a write), which the
    /// decoder passes over as space not yet written. Once sealed it goes back to
    /// the last record and reads the rest again, once, now that it cannot change.
    read_live: bool,
}

impl Cursor {
    /// Whether `record`, just decoded, was put together from more than one read
    /// in another process (it starts before the last read did): the file must
    /// then be checked to still hold it. A record inside one read is what the file
    /// held when it was read.
    fn assembled(&self, record: &DirRecord) -> bool {
        self.guard.is_some() && record.start.offset < self.read_from
    }

    /// Whether the file still holds `record`'s bytes, checked on this thread from
    /// the page cache; `false` when it does not or cannot tell there.
    fn span_holds_cached(&mut self, record: &DirRecord) -> bool {
        let guard = self
            .guard
            .as_mut()
            .expect("only a guarded record is checked");
        match guard
            .span(record.start.offset, record.end.offset)
            .run_cached()
        {
            Ok((recent, result)) => {
                guard.restore(recent);
                result.is_ok()
            }
            Err(span) => {
                guard.restore(span.into_window());
                false
            }
        }
    }

    /// The record the decoder just returned, in `segment`.
    fn record(&mut self, segment: u64, data: Bytes) -> DirRecord {
        self.doubted.clear();
        let position = self
            .decoder
            .last_record()
            .expect("a returned record has a position");
        DirRecord {
            start: LogPosition::new(segment, position.start),
            end: LogPosition::new(segment, position.end),
            data,
        }
    }
}

/// How much of the current segment may be read now.
struct Readable {
    /// Read no further than this offset (`None`: to the file's end).
    limit: Option<u64>,
    /// No record will be added to the segment.
    sealed: bool,
}

impl Walk {
    fn in_process(inner: Arc<Inner>, from: LogPosition) -> Result<Walk, Error> {
        let (from, truncations_seen) = {
            let mut catalog = inner.catalog();
            let from = catalog.resolve(from)?;
            if from.segment > catalog.active {
                return Err(Error::InvalidPosition {
                    position: from,
                    reason: "past the end of the log",
                });
            }
            catalog.pin(from.segment);
            (from, catalog.truncations.len())
        };
        let end = DurableWatch::new(inner.subscribe(), LogDirOptions::DEFAULT_WAKE_INTERVAL);
        Ok(Walk {
            dir: inner.dir().to_path_buf(),
            pebble: inner.options.pebble(),
            source: Source::Writer {
                inner,
                end,
                truncations_seen,
            },
            follow: false,
            poll_interval: LogTailer::DEFAULT_POLL_INTERVAL,
            segment: from.segment,
            start_offset: from.offset,
            cursor: None,
            position: from,
            failed: false,
            no_wait: false,
            at_end: false,
            looked_again: false,
            holes_checked: None,
            decoded: None,
        })
    }

    async fn open(path: impl AsRef<Path>, from: LogPosition) -> Result<Walk, Error> {
        let dir = path.as_ref().to_path_buf();
        // The segments a reader reads (`LogDir::list`): segments a crash kept from a
        // purge are not part of the log.
        let (listing, pebble) = {
            let dir = dir.clone();
            tokio::task::spawn_blocking(move || {
                let listing = super::listing::list(&dir)?;
                Ok::<_, Error>((listing, super::dialect::is_marked_pebble(&dir)?))
            })
            .await
            .map_err(std::io::Error::other)??
        };
        let purged_through = listing.purged_through;
        let first = listing
            .segments
            .first()
            .map_or(purged_through.segment + 1, |segment| segment.number);
        let from = super::resolve_start(from, first, purged_through)?;
        Ok(Walk {
            dir,
            source: Source::Files,
            pebble,
            follow: false,
            poll_interval: LogTailer::DEFAULT_POLL_INTERVAL,
            segment: from.segment,
            start_offset: from.offset,
            cursor: None,
            position: from,
            failed: false,
            no_wait: false,
            at_end: false,
            looked_again: false,
            holes_checked: None,
            decoded: None,
        })
    }

    /// The next record; `None` at the end of what is readable (a follower waits
    /// instead, unless `no_wait`). After an error, `None`.
    async fn next_record(&mut self) -> Option<Result<DirRecord, Error>> {
        if self.failed {
            return None;
        }
        match self.advance().await {
            Ok(record) => {
                if let Some(record) = &record {
                    self.position = record.end;
                }
                record.map(Ok)
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }

    /// The next record when the buffer already holds it, decoded on the spot: a
    /// read under way is a boxed future holding the whole walk, and a follower
    /// that finds a hundred records per poll spent much of its CPU building one
    /// per record. `None` when the read must go on as a future; what the decoder
    /// said is then kept for it.
    fn next_buffered(&mut self) -> Option<Result<DirRecord, Error>> {
        if self.failed || self.decoded.is_some() || self.cursor.is_none() {
            return None;
        }
        if let Err(e) = self.check_truncations() {
            self.failed = true;
            return Some(Err(e));
        }
        let segment = self.segment;
        let cursor = self.cursor.as_mut().expect("checked above");
        let decoded = if cursor.at_eof {
            cursor.decoder.decode_eof(&mut cursor.buf)
        } else {
            cursor.decoder.decode(&mut cursor.buf)
        };
        match decoded {
            Ok(Some(data)) => {
                let record = cursor.record(segment, data);
                if cursor.assembled(&record) && !cursor.span_holds_cached(&record) {
                    // Not known to be whole yet: the read under way checks it, on a
                    // blocking thread if it must, and says what changed if it did.
                    self.decoded = Some(Ok(Some(record.data)));
                    return None;
                }
                self.position = record.end;
                Some(Ok(record))
            }
            other => {
                self.decoded = Some(other);
                None
            }
        }
    }

    async fn advance(&mut self) -> Result<Option<DirRecord>, Error> {
        loop {
            // Before anything read is decoded, and while waiting for a segment that
            // a truncation may have removed.
            self.check_truncations()?;
            if self.cursor.is_none() && !self.open_segment().await? {
                if self.stop_here() {
                    return Ok(None);
                }
                self.wait().await;
                continue;
            }
            let segment = self.segment;
            let cursor = self.cursor.as_mut().expect("opened above");
            let decoded = match self.decoded.take() {
                Some(decoded) => decoded,
                None if cursor.at_eof => cursor.decoder.decode_eof(&mut cursor.buf),
                None => cursor.decoder.decode(&mut cursor.buf),
            };
            let decoded = match decoded {
                Err(e) if !cursor.at_eof && self.is_live_error(&e).await? => {
                    // Damage past the last record of a segment still written in
                    // place may be a write in progress: read it again before
                    // believing it.
                    self.go_back().await?;
                    if self.look_again() {
                        continue;
                    }
                    if self.stop_here() {
                        return Ok(None);
                    }
                    self.wait().await;
                    continue;
                }
                decoded => decoded,
            };
            let cursor = self.cursor.as_mut().expect("opened above");
            let decoded = match decoded {
                Err(e) if cursor.guard.is_some() => Err(self.damage_or_change(e.into()).await),
                decoded => decoded.map_err(|e| bad_segment(segment, e.into())),
            };
            let cursor = self.cursor.as_mut().expect("opened above");
            match decoded? {
                Some(data) => {
                    let record = cursor.record(segment, data);
                    if cursor.assembled(&record) {
                        self.verify_assembled(&record).await?;
                    }
                    return Ok(Some(record));
                }
                None if cursor.at_eof => {
                    // Read in another process, a sealed segment ends at its last
                    // record whatever follows it (zeros, an earlier use's bytes, a
                    // write a crash cut short); the writer's process knows it synced
                    // the whole segment, so there a torn tail is damage.
                    if cursor.decoder.has_incomplete_tail() && cursor.guard.is_none() {
                        let cut = Error::Corruption {
                            offset: cursor.decoder.valid_prefix_len(),
                            bytes: cursor.read_to - cursor.decoder.valid_prefix_len(),
                            kind: crate::decoder::error::CorruptionKind::TruncatedTail,
                        };
                        return Err(bad_segment(segment, cut));
                    }
                    if cursor.guard.is_some() {
                        // The end of what the file held, read through the file the
                        // reader opened: if a purge took the segment and its file
                        // was recycled (written over as a later segment), that end
                        // came early, and records it never returned went.
                        let purged = super::recovery::read_purged(&self.dir).await?;
                        if purged.segment == segment && purged > self.returned_in_segment() {
                            return Err(Error::Purged { segment });
                        }
                    }
                    self.next_segment();
                    continue;
                }
                None => {}
            }
            let readable = self.readable().await?;
            let live = matches!(self.source, Source::Files) && !readable.sealed;
            let cursor = self.cursor.as_mut().expect("opened above");
            if readable.sealed && std::mem::replace(&mut cursor.read_live, false) {
                // Sealed since the bytes past the last record were read: read them
                // again (see `Cursor::read_live`), or records the writer put there
                // after the read would be skipped with the space they filled.
                self.go_back().await?;
                continue;
            }
            if live && cursor.decoder.passed_unwritten() {
                // Past the last record into space the writer has not reached
                // (preallocated zeros, a recycled file's earlier use): back to that
                // record's end, to read again once the writer wrote more, or once a
                // later segment shows this one is sealed.
                self.go_back().await?;
                // Read about what the writer added since the last time here (twice
                // it), not a whole chunk of the space it has not reached.
                let cursor = self.cursor.as_mut().expect("opened above");
                let end = cursor.read_to;
                let added = cursor.live_end.map_or(0, |last| end.saturating_sub(last));
                cursor.live_end = Some(end);
                cursor.chunk = (2 * added as usize)
                    .next_power_of_two()
                    .clamp(LIVE_READ_CHUNK, READ_CHUNK);
                // `readable` looked for the next segment just now (a `stat` per poll
                // spared): only a hole remains to be seen.
                if self.look_again() || self.later_segment_than_next().await? {
                    continue;
                }
                if self.stop_here() {
                    return Ok(None);
                }
                self.wait().await;
                continue;
            }
            let chunk = cursor.chunk;
            let room = match readable.limit {
                Some(limit) => limit.saturating_sub(cursor.read_to).min(chunk as u64) as usize,
                None => chunk,
            };
            if room > 0 && self.fill(room).await? > 0 {
                continue;
            }
            if self.cursor.as_ref().is_some_and(|cursor| cursor.at_eof) {
                // A purge took the segment after the reader returned its last record.
                continue;
            }
            if readable.sealed {
                // Sealed before the read above: the read saw all of it.
                let cursor = self.cursor.as_mut().expect("opened above");
                cursor.at_eof = true;
                continue;
            }
            if self.later_segment_exists().await? {
                // The writer moved on after the read above, and may have written the
                // segment's last bytes in between: read again from the last record
                // (see `Cursor::read_live`), now that nothing more can come, before
                // taking its end for the end.
                let cursor = self.cursor.as_mut().expect("opened above");
                if std::mem::replace(&mut cursor.read_live, false) {
                    self.go_back().await?;
                }
                if self.fill(READ_CHUNK).await? == 0 {
                    self.cursor.as_mut().expect("opened above").at_eof = true;
                }
                continue;
            }
            if live {
                // The bytes of a record not yet complete may still change in a file
                // written in place: read them again after the wait.
                let cursor = self.cursor.as_ref().expect("opened above");
                if cursor.decoder.offset() + cursor.buf.len() as u64 > cursor.decoder.rewind_point()
                {
                    self.go_back().await?;
                    // What was read past the last record may be older than the
                    // writer's last write (zeros a decoder skips to a block's end
                    // leave no trace), so `caught_up` reads it again once.
                    if self.look_again() {
                        continue;
                    }
                }
            }
            if self.stop_here() {
                return Ok(None);
            }
            self.wait().await;
        }
    }

    /// Whether `error`, met decoding the current segment, may be a write still in
    /// progress to be read again (in another process, in a segment not sealed, and
    /// not met there already): then it is noted as met.
    async fn is_live_error(&mut self, error: &CodecError) -> Result<bool, Error> {
        if !matches!(self.source, Source::Files) || matches!(error, CodecError::Io(_)) {
            return Ok(false);
        }
        if self.readable().await?.sealed {
            return Ok(false);
        }
        let cursor = self.cursor.as_mut().expect("a segment is open");
        let rewind_point = cursor.decoder.rewind_point();
        Ok(cursor.doubted.read_again(rewind_point, error))
    }

    /// Goes back to the end of the current segment's last record (see
    /// `LogDecoder::rewind`): the decoder, the file and the guard's window. The
    /// guard checks the file before the next read.
    async fn go_back(&mut self) -> Result<(), Error> {
        let cursor = self.cursor.as_mut().expect("a segment is open");
        let point = cursor.decoder.rewind();
        cursor.buf.clear();
        cursor.read_to = point;
        cursor.read_from = point;
        cursor.reached_end = true;
        if let Some(guard) = cursor.guard.as_mut() {
            guard.rewind(point);
        }
        Ok(())
    }

    /// Reads up to `max` more bytes of the current segment into its buffer; 0 at
    /// the end of the file. When the last read reached the file's end, checks first
    /// that the file is still the one read (another process), as a
    /// [`LogTailer`](crate::LogTailer) does after each wait: the writer may have cut
    /// and regrown it since, and once new bytes are read a rewrite before them can
    /// no longer be seen. Reads that got all they asked for skip the check, so
    /// catching up costs nothing more.
    async fn fill(&mut self, max: usize) -> Result<usize, Error> {
        let segment = self.segment;
        let cursor = self.cursor.as_mut().expect("a segment is open");
        if cursor.at_eof {
            return Ok(0);
        }
        if let (true, Some(guard)) = (cursor.reached_end, cursor.guard.as_mut()) {
            let returned_end = cursor.decoder.rewind_point();
            let moved = match guard.verify(cursor.read_to, returned_end).await {
                Ok(moved) => moved,
                Err(Error::LogChanged(LogChange::Removed | LogChange::Replaced))
                    if self.purged_to_here().await? =>
                {
                    // A purge up to the reader's position took the segment (deleted,
                    // or renamed into the pool of files to recycle): every record
                    // it held was returned, so it is over.
                    self.go_back().await?;
                    let cursor = self.cursor.as_mut().expect("a segment is open");
                    cursor.reached_end = false;
                    cursor.at_eof = true;
                    return Ok(0);
                }
                Err(e) => return Err(changed_under_reader(segment, returned_end, e)),
            };
            if moved {
                // Bytes read after the last record changed (a write in place went
                // on): read them again, now, from that record's end; the bytes
                // before it were just checked.
                self.go_back().await?;
                self.cursor.as_mut().expect("a segment is open").reached_end = false;
            }
        }
        let cursor = self.cursor.as_mut().expect("a segment is open");
        let before = cursor.buf.len();
        cursor.buf.reserve(max);
        let n = read_at(&cursor.file, &mut cursor.buf, cursor.read_to, max).await?;
        if let Some(guard) = cursor.guard.as_mut() {
            guard.read(
                &cursor.buf[before..before + n],
                cursor.decoder.rewind_point(),
            );
        }
        if n > 0 {
            cursor.read_from = cursor.read_to;
        }
        cursor.read_to += n as u64;
        #[cfg(test)]
        seal_race::after_read(segment, cursor.read_to);
        cursor.reached_end = n < max;
        if n == max {
            // A full read: catching up, so read in larger pieces again.
            cursor.chunk = (cursor.chunk * 2).min(READ_CHUNK);
        }
        Ok(n)
    }

    /// Opens the current segment at the reader's offset; `false` when it does not
    /// exist yet. A segment a purge took with nothing in it left to return is
    /// passed: the next one is opened.
    async fn open_segment(&mut self) -> Result<bool, Error> {
        loop {
            match self.try_open_segment().await? {
                Some(opened) => return Ok(opened),
                None => self.next_segment(),
            }
        }
    }

    /// [`open_segment`](Self::open_segment) once: `None` when the segment was
    /// purged with nothing left in it that the reader has not returned.
    async fn try_open_segment(&mut self) -> Result<Option<bool>, Error> {
        if let Source::Writer { inner, .. } = &self.source {
            let catalog = inner.catalog();
            if self.segment < catalog.first {
                return Err(Error::Purged {
                    segment: self.segment,
                });
            }
            if self.segment > catalog.active {
                return Ok(Some(false));
            }
        }
        let path = segment_path(&self.dir, self.segment);
        let file = {
            let path = path.clone();
            super::fs::blocking(move || crate::open::open_to_read(&path)).await
        };
        let file = match file {
            Ok(file) => Arc::new(file),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return match self.source {
                    Source::Writer { .. } => {
                        self.check_truncations()?;
                        Err(e.into())
                    }
                    Source::Files => self.missing_segment().await,
                };
            }
            Err(e) => return Err(e.into()),
        };
        let read_to = block_start(self.start_offset);
        let guard = match self.source {
            Source::Writer { .. } => None,
            Source::Files => {
                let segment = self.segment;
                let opened = Arc::clone(&file);
                let guard = tokio::task::spawn_blocking(move || {
                    FileGuard::new(path, &opened.metadata()?, read_to)
                })
                .await
                .map_err(|join| Error::Io(std::io::Error::other(join)))?
                .map_err(|e| changed_under_reader(segment, read_to, e))?;
                Some(guard)
            }
        };
        // RocksDB's dialect with the segment's number: a legacy segment reads as
        // LevelDB's reader reads it, a recyclable one (recycling) ends where the
        // bytes of its file's earlier use begin. Pebble's dialect with it in a
        // directory of Pebble's segments: a sealed one ends at its EOF trailer, a
        // recycled one where its file's earlier use (another number) begins.
        let mut decoder = super::dialect::segment_decoder(self.segment, self.pebble)
            .start_offset(self.start_offset)
            .build();
        if guard.is_some() {
            decoder.set_live();
        }
        self.cursor = Some(Cursor {
            file,
            decoder,
            buf: BytesMut::new(),
            read_to,
            read_from: read_to,
            at_eof: false,
            guard,
            reached_end: false,
            doubted: LiveDoubt::default(),
            chunk: READ_CHUNK,
            live_end: None,
            read_live: matches!(self.source, Source::Files),
        });
        Ok(Some(true))
    }

    /// The current segment's file is not there (a reader in another process): not
    /// written yet (`Some(false)`), purged (`None` when nothing the reader has not
    /// returned went with it), or lost.
    async fn missing_segment(&self) -> Result<Option<bool>, Error> {
        let segments = {
            let dir = self.dir.clone();
            super::fs::blocking(move || list_segments(&dir)).await?
        };
        let segment = self.segment;
        match (segments.first(), segments.last()) {
            (Some(&first), _) if first > segment => match self.purged_to_here().await? {
                true => Ok(None),
                false => Err(Error::Purged { segment }),
            },
            (_, Some(&last)) if last > segment => Err(Error::MissingSegment { segment }),
            _ => Ok(Some(false)),
        }
    }

    /// Where the reader is in the current segment: just past the last record it
    /// returned there, or where it starts reading it.
    fn returned_in_segment(&self) -> LogPosition {
        if self.position.segment == self.segment {
            self.position
        } else {
            LogPosition::new(self.segment, self.start_offset)
        }
    }

    /// In another process, when the current segment's file went or ended early:
    /// whether a purge took it (the `PURGED` file, which a purge writes before it
    /// removes anything, reaches into it) with nothing the reader has not returned
    /// (`PURGED` is at or before its position there). A purge past its position
    /// is [`Error::Purged`]; `false` when no purge reached the segment.
    async fn purged_to_here(&self) -> Result<bool, Error> {
        let purged = super::recovery::read_purged(&self.dir).await?;
        if purged.segment < self.segment {
            return Ok(false);
        }
        if purged <= self.returned_in_segment() {
            return Ok(true);
        }
        Err(Error::Purged {
            segment: self.segment,
        })
    }

    /// A record put together from more than one read: the file must still hold
    /// its bytes (see `FileGuard::span`), else the log was rewritten under it.
    async fn verify_assembled(&mut self, record: &DirRecord) -> Result<(), Error> {
        let cursor = self.cursor.as_mut().expect("a segment is open");
        let guard = cursor
            .guard
            .as_mut()
            .expect("only a guarded record is checked");
        match guard
            .verify_span(record.start.offset, record.end.offset)
            .await
        {
            Ok(()) => Ok(()),
            Err(e) => Err(self.changed_under(e).await),
        }
    }

    /// What damage the decoder met in another process means: if bytes read since
    /// the last record returned changed in a sealed segment (where no write in
    /// place goes on), the log was rewritten under the reader (reading them joined
    /// two versions of the file), not damaged. In a live segment the damage was
    /// read twice, and the guard's check between the two reads saw no rewrite.
    async fn damage_or_change(&mut self, error: Error) -> Error {
        let segment = self.segment;
        match self.readable().await {
            Ok(readable) if readable.sealed => {}
            _ => return bad_segment(segment, error),
        }
        let cursor = self.cursor.as_mut().expect("a segment is open");
        let from = cursor.decoder.rewind_point().min(cursor.read_to);
        let to = cursor.read_to;
        let Some(guard) = cursor.guard.as_mut() else {
            return bad_segment(segment, error);
        };
        match guard.verify_span(from, to).await {
            Ok(()) => bad_segment(segment, error),
            Err(change) => self.changed_under(change).await,
        }
    }

    /// A change a span check found, as the reader reports it: a purge past its
    /// position ([`Error::Purged`]), else the log cut or rewritten under it.
    async fn changed_under(&mut self, change: Error) -> Error {
        if let Err(purged) = self.purged_to_here().await {
            return purged;
        }
        let segment = self.segment;
        let read_to = self.cursor.as_ref().map_or(0, |cursor| cursor.read_to);
        let position = match change {
            Error::LogChanged(LogChange::Rewritten { offset }) => offset,
            Error::LogChanged(LogChange::Shrunk { len, .. }) => len,
            other => return other,
        };
        Error::TruncatedUnderReader {
            position: LogPosition::new(segment, position),
            reader: LogPosition::new(segment, read_to),
        }
    }

    /// In another process, at the end of a segment whose successor is not there:
    /// whether a later one is (a hole, reported when the reader gets to it).
    /// The next segment is looked up at once; a later one with a hole before it
    /// only a lost segment makes, so a follower waiting at the end of a live
    /// segment lists the directory for it at most once per
    /// [`HOLE_CHECK_INTERVAL`], not on every poll.
    async fn later_segment_exists(&mut self) -> Result<bool, Error> {
        if let Source::Writer { .. } = self.source {
            return Ok(false);
        }
        // The next one, as `readable` looks for it: the usual case, a rotation.
        if segment_path(&self.dir, self.segment + 1).try_exists()? {
            return Ok(true);
        }
        self.later_segment_than_next().await
    }

    /// [`later_segment_exists`](Self::later_segment_exists) when the next segment
    /// was just looked for and is not there: a later one is a hole, which the
    /// directory is listed for at most once per [`HOLE_CHECK_INTERVAL`].
    async fn later_segment_than_next(&mut self) -> Result<bool, Error> {
        let now = Instant::now();
        if self
            .holes_checked
            .is_some_and(|(segment, at)| segment == self.segment && now < at + HOLE_CHECK_INTERVAL)
        {
            return Ok(false);
        }
        let dir = self.dir.clone();
        let segments = super::fs::blocking(move || list_segments(&dir)).await?;
        self.holes_checked = Some((self.segment, now));
        Ok(segments.last().is_some_and(|&last| last > self.segment))
    }

    /// Moves on to the start of the next segment.
    fn next_segment(&mut self) {
        let done = self.segment;
        self.segment += 1;
        self.start_offset = 0;
        self.cursor = None;
        if let Source::Writer { inner, .. } = &self.source {
            let mut catalog = inner.catalog();
            catalog.pin(done + 1);
            catalog.unpin(done);
        }
    }

    /// How far the current segment may be read now.
    async fn readable(&self) -> Result<Readable, Error> {
        match &self.source {
            Source::Writer { end, .. } => {
                let end = end.peek();
                Ok(if end.segment > self.segment {
                    Readable {
                        limit: None,
                        sealed: true,
                    }
                } else {
                    Readable {
                        limit: Some(if end.segment == self.segment {
                            end.offset
                        } else {
                            0
                        }),
                        sealed: false,
                    }
                })
            }
            Source::Files => {
                // Look for the next segment before reading to the end: once it
                // exists, this one was closed before it, so its file is complete.
                // On this thread: one lookup in a directory being read, whose
                // entries are cached (a blocking thread there and back on each
                // poll cost more than the rest of it).
                let next = segment_path(&self.dir, self.segment + 1);
                let sealed = next.try_exists()?;
                Ok(Readable {
                    limit: None,
                    sealed,
                })
            }
        }
    }

    /// Fails if the log was truncated before what this reader has read.
    fn check_truncations(&mut self) -> Result<(), Error> {
        let reader = LogPosition::new(
            self.segment,
            self.cursor
                .as_ref()
                .map_or(self.start_offset, |c| c.read_to.max(self.start_offset)),
        );
        if let Source::Writer {
            inner,
            truncations_seen,
            ..
        } = &mut self.source
        {
            let catalog = inner.catalog();
            let new = &catalog.truncations[*truncations_seen..];
            *truncations_seen = catalog.truncations.len();
            if let Some(&position) = new.iter().filter(|&&t| t < reader).min() {
                return Err(Error::TruncatedUnderReader { position, reader });
            }
        }
        Ok(())
    }

    /// After going back, in `caught_up` (`no_wait`): read again at once, the first
    /// time, since the bytes that made it go back may have been read before the
    /// writer wrote there.
    fn look_again(&mut self) -> bool {
        self.no_wait && !std::mem::replace(&mut self.looked_again, true)
    }

    /// At the end of what is readable now: whether to return rather than wait (a
    /// reader that does not follow, or `caught_up`, which learns so in `at_end`).
    fn stop_here(&mut self) -> bool {
        self.at_end = self.follow && self.no_wait;
        !self.follow || self.no_wait
    }

    /// Waits for the log to grow: on the writer's watch channel, or one poll interval.
    async fn wait(&mut self) {
        match &mut self.source {
            // The reader holds the sender's owner, so the channel never closes under it.
            Source::Writer { end, .. } => {
                let _ = end.moved().await;
            }
            Source::Files => tokio::time::sleep(self.poll_interval).await,
        }
    }
}

impl Drop for Walk {
    fn drop(&mut self) {
        if let Source::Writer { inner, .. } = &self.source {
            inner.catalog().unpin(self.segment);
        }
    }
}

/// What the guard of `segment`'s file found, as a LogDir reader reports it: the
/// log was cut (at the segment's new length, or at its start when the file is gone
/// or another) or rewritten (at the first byte that changed) below `returned_end`,
/// the end of the last record the reader returned (where it started, before any).
fn changed_under_reader(segment: u64, returned_end: u64, error: Error) -> Error {
    let position = |offset| Error::TruncatedUnderReader {
        position: LogPosition::new(segment, offset),
        reader: LogPosition::new(segment, returned_end),
    };
    match error {
        Error::LogChanged(LogChange::Shrunk { len, .. }) => position(len),
        Error::LogChanged(LogChange::Replaced | LogChange::Removed) => position(0),
        Error::LogChanged(LogChange::Rewritten { offset }) => position(offset),
        other => other,
    }
}

fn bad_segment(segment: u64, error: Error) -> Error {
    match error {
        Error::Io(e) => Error::Io(e),
        other => Error::BadSegment {
            segment,
            source: Box::new(other),
        },
    }
}

// The re-read at the seal, with its events ordered by a hook in `fill`.
#[cfg(test)]
#[path = "reader_seal_race.rs"]
mod seal_race;
