//! [`DirReader`]: reading and following a [`LogDir`](crate::LogDir) across its
//! segments.
//!
//! Here the public face: [`DirReader`], a read under way as a future that holds the
//! reader's state, and the record `caught_up` read ahead. The state machine that
//! moves from segment to segment is `walk.rs` (`Walk`); where a segment ends and
//! which comes next (the writer's durable end, or the files) is `segments.rs`; what
//! the bytes of a followed file mean (doubt, going back, the file's guard) is the
//! follower engine `LogTailer` shares, `crate::reader::follow`.
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
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;

use crate::error::Error;
use crate::logdir::Inner;
use crate::position::LogPosition;
use segments::Source;
use walk::Walk;

mod segments;
mod walk;

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
    /// gather before it looks again (default
    /// [`LogDirOptions::DEFAULT_WAKE_INTERVAL`](crate::logdir::LogDirOptions::DEFAULT_WAKE_INTERVAL),
    /// 1 ms).
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
            if let Some(cursor) = walk.cursor.as_mut() {
                cursor.engine.start_looking();
            }
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
