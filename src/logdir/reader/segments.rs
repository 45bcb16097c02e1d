//! Where a segment a [`DirReader`](crate::logdir::DirReader) reads ends, and which
//! comes next: in the writer's process its durable end and its catalog (pinning the
//! segment read, seeing truncations); in another process the files (the next
//! segment's file seals this one; a missing one was purged or lost).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::walk::Walk;
use crate::error::Error;
use crate::logdir::segment::{list_segments, segment_path};
use crate::logdir::wake::DurableWatch;
use crate::logdir::Inner;
use crate::position::LogPosition;

/// How often a follower in another process, waiting at the end of a live segment,
/// lists the directory for a later segment with a hole before it.
const HOLE_CHECK_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub(super) enum Source {
    /// In the writer's process: bounded by the durable end, pinning segments.
    Writer {
        inner: Arc<Inner>,
        end: DurableWatch,
        truncations_seen: usize,
    },
    /// Any process: what the files hold.
    Files,
}

/// How much of the current segment may be read now.
pub(super) struct Readable {
    /// Read no further than this offset (`None`: to the file's end).
    pub(super) limit: Option<u64>,
    /// No record will be added to the segment.
    pub(super) sealed: bool,
}

impl Walk {
    /// The current segment's file is not there (a reader in another process): not
    /// written yet (`Some(false)`), purged (`None` when nothing the reader has not
    /// returned went with it), or lost.
    pub(super) async fn missing_segment(&self) -> Result<Option<bool>, Error> {
        let segments = {
            let dir = self.dir.clone();
            crate::logdir::fs::blocking(move || list_segments(&dir)).await?
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
    pub(super) fn returned_in_segment(&self) -> LogPosition {
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
    pub(super) async fn purged_to_here(&self) -> Result<bool, Error> {
        let purged = crate::logdir::recovery::read_purged(&self.dir).await?;
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

    /// In another process, at the end of a segment whose successor is not there:
    /// whether a later one is (a hole, reported when the reader gets to it).
    /// The next segment is looked up at once; a later one with a hole before it
    /// only a lost segment makes, so a follower waiting at the end of a live
    /// segment lists the directory for it at most once per
    /// [`HOLE_CHECK_INTERVAL`], not on every poll.
    pub(super) async fn later_segment_exists(&mut self) -> Result<bool, Error> {
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
    pub(super) async fn later_segment_than_next(&mut self) -> Result<bool, Error> {
        let now = Instant::now();
        if self
            .holes_checked
            .is_some_and(|(segment, at)| segment == self.segment && now < at + HOLE_CHECK_INTERVAL)
        {
            return Ok(false);
        }
        let dir = self.dir.clone();
        let segments = crate::logdir::fs::blocking(move || list_segments(&dir)).await?;
        self.holes_checked = Some((self.segment, now));
        Ok(segments.last().is_some_and(|&last| last > self.segment))
    }

    /// Moves on to the start of the next segment.
    pub(super) fn next_segment(&mut self) {
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
    pub(super) async fn readable(&self) -> Result<Readable, Error> {
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
    pub(super) fn check_truncations(&mut self) -> Result<(), Error> {
        let reader = LogPosition::new(
            self.segment,
            self.cursor.as_ref().map_or(self.start_offset, |c| {
                c.engine.read_end().max(self.start_offset)
            }),
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

    /// Waits for the log to grow: on the writer's watch channel, or one poll interval.
    pub(super) async fn wait(&mut self) {
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
