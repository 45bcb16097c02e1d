//! Space of a [`SharedLog`](crate::SharedLog): which segments may go, and the
//! rewrite of the groups that pin old ones (the idea of raft-engine's purge and
//! rewrite).
//!
//! A group needs, of the log, the records a replay reads to rebuild it: its live
//! entries, and its latest vote, committed id and purge (the records that set
//! them, [`Kept`]). The oldest of those is the group's *pin*; the segments
//! before every group's pin hold nothing anyone needs, and go.
//!
//! A group that lags (a follower far behind, a group nobody writes to) pins old
//! segments full of other groups' dead records. Once the segments kept pass
//! [`SpaceOptions::rewrite_threshold`] bytes, the groups pinning the oldest ones
//! are *rewritten*: their live entries copied to the head of the log as
//! `Moved` records (which, on replay, put an entry at its index without dropping
//! the ones after it, so that any prefix of a rewrite a power cut keeps replays
//! to the same entries), and their vote, committed id and purge as one record
//! (or two independent ones when the group never purged). Then the old segments
//! go. A rewrite is done only when it frees at least twice the bytes it copies,
//! so that rewrites at most double what the stores write (a group whose live
//! entries fill the old segments is needed there, and stays).
//!
//! # Why the deletion waits
//! A store changes its index when a call begins (a truncation or a purge drops
//! entries at once, so that reads no longer see them) and hands its record to
//! the writer then, under the index's lock. The segments that a dropped entry
//! was the last need of may only go once the record that drops it is durable:
//! so the reclaimer, having looked at the indexes, counts the ops queued to the
//! writer and deletes once that many more are durable.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use walcodec::{DirReader, LogDir, LogPosition};

use crate::group::{Group, Kept};
use crate::record::{self, Kind};
use crate::Error;

/// The default of [`SharedLogBuilder::rewrite_threshold`](crate::SharedLogBuilder::rewrite_threshold).
pub(crate) const DEFAULT_REWRITE_THRESHOLD: u64 = 1 << 30;
/// The default of [`SharedLogBuilder::max_rewrite_bytes`](crate::SharedLogBuilder::max_rewrite_bytes).
pub(crate) const DEFAULT_MAX_REWRITE_BYTES: u64 = 64 << 20;

/// The knobs of the reclaimer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpaceOptions {
    /// Rewrite once the segments kept hold more bytes than this.
    pub(crate) rewrite_threshold: u64,
    /// Most bytes one rewrite copies (the writer pauses for it).
    pub(crate) max_rewrite_bytes: u64,
}

impl Default for SpaceOptions {
    fn default() -> Self {
        SpaceOptions {
            rewrite_threshold: DEFAULT_REWRITE_THRESHOLD,
            max_rewrite_bytes: DEFAULT_MAX_REWRITE_BYTES,
        }
    }
}

/// What a shared log wrote and freed since it was opened: see
/// [`SharedLog::space_stats`](crate::SharedLog::space_stats).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpaceStats {
    /// Bytes of the records the group stores wrote.
    pub written_bytes: u64,
    /// Bytes of the records rewrites copied to the head of the log.
    pub rewritten_bytes: u64,
    /// Rewrites done.
    pub rewrites: u64,
    /// Segments deleted (no group needed a record in them).
    pub deleted_segments: u64,
    /// Bytes of the segments deleted.
    pub deleted_bytes: u64,
}

impl SpaceStats {
    /// Bytes written to the log per byte the stores wrote: 1 without rewrites,
    /// at most 2 (a rewrite frees at least twice what it copies); 1 before
    /// anything is written.
    pub fn write_amplification(&self) -> f64 {
        if self.written_bytes == 0 {
            return 1.0;
        }
        (self.written_bytes + self.rewritten_bytes) as f64 / self.written_bytes as f64
    }
}

impl fmt::Display for SpaceStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} bytes written, {} rewritten in {} rewrites (write amplification {:.3}), \
             {} segments ({} bytes) deleted",
            self.written_bytes,
            self.rewritten_bytes,
            self.rewrites,
            self.write_amplification(),
            self.deleted_segments,
            self.deleted_bytes
        )
    }
}

