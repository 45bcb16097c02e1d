//! An in-memory state machine for the tests (openraft's suite needs one beside
//! the log store): the commands applied, in order, with snapshots.

#![allow(dead_code)]

pub mod ops;

use std::io::Cursor;
use std::sync::{Arc, Mutex};

use openraft::storage::RaftStateMachine;
use openraft::{
    BasicNode, EntryPayload, LogId, RaftSnapshotBuilder, Snapshot, SnapshotMeta, StorageError,
    StorageIOError, StoredMembership,
};

openraft::declare_raft_types!(
    /// Commands and responses are strings; everything else openraft's defaults.
    pub TypeConfig:
);

type Membership = StoredMembership<u64, BasicNode>;

/// The tests' log entry.
pub type Entry = openraft::Entry<TypeConfig>;

#[derive(Default, Clone, serde::Serialize, serde::Deserialize)]
struct Applied {
    last_applied: Option<LogId<u64>>,
    membership: Membership,
    commands: Vec<String>,
}

#[derive(Default)]
struct Inner {
    applied: Applied,
    snapshot: Option<(SnapshotMeta<u64, BasicNode>, Vec<u8>)>,
    snapshots_built: u64,
}

/// The state machine; clones share it.
#[derive(Default, Clone)]
pub struct MemStateMachine {
    inner: Arc<Mutex<Inner>>,
}

impl RaftSnapshotBuilder<TypeConfig> for MemStateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<u64>> {
        let mut inner = self.inner.lock().unwrap();
        let data = postcard::to_stdvec(&inner.applied)
            .map_err(|e| StorageIOError::write_snapshot(None, openraft::AnyError::new(&e)))?;
        inner.snapshots_built += 1;
        let meta = SnapshotMeta {
            last_log_id: inner.applied.last_applied,
            last_membership: inner.applied.membership.clone(),
            snapshot_id: format!("snapshot-{}", inner.snapshots_built),
        };
        inner.snapshot = Some((meta.clone(), data.clone()));
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for MemStateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<u64>>, Membership), StorageError<u64>> {
        let inner = self.inner.lock().unwrap();
        Ok((inner.applied.last_applied, inner.applied.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<String>, StorageError<u64>>
    where
        I: IntoIterator<Item = openraft::Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let mut inner = self.inner.lock().unwrap();
        let mut responses = Vec::new();
        for entry in entries {
            inner.applied.last_applied = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => responses.push(String::new()),
                EntryPayload::Normal(command) => {
                    inner.applied.commands.push(command.clone());
                    responses.push(command);
                }
                EntryPayload::Membership(membership) => {
                    inner.applied.membership =
                        StoredMembership::new(Some(entry.log_id), membership);
                    responses.push(String::new());
                }
            }
        }
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<u64>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<u64>> {
        let data = snapshot.into_inner();
        let applied: Applied = postcard::from_bytes(&data).map_err(|e| {
            StorageIOError::read_snapshot(Some(meta.signature()), openraft::AnyError::new(&e))
        })?;
        let mut inner = self.inner.lock().unwrap();
        inner.applied = Applied {
            last_applied: meta.last_log_id,
            membership: meta.last_membership.clone(),
            commands: applied.commands,
        };
        inner.snapshot = Some((meta.clone(), data));
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<u64>> {
        let inner = self.inner.lock().unwrap();
        Ok(inner.snapshot.as_ref().map(|(meta, data)| Snapshot {
            meta: meta.clone(),
            snapshot: Box::new(Cursor::new(data.clone())),
        }))
    }
}

/// The log id of `index` written in `term` (by leader node 1).
pub fn log_id(term: u64, index: u64) -> LogId<u64> {
    LogId::new(openraft::CommittedLeaderId::new(term, 1), index)
}

/// An entry whose command names its log id, so that any copy read back can be
/// checked against it.
pub fn entry(term: u64, index: u64) -> openraft::Entry<TypeConfig> {
    openraft::Entry {
        log_id: log_id(term, index),
        payload: EntryPayload::Normal(format!("entry {index} of term {term}")),
    }
}

/// Whether `entry` is the one [`entry`] makes for its log id.
pub fn is_genuine(entry: &openraft::Entry<TypeConfig>) -> bool {
    let expected = self::entry(entry.log_id.leader_id.term, entry.log_id.index);
    format!("{:?}", entry.payload) == format!("{:?}", expected.payload)
        && entry.log_id == expected.log_id
}

/// A tiny deterministic generator (xorshift64*), so that a failing run replays
/// from its seed.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded; any seed works.
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
