//! What the store knows in memory: where each entry is, the vote, the committed
//! and purged ids; rebuilt on open by replaying the log.

use std::ops::Range;
use std::sync::{Mutex, PoisonError};

use openraft::{CommittedLeaderId, LogId, RaftTypeConfig, Vote};
use walcodec::{LogDir, LogPosition};

use crate::group::{GroupView, RawGroup};
use crate::index::Index;
use crate::record::{self, Record};
use crate::Error;

/// The most bytes of durable records [`State`] keeps in memory for readers: the
/// latest entries, about one replication message's worth (readers' default
/// [`MAX_READ_BYTES`](crate::MAX_READ_BYTES) is this) so that a follower a
/// message behind is still served from memory. (openraft 0.9's leader
/// replicates an entry once its flush callback fired: right after it is
/// written.)
pub(crate) const CACHE_BYTES: usize = 4 << 20;

/// The store's state. Entries are consecutive from `purged + 1`.
pub(crate) struct State<C: RaftTypeConfig> {
    /// Every entry: its leader id, where its record is, the records of the
    /// latest ones.
    pub(crate) index: Index<CommittedLeaderId<C::NodeId>>,
    pub(crate) purged: Option<LogId<C::NodeId>>,
    /// The last vote made durable.
    pub(crate) vote: Option<Vote<C::NodeId>>,
    /// The last committed id given to `save_committed`.
    pub(crate) committed: Option<LogId<C::NodeId>>,
    /// Tags the entries of each append (see [`Index::keep`]); kept here, not in
    /// the store, so that a group's store opened again never reuses a tag.
    pub(crate) seq: u64,
    /// Counts the rewrites that moved this group's entries: a read that found
    /// no entry where the index pointed tries again when it changed.
    pub(crate) moves: u64,
    /// The durable entries are not in log order: replay found a rewrite a power
    /// cut kept part of (see [`GroupView`]); the next rewrite puts them in order.
    pub(crate) scattered: bool,
}

impl<C: RaftTypeConfig> GroupView for Mutex<State<C>> {
    fn is_empty(&self) -> bool {
        let state = self.lock().unwrap_or_else(PoisonError::into_inner);
        state.index.is_empty()
            && state.vote.is_none()
            && state.purged.is_none()
            && state.committed.is_none()
    }

    fn first_entry(&self) -> Option<LogPosition> {
        let state = self.lock().unwrap_or_else(PoisonError::into_inner);
        if state.scattered {
            return state.index.positions().map(|(_, at)| at.start).min();
        }
        // Entries not yet durable come last: the first durable one is first.
        Some(state.index.position(state.index.first()?)?.start)
    }

    fn entries(&self) -> Vec<(u64, Range<LogPosition>)> {
        let state = self.lock().unwrap_or_else(PoisonError::into_inner);
        state.index.positions().collect()
    }

    fn moved(&self, moves: &[(u64, Range<LogPosition>, Range<LogPosition>)]) {
        let mut state = self.lock().unwrap_or_else(PoisonError::into_inner);
        state.moves += 1;
        // Moved in index order, after every durable record of the group.
        state.scattered = false;
        state.index.moved(moves);
    }
}

impl<C: RaftTypeConfig> State<C> {
    /// The log id of the entry at `index`.
    pub(crate) fn log_id(&self, index: u64) -> Option<LogId<C::NodeId>> {
        Some(LogId {
            leader_id: self.index.leader(index)?.clone(),
            index,
        })
    }

    /// The log id of the last entry, or the purged id when there is none.
    pub(crate) fn last_log_id(&self) -> Option<LogId<C::NodeId>> {
        match self.index.last() {
            Some(last) => self.log_id(last),
            None => self.purged.clone(),
        }
    }

    /// Drops the entries at and after `index`.
    pub(crate) fn truncate(&mut self, index: u64) {
        self.index.truncate(index);
    }

    /// The entry at `index` (if it is still the one appended with `seq`) is
    /// durable at `at`: its record stays in memory, and the oldest cached
    /// records go back to being read from the log once more than
    /// [`CACHE_BYTES`] are kept.
    pub(crate) fn keep(&mut self, index: u64, seq: u64, at: Range<LogPosition>) {
        self.index.keep(index, seq, at, CACHE_BYTES);
    }

