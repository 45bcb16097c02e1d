//! The crate's top error: what reading and writing files, a directory and its replicas
//! can raise.
//!
//! The codecs below raise their own [`CodecError`] (only what decoding and encoding can
//! raise). This one wraps it through `From`, variant
//! for variant, so a user of [`LogReader`](crate::LogReader), [`LogDir`](crate::LogDir)
//! or [`Replica`](crate::Replica) matches one type.

use std::borrow::Cow;
use std::fmt;
use std::io;
use std::sync::Arc;

use crate::decoder::error::{CodecError, CorruptionKind};

/// Errors of reading and writing logs: files, directories, replicas.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The underlying source or sink failed. Displays as the I/O error itself (its
    /// source is that error's source), so an error chain says it once.
    #[error(transparent)]
    Io(#[from] io::Error),

    /// The log is damaged at `offset`, in a way the decoder's [`Recovery`] mode does
    /// not skip.
    ///
    /// [`Recovery`]: crate::Recovery
    #[error("corrupt log at offset {offset}: {kind} ({bytes} bytes)")]
    Corruption {
        /// Log offset of the damaged fragment (or of the record it belonged to).
        offset: u64,
        /// Bytes the damage covers.
        bytes: u64,
        /// What is wrong (as [`Corruption::kind`](crate::Corruption::kind); it displays as LevelDB's reason
        /// text, [`Corruption::reason`](crate::Corruption::reason)).
        kind: CorruptionKind,
    },

    /// The input of a [`LogDecoder`](crate::LogDecoder) reading a stream (the
    /// default, [`LogInput::Stream`](crate::LogInput::Stream)) ended inside a record:
    /// a header or payload cut short, or a fragmented record without its LAST
    /// fragment. The sender stopped, or the connection broke, mid-record: the record
    /// is lost, so the stream ends with this error rather than cleanly (as
    /// tokio-util's own codecs do with "bytes remaining on stream"). A decoder of a
    /// file ([`LogInput::File`](crate::LogInput::File)) takes the same bytes as a
    /// torn tail instead: see [`Recovery`](crate::Recovery).
    #[error("stream ended inside a record at offset {offset} ({bytes} bytes remaining on stream)")]
    IncompleteRecord {
        /// Log offset where the incomplete record (or the cut header) begins: the
        /// end of the last complete record, where a sender should resume.
        offset: u64,
        /// Bytes of the incomplete record that arrived.
        bytes: u64,
    },

    /// A record grew past the decoder's `max_record_bytes`.
    #[error("record at offset {offset} is larger than the limit ({size} > {max} bytes)")]
    RecordTooLarge {
        /// Log offset of the record's first fragment.
        offset: u64,
        /// Bytes of the record seen when the limit was crossed.
        size: u64,
        /// The configured limit.
        max: usize,
    },

    /// An [`AsyncLogWriter`](crate::AsyncLogWriter) accepts no more appends because an
    /// earlier write or sync failed. The call that gets it wrote nothing: no byte of
    /// its records is in the file (the appends with bytes in the failed batch, a
    /// record larger than a batch included, got [`Error::Io`] instead). Bytes from
    /// `offset` on may be missing or torn in the file; reopening the log with
    /// [`AsyncLogWriter::open`](crate::AsyncLogWriter::open) cuts them to a clean
    /// prefix.
    #[error("log writer stopped by an earlier failed write or sync at offset {offset}; nothing of this call was written; reopen the log to repair it")]
    Poisoned {
        /// Log offset where the failed batch began: every byte before it was synced.
        offset: u64,
        /// The failure that stopped the writer.
        #[source]
        source: Arc<io::Error>,
    },

    /// A followed log changed under its [`LogTailer`](crate::LogTailer) in a way
    /// appends never change a log: it was cut, replaced or rewritten. The records
    /// returned before stand; nothing after is returned, so no record is ever made of
    /// bytes from before and after the change. Open a new follower to go on.
    #[error("followed log changed under the reader: {0}")]
    LogChanged(LogChange),

    /// The [`AsyncLogWriter`](crate::AsyncLogWriter) was closed, or its flusher is gone.
    #[error("log writer is closed")]
    Closed,

    /// A [`LogDir`](crate::LogDir) has segments on both sides of a missing number:
    /// records were lost (a file deleted by hand, a bad copy). Nothing is repaired.
    #[error("log directory is missing segment {}", crate::names::segment_name(*segment))]
    MissingSegment {
        /// The first missing segment number.
        segment: u64,
    },

    /// A sealed segment of a [`LogDir`](crate::LogDir) (any but the last) is damaged
    /// or does not end cleanly: only the last segment may end in a torn tail.
    #[error("segment {} is damaged: {source}", crate::names::segment_name(*segment))]
    BadSegment {
        /// The segment's number.
        segment: u64,
        /// What is wrong with it.
        #[source]
        source: Box<Error>,
    },

    /// The segment a read needs was purged (or lies before the first segment).
    #[error("segment {} was purged", crate::names::segment_name(*segment))]
    Purged {
        /// The segment's number.
        segment: u64,
    },

    /// Records a reader had reached were removed under it (by
    /// [`LogDir::truncate_after`](crate::LogDir::truncate_after), or, for a
    /// [`DirReader`](crate::DirReader) in another process, a segment file cut,
    /// replaced, removed, or rewritten in place: cut and grown again past what was
    /// read, or overwritten), so it stops rather than yield records that are gone
    /// or join bytes from before and after the change.
    #[error("log was truncated to {position} under a reader at {reader}")]
    TruncatedUnderReader {
        /// Where the log now ends (or the segment that was cut, at its new length;
        /// its start when the file was removed or replaced; the first byte that
        /// changed when it was rewritten in place).
        position: crate::position::LogPosition,
        /// Where the reader was.
        reader: crate::position::LogPosition,
    },

    /// A position that does not name a record boundary of the log (past its end, in
    /// a segment that does not exist, or inside a record).
    #[error("invalid log position {position}: {reason}")]
    InvalidPosition {
        /// The position given.
        position: crate::position::LogPosition,
        /// Why it is refused.
        reason: &'static str,
    },

    /// Another [`LogDir`](crate::LogDir), in this process or another, holds the
    /// directory's lock file (after trying again for half a second, as a lock a
    /// forked child still holds until it execs is let go within that time).
    #[error("log directory {} is locked by another writer", .path.display())]
    Locked {
        /// The directory.
        path: std::path::PathBuf,
    },

    /// A [`LogDir`](crate::LogDir) accepts no more appends because a rotation, a
    /// truncation or a write failed; records acknowledged before are durable.
    /// Reopening the directory recovers it.
    #[error("log directory stopped by a failure in segment {}; reopen it to recover", crate::names::segment_name(*segment))]
    DirPoisoned {
        /// The segment that was active.
        segment: u64,
        /// The failure.
        #[source]
        source: Arc<Error>,
    },

    /// A [`LogDir`](crate::LogDir) holds segments of another dialect than asked
    /// for: opened with [`LogDirOptions::dialect`](crate::LogDirOptions::dialect)
    /// other than the one its segments were written in (the directory's `DIALECT`
    /// file, or its segments' headers, tell), or shipped where only LevelDB's and
    /// RocksDB's segments can go (replication). Nothing was read or written.
    /// `Dialect::LevelDb` stands for LevelDB's and RocksDB's segments alike (one
    /// directory may hold both: they read the same way).
    #[error("log directory {} holds segments in {}'s dialect, not {}'s", .path.display(), dialect_name(*.found), dialect_name(*.expected))]
    WrongDialect {
        /// The directory.
        path: std::path::PathBuf,
        /// The dialect its segments are in.
        found: crate::format::fragment::Dialect,
        /// The dialect asked for.
        expected: crate::format::fragment::Dialect,
    },

    /// A replica needs segments its primary has purged: it cannot catch up, and
    /// must be seeded again from a copy of the primary (nothing is skipped).
    #[error("replica is too far behind: the primary's log now starts at {first_available}")]
    ReplicaTooFarBehind {
        /// The start of the primary's oldest segment.
        first_available: crate::position::LogPosition,
    },

    /// The two ends of a replication connection speak different protocol versions
    /// (each end sends its version first; both fail with this error).
    #[error("replication protocol version {theirs} is not supported (this end speaks {ours})")]
    ReplicaVersion {
        /// The version this end speaks.
        ours: u32,
        /// The version the other end sent.
        theirs: u32,
    },

    /// A replica holds records its primary's history does not: the two copies of
    /// the log forked (a replica promoted while the old primary went on appending,
    /// a [truncation](crate::LogDir::truncate_after) of records the replica holds,
    /// a replica past the primary's end). They share the log up to `common`, the
    /// end of the longest history both have (found from their
    /// [histories](crate::LogDir::history), then confirmed by the checksum of the
    /// replica's last record). Nothing was written to the replica:
    /// [`Replica::rewind`](crate::Replica::rewind) to `common` drops what the
    /// primary does not have, and the next
    /// [`sync_from`](crate::Replica::sync_from) continues the primary's history.
    /// `common` is [`LogPosition::START`](crate::LogPosition::START) when no
    /// shared record could be proven (the histories agree but the last records
    /// differ): rewinding there empties the replica, which then copies the log
    /// again.
    #[error("the replica's log (ending at {replica}) forked from the primary's (ending at {primary}): they share it up to {common}")]
    ReplicaDiverged {
        /// Where the log both copies share ends: rewind the replica there.
        common: crate::position::LogPosition,
        /// The replica's end.
        replica: crate::position::LogPosition,
        /// The primary's end.
        primary: crate::position::LogPosition,
    },

    /// A replica of one log connected to another log's primary (their
    /// [`LogId`](crate::LogId)s differ): refused on both ends before anything is
    /// shipped; nothing was written to the replica. A replica that holds no
    /// record takes the id of the first primary it copies.
    #[error("the replica holds log {replica}, the primary serves log {primary}")]
    ReplicaOfAnotherLog {
        /// The primary's log id.
        primary: crate::log_id::LogId,
        /// The replica's (zero for a copy made before logs had ids, whose last
        /// record the primary does not hold).
        replica: crate::log_id::LogId,
    },

    /// The other end of a replication connection broke the protocol (a garbage or
    /// truncated handshake, a message out of place or out of bounds, no message in
    /// time). Nothing that did not verify was written to the replica.
    #[error("replication protocol error: {reason}")]
    ReplicaProtocol {
        /// What was wrong.
        reason: Cow<'static, str>,
    },

    /// Fewer than [`sync_replicas`](crate::LogDirOptions::sync_replicas) replicas
    /// have been connected for [`replica_timeout`](crate::LogDirOptions::replica_timeout)
    /// or longer, so an append cannot be acknowledged as held by them. The log is not
    /// poisoned: appends succeed again once enough replicas are back. An append
    /// that fails with this may still be durable on the primary (and reach the
    /// replicas later): its outcome is unknown, as after a timeout.
    #[error("{connected} of the {needed} synchronous replicas needed are connected")]
    ReplicasUnavailable {
        /// How many replicas must hold each record.
        needed: usize,
        /// How many were connected.
        connected: usize,
    },

    /// The other end of a replication connection did not prove the shared secret
    /// (`LogDirOptions::replica_secret`, `Replica::set_secret`, feature
    /// `replica-auth`), or set none while this end
    /// requires one (or the reverse). Nothing of the log was sent or written.
    #[error("replication peer refused: {reason}")]
    ReplicaAuthentication {
        /// What was wrong.
        reason: Cow<'static, str>,
    },
}

