//! The key-value state machine: in memory, with its snapshots written to the node's
//! directory (`snapshot.json`), so that a restarted node starts from its last
//! snapshot and openraft replays the log after it.
//!
//! Writing each snapshot durably before openraft learns of it is what makes
//! openraft's purge safe: it purges the log only up to a snapshot it was told
//! about, and the entries purged must still be somewhere after a crash.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io::{self, Cursor, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    BasicNode, Entry, EntryPayload, LogId, RaftSnapshotBuilder, SnapshotMeta, StorageError,
    StorageIOError, StoredMembership,
};
use serde::{Deserialize, Serialize};
use tokio::sync::{Mutex, RwLock};

use crate::{NodeId, TypeConfig};

/// A client's write: one command of the Raft log.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Sets `key` to `value`.
    Set {
        /// The key.
        key: String,
        /// Its new value.
        value: String,
    },
    /// Removes `key`.
    Delete {
        /// The key.
        key: String,
    },
}

/// What applying a [`Request`] answers.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The key's value before the write.
    pub previous: Option<String>,
}

/// The state machine's contents.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StateMachineData {
    /// The last entry applied.
    pub last_applied: Option<LogId<NodeId>>,
    /// The last membership applied.
    pub last_membership: StoredMembership<NodeId, BasicNode>,
    /// The keys and values.
    pub kv: BTreeMap<String, String>,
}

/// A snapshot as kept: its metadata and its data (the key-value map as JSON).
#[derive(Debug, Clone)]
struct StoredSnapshot {
    meta: SnapshotMeta<NodeId, BasicNode>,
    data: Vec<u8>,
}

/// The key-value state machine of one node (shared by openraft and the HTTP
/// handlers that read it).
#[derive(Debug)]
pub struct StateMachineStore {
    data: RwLock<StateMachineData>,
    /// The newest snapshot, as on disk. Locked while one is written, so that an
    /// older one never replaces a newer one.
    current: Mutex<Option<StoredSnapshot>>,
    /// Where snapshots are written.
    path: PathBuf,
    /// Tells apart snapshots of the same log id.
    snapshot_idx: AtomicU64,
    /// Snapshots installed from a leader since this process opened it.
    installed: AtomicU64,
}

/// The name of the snapshot file in a node's directory.
pub const SNAPSHOT_FILE: &str = "snapshot.json";

impl StateMachineStore {
    /// Opens the state machine of the node directory `dir`: empty, or as its last
    /// snapshot left it.
    ///
    /// # Errors
    /// When the snapshot file exists but cannot be read or parsed.
    pub async fn open(dir: &Path) -> io::Result<StateMachineStore> {
        let path = dir.join(SNAPSHOT_FILE);
        let loaded = {
            let path = path.clone();
            tokio::task::spawn_blocking(move || load(&path))
                .await
                .map_err(io::Error::other)??
        };
        let mut data = StateMachineData::default();
        if let Some(snapshot) = &loaded {
            data = StateMachineData {
                last_applied: snapshot.meta.last_log_id,
                last_membership: snapshot.meta.last_membership.clone(),
                kv: serde_json::from_slice(&snapshot.data)?,
            };
        }
        Ok(StateMachineStore {
            data: RwLock::new(data),
            current: Mutex::new(loaded),
            path,
            snapshot_idx: AtomicU64::new(0),
            installed: AtomicU64::new(0),
        })
    }

    /// The value of `key`, as applied on this node (not linearizable by itself: see
    /// [`Raft::ensure_linearizable`](openraft::Raft::ensure_linearizable)).
    pub async fn get(&self, key: &str) -> Option<String> {
        self.data.read().await.kv.get(key).cloned()
    }

    /// A copy of the whole state machine.
    pub async fn data(&self) -> StateMachineData {
        self.data.read().await.clone()
    }

    /// How many snapshots a leader sent and this node installed since it opened
    /// the state machine (a node that lagged too far behind the leader's log).
    pub fn snapshots_installed(&self) -> u64 {
        self.installed.load(Ordering::Relaxed)
    }

