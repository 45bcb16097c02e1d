//! `raft-kv serve` runs one node of the example cluster (`--groups N`: N Raft
//! groups on one shared log); `raft-kv dump-log` prints a stopped node's log
//! (`--group G`: one group's).

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use walcodec_raft_kv::node::{self, NodeOptions};

#[derive(Parser, Debug)]
#[command(about = "A key-value service on openraft with walcodec-raft's LogStore")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a node until SIGTERM or Ctrl-C.
    Serve {
        /// The node's id.
        #[arg(long)]
        id: u64,
        /// The address to listen on, and to be reached at.
        #[arg(long)]
        addr: String,
        /// The node's directory (its Raft log and snapshot).
        #[arg(long)]
        dir: PathBuf,
        /// Heartbeat interval, in milliseconds.
        #[arg(long, default_value_t = 250)]
        heartbeat_ms: u64,
        /// Least election timeout, in milliseconds.
        #[arg(long, default_value_t = 1000)]
        election_min_ms: u64,
        /// Most election timeout, in milliseconds.
        #[arg(long, default_value_t = 2000)]
        election_max_ms: u64,
        /// Build a snapshot every this many entries.
        #[arg(long, default_value_t = 5000)]
        snapshot_every: u64,
        /// Entries kept in the log before a snapshot.
        #[arg(long, default_value_t = 1000)]
        keep_before_snapshot: u64,
        /// Size at which the log starts a new segment, in bytes.
        #[arg(long, default_value_t = 16 << 20)]
        segment_bytes: u64,
        /// Run this many Raft groups (0, 1, ...), their logs on one shared log,
        /// each group's endpoints under /groups/{group}/ (every node of the
        /// cluster the same number); without it, one group on a log of its own,
        /// its endpoints at the root.
        #[arg(long)]
        groups: Option<u64>,
    },
    /// Print a stopped node's log: one JSON line with its vote, committed, purged
    /// and last log ids, then one line per entry.
    DumpLog {
        /// The node's directory.
        #[arg(long)]
        dir: PathBuf,
        /// The group, on a node that ran with --groups (its shared log).
        #[arg(long)]
        group: Option<u64>,
    },
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    tracing_subscriber::fmt()
        .with_max_level(match std::env::var("RAFT_KV_LOG").as_deref() {
            Ok("debug") => tracing::Level::DEBUG,
            Ok("trace") => tracing::Level::TRACE,
            Ok("warn") => tracing::Level::WARN,
            _ => tracing::Level::INFO,
        })
        .with_ansi(false)
        .init();
    match Cli::parse().command {
        Command::Serve {
            id,
            addr,
            dir,
            heartbeat_ms,
            election_min_ms,
            election_max_ms,
            snapshot_every,
            keep_before_snapshot,
            segment_bytes,
            groups,
        } => {
            let options = NodeOptions {
                id,
                addr,
                dir,
                heartbeat_ms,
                election_timeout_ms: (election_min_ms, election_max_ms),
                snapshot_every,
                keep_before_snapshot,
                segment_bytes,
                groups,
            };
            node::run(options, stop_signal()).await
        }
        Command::DumpLog { dir, group } => {
            let dump = match group {
                None => walcodec_raft_kv::dump::dump_log(&dir).await?,
                Some(group) => walcodec_raft_kv::dump::dump_group_log(&dir, group).await?,
            };
            let head = serde_json::json!({
                "vote": dump.vote,
                "committed": dump.committed,
                "purged": dump.purged,
                "last": dump.last,
                "entries": dump.entries.len(),
            });
            println!("{head}");
            for entry in &dump.entries {
                println!("{}", serde_json::to_string(entry)?);
            }
            Ok(())
        }
    }
}

/// SIGTERM or Ctrl-C.
async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "no SIGTERM handler: Ctrl-C only");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