/// [`SpaceStats`] as the writer counts them.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    written_bytes: AtomicU64,
    rewritten_bytes: AtomicU64,
    rewrites: AtomicU64,
    deleted_segments: AtomicU64,
    deleted_bytes: AtomicU64,
}

impl Counters {
    pub(crate) fn stats(&self) -> SpaceStats {
        SpaceStats {
            written_bytes: self.written_bytes.load(Ordering::Relaxed),
            rewritten_bytes: self.rewritten_bytes.load(Ordering::Relaxed),
            rewrites: self.rewrites.load(Ordering::Relaxed),
            deleted_segments: self.deleted_segments.load(Ordering::Relaxed),
            deleted_bytes: self.deleted_bytes.load(Ordering::Relaxed),
        }
    }

    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// The reclaimer: runs on the writer task, between batches.
pub(crate) struct Space {
    groups: Arc<Mutex<BTreeMap<u64, Group>>>,
    kept: BTreeMap<u64, Kept>,
    options: SpaceOptions,
    counters: Arc<Counters>,
    /// Segments before this position go once this many more ops are durable.
    pending: Option<(LogPosition, usize)>,
    /// The active segment when the pins were last looked at.
    checked_active: u64,
    /// A purge was written since.
    purged: bool,
}

/// A group to rewrite: its durable entries, the records of its [`Kept`].
struct Plan {
    group: u64,
    entries: Vec<(u64, Range<LogPosition>)>,
    kept: Vec<Vec<u8>>,
}

impl Space {
    pub(crate) fn new(
        groups: Arc<Mutex<BTreeMap<u64, Group>>>,
        kept: BTreeMap<u64, Kept>,
        options: SpaceOptions,
        counters: Arc<Counters>,
    ) -> Space {
        Space {
            groups,
            kept,
            options,
            counters,
            pending: None,
            checked_active: 0,
            purged: true,
        }
    }

    /// The records `records` of a batch are durable at `ranges`.
    pub(crate) fn written(&mut self, records: &[Arc<[u8]>], ranges: &[Range<LogPosition>]) {
        let mut bytes = 0;
        for (data, at) in records.iter().zip(ranges) {
            bytes += data.len() as u64;
            self.note(data, at.start);
        }
        Counters::add(&self.counters.written_bytes, bytes);
    }

    fn note(&mut self, data: &[u8], at: LogPosition) {
        match record::group_kind(data) {
            Some((group, Kind::Vote | Kind::Committed)) => {
                self.kept.entry(group).or_default().note(data, at)
            }
            Some((group, Kind::Purge)) => {
                self.kept.entry(group).or_default().note(data, at);
                self.purged = true;
            }
            _ => {}
        }
    }

    /// After a batch of `ops` ops is durable, with `queued` ops waiting: deletes
    /// what a earlier look found no group needs once the ops queued then are
    /// durable; else, when a segment was sealed or a group purged since the last
    /// look, looks again (and rewrites lagging groups when the segments kept pass
    /// the threshold).
    ///
    /// # Errors
    /// When a rewrite's append fails: the log is poisoned. (A deletion that fails
    /// is only warned about: appends go on.)
    pub(crate) async fn tick(
        &mut self,
        log: &LogDir,
        ops: usize,
        queued: impl Fn() -> usize,
    ) -> Result<(), Error> {
        if let Some((cut, left)) = &mut self.pending {
            *left = left.saturating_sub(ops);
            if *left > 0 {
                return Ok(());
            }
            let cut = *cut;
            self.pending = None;
            self.delete(log, cut).await;
        }
        let segments = log.segments();
        let Some(&(active, _)) = segments.last() else {
            return Ok(());
        };
        if segments.len() < 2 || (!self.purged && active == self.checked_active) {
            return Ok(());
        }
        self.checked_active = active;
        self.purged = false;
        let mut cut = self.look(log, &segments).await?;
        if cut.segment <= segments[0].0 {
            return Ok(());
        }
        cut.offset = 0;
        let queued = queued();
        if queued == 0 {
            self.delete(log, cut).await;
        } else {
            self.pending = Some((cut, queued));
        }
        Ok(())
    }

