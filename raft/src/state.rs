//! What the store knows in memory: where each entry is, the vote, the committed
//! and purged ids; rebuilt on open by replaying the log.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use openraft::{LogId, RaftTypeConfig, Vote};
use walcodec::{LogDir, LogPosition};

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
/// latest entries, about one replication message's worth
/// ([`MAX_READ_BYTES`](crate::MAX_READ_BYTES)) so that a follower a message behind
/// is still served from memory.
pub(crate) const CACHE_BYTES: usize = crate::reader::MAX_READ_BYTES as usize;

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

    /// Replays the whole log (what purges left of it) into a state.
    pub(crate) async fn replay(log: &LogDir) -> Result<State<C>, Error> {
        let mut state = State {
            slots: BTreeMap::new(),
            purged: None,
            vote: None,
            committed: None,
            cached_bytes: 0,
            cached_from: u64::MAX,
        };
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
