//! Writing one record of any size as its bytes arrive: [`LogWriter`] over any
//! [`AsyncWrite`], and its [`RecordWriter`] (an `AsyncWrite` for one record).
//!
//! A fragment's header holds the checksum of its payload and says whether more
//! fragments follow, so a fragment can be written only once its payload is known
//! and one more byte of the record (or its end) has been seen. [`Framer`] holds that
//! one fragment (at most a block) and cuts the record exactly as
//! [`LogEncoder`](crate::LogEncoder) does, so the bytes are the same.
//!
//! # States of the fragment being framed
//!
//! | state     | bytes in the buffer                      | next                          |
//! |-----------|------------------------------------------|-------------------------------|
//! | filling   | trailer, header slot, part of a payload  | more bytes, or the record ends |
//! | sealed    | a whole fragment (and its trailer)       | written out, then filling     |

use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};

use crate::error::Error;
use crate::format::fragment::{legacy_header, Part};
use crate::format::{Position, BLOCK_SIZE, HEADER_SIZE};

/// Frames one record at a time into fragments, holding at most one fragment.
#[derive(Debug)]
pub(crate) struct Framer {
    /// Log offset of the first byte of `buf`.
    offset: u64,
    /// The trailer (zeros) before the fragment, its header slot, then its payload.
    buf: Vec<u8>,
    /// Where the header slot starts in `buf` (the trailer's length).
    header_at: usize,
    /// The largest payload the fragment can take.
    room: usize,
    /// Whether the fragment being filled is its record's first.
    begins: bool,
    /// Fragments of the current record sealed so far.
    sealed: u64,
}

impl Framer {
    pub(crate) fn new(offset: u64) -> Framer {
        let mut framer = Framer {
            offset,
            buf: Vec::with_capacity(BLOCK_SIZE + HEADER_SIZE),
            header_at: 0,
            room: 0,
            begins: true,
            sealed: 0,
        };
        framer.lay_out();
        framer
    }

    /// Log offset where the next record would go (before any trailer).
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Starts a new fragment at `offset`: a zero trailer if fewer than a header's
    /// bytes are left in the block (LevelDB's rule), then room up to the block end.
    fn lay_out(&mut self) {
        self.buf.clear();
        let block_left = BLOCK_SIZE - (self.offset % BLOCK_SIZE as u64) as usize;
        let trailer = if block_left < HEADER_SIZE {
            block_left
        } else {
            0
        };
        self.buf.resize(trailer + HEADER_SIZE, 0);
        self.header_at = trailer;
        let left = if trailer > 0 { BLOCK_SIZE } else { block_left };
        self.room = left - HEADER_SIZE;
    }

    /// Where the record being framed starts (its first header).
    pub(crate) fn record_start(&self) -> u64 {
        self.offset + self.header_at as u64
    }

    /// Whether the fragment being filled has no room left: one more byte of the
    /// record means it is sealed as not the last.
    pub(crate) fn is_full(&self) -> bool {
        self.filled() == self.room
    }

    fn filled(&self) -> usize {
        self.buf.len() - self.header_at - HEADER_SIZE
    }

    /// Takes as many of `data` as the fragment has room for.
    pub(crate) fn push(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.room - self.filled());
        self.buf.extend_from_slice(&data[..n]);
        n
    }

    /// Seals the fragment (`ends`: it is the record's last) and returns its bytes,
    /// trailer first, to be written out before [`next`](Self::next).
    pub(crate) fn seal(&mut self, ends: bool) -> &[u8] {
        let type_byte = Part::for_fragment(self.begins, ends).type_byte(false);
        let payload_at = self.header_at + HEADER_SIZE;
        let header = legacy_header(type_byte, &self.buf[payload_at..]);
        self.buf[self.header_at..payload_at].copy_from_slice(&header);
        &self.buf
    }

    /// After the sealed fragment was written out: the next one begins. `ended`
    /// tells whether the sealed one ended its record.
    pub(crate) fn next(&mut self, ended: bool) {
        self.offset += self.buf.len() as u64;
        self.begins = ended;
        self.sealed = if ended { 0 } else { self.sealed + 1 };
        self.lay_out();
    }

    /// Whether any fragment of the current record was sealed (and so written).
    pub(crate) fn record_begun(&self) -> bool {
        self.sealed > 0
    }

    /// Drops what was framed of a record none of whose fragments were written.
    pub(crate) fn discard(&mut self) {
        self.begins = true;
        self.sealed = 0;
        self.lay_out();
    }
}