    /// Where the oldest record some group needs is, after rewriting the lagging
    /// groups when the segments kept pass the threshold.
    async fn look(&mut self, log: &LogDir, segments: &[(u64, u64)]) -> Result<LogPosition, Error> {
        let active = segments[segments.len() - 1].0;
        let mut pins: Vec<(LogPosition, u64)> = Vec::new();
        let plans = {
            let groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
            for (&id, group) in groups.iter() {
                let kept = self.kept.get(&id).and_then(Kept::first);
                if let Some(pin) = [group.first_entry(), kept].into_iter().flatten().min() {
                    pins.push((pin, id));
                }
            }
            pins.sort_unstable();
            let needed = pins
                .first()
                .map_or(LogPosition::new(active, 0), |(pin, _)| *pin);
            let kept_bytes: u64 = segments
                .iter()
                .filter(|(s, _)| *s >= needed.segment)
                .map(|(_, len)| len)
                .sum();
            if kept_bytes <= self.options.rewrite_threshold {
                return Ok(needed);
            }
            // The largest cut at a segment's end whose rewrite frees at least
            // twice what it copies, within the bytes one rewrite may copy.
            let (mut cost, mut freed, mut joined) = (0u64, 0u64, 0usize);
            let mut best = None;
            for &(segment, len) in &segments[..segments.len() - 1] {
                if segment < needed.segment {
                    continue;
                }
                let cut = LogPosition::new(segment + 1, 0);
                while let Some(&(pin, id)) = pins.get(joined) {
                    if pin >= cut {
                        break;
                    }
                    cost += groups.get(&id).map_or(0, |g| entry_bytes(&g.entries()));
                    cost += self.kept.get(&id).map_or(0, |k| {
                        k.records(id).iter().map(|r| r.len() as u64).sum::<u64>()
                    });
                    joined += 1;
                }
                if cost > self.options.max_rewrite_bytes {
                    break;
                }
                freed += len;
                if cost.saturating_mul(2) <= freed {
                    best = Some((cut, joined));
                }
            }
            let Some((cut, joined)) = best else {
                return Ok(needed);
            };
            let plans: Vec<Plan> = pins[..joined]
                .iter()
                .map(|&(_, id)| Plan {
                    group: id,
                    entries: groups.get(&id).map(Group::entries).unwrap_or_default(),
                    kept: self
                        .kept
                        .get(&id)
                        .map(|k| k.records(id))
                        .unwrap_or_default(),
                })
                .collect();
            (cut, plans)
        };
        let (cut, plans) = plans;
        if plans.is_empty() {
            return Ok(cut);
        }
        match self.rewrite(log, plans).await {
            Ok(()) => Ok(cut),
            Err(Rewrite::Read(e)) => {
                tracing::warn!(
                    path = %log.path().display(),
                    error = %e,
                    "rewrite of lagging groups abandoned: an entry could not be read"
                );
                Ok(pins
                    .first()
                    .map_or(LogPosition::new(active, 0), |(pin, _)| *pin))
            }
            Err(Rewrite::Write(e)) => Err(e),
        }
    }

