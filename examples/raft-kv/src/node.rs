//! Running one node: its log store, state machine, Raft and HTTP server; or,
//! with [`NodeOptions::groups`], several Raft groups (a multi-Raft node) whose
//! logs share one [`SharedLog`].

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use openraft::{Config, SnapshotPolicy};
use walcodec::LogDirOptions;
use walcodec_raft::{LogStore, SharedLog};

use crate::api::{self, App};
use crate::network::Network;
use crate::store::StateMachineStore;
use crate::{NodeId, Raft, TypeConfig};

/// Where the Raft log of a node directory lives (a walcodec `LogDir`: a
/// [`LogStore`]'s own, or with [`NodeOptions::groups`] the [`SharedLog`] of every
/// group).
pub const LOG_DIR: &str = "raft-log";

/// The directory of group `group`'s snapshot in a node directory, when the node
/// runs several groups (one group alone keeps its snapshot in the node directory).
pub fn group_dir(dir: &Path, group: u64) -> PathBuf {
    dir.join("groups").join(group.to_string())
}

/// Where group `group`'s endpoints are served, when the node runs several groups:
/// `/groups/{group}/write`, `/groups/{group}/raft-append`, ...
pub fn group_prefix(group: u64) -> String {
    format!("/groups/{group}")
}

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
    /// `None`: one Raft group, its log a [`LogStore`] of its own, its endpoints
    /// at the root (`/write`, ...). `Some(n)`: `n` Raft groups, numbered from 0,
    /// each with its own state machine and its endpoints under
    /// [`group_prefix`], their logs on one [`SharedLog`] (one writer, one sync per
    /// batch across the groups). Every node of a cluster runs the same groups.
    pub groups: Option<u64>,
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
/// disk) and its last snapshot (with [`NodeOptions::groups`], each group's),
/// starts Raft (a Raft per group) and serves the HTTP endpoints of [`api`] on
/// `options.addr`. Then stops Raft and waits until its log is closed.
///
/// # Errors
/// When the configuration is refused, the log or the snapshot cannot be opened,
/// the address cannot be bound, or Raft fails.
pub async fn run(
    options: NodeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    match options.groups {
        None => run_one(options, shutdown).await,
        Some(groups) => run_groups(options, groups, shutdown).await,
    }
}

fn log_dir_options(options: &NodeOptions) -> LogDirOptions {
    LogDirOptions::new()
        .max_segment_bytes(options.segment_bytes)
        .clone()
}

async fn serve(
    options: &NodeOptions,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let listener = tokio::net::TcpListener::bind(&options.addr).await?;
    tracing::info!(id = options.id, addr = %options.addr, groups = ?options.groups, "serving");
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await?;
    Ok(())
}

async fn run_one(
    options: NodeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let config = Arc::new(options.config()?);
    tokio::fs::create_dir_all(&options.dir).await?;
    let log_path = options.dir.join(LOG_DIR);
    let log_store = LogStore::<TypeConfig>::builder()
        .log_dir(log_dir_options(&options))
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
    serve(&options, api::router(app), shutdown).await?;
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

async fn run_groups(
    options: NodeOptions,
    groups: u64,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let config = Arc::new(options.config()?);
    tokio::fs::create_dir_all(&options.dir).await?;
    let shared = SharedLog::builder()
        .log_dir(&log_dir_options(&options))
        .open(options.dir.join(LOG_DIR))
        .await?;
    let mut router = Router::new();
    let mut rafts = Vec::new();
    let client = reqwest::Client::new();
    for group in 0..groups {
        let dir = group_dir(&options.dir, group);
        tokio::fs::create_dir_all(&dir).await?;
        let state_machine = Arc::new(StateMachineStore::open(&dir).await?);
        let raft = Raft::new(
            options.id,
            Arc::clone(&config),
            Network::for_group(client.clone(), group),
            shared.store::<TypeConfig>(group).await?,
            Arc::clone(&state_machine),
        )
        .await?;
        let app = Arc::new(App {
            id: options.id,
            addr: options.addr.clone(),
            raft: raft.clone(),
            state_machine,
        });
        router = router.nest(&group_prefix(group), api::router(app));
        rafts.push(raft);
    }
    // The group directories' names must survive a power cut as the snapshots in
    // them do (each snapshot syncs its own directory, not the one above).
    let groups_dir = options.dir.join("groups");
    for dir in [&groups_dir, &options.dir] {
        let dir = dir.clone();
        tokio::task::spawn_blocking(move || std::fs::File::open(dir)?.sync_all()).await??;
    }
    serve(&options, router, shutdown).await?;
    for raft in &rafts {
        raft.shutdown().await?;
    }
    // Each Raft dropped its group's store on shutdown; the log writes what they
    // queued, syncs and closes.
    shared.close().await?;
    tracing::info!(id = options.id, "stopped");
    Ok(())
}