/// Writes the LevelDB log format to any [`AsyncWrite`], one record at a time, each
/// of any size: [`record_writer`](Self::record_writer) streams a record in, and the
/// bytes are those [`LogEncoder`](crate::LogEncoder) writes for the same records.
///
/// It holds one fragment (at most a block, 32 KiB) whatever the record's size. It
/// does not sync: for a durable log use [`AsyncLogWriter`](crate::AsyncLogWriter)
/// and its [`append_stream`](crate::AsyncLogWriter::append_stream).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), walcodec::Error> {
/// use bytes::BytesMut;
/// use tokio::io::AsyncWriteExt;
/// use walcodec::{LogEncoder, LogWriter};
///
/// let mut writer = LogWriter::new(Vec::new());
/// let mut record = writer.record_writer()?;
/// for _ in 0..100 {
///     record.write_all(&[7u8; 1000]).await?;
/// }
/// let position = record.finish().await?;
/// assert_eq!(position.start, 0);
///
/// let mut expected = BytesMut::new();
/// LogEncoder::new().encode_record(&[7u8; 100_000], &mut expected);
/// assert_eq!(writer.get_ref()[..], expected[..]);
/// # Ok(())
/// # }
/// ```
pub struct LogWriter<W> {
    sink: W,
    framer: Framer,
    /// Set when a record was left part way in the sink (its writer dropped, or a
    /// write failed): the next record would join it, so none is accepted.
    broken: Option<(u64, Arc<io::Error>)>,
}

impl<W> fmt::Debug for LogWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogWriter")
            .field("offset", &self.framer.offset())
            .field("broken", &self.broken.as_ref().map(|b| b.0))
            .finish_non_exhaustive()
    }
}

impl<W: AsyncWrite + Unpin> LogWriter<W> {
    /// A writer of a new log into `sink`.
    pub fn new(sink: W) -> LogWriter<W> {
        LogWriter::with_offset(sink, 0)
    }

    /// A writer that continues a log already `len` bytes long (the sink positioned
    /// at its end), aligned as [`LogEncoder::with_offset`](crate::LogEncoder::with_offset).
    pub fn with_offset(sink: W, len: u64) -> LogWriter<W> {
        LogWriter {
            sink,
            framer: Framer::new(len),
            broken: None,
        }
    }

    /// The log's length so far: where the next record goes (before any trailer).
    pub fn offset(&self) -> u64 {
        self.framer.offset()
    }

    /// The sink.
    pub fn get_ref(&self) -> &W {
        &self.sink
    }

    /// Gives back the sink.
    pub fn into_inner(self) -> W {
        self.sink
    }

    /// An [`AsyncWrite`] for one new record; [`RecordWriter::finish`] ends it.
    ///
    /// # Errors
    /// [`Error::Poisoned`] when an earlier record was left part way in the sink (its
    /// writer dropped after some of its fragments were written, or a write failed):
    /// the log then ends in a torn record, which a repair cuts off.
    pub fn record_writer(&mut self) -> Result<RecordWriter<'_, W>, Error> {
        if let Some((offset, source)) = &self.broken {
            return Err(Error::Poisoned {
                offset: *offset,
                source: Arc::clone(source),
            });
        }
        Ok(RecordWriter {
            start: self.framer.record_start(),
            writer: self,
            written: None,
            finished: false,
        })
    }

    /// Writes `record` whole and returns where it sits.
    pub async fn append(&mut self, record: &[u8]) -> Result<Position, Error> {
        use tokio::io::AsyncWriteExt;
        let mut writer = self.record_writer()?;
        writer.write_all(record).await?;
        writer.finish().await
    }

    /// Writes all of `source` as one record, of any size, holding one fragment.
    pub async fn append_stream<S>(&mut self, mut source: S) -> Result<Position, Error>
    where
        S: AsyncRead + Unpin,
    {
        let mut writer = self.record_writer()?;
        tokio::io::copy(&mut source, &mut writer).await?;
        writer.finish().await
    }
}