/// A decoder's error, as the same variant of the top error (`?` converts it).
impl From<CodecError> for Error {
    fn from(error: CodecError) -> Error {
        match error {
            CodecError::Io(e) => Error::Io(e),
            CodecError::Corruption {
                offset,
                bytes,
                kind,
            } => Error::Corruption {
                offset,
                bytes,
                kind,
            },
            CodecError::IncompleteRecord { offset, bytes } => {
                Error::IncompleteRecord { offset, bytes }
            }
            CodecError::RecordTooLarge { offset, size, max } => {
                Error::RecordTooLarge { offset, size, max }
            }
        }
    }
}

/// A dialect's name in [`Error::WrongDialect`]'s message.
fn dialect_name(dialect: crate::format::fragment::Dialect) -> &'static str {
    match dialect {
        crate::format::fragment::Dialect::Pebble => "Pebble",
        _ => "LevelDB/RocksDB",
    }
}

/// How a followed log changed under its reader ([`Error::LogChanged`]).
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LogChange {
    /// The file is shorter (`len` bytes) than the end of the last record the
    /// follower returned (`read`; where it started, before any): it was truncated
    /// below what was returned, e.g. by a repair.
    Shrunk {
        /// The file's length now.
        len: u64,
        /// The end of the last record the follower returned (a follower never keeps
        /// bytes past it across a wait, since a writer may still change them).
        read: u64,
    },
    /// The path now names another file (another device or inode): the log was
    /// deleted and recreated, or renamed over.
    Replaced,
    /// The path no longer names a file.
    Removed,
    /// Bytes already read now differ, first at `offset`: the file was cut and grew
    /// again, or was written over in place (as preallocated space is).
    Rewritten {
        /// The first offset whose byte changed.
        offset: u64,
    },
}

