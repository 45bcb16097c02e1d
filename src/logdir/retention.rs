//! Space coming back: purges (`purge_before`), retention by size and age
//! (`enforce_retention`, run after each rotation), and what a purge keeps for the
//! replicas still reading (`replica_keep_from`).
//!
//! Apart from `mod.rs` because deleting is the one way records leave a log other than
//! a truncation, and its rules (never the active segment, never a hole, where the purge
//! ends durable first) read best together.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::fs::blocking;
use super::segment::segment_path;
use super::{recovery, recycle, LogDir};
use crate::error::Error;
use crate::position::LogPosition;

impl LogDir {
    /// Deletes the whole segments that end at or before `pos`, oldest first, and
    /// syncs the directory; returns their numbers. Where the purge ends is made
    /// durable first (the `PURGED` file), so a crash in the middle leaves segments
    /// that [`open`](crate::LogDirOptions::open) deletes, never a hole. Never the active segment, nor a
    /// segment a [`DirReader`](crate::DirReader) of this log still needs (those and every later one
    /// are kept), so a purge never leaves a hole.
    ///
    /// # Errors
    /// When a deletion fails, the segments before it are gone and the rest kept;
    /// when the directory sync fails, the deletions may not survive a crash. Appends
    /// are not affected either way.
    pub async fn purge_before(&self, pos: LogPosition) -> Result<Vec<u64>, Error> {
        let _purging = self.inner.purging.lock().await;
        let victims: Vec<u64> = {
            let mut catalog = self.inner.catalog();
            let limit = catalog
                .pins
                .keys()
                .next()
                .copied()
                .unwrap_or(u64::MAX)
                .min(catalog.active);
            let mut victims: Vec<(u64, u64)> = catalog
                .sealed
                .range(..limit)
                .take_while(|(&segment, &len)| {
                    LogPosition::new(segment, catalog.records_end(segment, len)) <= pos
                })
                .map(|(&segment, &len)| (segment, len))
                .collect();
            let keep_from = replica_keep_from(
                &victims,
                catalog.replica_pins.keys().next().copied(),
                self.inner.options.replica_retain_limit(),
            );
            victims.retain(|&(segment, _)| segment < keep_from);
            let victims: Vec<u64> = victims.into_iter().map(|(segment, _)| segment).collect();
            if let Some(&last) = victims.last() {
                catalog.first = last + 1;
            }
            victims
        };
        self.delete_segments(victims).await
    }

    /// Deletes `victims` (consecutive, oldest first, already behind `first`).
    pub(super) async fn delete_segments(&self, victims: Vec<u64>) -> Result<Vec<u64>, Error> {
        let Some(&last) = victims.last() else {
            return Ok(victims);
        };
        let through = {
            let catalog = self.inner.catalog();
            let len = catalog.sealed.get(&last).copied().unwrap_or(0);
            // The end of its last record: a checkpoint there (before a Pebble
            // segment's EOF trailer) reads on from the next segment kept.
            LogPosition::new(last, catalog.records_end(last, len))
        };
        let dir = self.inner.dir.clone();
        let storage = Arc::clone(&self.inner.options.storage);
        let deleted = victims.clone();
        // Room in the pool: that many of the victims may be kept for reuse.
        let room = self
            .inner
            .options
            .recycle_segments
            .saturating_sub(self.inner.catalog().pool.len());
        let result = blocking(move || {
            // First where the purge ends, durably: it decides the purge, so that a
            // crash that keeps some of the deletions below and not others (a
            // directory's changes reach the disk in any order until it is synced)
            // leaves a log `open` finishes purging, never one with a hole. It also
            // lets a checkpoint there still read after a restart.
            if let Err(e) =
                recovery::write_position_file(&dir, recovery::PURGED_FILE, through, &*storage)
                    .and_then(|()| storage.sync_dir(&dir))
            {
                return Ok((Vec::new(), Err((deleted[0], e))));
            }
            let mut pooled = Vec::new();
            for &segment in &deleted {
                let path = segment_path(&dir, segment);
                // Only a file written in the recyclable format with its own number
                // is kept: its old bytes then read as the end of any later segment.
                let reusable = pooled.len() < room
                    && matches!(
                        recycle::written_as(&path, segment),
                        Ok(recycle::Written::Recyclable | recycle::Written::WalSync)
                    );
                let gone = if reusable {
                    storage
                        .rename(&path, &recycle::pooled_path(&dir, segment))
                        .map(|()| pooled.push(segment))
                } else {
                    storage.remove(&path)
                };
                match gone {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Ok((pooled, Err((segment, e)))),
                }
            }
            Ok((pooled, storage.sync_dir(&dir).map_err(|e| (u64::MAX, e))))
        })
        .await?;
        let (pooled, result) = result;
        self.inner.observer.pooled(&pooled);
        let mut catalog = self.inner.catalog();
        catalog.pool.extend(pooled);
        match result {
            Ok(()) => {
                for segment in &victims {
                    catalog.sealed.remove(segment);
                    catalog.ends.remove(segment);
                }
                catalog.purged_through = catalog.purged_through.max(through);
                drop(catalog);
                self.inner.observer.purged(&victims);
                self.report_size();
                Ok(victims)
            }
            Err((failed, e)) => {
                // Keep what was not deleted; what was is gone from the directory.
                for segment in victims.iter().filter(|&&s| s < failed) {
                    catalog.sealed.remove(segment);
                    catalog.ends.remove(segment);
                }
                if failed != u64::MAX {
                    catalog.first = failed;
                } else {
                    catalog.purged_through = catalog.purged_through.max(through);
                }
                Err(e.into())
            }
        }
    }

