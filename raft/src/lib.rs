//! walcodec's segmented LevelDB-format log directory ([`walcodec::LogDir`]) as
//! the log storage of [openraft](https://docs.rs/openraft/0.9) 0.9
//! ([`RaftLogStorage`](openraft::storage::RaftLogStorage), feature `storage-v2`).
//!
//! ```
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use openraft::storage::RaftLogStorage;
//! use openraft::{CommittedLeaderId, LogId, Vote};
//! use walcodec_raft::LogStore;
//!
//! # use std::io::Cursor;
//! openraft::declare_raft_types!(pub TypeConfig:);
//!
//! let dir = tempfile::tempdir()?;
//! let mut store = LogStore::<TypeConfig>::open(dir.path()).await?;
//! store.save_vote(&Vote::new(1, 7)).await?; // durable now
//! store.close().await?;
//!
//! let mut store = LogStore::<TypeConfig>::open(dir.path()).await?;
//! assert_eq!(store.read_vote().await?, Some(Vote::new(1, 7)));
//! assert_eq!(store.get_log_state().await?.last_log_id, None);
//! # let _ = LogId::new(CommittedLeaderId::new(1, 7), 0);
//! store.close().await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Layout
//!
//! A store is a [`LogDir`](walcodec::LogDir): numbered segment files
//! (`000001.log`, …), each an ordinary LevelDB-format log, so `walcodec dump`,
//! `walcodec verify` and any LevelDB log reader read a node's log as it is.
//! Everything the store keeps is a record of that log, appended in call order:
//! an entry per record, and the vote, the committed id, truncations and purges as
//! records of their own (the table below). Opening the store replays the log.
//!
//! | tag | record      | fields                         | on replay                                  |
//! |-----|-------------|--------------------------------|--------------------------------------------|
//! | `1` | `Entry`     | log id, the whole entry        | drops entries at or after its index, keeps it |
//! | `2` | `Vote`      | vote                           | the vote from here on                      |
//! | `3` | `Committed` | committed log id (or none)     | the committed id from here on              |
//! | `4` | `Truncate`  | first index removed            | drops entries at or after it               |
//! | `5` | `Purge`     | purged log id, vote, committed | drops entries up to it; sets all three     |
//!
//! A record is the tag byte then [postcard](https://docs.rs/postcard) (compact
//! binary serde) of its fields.
//!
//! - A truncation is a record, not a cut of the files: it is crash-atomic (one
//!   record), and it cannot take with it a vote written after the entries it
//!   removes. Truncated entries stay in the files until a purge passes them.
//! - A purge appends its record (repeating the vote and committed id) and, once it
//!   is durable, deletes the whole segments before both that record and the
//!   first entry kept ([`LogDir::purge_before`](walcodec::LogDir::purge_before)):
//!   what remains is a suffix of the log that replays to the same state. The
//!   active segment is never deleted, so entries purged stay on disk until their
//!   segment is sealed.
//! - The store keeps in memory, per entry, where its record is (8 bytes: its
//!   offset from the start of a run of the entries in one segment, and its
//!   length), the leader ids as runs (one per term), and the records of the
//!   latest entries (4 MiB of them: a leader replicates an entry right after its
//!   flush); reads ([`LogReader`]) decode those from memory, as they do an append
//!   not yet durable, and read older ones from the segments. About 10 bytes an
//!   entry besides the cached records.

//!
//! # Many groups, one log
//!
//! [`SharedLog`] puts many Raft groups' stores on one log: each group's
//! [`LogStore`] (from [`SharedLog::store`]) writes records naming its group, and
//! what every group queued goes to the log as one batch with one sync. Its
//! records are the five above with tags `11` to `15`, the group (a varint) after
//! the tag, and the fields a replay needs before it knows a group's type config
//! (an entry's index) as varints, every typed field as length-prefixed postcard
//! bytes: opening the log replays it once and indexes every group. A store of its
//! own and a shared log refuse each other's records.
//!
//! | tag  | record      | fields after the group                                      |
//! |------|-------------|-------------------------------------------------------------|
//! | `11` | `Entry`     | index, leader id (bytes), the whole entry                   |
//! | `12` | `Vote`      | vote as an option (bytes)                                   |
//! | `13` | `Committed` | committed log id or none (bytes)                            |
//! | `14` | `Truncate`  | first index removed                                         |
//! | `15` | `Purge`     | purged index, its leader id, vote, committed id (all bytes) |
//! | `16` | `Moved`     | as `Entry`: a rewrite's copy of a live entry                |
//!
//! A `Moved` record, on replay, puts its entry at its index without dropping
//! the entries after it (an `Entry` drops them: it follows a truncation), so that
//! any prefix of a rewrite a power cut keeps replays to the same entries. See
//! [`SharedLogBuilder::rewrite_threshold`] for when segments go and groups are
//! rewritten.

#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

mod error;
mod group;
mod index;
#[cfg(test)]
mod pause;
mod reader;
// A read in flight at every step of a rewrite (the pause points of `pause`).
#[cfg(test)]
mod read_rewrite_race;
mod record;
mod shared;
mod space;
mod state;
mod store;
mod writer;

pub use error::Error;
pub use reader::{LogReader, MAX_READ_BYTES};
pub use shared::{SharedLog, SharedLogBuilder};
pub use space::SpaceStats;
pub use store::{LogStore, LogStoreBuilder};

// Every Rust snippet of the workspace's README is compiled as a test here: its
// examples use both crates, as a user's program would.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
mod readme {}
