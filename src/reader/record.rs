//! `RecordReader`: one record of a log as an [`AsyncRead`], fragment by fragment,
//! for records larger than memory.
//!
//! [`LogReader::next_record_reader`] hands out a [`RecordReader`] that borrows the
//! log reader; it reads the record's fragments as the caller reads its bytes, so a
//! record of any size costs a block or two of memory. Every rule about what a
//! fragment is (headers, checksums, trailers, zero fill, damage and the recovery
//! modes) is the [`LogDecoder`](crate::LogDecoder)'s, run in its fragment mode: this
//! module only decides what the fragments it gets mean for the record being read
//! ([`next_fragment`] is the one place that asks for them).
//!
//! # States of a record being read
//!
//! | state       | what a read does                                            |
//! |-------------|-------------------------------------------------------------|
//! | `Open`      | hands out the current fragment, then asks for the next one  |
//! | `Complete`  | hands out what is left of the last fragment, then EOF (0)   |
//! | `Failed`    | returns the error that ended the record, again              |

use std::fmt;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncBufRead, AsyncRead, ReadBuf};

use crate::decoder::error::{Corruption, CorruptionKind};
use crate::decoder::FragmentMark;
use crate::error::Error;
use crate::format::Position;
use crate::reader::LogReader;
use crate::reader::LogRecord;

/// What a [`RecordReader`] leaves in its [`LogReader`] for the next read.
#[derive(Debug, Default)]
pub(crate) struct StreamState {
    /// A reader was dropped before its record (starting here) ended: the rest of
    /// the record is passed over before anything else is read.
    skip_rest: Option<u64>,
    /// A fragment that began the next record, met while reading the one before it
    /// (whose end it revealed as missing).
    stash: Option<(FragmentMark, Bytes)>,
    /// The streaming path's own limit on a record's size (none unless asked).
    max_record_bytes: Option<u64>,
}

impl StreamState {
    /// Whether a streamed record left something to settle before whole records go on.
    pub(crate) fn is_busy(&self) -> bool {
        self.skip_rest.is_some() || self.stash.is_some()
    }

    fn limit(&self) -> usize {
        self.max_record_bytes
            .map_or(usize::MAX, |max| usize::try_from(max).unwrap_or(usize::MAX))
    }
}

/// What the decoder gave next, seen from a record being read.
enum Next {
    /// A checked fragment and where it sits in its record.
    Fragment(FragmentMark, Bytes),
    /// The record being read is no longer open in the decoder: damage (reported,
    /// in `SkipCorrupted`; a stop, in `PointInTime`) abandoned it.
    Lost,
    /// The end of the log, or of what the decoder will return.
    End,
}

/// The one place fragments come from: the decoder's fragment mode over the log
/// reader's buffer, reading more from the source as it needs. `open` is the start
/// of the record being read, if any: its loss is noticed as soon as the decoder
/// lets it go, not only when the next record shows up.
fn poll_next_fragment<R: AsyncRead + Unpin>(
    reader: &mut LogReader<R>,
    open: Option<u64>,
    cx: &mut Context<'_>,
) -> Poll<Result<Next, Error>> {
    let limit = reader.stream.limit();
    loop {
        let (buffer, decoder, eof, done) = reader.stream_parts();
        if *done {
            return Poll::Ready(Ok(Next::End));
        }
        match decoder.decode_fragment(buffer, eof, limit) {
            Err(e) => {
                *done = true;
                return Poll::Ready(Err(e.into()));
            }
            Ok(Some((mark, payload))) => return Poll::Ready(Ok(Next::Fragment(mark, payload))),
            Ok(None) => {}
        }
        // Zeros after the record's last fragment: a torn tail if nothing but zeros
        // follows, damage otherwise; only what follows tells, so read on.
        if open.is_some() && decoder.open_record() != open && !decoder.zeros_pending() {
            return Poll::Ready(Ok(Next::Lost));
        }
        if eof || decoder.is_finished() {
            *done = true;
            return Poll::Ready(Ok(Next::End));
        }
        ready!(reader.poll_fill(cx))?;
    }
}

async fn next_fragment<R: AsyncRead + Unpin>(
    reader: &mut LogReader<R>,
    open: Option<u64>,
) -> Result<Next, Error> {
    futures::future::poll_fn(|cx| poll_next_fragment(reader, open, cx)).await
}

