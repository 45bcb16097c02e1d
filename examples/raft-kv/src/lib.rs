//! A key-value service on [openraft](https://docs.rs/openraft/0.9) 0.9 whose nodes
//! keep their Raft log in walcodec-raft's [`LogStore`](walcodec_raft::LogStore):
//! three processes on localhost, talking HTTP with JSON bodies as openraft's own
//! `raft-kv-memstore` example does. With `--groups N` each node runs N Raft groups
//! (a multi-Raft node: a group per shard), their logs on one walcodec-raft
//! [`SharedLog`](walcodec_raft::SharedLog), each group's endpoints under
//! `/groups/{group}/`.
//!
//! - [`store`]: the state machine (a map in memory, its snapshots written to the
//!   node's directory);
//! - [`network`]: openraft's RPCs as HTTP requests to the other nodes;
//! - [`api`]: the endpoints of a node (client writes and reads, cluster
//!   management, metrics, and the RPCs from other nodes);
//! - [`node`]: one node, from its directory to its HTTP server;
//! - [`dump`]: a stopped node's log as it is on disk.
//!
//! `scripts/raft-kill-leader.sh` starts three nodes (4 groups each by default),
//! writes under load to every group, kills a leader and checks that no
//! acknowledged write was lost in any group and that the killed node's log held
//! every entry it had flushed.

#![warn(missing_docs, rust_2018_idioms, unreachable_pub)]

use std::io::Cursor;

pub mod api;
pub mod dump;
pub mod network;
pub mod node;
pub mod store;

/// A node's id.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// The service's types: key-value commands in, previous values out.
    pub TypeConfig:
        D = store::Request,
        R = store::Response,
);

/// A node's Raft.
pub type Raft = openraft::Raft<TypeConfig>;
