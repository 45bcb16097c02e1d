//! Reading a stopped node's Raft log from its directory, to compare nodes.

use std::path::Path;

use openraft::storage::RaftLogStorage;
use openraft::{LogId, RaftLogReader, Vote};
use serde::Serialize;
use walcodec_raft::LogStore;

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
    let mut store = LogStore::<TypeConfig>::open(dir.join(LOG_DIR)).await?;
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
