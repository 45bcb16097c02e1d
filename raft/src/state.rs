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
}

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
        drop(self.slots.split_off(&index));
    }

    /// Drops the entries up to `purged` (inclusive) and remembers it.
    pub(crate) fn purge(&mut self, purged: LogId<C::NodeId>) {
        self.slots = self.slots.split_off(&(purged.index + 1));
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
        Ok(state)
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
