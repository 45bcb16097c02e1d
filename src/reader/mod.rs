//! Reading logs from files and streams: whole logs, splits of a log for parallel
//! processing, and live logs that another task or process is still appending to.
//!
//! [`LogReader`] drives a [`LogDecoder`] over any [`AsyncRead`] and yields
//! [`LogRecord`]s, each with its [`Position`]. Unlike a `FramedRead`, it stops reading
//! as soon as the decoder is finished (the end of a split), and in follow mode
//! ([`LogTailer`]) it waits at EOF for the log to grow instead of ending.
//!
//! A short read is never taken for EOF: only a read of zero bytes is.

// Why one file: `LogReader`'s poll loop (reads, live waits, seek-backs, the span check)
// is one state machine; the other readers live beside it in this folder.

use std::future::Future;
use std::io::SeekFrom;
use std::ops::Range;
use std::path::Path;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use futures::Stream;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncSeek};
use tokio_util::io::poll_read_buf;

use crate::decoder::LogDecoder;
use crate::decoder::LogDecoderBuilder;
use crate::decoder::LogInput;
use crate::error::Error;
use crate::format::{block_start, BLOCK_SIZE};
use crate::reader::record::StreamState;

mod chunks;
pub(crate) mod follow;
pub(crate) mod guard;
mod readahead;
pub(crate) mod record;
pub(crate) mod repair;
mod tailer;

pub use crate::codec::record_decoder::LogRecord;
pub use chunks::{ChunkReader, CHUNK_ALIGN};
use follow::Follow;
use guard::FileGuard;
pub use readahead::{ReadAhead, ReadAheadBuilder};
pub use tailer::LogTailer;

/// A stream of [`LogRecord`]s decoded from an [`AsyncRead`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), walcodec::Error> {
/// use bytes::BytesMut;
/// use futures::TryStreamExt;
/// use walcodec::{LogDecoder, LogEncoder, LogReader};
///
/// let mut log = BytesMut::new();
/// let mut encoder = LogEncoder::new();
/// for record in [&b"one"[..], b"two", b"three"] {
///     encoder.encode_record(record, &mut log);
/// }
/// let records: Vec<_> = LogReader::new(&log[..], LogDecoder::new()).try_collect().await?;
/// assert_eq!(records[1].data, &b"two"[..]);
/// assert_eq!((records[1].position.start, records[1].position.end), (10, 20));
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct LogReader<R> {
    io: R,
    /// The decoder, the bytes read ahead of it, and for a followed file the
    /// follower's rules (`follow.rs`).
    engine: Follow,
    read_size: usize,
    follow: Option<Duration>,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    /// A followed file's check after each wait at EOF, running on a blocking thread.
    checking: Option<tokio::task::JoinHandle<Result<guard::Checked, Error>>>,
    /// A record put together from more than one read of a followed file, and its check running on a blocking thread.
    verifying: Option<(LogRecord, tokio::task::JoinHandle<SpanOutcome>)>,
    /// Set only for a `LogReader<ReadAhead>` built to take its chunks: how to reach
    /// them, so that they become the decoder's buffer instead of being copied.
    chunks: Option<fn(&mut R) -> &mut ReadAhead>,
    /// What is left of the last chunk taken, after `buffer`.
    spill: BytesMut,
    /// A followed file opened by path, which may be written in place: how to reach
    /// it to go back (see `LogDecoder::rewind`).
    live: Option<fn(&mut R) -> &mut tokio::fs::File>,
    seek_back: Option<SeekBack>,
    /// A record read ahead by `caught_up`, returned next.
    peeked: Option<LogRecord>,
    eof: bool,
    done: bool,
    /// Streamed records ([`LogReader::next_record_reader`]): what a reader left.
    pub(crate) stream: StreamState,
}

