//! [`RetentionHold`]: a holder outside the log (an archiver, a backup, a slow
//! consumer in another system) keeps segments from being purged until it has
//! dealt with them, and lets them go as it moves on.
//!
//! A hold is a pin like a [`DirReader`](super::DirReader)'s: it keeps one segment
//! and every later one against [`purge_before`](super::LogDir::purge_before),
//! [`retain_bytes`](super::LogDirOptions::retain_bytes) and
//! [`retain_age`](super::LogDirOptions::retain_age), with no limit (unlike a
//! replica's, which [`replica_retain_bytes`](super::LogDirOptions::replica_retain_bytes)
//! bounds). It never keeps the log from growing or rotating: it only delays
//! deletions. Dropping the hold releases it.

use std::sync::{Arc, Mutex, PoisonError};

use super::Inner;
use super::LogDir;

/// Keeps the segments from [`held_from`](Self::held_from) on against every purge
/// of a [`LogDir`] until its holder [`release_before`](Self::release_before)s
/// them; from [`LogDir::hold_retention`]. Dropping it releases what it holds.
///
/// ```
/// # #[tokio::main]
/// # async fn main() -> Result<(), walcodec::Error> {
/// use walcodec::LogDir;
///
/// let dir = tempfile::tempdir()?;
/// let log = LogDir::builder().max_segment_bytes(1024).open(dir.path()).await?;
/// // Before the first append: nothing can be purged before the hold is in place.
/// let hold = log.hold_retention();
/// for i in 0..300 {
///     log.append(format!("event {i}")).await?;
/// }
/// // Held: nothing is purged, whatever the purge asks for.
/// assert!(log.purge_before(log.end()).await?.is_empty());
/// // Segments 1 and 2 are copied elsewhere: let them go.
/// hold.release_before(3);
/// assert_eq!(log.purge_before(log.end()).await?, vec![1, 2]);
/// log.close().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "dropping the hold releases it at once"]
pub struct RetentionHold {
    inner: Arc<Inner>,
    /// The segment pinned: the oldest one held.
    from: Mutex<u64>,
}

impl LogDir {
    /// Holds every segment kept now (from [`start`](Self::start) on) and every
    /// later one against purges until the hold is
    /// [`release_before`](RetentionHold::release_before)d or dropped.
    ///
    /// Take it before anything could purge what the holder still needs (before the
    /// first append of a log with [`retain_bytes`](crate::LogDirOptions::retain_bytes)
    /// or [`retain_age`](crate::LogDirOptions::retain_age)): segments purged before
    /// are gone.
    pub fn hold_retention(&self) -> RetentionHold {
        let from = {
            let mut catalog = self.inner.catalog();
            let first = catalog.first;
            catalog.pin(first);
            first
        };
        RetentionHold {
            inner: Arc::clone(&self.inner),
            from: Mutex::new(from),
        }
    }
}

impl RetentionHold {
    /// The oldest segment held: it and every later one are kept.
    pub fn held_from(&self) -> u64 {
        *self.from.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Lets the segments before `segment` go: the next purge may delete them. A
    /// hold only moves forward: a `segment` at or before
    /// [`held_from`](Self::held_from) changes nothing.
    pub fn release_before(&self, segment: u64) {
        let mut from = self.from.lock().unwrap_or_else(PoisonError::into_inner);
        if segment <= *from {
            return;
        }
        let mut catalog = self.inner.catalog();
        // Pin the new segment before unpinning the old: no moment without a hold.
        catalog.pin(segment);
        catalog.unpin(*from);
        *from = segment;
    }
}

impl Drop for RetentionHold {
    fn drop(&mut self) {
        let from = *self.from.get_mut().unwrap_or_else(PoisonError::into_inner);
        self.inner.catalog().unpin(from);
    }
}
