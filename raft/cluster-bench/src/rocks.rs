//! A RocksDB-backed log store as openraft 0.9's `stores/rocksstore-v2` writes it:
//! entries in a `logs` column family keyed by big-endian index, the vote and the
//! purged id in `meta`, and `flush_wal(true)` (a WAL sync) before the flush
//! callback of every append, after a vote and after a truncation.
//!
//! Two changes in RocksDB's favour, so that the comparison is of the storage and
//! not of encodings: an entry is encoded with postcard, as `LogStore` encodes it
//! (rocksstore-v2 uses JSON), and the entries of one append go in one `WriteBatch`
//! (rocksstore-v2 puts them one by one). Like rocksstore-v2, the store calls
//! RocksDB inline in its async methods.

// The helpers return openraft's own error type, as the trait methods must.
#![allow(clippy::result_large_err)]

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{
    AnyError, ErrorSubject, ErrorVerb, LogId, OptionalSend, RaftLogReader, StorageError,
    StorageIOError, Vote,
};
use rocksdb::{
    ColumnFamily, ColumnFamilyDescriptor, Direction, IteratorMode, Options, WriteBatch, DB,
};

use crate::types::{Entry, NodeId, TypeConfig};

const VOTE: &[u8] = b"vote";
const COMMITTED: &[u8] = b"committed";
const PURGED: &[u8] = b"purged";

/// The store; clones (its reader) share the database.
#[derive(Clone)]
pub struct RocksLogStore {
    db: Arc<DB>,
}

fn io_error(
    subject: ErrorSubject<NodeId>,
    verb: ErrorVerb,
    e: &(impl std::error::Error + 'static),
) -> StorageError<NodeId> {
    StorageIOError::new(subject, verb, AnyError::new(e)).into()
}

fn logs_write(e: &(impl std::error::Error + 'static)) -> StorageError<NodeId> {
    io_error(ErrorSubject::Logs, ErrorVerb::Write, e)
}

fn logs_read(e: &(impl std::error::Error + 'static)) -> StorageError<NodeId> {
    io_error(ErrorSubject::Logs, ErrorVerb::Read, e)
}

fn key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

impl RocksLogStore {
    /// Opens (or creates) the database at `path`.
    pub fn open(path: &Path) -> Result<Self, rocksdb::Error> {
        let mut options = Options::default();
        options.create_if_missing(true);
        options.create_missing_column_families(true);
        let families =
            ["meta", "logs"].map(|name| ColumnFamilyDescriptor::new(name, Options::default()));
        let db = DB::open_cf_descriptors(&options, path, families)?;
        Ok(RocksLogStore { db: Arc::new(db) })
    }

    fn meta(&self) -> &ColumnFamily {
        self.db
            .cf_handle("meta")
            .expect("opened with the meta family")
    }

    fn logs(&self) -> &ColumnFamily {
        self.db
            .cf_handle("logs")
            .expect("opened with the logs family")
    }

    fn get_meta<T: serde::de::DeserializeOwned>(
        &self,
        name: &[u8],
    ) -> Result<Option<T>, StorageError<NodeId>> {
        let subject = ErrorSubject::Store;
        match self
            .db
            .get_cf(self.meta(), name)
            .map_err(|e| io_error(subject.clone(), ErrorVerb::Read, &e))?
        {
            None => Ok(None),
            Some(bytes) => postcard::from_bytes(&bytes)
                .map(Some)
                .map_err(|e| io_error(subject, ErrorVerb::Read, &e)),
        }
    }

    fn put_meta<T: serde::Serialize>(
        &self,
        name: &[u8],
        value: &T,
    ) -> Result<(), StorageError<NodeId>> {
        let bytes = postcard::to_stdvec(value)
            .map_err(|e| io_error(ErrorSubject::Store, ErrorVerb::Write, &e))?;
        self.db
            .put_cf(self.meta(), name, bytes)
            .map_err(|e| io_error(ErrorSubject::Store, ErrorVerb::Write, &e))
    }
}

impl RaftLogReader<TypeConfig> for RocksLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError<NodeId>> {
        let start = match range.start_bound() {
            Bound::Included(x) => *x,
            Bound::Excluded(x) => *x + 1,
            Bound::Unbounded => 0,
        };
        let mut entries = Vec::new();
        let from = key(start);
        for item in self
            .db
            .iterator_cf(self.logs(), IteratorMode::From(&from, Direction::Forward))
        {
            let (index, value) = item.map_err(|e| logs_read(&e))?;
            let index = u64::from_be_bytes(index[..8].try_into().expect("8-byte keys"));
            if !range.contains(&index) {
                break;
            }
            entries.push(postcard::from_bytes(&value).map_err(|e| logs_read(&e))?);
        }
        Ok(entries)
    }
}

impl RaftLogStorage<TypeConfig> for RocksLogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let last = match self.db.iterator_cf(self.logs(), IteratorMode::End).next() {
            None => None,
            Some(item) => {
                let (_, value) = item.map_err(|e| logs_read(&e))?;
                let entry: Entry = postcard::from_bytes(&value).map_err(|e| logs_read(&e))?;
                Some(entry.log_id)
            }
        };
        let purged = self.get_meta::<LogId<NodeId>>(PURGED)?;
        Ok(LogState {
            last_purged_log_id: purged,
            last_log_id: last.or(purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.put_meta(VOTE, vote)?;
        self.db
            .flush_wal(true)
            .map_err(|e| io_error(ErrorSubject::Vote, ErrorVerb::Write, &e))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        self.get_meta(VOTE)
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<NodeId>>,
    ) -> Result<(), StorageError<NodeId>> {
        // No sync: it goes with the next one, as openraft allows.
        self.put_meta(COMMITTED, &committed)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        Ok(self.get_meta::<Option<LogId<NodeId>>>(COMMITTED)?.flatten())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut batch = WriteBatch::default();
        for entry in entries {
            let value = postcard::to_stdvec(&entry).map_err(|e| logs_write(&e))?;
            batch.put_cf(self.logs(), key(entry.log_id.index), value);
        }
        self.db.write(batch).map_err(|e| logs_write(&e))?;
        let synced = self.db.flush_wal(true);
        callback.log_io_completed(synced.map_err(std::io::Error::other));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.db
            .delete_range_cf(self.logs(), key(log_id.index), key(u64::MAX))
            .map_err(|e| logs_write(&e))?;
        self.db.flush_wal(true).map_err(|e| logs_write(&e))
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        // As rocksstore-v2: the purged id first, then the range; no sync (entries
        // at or before the purged id are ignored on restart anyway).
        self.put_meta(PURGED, &log_id)?;
        self.db
            .delete_range_cf(self.logs(), key(0), key(log_id.index + 1))
            .map_err(|e| logs_write(&e))
    }
}
