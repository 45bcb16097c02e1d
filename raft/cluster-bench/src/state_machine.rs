//! The state machine, the same for every log store: it counts the commands applied
//! and keeps the last value written; a snapshot is those numbers. Trivial on
//! purpose, so that the log store is what the figures compare.

use std::io::Cursor;
use std::sync::{Arc, Mutex};

use openraft::storage::RaftStateMachine;
use openraft::{
    AnyError, EntryPayload, LogId, RaftSnapshotBuilder, Snapshot, SnapshotMeta, StorageError,
    StorageIOError, StoredMembership,
};
use serde::{Deserialize, Serialize};

use crate::types::{Entry, NodeId, TypeConfig};

#[derive(Default, Clone, Serialize, Deserialize)]
struct Applied {
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, ()>,
    commands: u64,
    last_value: u64,
}

#[derive(Default)]
struct Inner {
    applied: Applied,
    snapshot: Option<(SnapshotMeta<NodeId, ()>, Vec<u8>)>,
    built: u64,
}

/// The state machine; clones share it.
#[derive(Default, Clone)]
pub struct StateMachine {
    inner: Arc<Mutex<Inner>>,
}

fn snapshot_error(e: &postcard::Error) -> StorageError<NodeId> {
    StorageIOError::write_snapshot(None, AnyError::new(e)).into()
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let mut inner = self.inner.lock().unwrap();
        let data = postcard::to_stdvec(&inner.applied).map_err(|e| snapshot_error(&e))?;
        inner.built += 1;
        let meta = SnapshotMeta {
            last_log_id: inner.applied.last_applied,
            last_membership: inner.applied.membership.clone(),
            snapshot_id: format!("snapshot-{}", inner.built),
        };
        inner.snapshot = Some((meta.clone(), data.clone()));
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, ()>), StorageError<NodeId>> {
        let inner = self.inner.lock().unwrap();
        Ok((inner.applied.last_applied, inner.applied.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<u64>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry> + Send,
    {
        let mut inner = self.inner.lock().unwrap();
        let applied = &mut inner.applied;
        let mut responses = Vec::new();
        for entry in entries {
            applied.last_applied = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(request) => {
                    applied.commands += request.commands.len() as u64;
                    if let Some(last) = request.commands.last() {
                        applied.last_value = last.value;
                    }
                }
                EntryPayload::Membership(membership) => {
                    applied.membership = StoredMembership::new(Some(entry.log_id), membership);
                }
            }
            responses.push(applied.commands);
        }
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, ()>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let data = snapshot.into_inner();
        let applied: Applied = postcard::from_bytes(&data).map_err(|e| {
            StorageError::from(StorageIOError::read_snapshot(
                Some(meta.signature()),
                AnyError::new(&e),
            ))
        })?;
        let mut inner = self.inner.lock().unwrap();
        inner.applied = applied;
        inner.snapshot = Some((meta.clone(), data));
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let inner = self.inner.lock().unwrap();
        Ok(inner.snapshot.as_ref().map(|(meta, data)| Snapshot {
            meta: meta.clone(),
            snapshot: Box::new(Cursor::new(data.clone())),
        }))
    }
}
