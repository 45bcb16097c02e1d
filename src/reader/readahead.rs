//! A read-ahead pipeline for log files: a blocking thread makes large reads and
//! hands each one over as a chunk of its own, while the task that owns the
//! [`ReadAhead`] decodes the chunk before.
//!
//! Why: `tokio::fs::File` sends every read to the blocking pool and waits for it, one
//! round trip per read buffer (8 KiB for a default `FramedRead`), and copies each
//! byte from its own buffer into the reader's; decoding only starts once a read has
//! returned. Here the reads are large, never wait on the decoder (up to a fixed
//! number of chunks ahead), and their buffers become the decoder's buffers, so a
//! record that fits in one fragment is a view of the chunk it was read into.
//!
//! | who                   | does                                                  |
//! |-----------------------|-------------------------------------------------------|
//! | the blocking thread   | fills a chunk (`chunk_bytes`) with reads, queues it   |
//! | the queue             | holds at most `chunks_in_flight` chunks               |
//! | the owning task       | takes chunks in order; a record is a view of one      |
//!
//! The thread stops at the source's end (a read of zero bytes), at a read error
//! (which is queued like a chunk), or as soon as the [`ReadAhead`] is dropped.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Buf, BytesMut};
use futures::Stream;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::mpsc;

use super::ChunkReader;
use crate::format::BLOCK_SIZE;

/// Configures a [`ReadAhead`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), walcodec::Error> {
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("000001.log");
/// use walcodec::{AsyncLogWriter, LogDecoder, LogReader, ReadAhead, BLOCK_SIZE};
///
/// let writer = AsyncLogWriter::create(&path).await?;
/// writer.append(b"one").await?;
/// writer.close().await?;
///
/// // 1 MiB reads, at most two of them waiting for the decoder.
/// let source = ReadAhead::builder()
///     .chunk_bytes(32 * BLOCK_SIZE)
///     .chunks_in_flight(2)
///     .open(&path, 0)
///     .await?;
/// let mut reader = LogReader::from_read_ahead(source, LogDecoder::new());
/// assert_eq!(reader.next_record().await.unwrap()?.data, &b"one"[..]);
/// # Ok(())
/// # }
/// ```
#[must_use]
#[derive(Debug, Clone)]
pub struct ReadAheadBuilder {
    chunk_bytes: usize,
    chunks_in_flight: usize,
}

impl Default for ReadAheadBuilder {
    fn default() -> Self {
        ReadAheadBuilder {
            chunk_bytes: ReadAhead::DEFAULT_CHUNK_BYTES,
            chunks_in_flight: ReadAhead::DEFAULT_CHUNKS_IN_FLIGHT,
        }
    }
}

impl ReadAheadBuilder {
    /// How many bytes each read asks for (default [`ReadAhead::DEFAULT_CHUNK_BYTES`]; at least
    /// 1). Any size reads the same records; a multiple of [`BLOCK_SIZE`] read from a
    /// block boundary keeps every fragment inside one chunk, so nothing is copied.
    pub fn chunk_bytes(&mut self, bytes: usize) -> &mut Self {
        self.chunk_bytes = bytes.max(1);
        self
    }

    /// How many chunks may wait for the decoder (default
    /// [`ReadAhead::DEFAULT_CHUNKS_IN_FLIGHT`]; at least 1). The pipeline holds at most this
    /// many, plus the one being read and the one being decoded, and keeps up to four
    /// that the reader is done with for the next reads (their memory is used again).
    pub fn chunks_in_flight(&mut self, chunks: usize) -> &mut Self {
        self.chunks_in_flight = chunks.max(1);
        self
    }

    /// Opens the file at `path` and reads it from `offset` on. Must be called within
    /// a Tokio runtime: the reads run on its blocking pool.
    pub async fn open(&self, path: impl AsRef<Path>, offset: u64) -> io::Result<ReadAhead> {
        let path = path.as_ref().to_path_buf();
        let file = tokio::task::spawn_blocking(move || -> io::Result<File> {
            let mut file = crate::open::open_to_read(&path)?;
            if offset > 0 {
                file.seek(SeekFrom::Start(offset))?;
            }
            Ok(file)
        })
        .await
        .map_err(io::Error::other)??;
        Ok(self.spawn(file))
    }