impl fmt::Display for LogChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogChange::Shrunk { len, read } => write!(
                f,
                "the file shrank to {len} bytes, below the end of the last record returned at {read}"
            ),
            LogChange::Replaced => f.write_str("the path now names another file"),
            LogChange::Removed => f.write_str("the file was removed"),
            LogChange::Rewritten { offset } => {
                write!(f, "bytes already read were rewritten, from offset {offset}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decoder::error::Corruption;

    #[test]
    fn a_decode_error_keeps_its_variant_and_message() {
        let decoded = Corruption::new(42, 10, CorruptionKind::ChecksumMismatch).into_error();
        let message = decoded.to_string();
        let e = Error::from(decoded);
        assert!(matches!(
            e,
            Error::Corruption {
                offset: 42,
                bytes: 10,
                kind: CorruptionKind::ChecksumMismatch
            }
        ));
        assert_eq!(e.to_string(), message);
        let e = Error::from(CodecError::RecordTooLarge {
            offset: 7,
            size: 9,
            max: 8,
        });
        assert!(matches!(
            e,
            Error::RecordTooLarge {
                offset: 7,
                size: 9,
                max: 8
            }
        ));
        let e = Error::from(CodecError::IncompleteRecord {
            offset: 3,
            bytes: 4,
        });
        assert!(matches!(
            e,
            Error::IncompleteRecord {
                offset: 3,
                bytes: 4
            }
        ));
        let e = Error::from(CodecError::Io(io::Error::other("boom")));
        assert!(matches!(e, Error::Io(ref io) if io.to_string() == "boom"));
    }
}
