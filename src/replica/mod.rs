//! Log shipping: [`LogDir::serve_replica`](crate::LogDir::serve_replica) on the
//! primary, [`Replica`] on the copy, over any byte stream (TCP, TLS, a Unix
//! socket, `tokio::io::duplex`).
//!
//! # Protocol (version 3)
//!
//! Each end first sends a hello, before reading the other's, so a version mismatch
//! is seen on both ends ([`Error::ReplicaVersion`](crate::Error::ReplicaVersion)):
//!
//! ```text
//! hello     "WALCREPL" | version u32 | flags u32 | segment u64 | offset u64   (32 bytes, LE)
//!           flags: bit 0 set by the replica, clear from the primary (two primaries or
//!           two replicas connected to each other fail); other bits 0
//!           replica: its resume position, the end of its last complete record
//!                    (000000:0 when it holds nothing: it starts at the primary's first segment)
//!           primary: its durable end
//! ```
//!
//! Then each end says what it holds, the replica first (it sends it with its
//! hello), the primary once it has judged the replica's:
//!
//! ```text
//! identity  'I' | log id u128 | last u8 | segment u64 offset u64 | crc u32 | count u32 | epochs
//!           log id: 0 for a replica that has none yet (then no epochs)
//!           last 1: a record ends at segment:offset, and crc is the crc32c of its
//!                   payload (the replica: its last record; the primary: its record
//!                   ending there, when it holds that segment); last 0: none, the
//!                   fields 0
//!           epochs: count (at most 65,536) of number u64 | id u64 | segment u64 | offset u64,
//!                   oldest first, numbers increasing, starts never decreasing
//! ```
//!
//! Both ends judge the replica alike (the table is in the guide's "The
//! handshake"): another log id fails with
//! [`Error::ReplicaOfAnotherLog`](crate::Error::ReplicaOfAnotherLog); a replica
//! whose end is past the end of the history both share, or whose last record is
//! not the primary's, with
//! [`Error::ReplicaDiverged`](crate::Error::ReplicaDiverged). The primary sends
//! its refusal in place of its identity; a replica that finds the primary's
//! identity wanting hangs up. A replica that holds no record takes the primary's
//! id and history, durably, before it writes a byte of the log.
//!
//! Then the primary sends the log, in messages of a tag byte and fixed fields,
//! little-endian:
//!
//! ```text
//! 'S' segment u64 offset u64   the bytes that follow are of this segment, from offset on:
//!                              the replica's end, or 0 for the next segment
//! 'D' len u32 bytes            the segment's next bytes, durable on the primary (1 <= len <= 1 MiB)
//! 'F' len u32 bytes            the same, reaching the primary's durable end as it was when
//!                              sent: the replica then holds all the primary had (its lag is
//!                              the time since the last 'F' or 'H')
//! 'E' len u64                  the segment is sealed at len; an 'S' for the next one follows
//!                              (the next number: a seal of segment u64::MAX - 1, whose next
//!                              number no log directory may hold, is a protocol error)
//! 'H'                          heartbeat while there is nothing to send (every quarter of
//!                              the primary's timeout, at most every 500 ms)
//! 'Y' count u32 epochs         the primary's history changed (a truncation past what was
//!                              shipped started an epoch): sent before any byte of the new
//!                              epoch; the replica makes it its own, durably, and refuses
//!                              one that forks from what it holds
//! 'G'                          goodbye: the primary closed its log and sent all of it; the
//!                              connection ends (a clean close, told from a cut)
//! 'X' code u8 f u128 f u128 f u128
//!                              refusal, then the primary hangs up: 1 too far behind
//!                              (first available), 2 diverged (replica's end, primary's
//!                              end, common), 3 protocol, 4 another log (primary's id,
//!                              replica's id); a position as segment | offset << 64
//! ```
//!
//! and the replica sends only acknowledgements of its durable end (any other byte
//! is refused), used by [`LogDirOptions::sync_replicas`](crate::LogDirOptions::sync_replicas)
//! and [`LogDir::replicated_end`](crate::LogDir::replicated_end):
//!
//! ```text
//! 'A' segment u64 offset u64   the replica's durable end (synced): after the primary's
//!                              first 'S', after each heartbeat, and whenever it moved;
//!                              never before the replica's resume position, never back,
//!                              never past the bytes the primary sent (each checked:
//!                              out of bounds is a protocol error)
//! ```
//!
//! A replica acknowledges once per sync, and syncs once what arrived is written
//! (not per message): one round trip serves a whole commit of the primary. A
//! replica that acknowledges nothing for the primary's timeout (heartbeats
//! included) is cut off, so a stalled replica never holds synchronous appends
//! longer than that.
//!
//! The log format is the wire format: the data messages carry the raw bytes of the
//! primary's segment files, and only bytes already durable there (a replica must
//! never hold a record the primary could still lose). The replica decodes them as
//! they arrive with a [`LogDecoder`](crate::LogDecoder) in
//! [`Recovery::AbsoluteConsistency`](crate::Recovery::AbsoluteConsistency), which
//! checks every fragment's checksum, checks that what lies between records is a
//! zero block trailer, and writes each record only once it is whole, at the offset
//! it had on the primary, syncing before it reports it durable: so every segment of
//! the replica is a byte-identical prefix of the primary's, and a connection cut at
//! any byte (in the hello, in a message header, mid-record, in a trailer) loses the
//! incomplete record only; the next connection resumes after the last complete one,
//! nothing lost or written twice.
//!
//! # Failure answers
//!
//! - A replica that needs a segment the primary purged:
//!   [`Error::ReplicaTooFarBehind`](crate::Error::ReplicaTooFarBehind), on both
//!   ends; nothing is skipped (see below for the segments a connected replica
//!   pins).
//! - A replica of another log:
//!   [`Error::ReplicaOfAnotherLog`](crate::Error::ReplicaOfAnotherLog), on both
//!   ends, nothing written.
//! - A replica whose history forked from the primary's (a former primary with
//!   records that never reached the replica promoted in its place, a replica past
//!   the primary's end, a primary that [truncated](crate::LogDir::truncate_after)
//!   its log below what the replica holds):
//!   [`Error::ReplicaDiverged`](crate::Error::ReplicaDiverged) with `common`, on
//!   both ends. Syncing never deletes: [`Replica::rewind`] to `common`, then sync
//!   again.
//! - A peer that breaks the protocol (a garbage or truncated hello, a message out
//!   of place or out of bounds, a segment that does not follow the replica's end,
//!   more than a record's worth of bytes that end no record):
//!   [`Error::ReplicaProtocol`](crate::Error::ReplicaProtocol); a damaged
//!   fragment: [`Error::Corruption`](crate::Error::Corruption). Every number
//!   from the wire (segment numbers, offsets, lengths) is checked before it is
//!   used, never wrapped. A replica's memory stays within four times the
//!   largest record it takes (64 MiB), plus a few MiB of messages and buffers:
//!   the bytes received that end no record yet and the record being checked,
//!   each grown by doubling. Measured with a counting allocator
//!   (`tests/replica_memory.rs`): 257 MiB at most copying a 64 MiB record,
//!   194 MiB refusing a stream that never ends one.
//! - A peer that stalls: [`Error::ReplicaProtocol`](crate::Error::ReplicaProtocol)
//!   once its end's timeout passes (default 10 s;
//!   [`Replica::set_timeout`], [`LogDirOptions::replica_timeout`](crate::LogDirOptions::replica_timeout)):
//!   a replica waits that long for the primary's hello and for each message
//!   (heartbeats included, sent every quarter of the primary's timeout, at most
//!   every 500 ms); a primary that long for the replica's hello and for it to take
//!   each message.
//!
//! # Pinned segments and a slow replica
//!
//! While a replica is connected, the segment it is sent and every later one are
//! pinned against purges and retention, up to
//! [`LogDirOptions::replica_retain_bytes`](crate::LogDirOptions::replica_retain_bytes)
//! beyond what the purge would leave. A purge past that limit deletes the oldest
//! pinned segments and cuts off the replicas that needed them: they fail with
//! [`Error::ReplicaTooFarBehind`](crate::Error::ReplicaTooFarBehind), and no byte
//! read after the release is sent.

#[cfg(feature = "replica-auth")]
pub(crate) mod auth;
mod copy;
mod handshake;
mod options;
mod primary;
mod wire;

pub use copy::{Replica, SyncEnd};
pub use primary::ShipStats;
pub use wire::PROTOCOL_VERSION;