    /// Writes `snapshot` to disk (replacing the file in one rename) unless a newer
    /// one is already there, and keeps it as the current one.
    async fn keep(
        &self,
        current: &mut Option<StoredSnapshot>,
        snapshot: StoredSnapshot,
    ) -> Result<(), StorageError<NodeId>> {
        if current
            .as_ref()
            .is_some_and(|c| c.meta.last_log_id > snapshot.meta.last_log_id)
        {
            return Ok(());
        }
        let signature = Some(snapshot.meta.signature());
        let meta = serde_json::to_vec(&snapshot.meta)
            .map_err(|e| StorageIOError::write_snapshot(signature.clone(), &e))?;
        let path = self.path.clone();
        let data = snapshot.data.clone();
        tokio::task::spawn_blocking(move || save(&path, &meta, &data))
            .await
            .map_err(|e| StorageIOError::write_snapshot(signature.clone(), &e))?
            .map_err(|e| StorageIOError::write_snapshot(signature, &e))?;
        *current = Some(snapshot);
        Ok(())
    }
}

/// The snapshot file is the metadata as one line of JSON, a newline, then the data.
fn save(path: &Path, meta: &[u8], data: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(meta)?;
    file.write_all(b"\n")?;
    file.write_all(data)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    // The rename itself must be durable before openraft purges the log behind it.
    std::fs::File::open(path.parent().unwrap_or(Path::new(".")))?.sync_all()
}

fn load(path: &Path) -> io::Result<Option<StoredSnapshot>> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let newline = bytes.iter().position(|&b| b == b'\n').ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidData, "snapshot file without metadata")
    })?;
    let meta = serde_json::from_slice(&bytes[..newline])?;
    Ok(Some(StoredSnapshot {
        meta,
        data: bytes[newline + 1..].to_vec(),
    }))
}

fn snapshot_of(stored: &StoredSnapshot) -> Snapshot<TypeConfig> {
    Snapshot {
        meta: stored.meta.clone(),
        snapshot: Box::new(Cursor::new(stored.data.clone())),
    }
}

impl RaftSnapshotBuilder<TypeConfig> for Arc<StateMachineStore> {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let data = self.data.read().await;
        let bytes =
            serde_json::to_vec(&data.kv).map_err(|e| StorageIOError::read_state_machine(&e))?;
        let idx = self.snapshot_idx.fetch_add(1, Ordering::Relaxed) + 1;
        let snapshot_id = match &data.last_applied {
            Some(last) => format!("{}-{}-{idx}", last.leader_id, last.index),
            None => format!("--{idx}"),
        };
        let meta = SnapshotMeta {
            last_log_id: data.last_applied,
            last_membership: data.last_membership.clone(),
            snapshot_id,
        };
        // Taken before the state machine is let go, so that snapshots are kept in
        // the order of what they hold.
        let mut current = self.current.lock().await;
        drop(data);
        let stored = StoredSnapshot { meta, data: bytes };
        self.keep(&mut current, stored.clone()).await?;
        Ok(snapshot_of(&stored))
    }
}

impl RaftStateMachine<TypeConfig> for Arc<StateMachineStore> {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>), StorageError<NodeId>>
    {
        let data = self.data.read().await;
        Ok((data.last_applied, data.last_membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
    {
        let mut data = self.data.write().await;
        let mut responses = Vec::new();
        for entry in entries {
            data.last_applied = Some(entry.log_id);
            let previous = match entry.payload {
                EntryPayload::Blank => None,
                EntryPayload::Normal(Request::Set { key, value }) => data.kv.insert(key, value),
                EntryPayload::Normal(Request::Delete { key }) => data.kv.remove(&key),
                EntryPayload::Membership(membership) => {
                    data.last_membership = StoredMembership::new(Some(entry.log_id), membership);
                    None
                }
            };
            responses.push(Response { previous });
        }
        Ok(responses)
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data: snapshot.into_inner(),
        };
        let kv = serde_json::from_slice(&stored.data)
            .map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), &e))?;
        let mut data = self.data.write().await;
        let mut current = self.current.lock().await;
        // On disk first: once this returns, openraft may purge the log it covers.
        self.keep(&mut current, stored).await?;
        *data = StateMachineData {
            last_applied: meta.last_log_id,
            last_membership: meta.last_membership.clone(),
            kv,
        };
        self.installed.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        Ok(self.current.lock().await.as_ref().map(snapshot_of))
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        Arc::clone(self)
    }
}
