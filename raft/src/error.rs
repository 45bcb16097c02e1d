//! [`Error`]: what opening or using a [`LogStore`](crate::LogStore) can fail with.

use std::io;

use walcodec::LogPosition;

/// An error of the log store; the trait methods hand it to openraft as a
/// [`StorageError`](openraft::StorageError).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The log directory failed (I/O, damage, lock).
    #[error(transparent)]
    Log(#[from] walcodec::Error),
    /// A record of the log is not one this store writes.
    #[error("record at {position} does not decode: {reason}")]
    Decode {
        /// Where the record starts.
        position: LogPosition,
        /// What is wrong with it.
        reason: String,
    },
    /// A value could not be encoded (a serde implementation refused it).
    #[error("cannot encode a record: {0}")]
    Encode(String),
    /// After a replay, the entries do not follow each other.
    #[error("log entries jump from index {expected} to {found}")]
    Gap {
        /// The index that should come next.
        expected: u64,
        /// The index found instead.
        found: u64,
    },
    /// An entry read back is not the one the index points to.
    #[error("entry at index {index} is missing from the log")]
    MissingEntry {
        /// Its index.
        index: u64,
    },
    /// An earlier write failed: the store accepts no more writes (reopen it).
    #[error("an earlier write failed, the store is poisoned: {0}")]
    Poisoned(String),
    /// The store (or its shared log) was closed.
    #[error("the log store is closed")]
    Closed,
    /// [`SharedLog::store`](crate::SharedLog::store) of a group whose store is
    /// open: one store per group at a time.
    #[error("group {group}'s store is open already")]
    GroupInUse {
        /// The group.
        group: u64,
    },
    /// [`SharedLog::store`](crate::SharedLog::store) of a group with another type
    /// config than the one it was opened with since the log was opened.
    #[error("group {group} was opened with another type config")]
    GroupType {
        /// The group.
        group: u64,
    },
}

impl Error {
    /// As an [`io::Error`], for [`LogFlushed`](openraft::storage::LogFlushed).
    pub(crate) fn to_io(&self) -> io::Error {
        match self {
            Error::Log(walcodec::Error::Io(e)) => io::Error::new(e.kind(), self.to_string()),
            _ => io::Error::other(self.to_string()),
        }
    }
}

/// As openraft's error for a failed read.
pub(crate) fn read_error<NID: openraft::NodeId>(e: Error) -> openraft::StorageError<NID> {
    openraft::StorageIOError::read_logs(openraft::AnyError::new(&e)).into()
}

/// As openraft's error for a failed write of entries.
pub(crate) fn write_error<NID: openraft::NodeId>(e: Error) -> openraft::StorageError<NID> {
    openraft::StorageIOError::write_logs(openraft::AnyError::new(&e)).into()
}

/// As openraft's error for a failed write of the vote.
pub(crate) fn vote_error<NID: openraft::NodeId>(e: Error) -> openraft::StorageError<NID> {
    openraft::StorageIOError::write_vote(openraft::AnyError::new(&e)).into()
}
