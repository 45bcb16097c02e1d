//! The cluster's types: a request packs one or more commands into one log entry.

use std::io::Cursor;

use serde::{Deserialize, Serialize};

/// One client command: a 16-byte key-value write.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Command {
    pub key: u64,
    pub value: u64,
}

/// What a client writes: one entry of the log, holding `commands.len()` commands
/// (one, or a client-side batch when packing).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub commands: Vec<Command>,
}

openraft::declare_raft_types!(
    /// Requests of packed commands; the response is the number of commands applied
    /// so far; nodes carry no address (the network is function calls).
    pub TypeConfig:
        D = Request,
        R = u64,
        Node = (),
);

pub type NodeId = u64;
pub type Raft = openraft::Raft<TypeConfig>;
pub type Entry = openraft::Entry<TypeConfig>;
