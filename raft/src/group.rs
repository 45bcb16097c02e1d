//! One replay pass over a [`SharedLog`](crate::SharedLog)'s log, indexing every
//! group before anyone asks for a group's store (and so before anyone says which
//! type config a group has): per group, where each live entry is with its
//! leader id's bytes, and the latest vote, committed id and purged id as the
//! bytes their records hold. [`State::from_raw`](crate::state::State::from_raw)
//! decodes them once the type config is known.

use std::any::Any;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

use walcodec::{LogDir, LogPosition};

use crate::index::Index;
use crate::record::{self, GroupRecord};
use crate::Error;

/// A group the log knows.
pub(crate) enum Group {
    /// As replay found it; no store asked for since the log was opened.
    Raw(Box<RawGroup>),
    /// Decoded for its type config: the store's `Arc<Mutex<State<C>>>`, kept
    /// when the store closes so that opening it again costs nothing.
    Typed {
        state: Arc<dyn Any + Send + Sync>,
        /// Whether a store holds it.
        open: bool,
        /// The same state, seen without its type config.
        view: Arc<dyn GroupView>,
    },
}

/// A group's index as the space reclaimer ([`crate::space`]) and
/// [`SharedLog::groups`](crate::SharedLog::groups) see it, whatever its type
/// config. A group's durable entries are in log order by index (an append goes
/// after every earlier record; a rewrite moves all of a group's entries at once,
/// in order), so the first is the oldest; except after a replay of a rewrite a
/// power cut kept part of (the first entries moved, the others where they were),
/// until the next rewrite of the group.
pub(crate) trait GroupView: Send + Sync {
    /// Whether it holds nothing yet.
    fn is_empty(&self) -> bool;
    /// Where its first durable entry's record starts.
    fn first_entry(&self) -> Option<LogPosition>;
    /// Its durable entries: index and where the record is.
    fn entries(&self) -> Vec<(u64, Range<LogPosition>)>;
    /// Each entry `(index, from, to)` that is still durable at `from` is at `to`
    /// now.
    fn moved(&self, moves: &[(u64, Range<LogPosition>, Range<LogPosition>)]);
}

impl Group {
    pub(crate) fn first_entry(&self) -> Option<LogPosition> {
        match self {
            Group::Raw(raw) if raw.scattered => {
                raw.entries.positions().map(|(_, at)| at.start).min()
            }
            Group::Raw(raw) => Some(raw.entries.position(raw.entries.first()?)?.start),
            Group::Typed { view, .. } => view.first_entry(),
        }
    }

    pub(crate) fn entries(&self) -> Vec<(u64, Range<LogPosition>)> {
        match self {
            Group::Raw(raw) => raw.entries.positions().collect(),
            Group::Typed { view, .. } => view.entries(),
        }
    }

    pub(crate) fn moved(&mut self, moves: &[(u64, Range<LogPosition>, Range<LogPosition>)]) {
        match self {
            Group::Raw(raw) => {
                // Moved in index order, after every record of the group.
                raw.scattered = false;
                raw.entries.moved(moves);
            }
            Group::Typed { view, .. } => view.moved(moves),
        }
    }
}

/// A group's state as its records left it, typed fields still encoded; each with
/// where its record starts (for errors).
#[derive(Default)]
pub(crate) struct RawGroup {
    /// The entries: the leader id's bytes (a run per leader) and where each
    /// entry's record is.
    pub(crate) entries: Index<Arc<[u8]>>,
    /// The entries are not in log order (see [`GroupView`]).
    pub(crate) scattered: bool,
    /// The purged id: index, leader id's bytes.
    pub(crate) purged: Option<(u64, Arc<[u8]>, LogPosition)>,
    /// postcard of `Option<Vote>`.
    pub(crate) vote: Option<(Arc<[u8]>, LogPosition)>,
    /// postcard of `Option<LogId>`.
    pub(crate) committed: Option<(Arc<[u8]>, LogPosition)>,
}

