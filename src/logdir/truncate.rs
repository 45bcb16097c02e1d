//! [`LogDir::truncate_after`]: cutting the log back to a record boundary, with the
//! new epoch that tells replicas, as one crash-atomic step.

use std::sync::Arc;

use super::fs::blocking;
use super::segment::segment_path;
use super::{dialect, history, recovery, Active, LogDir};
use crate::error::Error;
use crate::position::LogPosition;
use crate::reader::LogReader;

impl LogDir {
    /// Removes every record after `pos`, which must be a record boundary (a
    /// position [`append`](Self::append) returned, a [`DirRecord::end`](super::DirRecord::end), or the
    /// start of a kept segment); later appends continue from there. Segments after
    /// `pos.segment` are deleted and `pos.segment` becomes the active one again.
    ///
    /// When it removes records, a new epoch starts at `pos`
    /// ([`history`](Self::history)), durable before this returns.
    ///
    /// A crash in the middle leaves the log as it was or as truncated, never a mix:
    /// the truncation and its epoch are decided together by one durable
    /// replacement of the `HISTORY` file, which [`open`](Self::open) finishes. Readers of this log that had read past `pos`
    /// fail with [`Error::TruncatedUnderReader`].
    ///
    /// # Errors
    /// [`Error::InvalidPosition`] when `pos` is past the end or inside a record,
    /// [`Error::Purged`] when its segment is gone. A failed step poisons the log
    /// ([`Error::DirPoisoned`]); reopening finishes or undoes the truncation.
    pub async fn truncate_after(&self, pos: LogPosition) -> Result<(), Error> {
        let _purging = self.inner.purging.lock().await;
        let mut active = self.inner.active.write().await;
        let writer = active.writer()?.clone();
        writer.sync().await?;
        let end = LogPosition::new(active.segment, writer.stats().durable_len);
        let first = self.inner.catalog().first;
        if pos.segment < first {
            return Err(Error::Purged {
                segment: pos.segment,
            });
        }
        if pos > end {
            return Err(Error::InvalidPosition {
                position: pos,
                reason: "past the end of the log",
            });
        }
        if pos == end {
            return Ok(());
        }
        if !self.is_record_boundary(pos).await? {
            return Err(Error::InvalidPosition {
                position: pos,
                reason: "not the end of a record",
            });
        }
        if let Err(e) = writer.close().await {
            return Err(active.poison(e));
        }
        active.writer = None;
        let dir = self.inner.dir.clone();
        let storage = Arc::clone(&self.inner.options.storage);
        // The new epoch and the cut are decided together, by one durable
        // replacement of `HISTORY` (which `open` finishes after a crash), before
        // anything is cut: never the cut without the epoch that tells replicas.
        let mut history = self.inner.catalog().history.clone();
        history.history.begin(pos);
        let mut deciding = history.clone();
        deciding.truncate = Some(pos);
        let decided = history.clone();
        let reopened = blocking(move || {
            history::write(&dir, &deciding, &*storage)?;
            recovery::apply_truncation(&dir, pos, &*storage)?;
            history::write(&dir, &history, &*storage)?;
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(segment_path(&dir, pos.segment))?;
            std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(pos.offset))?;
            Ok(file)
        })
        .await;
        let file = match reopened {
            Ok(file) => file,
            Err(e) => return Err(active.poison(e.into())),
        };
        let writer = match self
            .start_writer(pos.segment, Some((file, pos.offset)))
            .await
        {
            Ok(writer) => writer,
            Err(e) => return Err(active.poison(e)),
        };
        *active = Active::new(pos.segment, writer, pos.offset);
        {
            let mut catalog = self.inner.catalog();
            catalog.sealed.retain(|&segment, _| segment < pos.segment);
            catalog.ends.retain(|&segment, _| segment < pos.segment);
            catalog.active = pos.segment;
            catalog.truncations.push(pos);
            catalog.history = decided;
        }
        self.inner.quorum.truncated(pos);
        self.inner.end.send_replace(pos);
        Ok(())
    }

    /// Whether a record ends exactly at `pos` (or `pos` starts its segment).
    async fn is_record_boundary(&self, pos: LogPosition) -> Result<bool, Error> {
        if pos.offset == 0 {
            return Ok(true);
        }
        let path = segment_path(&self.inner.dir, pos.segment);
        let mut reader = LogReader::open_at(
            &path,
            0,
            &dialect::segment_decoder(pos.segment, self.inner.options.pebble()),
        )
        .await?;
        while let Some(record) = reader.next_record().await {
            let end = record?.position.end;
            if end >= pos.offset {
                return Ok(end == pos.offset);
            }
        }
        Ok(false)
    }
}