impl<R: AsyncRead + Unpin> LogReader<R> {
    /// Reads the log in `io` with `decoder`, until EOF (or the decoder's end offset).
    ///
    /// `io` must start at the offset the decoder expects: 0, or
    /// [`block_start`]`(start_offset)` for a decoder built with a start offset.
    ///
    /// The end of `io` inside a record means what the decoder was built to take it
    /// for ([`LogInput`]): an error for a stream (the default), a torn tail for a
    /// file. [`LogReader::open`] and its siblings read their file as
    /// [`LogInput::File`]; give a file opened by hand a decoder built with
    /// `.input(LogInput::File)` to read it as they do.
    pub fn new(io: R, decoder: LogDecoder) -> LogReader<R> {
        LogReader {
            io,
            engine: Follow::new(decoder),
            read_size: BLOCK_SIZE,
            follow: None,
            sleep: None,
            checking: None,
            verifying: None,
            chunks: None,
            spill: BytesMut::new(),
            live: None,
            seek_back: None,
            peeked: None,
            eof: false,
            done: false,
            stream: StreamState::default(),
        }
    }

    /// How many bytes to ask the source for at a time (default one block, 32 KiB).
    pub fn with_read_size(mut self, bytes: usize) -> LogReader<R> {
        self.read_size = bytes.max(1);
        self
    }

    /// The decoder, for its offsets and statistics.
    pub fn decoder(&self) -> &LogDecoder {
        &self.engine.decoder
    }

    /// The next record, `None` at the end of the log (or of the split).
    pub async fn next_record(&mut self) -> Option<Result<LogRecord, Error>> {
        futures::future::poll_fn(|cx| self.poll_record(cx)).await
    }

    /// Gives back the source and the decoder.
    pub fn into_parts(self) -> (R, LogDecoder) {
        (self.io, self.engine.decoder)
    }