impl RawGroup {
    fn apply(&mut self, record: GroupRecord<'_>, at: Range<LogPosition>) {
        match record {
            GroupRecord::Entry { index, leader } => {
                // Raft appends right after the last entry; an append at an index
                // already held follows a truncation of it.
                let leader = self.leader(index, leader);
                self.entries.put(index, leader, &at);
            }
            GroupRecord::Moved { index, leader } => {
                // A rewrite's copy: where the entry is now; the entries after it
                // stay (they were moved after it, or are still where they were).
                let leader = self.leader(index, leader);
                self.entries.put_moved(index, leader, &at);
            }
            GroupRecord::Vote(vote) => self.vote = Some((Arc::from(vote), at.start)),
            GroupRecord::Committed(committed) => {
                self.committed = Some((Arc::from(committed), at.start))
            }
            GroupRecord::Truncate(since) => self.entries.truncate(since),
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
        self.entries.purge(index);
    }

    /// The leader bytes `bytes` of an entry at `index`: shared with the entry
    /// before it when equal (a run of the index), else a copy.
    fn leader(&self, index: u64, bytes: &[u8]) -> Arc<[u8]> {
        let before = index.checked_sub(1).and_then(|i| self.entries.leader(i));
        match before.or_else(|| self.entries.leader(index)) {
            Some(leader) if &leader[..] == bytes => Arc::clone(leader),
            _ => Arc::from(bytes),
        }
    }
}

/// Replays a shared log: every group's [`RawGroup`], and the records besides
/// its entries that replay reads ([`Kept`]), by group.
pub(crate) async fn replay(
    log: &LogDir,
) -> Result<(BTreeMap<u64, RawGroup>, BTreeMap<u64, Kept>), Error> {
    let mut groups: BTreeMap<u64, RawGroup> = BTreeMap::new();
    let mut kept: BTreeMap<u64, Kept> = BTreeMap::new();
    let mut reader = log.read_from(LogPosition::START)?;
    while let Some(record) = reader.next_record().await {
        let record = record?;
        let (group, decoded) =
            record::decode_group(&record.data).map_err(|reason| Error::Decode {
                position: record.start,
                reason,
            })?;
        if let GroupRecord::Vote(_) | GroupRecord::Committed(_) | GroupRecord::Purge { .. } =
            decoded
        {
            kept.entry(group)
                .or_default()
                .note(&record.data, record.start);
        }
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
        raw.entries.compact();
        raw.scattered = raw.entries.is_scattered();
    }
    Ok((groups, kept))
}

/// A group's latest purge, vote and committed id as the records that set them
/// left them (typed fields still encoded), each with where that record starts.
#[derive(Debug, Default)]
pub(crate) struct Kept {
    /// Purged index, its leader id's bytes.
    purge: Option<(u64, Arc<[u8]>, LogPosition)>,
    /// postcard of `Option<Vote>`.
    vote: Option<(Arc<[u8]>, LogPosition)>,
    /// postcard of `Option<LogId>`.
    committed: Option<(Arc<[u8]>, LogPosition)>,
}

impl Kept {
    /// Takes the shared log's record `data`, at `at`, into account (as replay
    /// would).
    pub(crate) fn note(&mut self, data: &[u8], at: LogPosition) {
        let Ok((_, decoded)) = record::decode_group(data) else {
            return;
        };
        match decoded {
            GroupRecord::Vote(vote) => self.vote = Some((Arc::from(vote), at)),
            GroupRecord::Committed(committed) => {
                self.committed = Some((Arc::from(committed), at));
            }
            GroupRecord::Purge {
                index,
                leader,
                vote,
                committed,
            } => {
                if self.purge.as_ref().is_none_or(|(p, _, _)| *p <= index) {
                    self.purge = Some((index, Arc::from(leader), at));
                }
                self.vote = Some((Arc::from(vote), at));
                self.committed = Some((Arc::from(committed), at));
            }
            GroupRecord::Entry { .. } | GroupRecord::Moved { .. } | GroupRecord::Truncate(_) => {}
        }
    }

    /// Where the oldest record it needs starts.
    pub(crate) fn first(&self) -> Option<LogPosition> {
        let purge = self.purge.as_ref().map(|(_, _, at)| *at);
        let vote = self.vote.as_ref().map(|(_, at)| *at);
        let committed = self.committed.as_ref().map(|(_, at)| *at);
        [purge, vote, committed].into_iter().flatten().min()
    }

    /// Records that set the same state wherever they are written: with a purge,
    /// one purge record with the latest vote and committed id (one record, so
    /// that a power cut cannot keep an old vote's copy without the newer one);
    /// else the vote's and the committed id's records, each independent.
    pub(crate) fn records(&self, group: u64) -> Vec<Vec<u8>> {
        match &self.purge {
            Some((index, leader, _)) => {
                // postcard of `None`, should a purge have neither (it has both).
                let none: &[u8] = &[0];
                let vote = self.vote.as_ref().map_or(none, |(v, _)| &v[..]);
                let committed = self.committed.as_ref().map_or(none, |(c, _)| &c[..]);
                vec![record::group_purge_raw(
                    group, *index, leader, vote, committed,
                )]
            }
            None => {
                let mut out = Vec::new();
                if let Some((vote, _)) = &self.vote {
                    out.push(record::group_vote_raw(group, vote));
                }
                if let Some((committed, _)) = &self.committed {
                    out.push(record::group_committed_raw(group, committed));
                }
                out
            }
        }
    }
}

/// A group store's hold on its group in a shared log (`groups`, the log's table of
/// groups, which its writer's reclaimer shares); lets the group go when dropped.
pub(crate) struct Lease {
    groups: Arc<Mutex<BTreeMap<u64, Group>>>,
    group: u64,
}

impl Lease {
    pub(crate) fn new(groups: Arc<Mutex<BTreeMap<u64, Group>>>, group: u64) -> Lease {
        Lease { groups, group }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(Group::Typed { open, .. }) = groups.get_mut(&self.group) {
            *open = false;
        }
    }
}