/// One record being written through a [`LogWriter`]: an [`AsyncWrite`] of its
/// bytes, ended by [`finish`](Self::finish).
///
/// Bytes are framed into fragments as they come and a fragment goes to the sink
/// once the next byte of the record shows it is not the last, so at most one
/// fragment (32 KiB) is held, and a flush writes out only whole fragments: the
/// record's last one waits for `finish`. Shutting the writer down flushes; it does
/// not end the record.
///
/// Dropped before `finish`, the record is not written if none of its fragments has
/// gone to the sink yet; otherwise the log ends in a torn record (what readers
/// take for a writer that died) and the [`LogWriter`] accepts no more records.
pub struct RecordWriter<'a, W> {
    writer: &'a mut LogWriter<W>,
    start: u64,
    /// Bytes of the sealed fragment already written to the sink, while one is
    /// being written out, and whether it ends the record.
    written: Option<(usize, bool)>,
    finished: bool,
}

impl<W> fmt::Debug for RecordWriter<'_, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordWriter")
            .field("start", &self.start)
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

impl<W: AsyncWrite + Unpin> RecordWriter<'_, W> {
    /// Log offset of the record's first header.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// Writes the sealed fragment out, if there is one.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((done, ends)) = self.written {
            let writer = &mut *self.writer;
            let bytes = &writer.framer.buf[done..];
            if bytes.is_empty() {
                writer.framer.next(ends);
                self.written = None;
                break;
            }
            match ready!(Pin::new(&mut writer.sink).poll_write(cx, bytes)) {
                Ok(0) => {
                    let e = io::Error::new(io::ErrorKind::WriteZero, "sink took no bytes");
                    return Poll::Ready(Err(self.break_log(e)));
                }
                Ok(n) => self.written = Some((done + n, ends)),
                Err(e) => return Poll::Ready(Err(self.break_log(e))),
            }
        }
        Poll::Ready(Ok(()))
    }

    /// A write failed part way into the record: the log holds a torn record.
    fn break_log(&mut self, e: io::Error) -> io::Error {
        let copy = io::Error::new(e.kind(), e.to_string());
        self.writer.broken = Some((self.start, Arc::new(copy)));
        self.finished = true;
        e
    }

    fn seal(&mut self, ends: bool) {
        self.writer.framer.seal(ends);
        self.written = Some((0, ends));
    }

    /// Ends the record: writes its last fragment, flushes the sink and returns where
    /// the record sits.
    pub async fn finish(mut self) -> Result<Position, Error> {
        futures::future::poll_fn(|cx| self.poll_drain(cx)).await?;
        self.seal(true);
        futures::future::poll_fn(|cx| self.poll_drain(cx)).await?;
        self.finished = true;
        let end = self.writer.framer.offset();
        futures::future::poll_fn(|cx| Pin::new(&mut self.writer.sink).poll_flush(cx)).await?;
        Ok(Position {
            start: self.start,
            end,
        })
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for RecordWriter<'_, W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.finished {
            return Poll::Ready(Err(io::Error::other("record writer is finished")));
        }
        loop {
            ready!(this.poll_drain(cx))?;
            if buf.is_empty() {
                return Poll::Ready(Ok(0));
            }
            if this.writer.framer.is_full() {
                // More bytes follow: the full fragment is not the last.
                this.seal(false);
                continue;
            }
            return Poll::Ready(Ok(this.writer.framer.push(buf)));
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.writer.sink).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

impl<W> Drop for RecordWriter<'_, W> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        if self.writer.framer.record_begun() || self.written.is_some() {
            let e = io::Error::other("a record writer was dropped part way into its record");
            self.writer.broken = Some((self.start, Arc::new(e)));
        } else {
            self.writer.framer.discard();
        }
    }
}

/// Reads `source` into the framer until its fragment is full and one more byte
/// shows it is not the record's last (kept in `carry`, returns true), or to EOF
/// (false). Shared by the streaming appends, which write sealed fragments their
/// own way. Bytes are read straight into the fragment: no copy.
pub(crate) async fn fill_fragment<S: AsyncRead + Unpin>(
    framer: &mut Framer,
    source: &mut S,
    carry: &mut Option<u8>,
) -> io::Result<bool> {
    if let Some(byte) = carry.take() {
        framer.push(&[byte]);
    }
    loop {
        if framer.is_full() {
            let mut one = [0u8; 1];
            if source.read(&mut one).await? == 0 {
                return Ok(false);
            }
            *carry = Some(one[0]);
            return Ok(true);
        }
        let len = framer.buf.len();
        framer.buf.resize(len + framer.room - framer.filled(), 0);
        let read = source.read(&mut framer.buf[len..]).await;
        let n = *read.as_ref().unwrap_or(&0);
        framer.buf.truncate(len + n);
        if read? == 0 {
            return Ok(false);
        }
    }
}
