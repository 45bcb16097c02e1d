//! Running one node: its log store, state machine, Raft and HTTP server.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use openraft::{Config, SnapshotPolicy};
use walcodec::LogDirOptions;
use walcodec_raft::LogStore;

use crate::api::{self, App};
use crate::network::Network;
use crate::store::StateMachineStore;
use crate::{NodeId, Raft, TypeConfig};

/// Where the Raft log of a node directory lives (a walcodec `LogDir`).
pub const LOG_DIR: &str = "raft-log";

/// How to run a node.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    /// The node's id.
    pub id: NodeId,
    /// The address to listen on and to be reached at (`host:port`).
    pub addr: String,
    /// The node's directory: its Raft log (`raft-log/`) and its snapshot.
    pub dir: PathBuf,
    /// How often a leader sends heartbeats, in milliseconds.
    pub heartbeat_ms: u64,
    /// The least and most time without a leader's word before a follower stands
    /// for election (a random time between the two), in milliseconds.
    pub election_timeout_ms: (u64, u64),
    /// Build a snapshot (and purge the log before it) every this many entries.
    pub snapshot_every: u64,
    /// Entries the log keeps before a snapshot, for followers that lag behind.
    pub keep_before_snapshot: u64,
    /// The size at which the log starts a new segment file.
    pub segment_bytes: u64,
}

impl NodeOptions {
    /// openraft's configuration for these options.
    ///
    /// # Errors
    /// When openraft refuses it (say an election timeout not above the heartbeat).
    pub fn config(&self) -> Result<Config, Box<openraft::ConfigError>> {
        Config {
            cluster_name: "walcodec-raft-kv".to_string(),
            heartbeat_interval: self.heartbeat_ms,
            election_timeout_min: self.election_timeout_ms.0,
            election_timeout_max: self.election_timeout_ms.1,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_every),
            max_in_snapshot_log_to_keep: self.keep_before_snapshot,
            // Chunks travel as JSON numbers: keep them well under the body limit.
            snapshot_max_chunk_size: 1 << 20,
            ..Config::default()
        }
        .validate()
        .map_err(Box::new)
    }
}

/// Runs a node until `shutdown` resolves: opens its log (replaying what is on
/// disk) and its last snapshot, starts Raft and serves the HTTP endpoints of
/// [`api`] on `options.addr`. Then stops Raft and waits until its log is closed.
///
/// # Errors
/// When the configuration is refused, the log or the snapshot cannot be opened,
/// the address cannot be bound, or Raft fails.
pub async fn run(
    options: NodeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let config = Arc::new(options.config()?);
    tokio::fs::create_dir_all(&options.dir).await?;
    let log_path = options.dir.join(LOG_DIR);
    let log_store = LogStore::<TypeConfig>::builder()
        .log_dir(
            LogDirOptions::new()
                .max_segment_bytes(options.segment_bytes)
                .clone(),
        )
        .open(&log_path)
        .await?;
    let state_machine = Arc::new(StateMachineStore::open(&options.dir).await?);
    let raft = Raft::new(
        options.id,
        config,
        Network::default(),
        log_store,
        Arc::clone(&state_machine),
    )
    .await?;
    let app = Arc::new(App {
        id: options.id,
        addr: options.addr.clone(),
        raft: raft.clone(),
        state_machine,
    });
    let listener = tokio::net::TcpListener::bind(&options.addr).await?;
    tracing::info!(id = options.id, addr = %options.addr, "serving");
    axum::serve(listener, api::router(app))
        .with_graceful_shutdown(shutdown)
        .await?;
    raft.shutdown().await?;
    // Raft owns the log store and dropped it on shutdown, which has the store's
    // writer write what is left and close the log in the background: opening the
    // log again waits for that (its directory lock is free once it is closed).
    let mut tries = 0;
    loop {
        match LogStore::<TypeConfig>::open(&log_path).await {
            Ok(mut store) => {
                store.close().await?;
                break;
            }
            Err(e) if tries < 100 => {
                tracing::debug!(error = %e, "log not closed yet");
                tries += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
    tracing::info!(id = options.id, "stopped");
    Ok(())
}