impl<R: AsyncRead + Unpin> LogReader<R> {
    /// The next record as a reader of its bytes, `None` at the end of the log (or of
    /// the split): for records too large to hold in memory.
    ///
    /// The [`RecordReader`] reads the record's fragments as its bytes are read, one
    /// at a time, so a record of any size costs a block or two of memory (plus the
    /// read size of this reader). Each fragment's checksum is checked before any of
    /// its bytes are handed out. Unlike [`next_record`](Self::next_record), the
    /// record's size is not bounded by the decoder's `max_record_bytes`; set
    /// [`with_max_streamed_record_bytes`](Self::with_max_streamed_record_bytes) for a
    /// bound.
    ///
    /// The record reader borrows this reader, so only one is alive at a time.
    /// Dropping it before the end of its record skips the rest of the record: the
    /// next call (of this or of `next_record`) starts with the record after it.
    ///
    /// A record that began before a damaged piece of the log, or before a torn
    /// tail, fails part way: the bytes already read belong to a record that did not
    /// complete (see [`RecordReader`]). In [`Recovery::SkipCorrupted`] the next call
    /// resumes where LevelDB's reader would; in the other modes the log ends there,
    /// as it does for whole records.
    ///
    /// [`Recovery::SkipCorrupted`]: crate::Recovery::SkipCorrupted
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), walcodec::Error> {
    /// use bytes::BytesMut;
    /// use tokio::io::AsyncReadExt;
    /// use walcodec::{LogDecoder, LogEncoder, LogReader};
    ///
    /// let mut log = BytesMut::new();
    /// let mut encoder = LogEncoder::new();
    /// encoder.encode_record(&vec![7u8; 100_000], &mut log);
    /// encoder.encode_record(b"small", &mut log);
    ///
    /// let mut reader = LogReader::new(&log[..], LogDecoder::new());
    /// let mut record = reader.next_record_reader().await.unwrap()?;
    /// let mut sum = 0u64;
    /// let mut chunk = [0u8; 4096];
    /// loop {
    ///     let n = record.read(&mut chunk).await?;
    ///     if n == 0 {
    ///         break;
    ///     }
    ///     sum += chunk[..n].iter().map(|&b| u64::from(b)).sum::<u64>();
    /// }
    /// assert!(record.is_complete());
    /// assert_eq!(sum, 700_000);
    /// drop(record);
    ///
    /// let mut small = Vec::new();
    /// let mut record = reader.next_record_reader().await.unwrap()?;
    /// record.read_to_end(&mut small).await?;
    /// assert_eq!(small, b"small");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn next_record_reader(&mut self) -> Option<Result<RecordReader<'_, R>, Error>> {
        if let Err(e) = self.settle_skip().await {
            return Some(Err(e));
        }
        let mut next = match self.stream.stash.take() {
            Some((mark, payload)) => Next::Fragment(mark, payload),
            None => match next_fragment(self, None).await {
                Ok(next) => next,
                Err(e) => return Some(Err(e)),
            },
        };
        loop {
            let (start, payload, complete) = match next {
                Next::End => return None,
                Next::Lost => (None, Bytes::new(), false),
                Next::Fragment(FragmentMark::Whole { start }, payload) => {
                    (Some(start), payload, true)
                }
                Next::Fragment(FragmentMark::Begin { start }, payload) => {
                    (Some(start), payload, false)
                }
                // Only a record begun here goes on; never met, but harmless.
                Next::Fragment(FragmentMark::Middle | FragmentMark::End, _) => {
                    (None, Bytes::new(), false)
                }
            };
            let Some(start) = start else {
                next = match next_fragment(self, None).await {
                    Ok(next) => next,
                    Err(e) => return Some(Err(e)),
                };
                continue;
            };
            if payload.is_empty() && !complete {
                // An empty FIRST: wait for bytes, or for the record's end, before
                // handing out a reader, so a record that an old writer's quirk (an
                // empty FIRST then a FULL) abandons with nothing read is passed over
                // as whole-record reading does.
                next = match next_fragment(self, Some(start)).await {
                    Ok(Next::Fragment(FragmentMark::Middle, payload)) if payload.is_empty() => {
                        Next::Fragment(FragmentMark::Begin { start }, payload)
                    }
                    Ok(Next::Fragment(FragmentMark::Middle, payload)) => {
                        return Some(Ok(RecordReader::new(self, start, payload, false)));
                    }
                    Ok(Next::Fragment(FragmentMark::End, payload)) => {
                        return Some(Ok(RecordReader::new(self, start, payload, true)));
                    }
                    Ok(Next::End) => {
                        // A torn tail with nothing of it read: the log ends here.
                        return None;
                    }
                    Ok(other) => other,
                    Err(e) => return Some(Err(e)),
                };
                continue;
            }
            return Some(Ok(RecordReader::new(self, start, payload, complete)));
        }
    }

    /// Bounds the size of a record read through [`next_record_reader`](Self::next_record_reader):
    /// a larger one is damage (an error, or in `SkipCorrupted` skipped) once it
    /// crosses `max` bytes. Unbounded by default; the decoder's `max_record_bytes`
    /// bounds only whole records.
    pub fn with_max_streamed_record_bytes(mut self, max: u64) -> LogReader<R> {
        self.stream.max_record_bytes = Some(max);
        self
    }

    /// Passes over the rest of a record whose reader was dropped part way.
    async fn settle_skip(&mut self) -> Result<(), Error> {
        let Some(start) = self.stream.skip_rest else {
            return Ok(());
        };
        loop {
            match next_fragment(self, Some(start)).await {
                Ok(Next::Fragment(FragmentMark::Middle, _)) => continue,
                Ok(Next::Fragment(
                    mark @ (FragmentMark::Whole { .. } | FragmentMark::Begin { .. }),
                    payload,
                )) => {
                    self.stream.stash = Some((mark, payload));
                    break;
                }
                Ok(Next::Fragment(FragmentMark::End, _) | Next::Lost | Next::End) => break,
                Err(e) => {
                    self.stream.skip_rest = None;
                    return Err(e);
                }
            }
        }
        self.stream.skip_rest = None;
        Ok(())
    }

    /// What whole-record reading does first after streamed records: passes over
    /// the rest of a record left part way, and takes a fragment met past a
    /// streamed record's end as its own (a FULL is a record to return).
    pub(crate) fn poll_settle_stream(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<LogRecord>, Error>> {
        while let Some(start) = self.stream.skip_rest {
            match ready!(poll_next_fragment(self, Some(start), cx)) {
                Ok(Next::Fragment(FragmentMark::Middle, _)) => continue,
                Ok(Next::Fragment(
                    mark @ (FragmentMark::Whole { .. } | FragmentMark::Begin { .. }),
                    payload,
                )) => {
                    self.stream.stash = Some((mark, payload));
                    self.stream.skip_rest = None;
                }
                Ok(Next::Fragment(FragmentMark::End, _) | Next::Lost | Next::End) => {
                    self.stream.skip_rest = None;
                }
                Err(e) => {
                    self.stream.skip_rest = None;
                    return Poll::Ready(Err(e));
                }
            }
        }
        match self.stream.stash.take() {
            Some((FragmentMark::Whole { start }, data)) => {
                let end = start + crate::format::HEADER_SIZE as u64 + data.len() as u64;
                Poll::Ready(Ok(Some(LogRecord {
                    position: Position { start, end },
                    data,
                })))
            }
            Some((_, first)) => {
                let (_, decoder, _, _) = self.stream_parts();
                decoder.reopen_with(first);
                Poll::Ready(Ok(None))
            }
            None => Poll::Ready(Ok(None)),
        }
    }
}

