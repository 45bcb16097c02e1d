//! `AsyncLogWriter::append_stream`: one record of any size from an [`AsyncRead`],
//! framed a fragment at a time into the writer's queue.
//!
//! A streamed record must be contiguous in the log, so while it is being read the
//! writer's end belongs to it: [`State::streaming`](super::State::streaming) makes other appends wait (their
//! queue room given back), and they go on once its last fragment is queued. The
//! fragments go through the same queue, flusher and group commit as whole records,
//! so memory stays within the queue's bound and one fragment.

use std::io;
use std::sync::Arc;

use tokio::io::AsyncRead;
use tokio::sync::oneshot;

use super::{AsyncLogWriter, Entry, Failure, Shared};
use crate::codec::encoder::LogEncoder;
use crate::error::Error;
use crate::format::Position;
use crate::writer::record_writer::{fill_fragment, Framer};

/// Holds the end of the log for a streamed record; on drop gives it back and wakes
/// the appends waiting behind it. Dropped part way into a record (an error, or the
/// future dropped) after some of its fragments were queued, it poisons the writer:
/// the log ends in a torn record that only a repair on reopen cuts off.
struct StreamClaim<'a> {
    shared: &'a Shared,
    /// Fragments of the record queued so far.
    queued: bool,
    finished: bool,
    /// Why the record was left part way, if it failed.
    error: Option<io::Error>,
}

impl Drop for StreamClaim<'_> {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.streaming = false;
        if self.queued && !self.finished && state.failure.is_none() {
            let error = self.error.take().unwrap_or_else(|| {
                io::Error::other("a streamed append was dropped part way into its record")
            });
            state.failure = Some(Failure {
                offset: state.durable_len,
                error: Arc::new(error),
            });
        }
        drop(state);
        self.shared.stream_done.notify_waiters();
    }
}

impl AsyncLogWriter {
    /// Appends all of `source`, of any size, as one record and resolves once it is
    /// durable. Returns where the record sits in the log.
    ///
    /// The record is read and framed a fragment (32 KiB) at a time, each fragment
    /// queued as soon as the next byte shows it is not the last, so memory stays
    /// within the queue's bound ([`WriterOptions::max_queued_bytes`](crate::WriterOptions::max_queued_bytes))
    /// whatever the record's size; [`WriterOptions::max_record_bytes`](crate::WriterOptions::max_record_bytes)
    /// does not apply. The bytes are those [`append`](Self::append) writes for the
    /// same record.
    ///
    /// **Other appends wait behind it**: a record is contiguous in the log, so from
    /// the call until its last fragment is queued, appends from any clone wait (one
    /// streamed append at a time, too). A source that stalls holds them up for at
    /// most [`WriterOptions::stream_stall_timeout`](crate::WriterOptions::stream_stall_timeout)
    /// per fragment: then this append fails with an error of kind `TimedOut`.
    ///
    /// # Errors
    /// As [`append`](Self::append) (but never [`Error::RecordTooLarge`]), and
    /// [`Error::Io`] when the source fails or stalls. If that happens after some of
    /// the record's fragments were queued (or this future is dropped then), the log
    /// ends in a torn record: the writer is poisoned, as after a failed write, and
    /// [`AsyncLogWriter::open`] repairs the log on reopen. A source that fails
    /// before its first 32 KiB leaves nothing behind. [`close`](Self::close) while a
    /// streamed append runs does not wait for it: the append's next fragment is
    /// refused with [`Error::Closed`], with the same effect.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), walcodec::Error> {
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("000001.log");
    /// use walcodec::AsyncLogWriter;
    ///
    /// let writer = AsyncLogWriter::create(&path).await?;
    /// let big = vec![42u8; 200_000];
    /// let position = writer.append_stream(&big[..]).await?;
    /// assert_eq!(position.start, 0);
    /// writer.close().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn append_stream<S>(&self, mut source: S) -> Result<Position, Error>
    where
        S: AsyncRead + Unpin + Send,
    {
        let shared = &*self.handle.shared;
        let _one_at_a_time = shared.stream_gate.lock().await;
        let mut claim = StreamClaim {
            shared,
            queued: false,
            finished: false,
            error: None,
        };
        let mut framer = {
            let mut state = shared.lock();
            if let Some(refusal) = state.refusal() {
                return Err(refusal);
            }
            if state.encoder.format() != crate::codec::encoder::LogFormat::leveldb() {
                // The streaming framer writes LevelDB's 7-byte headers only.
                return Err(Error::Io(std::io::Error::new(
                    std::io::ErrorKind::Unsupported,
                    "streamed records are written in LevelDB's format only",
                )));
            }
            state.streaming = true;
            Framer::new(state.encoder.offset())
        };
        let start = framer.record_start();
        let mut carry = None;
        let done = loop {
            let filled = tokio::time::timeout(
                shared.stream_stall_timeout,
                fill_fragment(&mut framer, &mut source, &mut carry),
            )
            .await;
            let more = match filled {
                Ok(Ok(more)) => more,
                Ok(Err(e)) => {
                    claim.error = Some(io::Error::new(e.kind(), e.to_string()));
                    return Err(Error::Io(e));
                }
                Err(_) => {
                    let e = || {
                        io::Error::new(
                            io::ErrorKind::TimedOut,
                            "the source of a streamed append stalled",
                        )
                    };
                    claim.error = Some(e());
                    return Err(Error::Io(e()));
                }
            };
            let done = queue_fragment(shared, framer.seal(!more), !more).await?;
            claim.queued = true;
            framer.next(!more);
            if !more {
                break done;
            }
        };
        claim.finished = true;
        let end = framer.offset();
        drop(claim);
        self.wait(Some(done)).await?;
        Ok(Position { start, end })
    }
}

/// Queues one sealed fragment (and its trailer) at the end of the log; the last
/// one of the record gets a waiter, completed once it is durable.
async fn queue_fragment(
    shared: &Shared,
    bytes: &[u8],
    last: bool,
) -> Result<oneshot::Receiver<Result<(), Error>>, Error> {
    let permits = bytes.len().min(shared.max_queued_bytes);
    match shared.queue.acquire_many(permits as u32).await {
        // Returned by the flusher once the bytes are written, not on drop.
        Ok(permit) => permit.forget(),
        Err(_) => return Err(shared.refusal()),
    }
    let mut state = shared.lock();
    if let Some(refusal) = state.refusal() {
        drop(state);
        shared.queue.add_permits(permits);
        return Err(refusal);
    }
    state.buf.extend_from_slice(bytes);
    let end = state.encoder.offset() + bytes.len() as u64;
    // The encoder only tracks where the log ends: whole records go on from there.
    state.encoder = LogEncoder::with_offset(end);
    state.queued_permits += permits;
    let (tx, rx) = oneshot::channel();
    let waiter = if last {
        state.pending_waiters += 1;
        Some(tx)
    } else {
        None
    };
    state.pending.push_back(Entry {
        end,
        records: u64::from(last),
        waiter,
    });
    let signal = state.flusher_signal(shared.max_batch_bytes);
    drop(state);
    shared.signal(signal);
    Ok(rx)
}