    fn poll_record(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<LogRecord, Error>>> {
        if let Some(record) = self.peeked.take() {
            return Poll::Ready(Some(Ok(record)));
        }
        Poll::Ready(match ready!(self.poll_step(cx, true)) {
            Step::Record(record) => Some(Ok(record)),
            Step::Failed(e) => Some(Err(e)),
            Step::End | Step::AtEnd => None,
        })
    }

    /// The next step of reading: a record, an error, the end, or (only when `wait`
    /// is false) the end of what the followed log holds now.
    fn poll_step(&mut self, cx: &mut Context<'_>, wait: bool) -> Poll<Step> {
        if self.stream.is_busy() {
            // A streamed record left behind: finish it before whole records go on.
            match ready!(self.poll_settle_stream(cx)) {
                Ok(Some(record)) => return Poll::Ready(Step::Record(record)),
                Ok(None) => {}
                Err(e) => {
                    self.done = true;
                    return Poll::Ready(Step::Failed(e));
                }
            }
        }
        if let Some((_, verifying)) = self.verifying.as_mut() {
            let outcome = ready!(Pin::new(verifying).poll(cx));
            let (record, _) = self.verifying.take().expect("polled above");
            let checked = match outcome {
                Ok((recent, checked)) => {
                    self.engine.restore(recent);
                    checked
                }
                Err(join) => Err(Error::Io(std::io::Error::other(join))),
            };
            return Poll::Ready(match checked {
                Ok(()) => Step::Record(record),
                Err(e) => {
                    self.done = true;
                    Step::Failed(e)
                }
            });
        }
        loop {
            if self.done {
                return Poll::Ready(Step::End);
            }
            // What the file's check found, when one ran (here or on a blocking thread).
            let mut checked = None;
            if let Some(sleep) = self.sleep.as_mut() {
                if wait {
                    ready!(sleep.as_mut().poll(cx));
                }
                self.sleep = None;
                if let Some(check) = self.engine.check() {
                    // On this thread when the bytes it compares are cached.
                    match check.run_cached() {
                        Ok(done) => checked = Some(done),
                        Err(check) => {
                            self.checking = Some(tokio::task::spawn_blocking(move || check.run()));
                        }
                    }
                }
            }
            if let Some(checking) = self.checking.as_mut() {
                let done = ready!(Pin::new(checking).poll(cx));
                self.checking = None;
                checked =
                    Some(done.unwrap_or_else(|join| Err(Error::Io(std::io::Error::other(join)))));
            }
            if let Some(checked) = checked {
                match checked {
                    Ok(checked) => {
                        if let Some(point) = self.engine.checked(checked) {
                            self.seek_back = Some(SeekBack::Start(point));
                        }
                    }
                    Err(e) => {
                        self.done = true;
                        return Poll::Ready(Step::Failed(e));
                    }
                }
            }
            if let Err(e) = ready!(self.poll_seek_back(cx)) {
                self.done = true;
                return Poll::Ready(Step::Failed(Error::Io(e)));
            }
            match self.engine.decode(self.eof) {
                Err(e) => {
                    if self.live.is_some() && self.engine.may_doubt(&e) {
                        // Damage past the last record of a live log may be a write
                        // still in progress: read it again once before believing it.
                        if self.engine.doubt(&e) {
                            self.go_back();
                            if self.look_again(wait) {
                                continue;
                            }
                            if let Some(at_end) = self.start_waiting(wait) {
                                return Poll::Ready(at_end);
                            }
                            continue;
                        }
                        if self.engine.believe(&e) {
                            self.go_back();
                            continue;
                        }
                    }
                    self.done = true;
                    return Poll::Ready(Step::Failed(self.damage_or_change(e.into())));
                }
                Ok(Some(data)) => {
                    let position = self.engine.returned();
                    let record = LogRecord { position, data };
                    if !self.engine.assembled(position.start) {
                        // Inside one read: what the file held when it was read.
                        return Poll::Ready(Step::Record(record));
                    }
                    match self.engine.span(position.start, position.end).run_cached() {
                        Ok((recent, checked)) => {
                            self.engine.restore(recent);
                            if let Err(e) = checked {
                                self.done = true;
                                return Poll::Ready(Step::Failed(e));
                            }
                            return Poll::Ready(Step::Record(record));
                        }
                        Err(span) => {
                            let verifying = tokio::task::spawn_blocking(move || span.run());
                            self.verifying = Some((record, verifying));
                            return self.poll_step(cx, wait);
                        }
                    }
                }
                Ok(None) => {}
            }
            if self.eof || self.engine.decoder.is_finished() && !self.going_back() {
                self.done = true;
                return Poll::Ready(Step::End);
            }
            if self.going_back() {
                // Past the last record into space the writer has not reached:
                // back to that record's end, to read again after a wait.
                self.go_back();
                if self.look_again(wait) {
                    continue;
                }
                if let Some(at_end) = self.start_waiting(wait) {
                    return Poll::Ready(at_end);
                }
                continue;
            }
            let before = self.engine.buf.len();
            let read = match self.chunks {
                Some(chunks) => ready!(self.poll_take_chunk(cx, chunks)),
                None => {
                    self.engine.buf.reserve(self.read_size);
                    ready!(poll_read_buf(
                        Pin::new(&mut self.io),
                        cx,
                        &mut self.engine.buf
                    ))
                }
            };
            if let Ok(n) = &read {
                self.engine.note_read(before, *n);
            }
            match read {
                Err(e) => {
                    self.done = true;
                    return Poll::Ready(Step::Failed(Error::Io(e)));
                }
                Ok(0) if self.follow.is_some() => {
                    // A followed log may grow: keep partial records and look again.
                    // In a file written in place, the bytes of a record not yet
                    // complete may still change (a write in progress over zeros or
                    // an earlier log): read them again after the wait.
                    if self.live.is_some() && self.engine.past_last_record() {
                        self.go_back();
                        // What was read past the last record may be older than
                        // the writer's last write (zeros the decoder skips to a
                        // block's end leave no trace): `caught_up` reads it again
                        // once before saying it has read everything.
                        if self.look_again(wait) {
                            continue;
                        }
                    }
                    if let Some(at_end) = self.start_waiting(wait) {
                        return Poll::Ready(at_end);
                    }
                }
                Ok(0) => self.eof = true,
                Ok(_) => {}
            }
        }
    }

    /// What damage met in a guarded file means: when the file no longer holds what
    /// was read up to the last record returned, the log was cut and written again
    /// under the reader (the damage is where a new record's bytes follow the old
    /// ones), and that is the error. Damage met twice in a live file is read again
    /// without a wait in between (`caught_up`), so no check after a wait saw the
    /// change. The check runs here, from the page cache or else blocking (a stat
    /// and one read of at most the window): once, as the reader ends.
    fn damage_or_change(&mut self, damage: Error) -> Error {
        let Some(check) = self.engine.check() else {
            return damage;
        };
        let checked = match check.run_cached() {
            Ok(checked) => checked,
            Err(check) => check.run(),
        };
        match checked {
            Err(change) => change,
            Ok(checked) => {
                self.engine.restore(checked.recent);
                damage
            }
        }
    }

    /// Whether the decoder went past the end of what a live log's writer has
    /// written (zeros, an earlier log's fragments, a write cut short).
    fn going_back(&self) -> bool {
        self.live.is_some() && self.engine.passed_unwritten()
    }

    /// Goes back to the end of the last record (see `LogDecoder::rewind`): the
    /// decoder, the file and the guard's window; the seek runs in `poll_seek_back`.
    fn go_back(&mut self) {
        let point = self.engine.go_back();
        self.seek_back = Some(SeekBack::Start(point));
    }

    /// Runs a seek that `go_back` asked for.
    fn poll_seek_back(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let (Some(state), Some(file_of)) = (self.seek_back, self.live) else {
            return Poll::Ready(Ok(()));
        };
        let file = Pin::new(file_of(&mut self.io));
        if let SeekBack::Start(point) = state {
            if let Err(e) = file.start_seek(SeekFrom::Start(point)) {
                self.seek_back = None;
                return Poll::Ready(Err(e));
            }
            self.seek_back = Some(SeekBack::Pending);
        }
        let file = Pin::new(file_of(&mut self.io));
        let done = ready!(file.poll_complete(cx));
        self.seek_back = None;
        Poll::Ready(done.map(|_| ()))
    }

    /// After going back, in `caught_up` (`!wait`): read again at once, the first
    /// time, since the bytes that made it go back may have been read before the
    /// writer wrote there.
    fn look_again(&mut self, wait: bool) -> bool {
        self.engine.look_again(!wait)
    }

    /// At the end of what a followed log holds now: arms the wait before the next
    /// look, and says so when the caller does not wait (`caught_up`).
    fn start_waiting(&mut self, wait: bool) -> Option<Step> {
        let interval = self.follow.unwrap_or(LogTailer::DEFAULT_POLL_INTERVAL);
        self.sleep = Some(Box::pin(tokio::time::sleep(interval)));
        (!wait).then_some(Step::AtEnd)
    }

    /// Reads what the followed log holds now, without waiting: `true` when every
    /// record in it has been returned, `false` when a record is ready (kept for the
    /// next read).
    pub(crate) async fn caught_up(&mut self) -> Result<bool, Error> {
        if self.peeked.is_some() {
            return Ok(false);
        }
        self.engine.start_looking();
        match futures::future::poll_fn(|cx| self.poll_step(cx, false)).await {
            Step::Record(record) => {
                self.peeked = Some(record);
                Ok(false)
            }
            Step::Failed(e) => Err(e),
            Step::End | Step::AtEnd => Ok(true),
        }
    }
}

/// A span check's outcome, with the guard's window given back.
type SpanOutcome = (BytesMut, Result<(), Error>);

/// One step of a [`LogReader`]'s reading.
enum Step {
    Record(LogRecord),
    Failed(Error),
    /// No more records, ever.
    End,
    /// A follower reached the end of what the log holds now.
    AtEnd,
}

/// A follower's seek back to the end of its last record.
#[derive(Debug, Clone, Copy)]
enum SeekBack {
    Start(u64),
    Pending,
}

/// The pieces the streaming reader (`crate::reader::record`) drives.
impl<R: AsyncRead + Unpin> LogReader<R> {
    /// Reads once more from the source into the buffer; a read of 0 bytes is EOF.
    pub(crate) fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        let read = match self.chunks {
            // A read-ahead source: the same hand-off as `poll_record`'s, so the two
            // kinds of reading can follow each other on one reader.
            Some(chunks) => ready!(self.poll_take_chunk(cx, chunks)),
            None => {
                self.engine.buf.reserve(self.read_size);
                ready!(poll_read_buf(
                    Pin::new(&mut self.io),
                    cx,
                    &mut self.engine.buf
                ))
            }
        };
        match read {
            Err(e) => {
                self.done = true;
                Poll::Ready(Err(Error::Io(e)))
            }
            Ok(0) => {
                self.eof = true;
                Poll::Ready(Ok(()))
            }
            Ok(_) => Poll::Ready(Ok(())),
        }
    }