    /// Reads `source` from where it stands to its end, on a thread of the runtime's
    /// blocking pool. Must be called within a Tokio runtime.
    pub fn spawn<R: Read + Send + 'static>(&self, source: R) -> ReadAhead {
        let (chunks, queue) = mpsc::channel(self.chunks_in_flight);
        let chunk_bytes = self.chunk_bytes;
        // Detached: it ends by itself at EOF, on an error or once `queue` is gone.
        drop(tokio::task::spawn_blocking(move || {
            fill(source, chunk_bytes, chunks)
        }));
        ReadAhead {
            queue,
            current: BytesMut::new(),
            done: false,
        }
    }
}

/// The blocking side: one chunk after another until the end, an error or a reader
/// that went away. [`ChunkReader`] reads each chunk into memory of its own, aligned,
/// and used again once nothing refers to it.
fn fill<R: Read>(source: R, chunk_bytes: usize, chunks: mpsc::Sender<io::Result<BytesMut>>) {
    for chunk in ChunkReader::new(source, chunk_bytes) {
        if chunks.blocking_send(chunk).is_err() {
            return;
        }
    }
}

/// The read side of the pipeline: a [`Stream`] of chunks in file order, and an
/// [`AsyncRead`] of the same bytes (which copies them out of the chunks).
///
/// [`LogReader::open`](crate::LogReader::open) and its siblings read through one;
/// [`LogReader::from_read_ahead`](crate::LogReader::from_read_ahead) reads a log
/// through one configured with [`ReadAhead::builder`].
#[derive(Debug)]
pub struct ReadAhead {
    queue: mpsc::Receiver<io::Result<BytesMut>>,
    /// What is left of the chunk that `poll_read` copies from.
    current: BytesMut,
    done: bool,
}

impl ReadAhead {
    /// The default size of a read-ahead chunk: 512 KiB, 16 blocks. Large enough that a
    /// read's fixed cost (a system call, a hand-over between threads) is small beside
    /// copying the bytes; small enough that a chunk is still in the CPU's cache when it
    /// is decoded.
    pub const DEFAULT_CHUNK_BYTES: usize = 16 * BLOCK_SIZE;

    /// The default number of chunks queued ahead of the decoder: 4.
    pub const DEFAULT_CHUNKS_IN_FLIGHT: usize = 4;

    /// A builder, to choose the chunk size and how many chunks are read ahead.
    pub fn builder() -> ReadAheadBuilder {
        ReadAheadBuilder::default()
    }

    /// Opens the file at `path` and reads it from `offset` on, with the defaults.
    pub async fn open(path: impl AsRef<Path>, offset: u64) -> io::Result<ReadAhead> {
        ReadAhead::builder().open(path, offset).await
    }

    /// The next bytes: a whole chunk, or what `poll_read` left of one. `None` at the
    /// end (and after an error).
    pub(crate) fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<io::Result<BytesMut>>> {
        if !self.current.is_empty() {
            return Poll::Ready(Some(Ok(std::mem::take(&mut self.current))));
        }
        if self.done {
            return Poll::Ready(None);
        }
        let next = ready!(self.queue.poll_recv(cx));
        if !matches!(next, Some(Ok(_))) {
            self.done = true;
        }
        Poll::Ready(next)
    }
}

impl Stream for ReadAhead {
    type Item = io::Result<BytesMut>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().poll_chunk(cx)
    }
}

impl AsyncRead for ReadAhead {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.current.is_empty() {
            match ready!(this.poll_chunk(cx)) {
                Some(Ok(chunk)) => this.current = chunk,
                Some(Err(e)) => return Poll::Ready(Err(e)),
                None => return Poll::Ready(Ok(())),
            }
        }
        let n = this.current.len().min(buf.remaining());
        buf.put_slice(&this.current[..n]);
        this.current.advance(n);
        Poll::Ready(Ok(()))
    }
}
