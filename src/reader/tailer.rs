//! [`LogTailer`]: a reader that follows a log as it is written. It drives the
//! [`LogReader`] it wraps in follow mode; what the bytes of a live file mean is the
//! follower engine's (`follow.rs`).

use std::io::SeekFrom;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::io::{AsyncRead, AsyncSeekExt};

use super::{with_log_start, FileGuard, LogReader, LogRecord};
use crate::decoder::{LogDecoder, LogDecoderBuilder, LogInput};
use crate::error::Error;
use crate::format::block_start;

/// Follows a log that is still being written: yields each record once it is complete
/// and waits for more at EOF, polling every `poll_interval`.
///
/// Partial records at EOF are kept, not dropped or reported: an in-progress write is
/// never mistaken for damage. The stream ends only on an error or at the decoder's
/// end offset; drop it to stop following.
///
/// A tailer of a file opened by path ([`open`](Self::open), [`open_at`](Self::open_at),
/// [`follow_file`](Self::follow_file)) checks, each time it has waited at EOF, that
/// the file is still the one it read: if it shrank below what was read (a repair or
/// a truncation), if the path now names another file (deleted and recreated), or if
/// the last block it read now holds other bytes (cut and grown again), it fails with
/// [`Error::LogChanged`] rather than join the start of an old record to the end of a
/// new one. Every error names offsets the tailer returned records up to. A record
/// it put together from more than one read is checked before it is returned: the
/// file must still hold all of its bytes, else the file was cut and written again
/// between the reads, and the tailer fails with [`Error::LogChanged`] rather than
/// return a record nobody wrote.
///
/// Such a tailer also follows a log written in place: a file whose space is
/// preallocated with zeros (see
/// [`WriterOptions::preallocate`](crate::WriterOptions::preallocate)) or a recycled
/// RocksDB WAL holding an earlier log. Whatever lies past the end of the last
/// complete record (zeros, a fragment of another log number, a fragment cut short,
/// a write in progress) is taken as not written yet: the tailer goes back to that
/// record's end, waits, and reads again from there. It never returns a record that
/// was not written and never joins bytes from before and after the writer filled
/// the space. Damage there that reads the same after a wait is reported; damage
/// that zeros or an earlier log's fragments follow is what a writer that died
/// mid-write leaves, and the tailer waits for the writer's recovery to cut it.
///
/// In the modes that skip damage ([`Recovery::SkipCorrupted`](crate::Recovery),
/// `PointInTime`) the tailer neither reports nor skips what may be a write in
/// progress, or a read that raced one (a page the writer had not reached yet, read
/// as zeros, with pages it has since filled after it): damage past the last record
/// is held back, unreported and uncounted. Only when a complete record follows it,
/// and it reads the same after a wait, is it reported (once) and the record
/// returned; with nothing complete after it, it is never reported while the log is
/// followed.
///
/// A tailer built with [`new`](Self::new) over any other source has no file to
/// check or go back in: it cannot follow a log written in place.
///
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), walcodec::Error> {
/// use futures::StreamExt;
/// use walcodec::LogTailer;
///
/// let mut tail = LogTailer::open("events.log").await?;
/// while let Some(record) = tail.next().await {
///     let record = record?;
///     println!("{}: {} bytes", record.position.start, record.data.len());
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct LogTailer<R> {
    reader: LogReader<R>,
}

impl<R: AsyncRead + Unpin> LogTailer<R> {
    /// Follows the log in `io`, read with `decoder`.
    pub fn new(io: R, mut decoder: LogDecoder) -> LogTailer<R> {
        // Its input's end is where the writer is, never a cut.
        decoder.set_input(LogInput::File);
        let mut reader = LogReader::new(io, decoder);
        reader.follow = Some(LogTailer::DEFAULT_POLL_INTERVAL);
        LogTailer { reader }
    }

    /// How long to wait before looking for new bytes after reaching EOF (default 50 ms).
    pub fn with_poll_interval(mut self, interval: Duration) -> LogTailer<R> {
        self.reader.follow = Some(interval);
        self
    }

    /// The decoder, for its offsets and statistics.
    pub fn decoder(&self) -> &LogDecoder {
        self.reader.decoder()
    }

    /// The next complete record; waits for the log to grow.
    pub async fn next_record(&mut self) -> Option<Result<LogRecord, Error>> {
        self.reader.next_record().await
    }

    /// Whether every record the log holds now has been returned: reads what is
    /// there without waiting, and answers `false` as soon as a complete record is
    /// (it is kept, and the next read returns it), `true` when only the end, a
    /// record still being written, or space the writer has not reached is left.
    /// A consumer asks it before it answers "am I current?", with no timeout.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), walcodec::Error> {
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("000001.log");
    /// use walcodec::{AsyncLogWriter, LogTailer};
    ///
    /// let writer = AsyncLogWriter::create(&path).await?;
    /// writer.append(b"one").await?;
    /// let mut tail = LogTailer::open(&path).await?;
    /// assert!(!tail.caught_up().await?);
    /// assert_eq!(tail.next_record().await.unwrap()?.data, &b"one"[..]);
    /// assert!(tail.caught_up().await?);
    /// writer.append(b"two").await?;
    /// assert!(!tail.caught_up().await?);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// What the next read would fail with; the tailer is then over.
    pub async fn caught_up(&mut self) -> Result<bool, Error> {
        self.reader.caught_up().await
    }
}

impl LogTailer<tokio::fs::File> {
    /// Default of [`with_poll_interval`](Self::with_poll_interval), the wait between
    /// polls of a followed log that has no new bytes: 50 ms. (Also
    /// [`DirReader::with_poll_interval`](crate::logdir::DirReader::with_poll_interval)'s.)
    pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(50);

    /// Follows the log at `path` from its start.
    pub async fn open(path: impl AsRef<Path>) -> Result<LogTailer<tokio::fs::File>, Error> {
        LogTailer::open_at(path, 0, &LogDecoder::builder()).await
    }

    /// Follows the log at `path` from the first record at or after `start_offset`.
    pub async fn open_at(
        path: impl AsRef<Path>,
        start_offset: u64,
        builder: &LogDecoderBuilder,
    ) -> Result<LogTailer<tokio::fs::File>, Error> {
        let builder = with_log_start(path.as_ref(), start_offset, builder).await?;
        // A tokio file rather than a read-ahead: a tailer spends its time waiting at
        // the end, where reading ahead has nothing to read.
        let mut file = crate::open::open_to_read_async(path.as_ref()).await?;
        file.seek(SeekFrom::Start(block_start(start_offset)))
            .await?;
        let decoder = builder.clone().start_offset(start_offset).build();
        LogTailer::follow_file(file, path, decoder).await
    }

    /// Follows `file`, opened at `path` and positioned at `decoder.offset()`, with a
    /// decoder that may already hold part of a record: how a reader that read a log
    /// to its end goes on following it. The file is watched as [`open`](Self::open)'s
    /// is; the block before the position is taken as already read.
    pub async fn follow_file(
        file: tokio::fs::File,
        path: impl AsRef<Path>,
        decoder: LogDecoder,
    ) -> Result<LogTailer<tokio::fs::File>, Error> {
        let path = path.as_ref().to_path_buf();
        let metadata = file.metadata().await?;
        let read_end = decoder.offset();
        let guard = tokio::task::spawn_blocking(move || FileGuard::new(path, &metadata, read_end))
            .await
            .map_err(|join| Error::Io(std::io::Error::other(join)))??;
        let mut tailer = LogTailer::new(file, decoder);
        tailer.reader.engine.watch(guard);
        tailer.reader.live = Some(|file| file);
        Ok(tailer)
    }
}

impl<R: AsyncRead + Unpin> Stream for LogTailer<R> {
    type Item = Result<LogRecord, Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().reader.poll_record(cx)
    }
}