    /// The buffer, the decoder, whether EOF was seen, and whether the reader is done.
    pub(crate) fn stream_parts(&mut self) -> (&mut BytesMut, &mut LogDecoder, bool, &mut bool) {
        (
            &mut self.engine.buf,
            &mut self.engine.decoder,
            self.eof,
            &mut self.done,
        )
    }
}

impl<R> LogReader<R> {
    /// Appends the next bytes of a read-ahead source to `buffer`, as
    /// `poll_read_buf` would, and says how many.
    ///
    /// An empty buffer becomes the next chunk itself: records in it are views of
    /// the chunk. Bytes left over from the chunk before (a fragment cut by the
    /// chunk boundary) get the new chunk's bytes up to the next block boundary
    /// copied after them, and no more: fragments never cross a block boundary, so
    /// the decoder consumes the buffer to its end and the rest of the chunk, which
    /// now starts at a block boundary, again becomes the buffer itself.
    fn poll_take_chunk(
        &mut self,
        cx: &mut Context<'_>,
        chunks: fn(&mut R) -> &mut ReadAhead,
    ) -> Poll<std::io::Result<usize>> {
        if self.spill.is_empty() {
            match ready!(chunks(&mut self.io).poll_chunk(cx)) {
                None => return Poll::Ready(Ok(0)),
                Some(Err(e)) => return Poll::Ready(Err(e)),
                Some(Ok(chunk)) => self.spill = chunk,
            }
        }
        if self.engine.buf.is_empty() {
            self.engine.buf = std::mem::take(&mut self.spill);
            return Poll::Ready(Ok(self.engine.buf.len()));
        }
        let next = self.engine.decoder.offset() + self.engine.buf.len() as u64;
        let to_boundary = BLOCK_SIZE - (next % BLOCK_SIZE as u64) as usize;
        let n = to_boundary.min(self.spill.len());
        self.engine.buf.extend_from_slice(&self.spill[..n]);
        self.spill.advance(n);
        Poll::Ready(Ok(n))
    }
}

