//! What the store knows in memory: where each entry is, the vote, the committed
//! and purged ids; rebuilt on open by replaying the log.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

use openraft::{LogId, RaftTypeConfig, Vote};
use walcodec::{LogDir, LogPosition};

use crate::group::{GroupView, RawGroup};
use crate::record::{self, Record};
use crate::Error;

/// Where one entry is.
pub(crate) enum Place {
    /// Handed to the writer, not yet durable: readers decode this copy of its
    /// record. `seq` tells the writer that the slot is still the one it wrote (a
    /// truncation may have replaced it meanwhile).
    Pending { seq: u64, record: Arc<[u8]> },
    /// Durable, in the record at this range of the log.
    Stored(Range<LogPosition>),
    /// Durable at `at`, and its record still in memory: one of the latest entries,
    /// which replication reads right after they are written (openraft 0.9's leader
    /// replicates an entry once its flush callback fired). Readers decode this copy
    /// instead of opening the segment; [`State::keep`] bounds the bytes kept.
    Cached {
        at: Range<LogPosition>,
        record: Arc<[u8]>,
    },
}

impl Place {
    /// Where the entry is in the log, once durable.
    pub(crate) fn stored_at(&self) -> Option<&Range<LogPosition>> {
        match self {
            Place::Pending { .. } => None,
            Place::Stored(at) | Place::Cached { at, .. } => Some(at),
        }
    }
}

/// The most bytes of durable records [`State`] keeps in memory for readers: the
/// latest entries, about one replication message's worth (readers' default
/// [`MAX_READ_BYTES`](crate::MAX_READ_BYTES) is this) so that a follower a
/// message behind is still served from memory.
pub(crate) const CACHE_BYTES: usize = 4 << 20;

pub(crate) struct Slot<C: RaftTypeConfig> {
    pub(crate) log_id: LogId<C::NodeId>,
    pub(crate) place: Place,
}

/// The store's state. Entries are consecutive from `purged + 1`.
pub(crate) struct State<C: RaftTypeConfig> {
    pub(crate) slots: BTreeMap<u64, Slot<C>>,
    pub(crate) purged: Option<LogId<C::NodeId>>,
    /// The last vote made durable.
    pub(crate) vote: Option<Vote<C::NodeId>>,
    /// The last committed id given to `save_committed`.
    pub(crate) committed: Option<LogId<C::NodeId>>,
    /// Bytes of the records of `Place::Cached` slots.
    pub(crate) cached_bytes: usize,
    /// No `Place::Cached` slot has an index below this: where eviction looks first.
    pub(crate) cached_from: u64,
    /// Tags the slots of each append (see [`Place::Pending`]); kept here, not in
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
        state.slots.is_empty()
            && state.vote.is_none()
            && state.purged.is_none()
            && state.committed.is_none()
    }

    fn first_entry(&self) -> Option<LogPosition> {
        let state = self.lock().unwrap_or_else(PoisonError::into_inner);
        if state.scattered {
            return state
                .slots
                .values()
                .filter_map(|slot| Some(slot.place.stored_at()?.start))
                .min();
        }
        // Entries not yet durable come last: the first durable one is first.
        let first = state.slots.first_key_value()?.1.place.stored_at()?.start;
        Some(first)
    }

    fn entries(&self) -> Vec<(u64, Range<LogPosition>)> {
        let state = self.lock().unwrap_or_else(PoisonError::into_inner);
        state
            .slots
            .iter()
            .map_while(|(&index, slot)| Some((index, slot.place.stored_at()?.clone())))
            .collect()
    }

    fn moved(&self, moves: &[(u64, Range<LogPosition>, Range<LogPosition>)]) {
        let mut state = self.lock().unwrap_or_else(PoisonError::into_inner);
        state.moves += 1;
        // Moved in index order, after every durable record of the group.
        state.scattered = false;
        for (index, from, to) in moves {
            let Some(slot) = state.slots.get_mut(index) else {
                continue;
            };
            match &mut slot.place {
                Place::Stored(at) | Place::Cached { at, .. } if at == from => *at = to.clone(),
                _ => {}
            }
        }
    }
}

