//! [`LogReader`]: the entries of a [`LogStore`](crate::LogStore), for
//! openraft's replication tasks, concurrently with appends.

use std::fmt::{self, Debug};
use std::ops::{Bound, Range, RangeBounds};
use std::sync::{Arc, Mutex, PoisonError};

use openraft::{LogId, OptionalSend, RaftLogReader, RaftTypeConfig, StorageError};
use walcodec::{DirReader, LogDir, LogPosition};

use crate::error::read_error;
use crate::record;
use crate::state::State;
use crate::Error;

/// Default of [`LogStoreBuilder::max_read_bytes`](crate::LogStoreBuilder::max_read_bytes):
/// 4 MiB, what the store keeps of its latest entries in memory.
pub const MAX_READ_BYTES: u64 = crate::state::CACHE_BYTES as u64;

/// Reads the entries of a [`LogStore`](crate::LogStore) while it appends: those not
/// yet durable from memory, the others from the log's segments (from the
/// record the store's index points at, checked against the entry's log id).
/// Cheap to clone.
pub struct LogReader<C: RaftTypeConfig> {
    pub(crate) log: LogDir,
    pub(crate) state: Arc<Mutex<State<C>>>,
    pub(crate) max_read_bytes: u64,
    /// The group of a shared log's store, whose entry records name it.
    pub(crate) group: Option<u64>,
}

impl<C: RaftTypeConfig> Clone for LogReader<C> {
    fn clone(&self) -> Self {
        LogReader {
            log: self.log.clone(),
            state: Arc::clone(&self.state),
            max_read_bytes: self.max_read_bytes,
            group: self.group,
        }
    }
}

impl<C: RaftTypeConfig> Debug for LogReader<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogReader")
            .field("path", &self.log.path())
            .finish_non_exhaustive()
    }
}

/// What a read needs for one entry.
enum Wanted<C: RaftTypeConfig> {
    /// Not yet durable: its record, from memory.
    Ready(Arc<[u8]>),
    Read {
        log_id: LogId<C::NodeId>,
        at: Range<LogPosition>,
    },
}

impl<C: RaftTypeConfig> LogReader<C> {
    /// The entries with indexes in `range`, in order, stopping after `max_bytes` of
    /// records (at least one entry).
    pub(crate) async fn read(
        &self,
        range: impl RangeBounds<u64> + Clone,
        max_bytes: u64,
    ) -> Result<Vec<C::Entry>, Error> {
        // A shared log's rewrite may move entries (and delete where they were)
        // between looking them up and reading them: look again then.
        let mut tries = 0;
        loop {
            let moves = self.moves();
            match self.read_once(range.clone(), max_bytes).await {
                Err(e) if tries < 3 && self.moves() != moves => {
                    tries += 1;
                    tracing::debug!(error = %e, "entries moved while read: reading again");
                }
                done => return done,
            }
        }
    }

    fn moves(&self) -> u64 {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .moves
    }

    async fn read_once(
        &self,
        range: impl RangeBounds<u64>,
        max_bytes: u64,
    ) -> Result<Vec<C::Entry>, Error> {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => match s.checked_add(1) {
                Some(s) => s,
                None => return Ok(Vec::new()),
            },
            Bound::Unbounded => 0,
        };
        let mut bytes = 0u64;
        let wanted: Vec<Wanted<C>> = {
            let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            let mut wanted = Vec::new();
            for (index, got) in state.index.entries_from(start) {
                if !range.contains(&index) || (bytes >= max_bytes && !wanted.is_empty()) {
                    break;
                }
                if let Some(at) = &got.at {
                    bytes += at.end.offset.saturating_sub(at.start.offset);
                }
                wanted.push(match (got.record, got.at) {
                    (Some(record), _) => Wanted::Ready(Arc::clone(record)),
                    (None, Some(at)) => Wanted::Read {
                        log_id: LogId {
                            leader_id: got.leader.clone(),
                            index,
                        },
                        at,
                    },
                    (None, None) => unreachable!("an entry not yet durable has its record"),
                });
            }
            wanted
        };
        #[cfg(test)]
        crate::pause::at(self.log.path(), crate::pause::Point::ReadLookedUp, 0).await;
        let mut entries = Vec::with_capacity(wanted.len());
        let mut cursor: Option<DirReader> = None;
        for want in wanted {
            match want {
                Wanted::Ready(record) => {
                    entries.push(decode_entry::<C>(self.group, &record, None)?.1)
                }
                Wanted::Read { log_id, at } => {
                    entries.push(self.read_one(&mut cursor, log_id, at).await?);
                    #[cfg(test)]
                    crate::pause::at(self.log.path(), crate::pause::Point::ReadEntry, 0).await;
                }
            }
        }
        Ok(entries)
    }

    /// Reads the entry at `at`, with `cursor` when it has not passed it.
    async fn read_one(
        &self,
        cursor: &mut Option<DirReader>,
        log_id: LogId<C::NodeId>,
        at: Range<LogPosition>,
    ) -> Result<C::Entry, Error> {
        let missing = Error::MissingEntry {
            index: log_id.index,
        };
        let reader = match cursor {
            Some(reader) if reader.position() <= at.start => reader,
            _ => cursor.insert(self.log.read_from(at.start)?),
        };
        loop {
            let Some(record) = reader.next_record().await else {
                return Err(missing);
            };
            let record = record?;
            if record.end < at.end {
                continue;
            }
            if record.end != at.end {
                return Err(missing);
            }
            let (found, entry) = decode_entry::<C>(self.group, &record.data, Some(record.start))?;
            if found != log_id {
                return Err(missing);
            }
            return Ok(entry);
        }
    }
}

impl<C: RaftTypeConfig> RaftLogReader<C> for LogReader<C> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<C::Entry>, StorageError<C::NodeId>> {
        self.read(range, u64::MAX).await.map_err(read_error)
    }

    async fn limited_get_log_entries(
        &mut self,
        start: u64,
        end: u64,
    ) -> Result<Vec<C::Entry>, StorageError<C::NodeId>> {
        self.read(start..end, self.max_read_bytes)
            .await
            .map_err(read_error)
    }
}

/// Decodes an entry record (found at `position` in the log, or in memory).
fn decode_entry<C: RaftTypeConfig>(
    group: Option<u64>,
    data: &[u8],
    position: Option<LogPosition>,
) -> Result<(LogId<C::NodeId>, C::Entry), Error> {
    record::decode_entry::<C>(group, data).map_err(|reason| Error::Decode {
        position: position.unwrap_or_default(),
        reason,
    })
}