impl<R: AsyncRead + Unpin> Stream for LogReader<R> {
    type Item = Result<LogRecord, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().poll_record(cx)
    }
}

impl LogReader<ReadAhead> {
    /// Reads the log that `source` reads with `decoder`, taking the source's chunks
    /// as the decoder's buffer: a record that fits in one fragment is a view of the
    /// chunk it was read into, and nothing is copied unless a fragment crosses a
    /// chunk boundary (then at most the bytes to the next block boundary are).
    ///
    /// `source` must start at the offset the decoder expects, as for
    /// [`new`](LogReader::new). Results do not depend on the chunk size.
    pub fn from_read_ahead(source: ReadAhead, decoder: LogDecoder) -> LogReader<ReadAhead> {
        let mut reader = LogReader::new(source, decoder);
        reader.chunks = Some(|source| source);
        reader
    }

    /// Opens the log at `path` and reads all of it with the default decoder
    /// ([`Recovery::TolerateTail`](crate::Recovery::TolerateTail)).
    ///
    /// The file is read through a [`ReadAhead`] pipeline with its defaults: large
    /// reads on a blocking thread, ahead of the decoding, into buffers that the
    /// records are views of.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), walcodec::Error> {
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("000001.log");
    /// use walcodec::{AsyncLogWriter, LogReader};
    ///
    /// let writer = AsyncLogWriter::create(&path).await?;
    /// writer.append(b"first").await?;
    /// writer.append(b"second").await?;
    /// writer.close().await?;
    ///
    /// let mut reader = LogReader::open(&path).await?;
    /// while let Some(record) = reader.next_record().await {
    ///     let record = record?;
    ///     println!("{}..{}: {:?}", record.position.start, record.position.end, record.data);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn open(path: impl AsRef<Path>) -> Result<LogReader<ReadAhead>, Error> {
        LogReader::open_at(path, 0, &LogDecoder::builder()).await
    }

    /// Opens the log at `path` and reads the records whose first fragment starts at or
    /// after `start_offset` (0 for the whole log), with a decoder `builder` builds.
    /// The file is positioned at [`block_start`]`(start_offset)`; the builder is left
    /// as it was.
    ///
    /// A checkpoint is a record's `position.end`: reading from it resumes with the
    /// next record, and no record that began before it is reported as damage.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), walcodec::Error> {
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("000001.log");
    /// use walcodec::{AsyncLogWriter, LogDecoder, LogReader};
    ///
    /// let writer = AsyncLogWriter::create(&path).await?;
    /// let checkpoint = writer.append(b"applied").await?.end;
    /// writer.append(b"not yet applied").await?;
    /// writer.close().await?;
    ///
    /// let mut reader = LogReader::open_at(&path, checkpoint, &LogDecoder::builder()).await?;
    /// let next = reader.next_record().await.unwrap()?;
    /// assert_eq!(next.data, &b"not yet applied"[..]);
    /// assert!(reader.next_record().await.is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn open_at(
        path: impl AsRef<Path>,
        start_offset: u64,
        builder: &LogDecoderBuilder,
    ) -> Result<LogReader<ReadAhead>, Error> {
        let path = path.as_ref();
        let builder = with_log_start(path, start_offset, builder).await?;
        let source = ReadAhead::open(path, block_start(start_offset)).await?;
        // A file: a record its end cuts is a torn tail, as LevelDB's reader takes it.
        let decoder = builder
            .clone()
            .start_offset(start_offset)
            .input(LogInput::File)
            .observed_file(path)
            .build();
        Ok(LogReader::from_read_ahead(source, decoder))
    }

    /// Opens one split of the log at `path`: the records whose first fragment starts
    /// in `range`. Reading goes past `range.end` only to finish the last record, so
    /// the splits of any partition of a log yield every record exactly once. The
    /// builder is left as it was.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), walcodec::Error> {
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("000001.log");
    /// use walcodec::{split_ranges, AsyncLogWriter, LogDecoder, LogReader};
    ///
    /// let writer = AsyncLogWriter::create(&path).await?;
    /// for i in 0..1000u32 {
    ///     writer.append_buffered(vec![i as u8; 300]).await?;
    /// }
    /// let len = writer.close().await?;
    ///
    /// // Four readers, one per split, each could run on its own task.
    /// let builder = LogDecoder::builder();
    /// let mut total = 0;
    /// for range in split_ranges(len, 4) {
    ///     let mut reader = LogReader::open_range(&path, range, &builder).await?;
    ///     while let Some(record) = reader.next_record().await {
    ///         record?;
    ///         total += 1;
    ///     }
    /// }
    /// assert_eq!(total, 1000);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn open_range(
        path: impl AsRef<Path>,
        range: Range<u64>,
        builder: &LogDecoderBuilder,
    ) -> Result<LogReader<ReadAhead>, Error> {
        let mut builder = builder.clone();
        builder.end_offset(range.end);
        LogReader::open_at(path, range.start, &builder).await
    }
}