/// Where a [`RecordReader`] is in its record (see the [module docs](self)).
#[derive(Debug, Clone)]
enum State {
    Open,
    Complete,
    Failed(io::ErrorKind, Option<Corruption>),
}

/// One record of a log, read as its fragments arrive: an [`AsyncRead`] and
/// [`AsyncBufRead`] of the record's bytes, from [`LogReader::next_record_reader`].
///
/// Each fragment is checked against its checksum before any of its bytes are handed
/// out. A read returns 0 (EOF) only after the record's last fragment was read and
/// checked: then [`is_complete`](Self::is_complete) is true and
/// [`position`](Self::position) tells where the record sits.
///
/// A record can fail part way, after some of its bytes were handed out; **those
/// bytes belong to a record that did not complete**, and a caller that must not act
/// on part of a record should hold what it read until EOF. The read that meets the
/// failure returns an [`io::Error`]:
///
/// | what ended the record                  | error kind      | its source (`get_ref`) |
/// |----------------------------------------|-----------------|------------------------|
/// | damage in or after one of its fragments | `InvalidData`   | a [`Corruption`]       |
/// | the log ends inside it (a torn tail)   | `UnexpectedEof` | a [`Corruption`] (`TruncatedTail`) |
/// | the source failed                      | the source's    | the source's           |
///
/// The error is returned again by later reads. What the log reader does next is
/// the recovery mode's: in `SkipCorrupted` the next record follows, in the other
/// modes the log ends (or the decoder's error was the end of it).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), walcodec::Error> {
/// use bytes::BytesMut;
/// use tokio::io::AsyncReadExt;
/// use walcodec::{Corruption, LogDecoder, LogEncoder, LogReader};
///
/// let mut log = BytesMut::new();
/// LogEncoder::new().encode_record(&vec![1u8; 100_000], &mut log);
/// log[40_000] ^= 0xff; // damage in the second fragment
///
/// let mut reader = LogReader::new(&log[..], LogDecoder::new());
/// let mut record = reader.next_record_reader().await.unwrap()?;
/// let mut bytes = Vec::new();
/// let error = record.read_to_end(&mut bytes).await.unwrap_err();
/// assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);
/// let corruption = error.get_ref().unwrap().downcast_ref::<Corruption>().unwrap();
/// assert_eq!(corruption.reason(), "checksum mismatch");
/// assert!(!record.is_complete());
/// assert_eq!(bytes.len(), 32_768 - 7); // the first fragment, handed out before
/// # Ok(())
/// # }
/// ```
pub struct RecordReader<'a, R> {
    reader: &'a mut LogReader<R>,
    start: u64,
    /// What is left of the fragment last read.
    current: Bytes,
    /// Bytes of the record read from the log so far (handed out or in `current`).
    len: u64,
    /// Where the record ends, once its last fragment was read.
    end: Option<u64>,
    state: State,
}