impl<C: RaftTypeConfig> State<C> {
    /// The log id of the last entry, or the purged id when there is none.
    pub(crate) fn last_log_id(&self) -> Option<LogId<C::NodeId>> {
        match self.slots.last_key_value() {
            Some((_, slot)) => Some(slot.log_id.clone()),
            None => self.purged.clone(),
        }
    }

    /// Drops the entries at and after `index`.
    pub(crate) fn truncate(&mut self, index: u64) {
        let removed = self.slots.split_off(&index);
        self.forget(removed);
    }

    /// Takes the cached records of `removed` slots off the count.
    fn forget(&mut self, removed: BTreeMap<u64, Slot<C>>) {
        for slot in removed.into_values() {
            if let Place::Cached { record, .. } = slot.place {
                self.cached_bytes -= record.len();
            }
        }
    }

    /// The entry at `index` (if the slot is still the one written with `seq`) is
    /// durable at `at`: its record stays in memory, and the oldest cached records
    /// go back to being read from the log once more than [`CACHE_BYTES`] are kept.
    pub(crate) fn keep(&mut self, index: u64, seq: u64, at: Range<LogPosition>) {
        let Some(slot) = self.slots.get_mut(&index) else {
            return;
        };
        let record = match &slot.place {
            Place::Pending { seq: s, record } if *s == seq => Arc::clone(record),
            _ => return,
        };
        self.cached_bytes += record.len();
        slot.place = Place::Cached { at, record };
        self.cached_from = self.cached_from.min(index);
        while self.cached_bytes > CACHE_BYTES {
            let oldest = self
                .slots
                .range_mut(self.cached_from..)
                .find(|(_, slot)| matches!(slot.place, Place::Cached { .. }));
            let Some((&index, slot)) = oldest else {
                break;
            };
            let Place::Cached { at, record } = &slot.place else {
                unreachable!("found as cached");
            };
            self.cached_bytes -= record.len();
            slot.place = Place::Stored(at.clone());
            self.cached_from = index + 1;
        }
    }

    /// Drops the entries up to `purged` (inclusive) and remembers it.
    pub(crate) fn purge(&mut self, purged: LogId<C::NodeId>) {
        let kept = self.slots.split_off(&(purged.index + 1));
        let removed = std::mem::replace(&mut self.slots, kept);
        self.forget(removed);
        if self.purged.as_ref().is_none_or(|p| *p < purged) {
            self.purged = Some(purged);
        }
    }

    /// An empty state.
    pub(crate) fn new() -> State<C> {
        State {
            slots: BTreeMap::new(),
            purged: None,
            vote: None,
            committed: None,
            cached_bytes: 0,
            cached_from: u64::MAX,
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
        // Entries of one term share their leader's bytes: decode each run once.
        let mut leader: Option<(&[u8], LogId<C::NodeId>)> = None;
        for (&index, (bytes, at)) in &raw.entries {
            let log_id = match &leader {
                Some((b, id)) if *b == &bytes[..] => LogId {
                    leader_id: id.leader_id.clone(),
                    index,
                },
                _ => {
                    let id =
                        record::log_id_from::<C>(index, bytes).map_err(undecodable(at.start))?;
                    leader = Some((bytes, id.clone()));
                    id
                }
            };
            state.slots.insert(
                index,
                Slot {
                    log_id,
                    place: Place::Stored(at.clone()),
                },
            );
        }
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
                    state.truncate(log_id.index);
                    state.slots.insert(
                        log_id.index,
                        Slot {
                            log_id,
                            place: Place::Stored(record.start..record.end),
                        },
                    );
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
        let mut expected = self.purged.as_ref().map(|p| p.index + 1);
        for &index in self.slots.keys() {
            if let Some(expected) = expected {
                if index != expected {
                    return Err(Error::Gap {
                        expected,
                        found: index,
                    });
                }
            }
            expected = Some(index + 1);
        }
        Ok(())
    }
}
