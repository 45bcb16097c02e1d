//! Reading a stopped node's Raft log from its directory, to compare nodes.

use std::path::Path;

use openraft::storage::RaftLogStorage;
use openraft::{LogId, RaftLogReader, Vote};
use serde::Serialize;
use walcodec_raft::{LogStore, SharedLog};

use crate::node::LOG_DIR;
use crate::{NodeId, TypeConfig};

/// What a node's log holds.
#[derive(Debug, Serialize)]
pub struct LogDump {
    /// The vote.
    pub vote: Option<Vote<NodeId>>,
    /// The committed log id as last written (it may lag: it is not synced on its own).
    pub committed: Option<LogId<NodeId>>,
    /// The last purged log id.
    pub purged: Option<LogId<NodeId>>,
    /// The last log id.
    pub last: Option<LogId<NodeId>>,
    /// Every entry after the purged one, in order.
    pub entries: Vec<openraft::Entry<TypeConfig>>,
}

/// Opens the log of the node directory `dir` (the node must be stopped: the log
/// is locked while it runs) and reads all of it.
///
/// # Errors
/// When the log cannot be opened or read.
pub async fn dump_log(dir: &Path) -> Result<LogDump, Box<dyn std::error::Error + Send + Sync>> {
    let store = LogStore::<TypeConfig>::open(dir.join(LOG_DIR)).await?;
    read_all(store).await
}

/// Opens the shared log of the node directory `dir` of a node running several
/// groups ([`NodeOptions::groups`](crate::node::NodeOptions::groups); the node
/// must be stopped) and reads all of group `group`'s log, as the node's restart
/// replays it.
///
/// # Errors
/// When the log cannot be opened or read.
pub async fn dump_group_log(
    dir: &Path,
    group: u64,
) -> Result<LogDump, Box<dyn std::error::Error + Send + Sync>> {
    let shared = SharedLog::open(dir.join(LOG_DIR)).await?;
    let dump = match shared.store::<TypeConfig>(group).await {
        Ok(store) => read_all(store).await,
        Err(e) => Err(e.into()),
    };
    shared.close().await?;
    dump
}

async fn read_all(
    mut store: LogStore<TypeConfig>,
) -> Result<LogDump, Box<dyn std::error::Error + Send + Sync>> {
    let state = store.get_log_state().await?;
    let first = state.last_purged_log_id.map_or(0, |id| id.index + 1);
    let entries = match state.last_log_id {
        Some(last) => store.try_get_log_entries(first..=last.index).await?,
        None => Vec::new(),
    };
    let dump = LogDump {
        vote: store.read_vote().await?,
        committed: store.read_committed().await?,
        purged: state.last_purged_log_id,
        last: state.last_log_id,
        entries,
    };
    store.close().await?;
    Ok(dump)
}