impl<R> fmt::Debug for RecordReader<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordReader")
            .field("start", &self.start)
            .field("len", &self.len)
            .field("buffered", &self.current.len())
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl<'a, R: AsyncRead + Unpin> RecordReader<'a, R> {
    fn new(
        reader: &'a mut LogReader<R>,
        start: u64,
        first: Bytes,
        complete: bool,
    ) -> RecordReader<'a, R> {
        let end = complete.then(|| reader.decoder().offset());
        RecordReader {
            reader,
            start,
            len: first.len() as u64,
            current: first,
            end,
            state: if complete {
                State::Complete
            } else {
                State::Open
            },
        }
    }

    /// Log offset of the record's first header.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// Whether the record's last fragment has been read and checked: every byte of
    /// the record is either handed out or waiting in this reader, and nothing can
    /// fail any more.
    pub fn is_complete(&self) -> bool {
        matches!(self.state, State::Complete)
    }

    /// Where the record sits in the log, once it is complete.
    pub fn position(&self) -> Option<Position> {
        self.end.map(|end| Position {
            start: self.start,
            end,
        })
    }

    /// Bytes of the record read from the log so far (the ones handed out and the
    /// ones waiting in this reader): the record's length, once it is complete.
    pub fn bytes_read(&self) -> u64 {
        self.len
    }

    fn fail(&mut self, kind: io::ErrorKind, corruption: Option<Corruption>) -> io::Error {
        self.state = State::Failed(kind, corruption);
        self.error()
    }

    fn error(&self) -> io::Error {
        match &self.state {
            State::Failed(kind, Some(corruption)) => io::Error::new(*kind, corruption.clone()),
            State::Failed(kind, None) => io::Error::from(*kind),
            _ => io::Error::other("record reader is not failed"),
        }
    }

    /// Turns the decoder's error into the record's: damage as `InvalidData`, a torn
    /// tail (in `AbsoluteConsistency`) as `UnexpectedEof`, both with a [`Corruption`].
    fn fail_with(&mut self, error: Error) -> io::Error {
        match error {
            Error::Corruption {
                offset,
                bytes,
                kind,
            } => {
                let io_kind = if kind == CorruptionKind::TruncatedTail {
                    io::ErrorKind::UnexpectedEof
                } else {
                    io::ErrorKind::InvalidData
                };
                self.fail(io_kind, Some(Corruption::new(offset, bytes, kind)))
            }
            Error::RecordTooLarge { offset, size, .. } => self.fail(
                io::ErrorKind::InvalidData,
                Some(Corruption::new(
                    offset,
                    size,
                    CorruptionKind::RecordTooLarge,
                )),
            ),
            Error::Io(e) => {
                self.state = State::Failed(e.kind(), None);
                e
            }
            other => {
                self.state = State::Failed(io::ErrorKind::Other, None);
                io::Error::other(other)
            }
        }
    }

    /// The record ended without its last fragment: `lost_to` tells how.
    fn fail_incomplete(&mut self, kind: CorruptionKind) -> io::Error {
        let io_kind = if kind == CorruptionKind::TruncatedTail {
            io::ErrorKind::UnexpectedEof
        } else {
            io::ErrorKind::InvalidData
        };
        let corruption = Corruption::new(self.start, self.len, kind);
        self.fail(io_kind, Some(corruption))
    }

    /// The decoder dropped the record (in `SkipCorrupted` or `PointInTime`): the
    /// error names the reason it met first.
    fn fail_lost(&mut self) -> io::Error {
        let kind = self
            .reader
            .decoder()
            .cut_short(self.start)
            .unwrap_or(CorruptionKind::ErrorInMiddleOfRecord);
        self.fail_incomplete(kind)
    }

    /// Fills `current` with the next fragment of the record, if there is one.
    fn poll_fragment(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.current.is_empty() {
            match &self.state {
                State::Complete => return Poll::Ready(Ok(())),
                State::Failed(..) => return Poll::Ready(Err(self.error())),
                State::Open => {}
            }
            let next = ready!(poll_next_fragment(self.reader, Some(self.start), cx));
            match next {
                Err(e) => return Poll::Ready(Err(self.fail_with(e))),
                Ok(Next::Fragment(FragmentMark::Middle, payload)) => {
                    self.len += payload.len() as u64;
                    self.current = payload;
                }
                Ok(Next::Fragment(FragmentMark::End, payload)) => {
                    self.len += payload.len() as u64;
                    self.current = payload;
                    self.end = Some(self.reader.decoder().offset());
                    self.state = State::Complete;
                }
                Ok(Next::Fragment(mark, payload)) => {
                    // The next record began: this one's end is missing. It waits
                    // for the next call to `next_record_reader`.
                    self.reader.stream.stash = Some((mark, payload));
                    return Poll::Ready(Err(self.fail_lost()));
                }
                Ok(Next::Lost) => return Poll::Ready(Err(self.fail_lost())),
                Ok(Next::End) => {
                    let kind = if self.reader.decoder().has_incomplete_tail() {
                        CorruptionKind::TruncatedTail
                    } else {
                        // Damage ended the log (`PointInTime`) inside the record.
                        CorruptionKind::ErrorInMiddleOfRecord
                    };
                    return Poll::Ready(Err(self.fail_incomplete(kind)));
                }
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for RecordReader<'_, R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_fragment(cx))?;
        let n = this.current.len().min(buf.remaining());
        buf.put_slice(&this.current[..n]);
        this.current.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl<R: AsyncRead + Unpin> AsyncBufRead for RecordReader<'_, R> {
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        let this = self.get_mut();
        ready!(this.poll_fragment(cx))?;
        Poll::Ready(Ok(&this.current[..]))
    }

    fn consume(self: Pin<&mut Self>, amt: usize) {
        let this = self.get_mut();
        this.current.advance(amt.min(this.current.len()));
    }
}

impl<R> Drop for RecordReader<'_, R> {
    fn drop(&mut self) {
        if matches!(self.state, State::Open) {
            // Dropping cannot wait for the rest of the record: the log reader
            // passes over it before it reads anything else.
            self.reader.stream.skip_rest = Some(self.start);
        }
    }
}