    /// Drops the entries up to `purged` (inclusive) and remembers it.
    pub(crate) fn purge(&mut self, purged: LogId<C::NodeId>) {
        self.index.purge(purged.index);
        if self.purged.as_ref().is_none_or(|p| *p < purged) {
            self.purged = Some(purged);
        }
    }

    /// An empty state.
    pub(crate) fn new() -> State<C> {
        State {
            index: Index::default(),
            purged: None,
            vote: None,
            committed: None,
            seq: 0,
            moves: 0,
            scattered: false,
        }
    }

    /// A group's state from what the replay of its shared log found.
    pub(crate) fn from_raw(raw: &RawGroup, path: &std::path::Path) -> Result<State<C>, Error> {
        let undecodable = |at: LogPosition| {
            move |reason: String| Error::Decode {
                position: at,
                reason,
            }
        };
        let mut state = State::new();
        // Entries of one leader share a run: each run's bytes decoded once.
        state.index = raw.entries.map_leaders(|from, bytes| {
            let at = raw
                .entries
                .position(from)
                .map_or_else(LogPosition::default, |at| at.start);
            record::log_id_from::<C>(from, bytes)
                .map(|id| id.leader_id)
                .map_err(undecodable(at))
        })?;
        state.scattered = raw.scattered;
        if let Some((index, bytes, at)) = &raw.purged {
            state.purged = Some(record::log_id_from::<C>(*index, bytes).map_err(undecodable(*at))?);
        }
        if let Some((bytes, at)) = &raw.vote {
            state.vote = record::from_bytes(bytes).map_err(undecodable(*at))?;
        }
        if let Some((bytes, at)) = &raw.committed {
            state.committed = record::from_bytes(bytes).map_err(undecodable(*at))?;
        }
        state.check_consecutive()?;
        state.clamp_committed(path);
        Ok(state)
    }

    /// Replays the whole log (what purges left of it) into a state.
    pub(crate) async fn replay(log: &LogDir) -> Result<State<C>, Error> {
        let mut state = State::new();
        let mut reader = log.read_from(LogPosition::START)?;
        while let Some(record) = reader.next_record().await {
            let record = record?;
            let decoded = record::decode::<C>(&record.data).map_err(|reason| Error::Decode {
                position: record.start,
                reason,
            })?;
            match decoded {
                Record::Entry(log_id) => {
                    // Raft appends right after the last entry; an append at an
                    // index already held follows a truncation of it.
                    state
                        .index
                        .put(log_id.index, log_id.leader_id, &(record.start..record.end));
                }
                Record::Vote(vote) => state.vote = Some(vote),
                Record::Committed(committed) => state.committed = committed,
                Record::Truncate(since) => state.truncate(since),
                Record::Purge {
                    purged,
                    vote,
                    committed,
                } => {
                    state.purge(purged);
                    state.vote = vote;
                    state.committed = committed;
                }
            }
        }
        // Entries before the last purge that a kept segment still holds.
        if let Some(purged) = state.purged.clone() {
            state.purge(purged);
        }
        state.index.compact();
        state.check_consecutive()?;
        state.clamp_committed(log.path());
        Ok(state)
    }

    /// A committed id past the last entry names an entry that is not there:
    /// openraft would apply up to it at start and fail. This store writes a
    /// committed id after the entries it names, so that only a log written
    /// otherwise (by an older version, which put it first in its batch, cut by a
    /// power failure) holds one; every entry up to the last one kept was
    /// committed then, so the last entry (or the purged id) is.
    fn clamp_committed(&mut self, path: &std::path::Path) {
        let last = self.last_log_id();
        let past = match (&self.committed, &last) {
            (Some(committed), Some(last)) => committed.index > last.index,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if past {
            tracing::warn!(
                path = %path.display(),
                committed = ?self.committed,
                last = ?last,
                "committed log id past the last entry of the log: lowered to the last entry"
            );
            self.committed = last;
        }
    }

    /// Entries must follow each other from the purged id on.
    fn check_consecutive(&self) -> Result<(), Error> {
        if let Some((expected, found)) = self.index.gap() {
            return Err(Error::Gap { expected, found });
        }
        match (&self.purged, self.index.first()) {
            (Some(purged), Some(first)) if first != purged.index.saturating_add(1) => {
                Err(Error::Gap {
                    expected: purged.index.saturating_add(1),
                    found: first,
                })
            }
            _ => Ok(()),
        }
    }
}
