//! A `FramedRead` and a `FramedWrite` of a log with buffers of the right size.
//!
//! `FramedRead::new` starts with an 8 KiB buffer and asks its source for no more
//! than the room left in it. Over a `tokio::fs::File` every read is a round trip to
//! the blocking pool, so a small buffer means many round trips per block of the
//! log; a buffer that holds many blocks needs few, and the decoder's records are
//! views of it.
//!
//! `FramedWrite` writes its buffer out once it holds 8 KiB (its backpressure
//! boundary): over a `tokio::fs::File`, one round trip per 8 KiB. Writing once a
//! megabyte has gathered takes a hundredth of the round trips.

use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::codec::encoder::LogEncoder;
use crate::decoder::LogDecoder;
use crate::decoder::LogDecoderBuilder;
use crate::format::BLOCK_SIZE;

/// The read buffer of [`LogDecoder::framed_read`] and
/// [`LogDecoderBuilder::framed_read`]: 1 MiB, 32 blocks.
pub const FRAMED_READ_CAPACITY: usize = 32 * BLOCK_SIZE;

impl LogDecoder {
    /// A [`FramedRead`] of `io` with a default decoder and a read buffer of
    /// [`FRAMED_READ_CAPACITY`] bytes.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), walcodec::Error> {
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("000001.log");
    /// # let writer = walcodec::AsyncLogWriter::create(&path).await?;
    /// # writer.append(b"one").await?;
    /// # writer.close().await?;
    /// use futures::TryStreamExt;
    /// use walcodec::LogDecoder;
    ///
    /// let file = tokio::fs::File::open(&path).await?;
    /// let records: Vec<_> = LogDecoder::framed_read(file).try_collect().await?;
    /// assert_eq!(records, [&b"one"[..]]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn framed_read<R: AsyncRead>(io: R) -> FramedRead<R, LogDecoder> {
        FramedRead::with_capacity(io, LogDecoder::new(), FRAMED_READ_CAPACITY)
    }
}

/// The backpressure boundary of [`LogEncoder::framed_write`]: 1 MiB, 32 blocks.
pub const FRAMED_WRITE_BUFFER: usize = 32 * BLOCK_SIZE;

impl<T: ?Sized> LogEncoder<T> {
    /// A [`FramedWrite`] of `io` with a new encoder that writes its buffer out once
    /// it holds [`FRAMED_WRITE_BUFFER`] bytes (rather than 8 KiB).
    ///
    /// The sink's item type is inferred from its use, as for
    /// [`LogEncoder::new`]: slices, or the [`Bytes`](bytes::Bytes) a decoder's
    /// stream yields, so a relay is one line:
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), walcodec::Error> {
    /// # let mut log = bytes::BytesMut::new();
    /// # walcodec::LogEncoder::new().encode_record(b"one", &mut log);
    /// # let src = &log[..];
    /// # let mut dst = Vec::new();
    /// use futures::StreamExt;
    /// use walcodec::{LogDecoder, LogEncoder};
    ///
    /// LogDecoder::framed_read(src)
    ///     .forward(LogEncoder::framed_write(&mut dst))
    ///     .await?;
    /// # assert_eq!(dst, &log[..]);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// Add records with `feed` and end with `flush` or `close`: `send` flushes
    /// after every record, one write per record.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), walcodec::Error> {
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("000001.log");
    /// use futures::SinkExt;
    /// use walcodec::{LogEncoder, LogReader};
    ///
    /// let file = tokio::fs::File::create(&path).await?;
    /// let mut sink = LogEncoder::framed_write(file);
    /// for record in [&b"one"[..], b"two"] {
    ///     sink.feed(record).await?;
    /// }
    /// sink.close().await?;
    ///
    /// let mut reader = LogReader::open(&path).await?;
    /// assert_eq!(reader.next_record().await.unwrap()?.data, &b"one"[..]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn framed_write<W: AsyncWrite>(io: W) -> FramedWrite<W, LogEncoder<T>> {
        let mut sink = FramedWrite::new(io, LogEncoder::new());
        sink.set_backpressure_boundary(FRAMED_WRITE_BUFFER);
        sink
    }
}

impl LogDecoderBuilder {
    /// A [`FramedRead`] of `io` with the configured decoder and a read buffer of
    /// [`FRAMED_READ_CAPACITY`] bytes (what [`new_read`](Self::new_read) gives
    /// too).
    pub fn framed_read<R: AsyncRead>(&self, io: R) -> FramedRead<R, LogDecoder> {
        FramedRead::with_capacity(io, self.build(), FRAMED_READ_CAPACITY)
    }
}
