//! One replay pass over a [`SharedLog`](crate::SharedLog)'s log, indexing every
//! group before anyone asks for a group's store (and so before anyone says which
//! type config a group has): per group, where each live entry is with its
//! leader id's bytes, and the latest vote, committed id and purged id as the
//! bytes their records hold. [`State::from_raw`](crate::state::State::from_raw)
//! decodes them once the type config is known.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use walcodec::{LogDir, LogPosition};

use crate::record::{self, GroupRecord};
use crate::Error;

/// A group's state as its records left it, typed fields still encoded; each with
/// where its record starts (for errors).
#[derive(Default)]
pub(crate) struct RawGroup {
    /// By index: the leader id's bytes (entries of one leader share them) and
    /// where the entry's record is.
    pub(crate) entries: BTreeMap<u64, (Arc<[u8]>, Range<LogPosition>)>,
    /// The purged id: index, leader id's bytes.
    pub(crate) purged: Option<(u64, Arc<[u8]>, LogPosition)>,
    /// postcard of `Option<Vote>`.
    pub(crate) vote: Option<(Arc<[u8]>, LogPosition)>,
    /// postcard of `Option<LogId>`.
    pub(crate) committed: Option<(Arc<[u8]>, LogPosition)>,
}

impl RawGroup {
    /// The leader bytes `bytes`, shared with the last entry's when equal.
    fn leader(&self, bytes: &[u8]) -> Arc<[u8]> {
        match self.entries.last_key_value() {
            Some((_, (leader, _))) if &leader[..] == bytes => Arc::clone(leader),
            _ => Arc::from(bytes),
        }
    }

    fn apply(&mut self, record: GroupRecord<'_>, at: Range<LogPosition>) {
        match record {
            GroupRecord::Entry { index, leader } => {
                // Raft appends right after the last entry; an append at an index
                // already held follows a truncation of it.
                let leader = self.leader(leader);
                drop(self.entries.split_off(&index));
                self.entries.insert(index, (leader, at));
            }
            GroupRecord::Vote(vote) => self.vote = Some((Arc::from(vote), at.start)),
            GroupRecord::Committed(committed) => {
                self.committed = Some((Arc::from(committed), at.start))
            }
            GroupRecord::Truncate(since) => drop(self.entries.split_off(&since)),
            GroupRecord::Purge {
                index,
                leader,
                vote,
                committed,
            } => {
                self.purge(index);
                if self.purged.as_ref().is_none_or(|(p, _, _)| *p <= index) {
                    self.purged = Some((index, Arc::from(leader), at.start));
                }
                self.vote = Some((Arc::from(vote), at.start));
                self.committed = Some((Arc::from(committed), at.start));
            }
        }
    }

    /// Drops the entries up to `index` (inclusive).
    fn purge(&mut self, index: u64) {
        match index.checked_add(1) {
            Some(next) => self.entries = self.entries.split_off(&next),
            None => self.entries.clear(),
        }
    }
}

/// Replays a shared log: every group's [`RawGroup`], by group.
pub(crate) async fn replay(log: &LogDir) -> Result<BTreeMap<u64, RawGroup>, Error> {
    let mut groups: BTreeMap<u64, RawGroup> = BTreeMap::new();
    let mut reader = log.read_from(LogPosition::START)?;
    while let Some(record) = reader.next_record().await {
        let record = record?;
        let (group, decoded) =
            record::decode_group(&record.data).map_err(|reason| Error::Decode {
                position: record.start,
                reason,
            })?;
        groups
            .entry(group)
            .or_default()
            .apply(decoded, record.start..record.end);
    }
    // Entries before a group's last purge that a kept segment still holds.
    for raw in groups.values_mut() {
        if let Some((index, _, _)) = raw.purged {
            raw.purge(index);
        }
    }
    Ok(groups)
}