/// `builder`, told what the log's start says when a decoder from `start_offset`
/// would not read it (RocksDB's compression-type record, for a read past the first
/// block of a compressed WAL).
async fn with_log_start(
    path: &Path,
    start_offset: u64,
    builder: &LogDecoderBuilder,
) -> Result<LogDecoderBuilder, Error> {
    let mut builder = builder.clone();
    if builder.needs_log_start(start_offset) {
        let file = crate::open::open_to_read_async(path).await?;
        // The type-9 record: a 7-byte header and a 4-byte payload.
        let mut log_start = Vec::with_capacity(16);
        file.take(16).read_to_end(&mut log_start).await?;
        builder.learn_log_start(&log_start);
    }
    Ok(builder)
}

/// Cuts `[0, len)` into `parts` contiguous ranges of nearly equal size, for
/// [`LogReader::open_range`]. Any partition works; this one is simply even.
///
/// ```
/// use walcodec::split_ranges;
///
/// assert_eq!(split_ranges(100, 3), [0..33, 33..66, 66..100]);
/// ```
pub fn split_ranges(len: u64, parts: usize) -> Vec<Range<u64>> {
    let parts = parts.max(1) as u64;
    (0..parts)
        .map(|i| (len * i / parts)..(len * (i + 1) / parts))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_ranges_partition() {
        for len in [0u64, 1, 7, 100_000, 1 << 40] {
            for parts in 1..9 {
                let ranges = split_ranges(len, parts);
                assert_eq!(ranges.len(), parts);
                assert_eq!(ranges[0].start, 0);
                assert_eq!(ranges.last().unwrap().end, len);
                for pair in ranges.windows(2) {
                    assert_eq!(pair[0].end, pair[1].start);
                }
            }
        }
    }
}