    /// Applies [`retain_bytes`](crate::LogDirOptions::retain_bytes) and
    /// [`retain_age`](crate::LogDirOptions::retain_age) now; returns the segments purged.
    /// Runs by itself after each rotation.
    pub async fn enforce_retention(&self) -> Result<Vec<u64>, Error> {
        let options = &self.inner.options;
        if options.retain_bytes.is_none() && options.retain_age.is_none() {
            return Ok(Vec::new());
        }
        let (sealed, active_len) = {
            let catalog = self.inner.catalog();
            let active = *self.inner.end.borrow();
            let active_len = if active.segment == catalog.active {
                active.offset
            } else {
                0
            };
            let sealed: Vec<(u64, u64)> = catalog.sealed.iter().map(|(&s, &l)| (s, l)).collect();
            (sealed, active_len)
        };
        let mut total: u64 = sealed.iter().map(|&(_, len)| len).sum::<u64>() + active_len;
        let mut cut = None;
        for &(segment, len) in &sealed {
            let too_big = options.retain_bytes.is_some_and(|max| total > max);
            let too_old = match options.retain_age {
                Some(age) => self.sealed_longer_than(segment, age).await,
                None => false,
            };
            if !(too_big || too_old) {
                break;
            }
            total -= len;
            cut = Some(LogPosition::new(segment, len));
        }
        let Some(cut) = cut else {
            return Ok(Vec::new());
        };
        let purged = self.purge_before(cut).await?;
        self.inner
            .observer
            .retention(&purged, options.retain_bytes, options.retain_age);
        Ok(purged)
    }

    pub(super) async fn sealed_longer_than(&self, segment: u64, age: Duration) -> bool {
        let path = segment_path(&self.inner.dir, segment);
        match tokio::fs::metadata(path).await.and_then(|m| m.modified()) {
            Ok(modified) => SystemTime::now()
                .duration_since(modified)
                .is_ok_and(|elapsed| elapsed > age),
            Err(_) => false,
        }
    }

    /// Sets the segment-count and size gauges (feature `metrics`).
    pub(super) fn report_size(&self) {
        let catalog = self.inner.catalog();
        let end = *self.inner.end.borrow();
        let active_len = if end.segment == catalog.active {
            end.offset
        } else {
            0
        };
        let sealed_bytes: u64 = catalog.sealed.values().sum();
        self.inner
            .observer
            .size(catalog.sealed.len() + 1, sealed_bytes + active_len);
    }

    pub(super) async fn auto_retention(&self) {
        // Best effort: a failed deletion leaves the segment for the next round, and
        // must not fail the append that happened to rotate.
        let _ = self.enforce_retention().await;
    }
}

/// The first of a purge's `victims` (sealed segments, oldest first, with their
/// lengths) to keep for the replicas pinning from `pinned` on: those it would delete
/// from `pinned` on, but for the oldest while they hold more than `limit` bytes
/// together. Every victim before the segment returned is deleted.
pub(super) fn replica_keep_from(victims: &[(u64, u64)], pinned: Option<u64>, limit: u64) -> u64 {
    let Some(pinned) = pinned else {
        return u64::MAX;
    };
    let held: Vec<(u64, u64)> = victims
        .iter()
        .copied()
        .filter(|&(segment, _)| segment >= pinned)
        .collect();
    let mut bytes: u64 = held.iter().map(|&(_, len)| len).sum();
    let mut keep_from = pinned;
    for (segment, len) in held {
        if bytes <= limit {
            break;
        }
        bytes -= len;
        keep_from = segment + 1;
    }
    keep_from
}