    /// Copies the plans' groups to the head of the log, then points their
    /// indexes at the copies.
    async fn rewrite(&mut self, log: &LogDir, plans: Vec<Plan>) -> Result<(), Rewrite> {
        let wanted: Vec<Range<LogPosition>> = plans
            .iter()
            .flat_map(|plan| plan.entries.iter().map(|(_, at)| at.clone()))
            .collect();
        let mut read = read_records(log, &wanted).await.map_err(Rewrite::Read)?;
        let mut records: Vec<Vec<u8>> = Vec::new();
        for plan in &plans {
            records.extend(plan.kept.iter().cloned());
            for (index, at) in &plan.entries {
                let data = read.remove(&at.start).unwrap_or_default();
                match (record::group_kind(&data), record::moved(&data)) {
                    (Some((group, Kind::Entry)), Some(moved)) if group == plan.group => {
                        records.push(moved)
                    }
                    _ => {
                        return Err(Rewrite::Read(Error::MissingEntry { index: *index }));
                    }
                }
            }
        }
        let bytes: u64 = records.iter().map(|r| r.len() as u64).sum();
        let ranges = log
            .append_batch(records.iter())
            .await
            .map_err(|e| Rewrite::Write(e.into()))?;
        Counters::add(&self.counters.rewritten_bytes, bytes);
        Counters::add(&self.counters.rewrites, 1);
        #[cfg(test)]
        crate::pause::at(log.path(), crate::pause::Point::RewriteAppended, 0).await;
        let mut ranges = ranges.into_iter();
        let mut records = records.into_iter();
        {
            let mut groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
            for plan in plans {
                for _ in &plan.kept {
                    if let (Some(data), Some(at)) = (records.next(), ranges.next()) {
                        self.kept
                            .entry(plan.group)
                            .or_default()
                            .note(&data, at.start);
                    }
                }
                let moves: Vec<_> = plan
                    .entries
                    .into_iter()
                    .zip(ranges.by_ref())
                    .map(|((index, from), to)| (index, from, to))
                    .collect();
                records.by_ref().take(moves.len()).for_each(drop);
                if let Some(group) = groups.get_mut(&plan.group) {
                    group.moved(&moves);
                }
            }
        }
        #[cfg(test)]
        crate::pause::at(log.path(), crate::pause::Point::RewriteMoved, 0).await;
        Ok(())
    }

    /// Deletes the segments before `cut`.
    async fn delete(&mut self, log: &LogDir, cut: LogPosition) {
        let lengths: BTreeMap<u64, u64> = log.segments().into_iter().collect();
        match log.purge_before(cut).await {
            Ok(deleted) => {
                let bytes = deleted.iter().filter_map(|s| lengths.get(s)).sum();
                Counters::add(&self.counters.deleted_segments, deleted.len() as u64);
                Counters::add(&self.counters.deleted_bytes, bytes);
            }
            Err(e) => tracing::warn!(
                path = %log.path().display(),
                error = %e,
                "segments no group needs could not be deleted"
            ),
        }
        #[cfg(test)]
        crate::pause::at(log.path(), crate::pause::Point::Deleted, cut.segment).await;
    }
}

enum Rewrite {
    /// Nothing written: the rewrite is abandoned.
    Read(Error),
    /// The log is poisoned.
    Write(Error),
}

/// Bytes of the records at `entries`.
fn entry_bytes(entries: &[(u64, Range<LogPosition>)]) -> u64 {
    entries
        .iter()
        .map(|(_, at)| at.end.offset.saturating_sub(at.start.offset))
        .sum()
}

/// The records at `wanted` (in any order), by where they start: read going
/// forward, a reader reopened where the next one is far ahead.
async fn read_records(
    log: &LogDir,
    wanted: &[Range<LogPosition>],
) -> Result<BTreeMap<LogPosition, Vec<u8>>, Error> {
    /// Bytes of records skipped rather than reopening a reader further on.
    const SKIP: u64 = 256 << 10;
    let mut wanted: Vec<&Range<LogPosition>> = wanted.iter().collect();
    wanted.sort_unstable_by_key(|at| at.start);
    let mut out = BTreeMap::new();
    let mut cursor: Option<DirReader> = None;
    for at in wanted {
        let reader = match &mut cursor {
            Some(reader)
                if reader.position() <= at.start
                    && reader.position().segment == at.start.segment
                    && at.start.offset - reader.position().offset <= SKIP =>
            {
                reader
            }
            _ => cursor.insert(log.read_from(at.start)?),
        };
        loop {
            let Some(record) = reader.next_record().await else {
                return Err(Error::Decode {
                    position: at.start,
                    reason: "the log ends before a record the index points at".into(),
                });
            };
            let record = record?;
            if record.end < at.end {
                continue;
            }
            if record.start != at.start || record.end != at.end {
                return Err(Error::Decode {
                    position: at.start,
                    reason: "no record where the index points".into(),
                });
            }
            out.insert(at.start, record.data.to_vec());
            break;
        }
    }
    Ok(out)
}
