//! Errors and corruption reports of the log codec.

use std::borrow::Cow;
use std::fmt;
use std::io;
use std::sync::Arc;

/// Errors of the LevelDB log codec and writer.
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
        /// What is wrong (as [`Corruption::kind`]; it displays as LevelDB's reason
        /// text, [`Corruption::reason`]).
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

impl Error {
    /// See [`CorruptionKind::unwritten_while_live`].
    pub(crate) fn unwritten_while_live(&self) -> bool {
        matches!(self, Error::Corruption { kind, .. } if kind.unwritten_while_live())
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

/// What is wrong with a damaged piece of a log.
///
/// Displays as the reason text LevelDB's `log::Reader` gives (without its numeric
/// suffixes), so reports can be compared with LevelDB's.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CorruptionKind {
    /// The stored checksum does not match the fragment.
    ChecksumMismatch,
    /// The length field runs past the end of the block.
    BadRecordLength,
    /// A fragment with a valid checksum has a type this reader does not know.
    UnknownRecordType(u8),
    /// A MIDDLE or LAST fragment with no FIRST before it.
    MissingStart,
    /// A FULL or FIRST fragment arrived while a fragmented record was open.
    PartialRecordWithoutEnd,
    /// Damage inside a fragmented record abandoned the part read so far.
    ErrorInMiddleOfRecord,
    /// A record grew past `max_record_bytes`.
    RecordTooLarge,
    /// The log ends inside a record (reported only by `Recovery::AbsoluteConsistency`).
    TruncatedTail,
    /// Zero fill from the first byte of a block, with data after it: no writer of
    /// the format leaves that, so the block's records were lost (a zeroed or
    /// unwritten block). `Recovery::SkipCorrupted` skips it silently, as LevelDB
    /// does, and counts it in [`DecodeStats::zeroed_blocks`](crate::DecodeStats::zeroed_blocks).
    /// A follower waits at it while the log is live (a read racing the writer sees
    /// the same), and reports it once the segment is sealed.
    ZeroedBlock,
    /// RocksDB: a fragment left from the file's earlier use (a recyclable header
    /// with another log number) cut the record being read; the log ends there
    /// (RocksDB's "error reading trailing data due to encountering old record").
    OldRecord,
    /// RocksDB: a recyclable fragment after the log's legacy data records. A
    /// recycled WAL starts with recyclable fragments; this is no such log.
    UnexpectedRecyclable,
    /// RocksDB: a metadata record (types 9, 10, 11, 130, 131) between the fragments
    /// of a record, which it cut.
    MetadataInRecord,
    /// RocksDB: a metadata record of this type whose payload does not parse.
    BadMetadataRecord(u8),
    /// RocksDB: a compression-type record (type 9) after data or a first one. It is
    /// applied all the same, as RocksDB does.
    LateCompressionType,
    /// RocksDB: the records are compressed with a type this reader cannot inflate
    /// (RocksDB's number): any but zstd, or zstd without the crate's `zstd` feature.
    UnsupportedCompression(u32),
    /// RocksDB: a compressed record that does not inflate (not a zstd frame, a
    /// damaged frame, bytes after it, or a frame cut short).
    BadCompressedRecord,
    /// Pebble: a zeroed header where a fragment should be (Pebble's
    /// `ErrZeroedChunk`): damage when a later WAL-sync fragment promised the log
    /// synced past it, else the log's end (preallocated or recycled space).
    ZeroedChunk,
    /// A follower's: a zeroed header in the middle of a block of a log that is not
    /// recycled, with data after it, in a segment sealed since (a later one
    /// exists). A writer pads with zeros only from where no header fits to the
    /// block's end, so the records from the zeros on were lost. A reader of a
    /// finished log skips such zeros to the block's end, as LevelDB does; a
    /// follower cannot, since a read racing the writer can see a later page of one
    /// write before an earlier one: while the log is live it reads them again.
    ZeroFillBeforeData,
}

impl CorruptionKind {
    /// Whether a follower of a live log takes this for bytes the writer has not
    /// finished writing, however often it reads them again: it waits, and it is
    /// damage only once the log is sealed. Zeros with data after them are what a
    /// read racing the writer sees (a later page of a write before an earlier
    /// one), and a second look can race again.
    pub(crate) fn unwritten_while_live(&self) -> bool {
        matches!(
            self,
            CorruptionKind::ZeroFillBeforeData | CorruptionKind::ZeroedBlock
        )
    }

    /// The reason text, as LevelDB words it.
    pub fn reason(&self) -> Cow<'static, str> {
        match self {
            CorruptionKind::ChecksumMismatch => "checksum mismatch".into(),
            CorruptionKind::BadRecordLength => "bad record length".into(),
            CorruptionKind::UnknownRecordType(t) => format!("unknown record type {t}").into(),
            CorruptionKind::MissingStart => "missing start of fragmented record".into(),
            CorruptionKind::PartialRecordWithoutEnd => "partial record without end".into(),
            CorruptionKind::ErrorInMiddleOfRecord => "error in middle of record".into(),
            CorruptionKind::RecordTooLarge => "record too large".into(),
            CorruptionKind::TruncatedTail => "truncated record at end of log".into(),
            CorruptionKind::ZeroedBlock => "zeroed block followed by data".into(),
            CorruptionKind::OldRecord => {
                "error reading trailing data due to encountering old record".into()
            }
            CorruptionKind::UnexpectedRecyclable => {
                "recyclable fragment in a log that is not recycled".into()
            }
            CorruptionKind::MetadataInRecord => {
                "metadata record interspersed partial record".into()
            }
            CorruptionKind::BadMetadataRecord(t) => {
                format!("could not decode metadata record of type {t}").into()
            }
            CorruptionKind::LateCompressionType => "SetCompressionType not the first record".into(),
            CorruptionKind::UnsupportedCompression(7) => {
                "WAL compressed with zstd: build walcodec with its `zstd` feature to read it".into()
            }
            CorruptionKind::UnsupportedCompression(t) => {
                format!("unsupported WAL compression type {t}").into()
            }
            CorruptionKind::BadCompressedRecord => "corrupted compressed record".into(),
            CorruptionKind::ZeroedChunk => "zeroed chunk".into(),
            CorruptionKind::ZeroFillBeforeData => "zero fill followed by data".into(),
        }
    }
}

impl fmt::Display for CorruptionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason())
    }
}

/// One piece of a log that a reader dropped, as handed to the
/// [`on_corruption`](crate::LogDecoderBuilder::on_corruption) reporter.
///
/// Displays as LevelDB's log line: `offset N: dropping B bytes; reason`.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corruption {
    offset: u64,
    bytes: u64,
    kind: CorruptionKind,
    reason: Cow<'static, str>,
}

impl Corruption {
    pub(crate) fn new(offset: u64, bytes: u64, kind: CorruptionKind) -> Corruption {
        Corruption {
            offset,
            bytes,
            kind,
            reason: kind.reason(),
        }
    }

    /// A report whose reason text says more than `kind`'s (e.g. zstd's error).
    pub(crate) fn with_reason(
        offset: u64,
        bytes: u64,
        kind: CorruptionKind,
        reason: String,
    ) -> Corruption {
        Corruption {
            offset,
            bytes,
            kind,
            reason: reason.into(),
        }
    }

    /// Log offset of the damaged fragment, or of the first fragment of the record it
    /// abandoned.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// How many bytes were dropped (LevelDB's `bytes` argument to its reporter).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The reason text, as LevelDB words it (e.g. `"checksum mismatch"`).
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The reason as a value to match on.
    pub fn kind(&self) -> CorruptionKind {
        self.kind
    }

    pub(crate) fn into_error(self) -> Error {
        Error::Corruption {
            offset: self.offset,
            bytes: self.bytes,
            kind: self.kind,
        }
    }
}

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "offset {}: dropping {} bytes; {}",
            self.offset, self.bytes, self.reason
        )
    }
}

/// A corruption is an error in its own right where a reader of a record's bytes
/// ([`RecordReader`](crate::RecordReader)) returns it as an [`io::Error`]'s source.
impl std::error::Error for Corruption {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_read_like_leveldb() {
        let c = Corruption::new(42, 10, CorruptionKind::ChecksumMismatch);
        assert_eq!(
            c.to_string(),
            "offset 42: dropping 10 bytes; checksum mismatch"
        );
        assert_eq!(
            CorruptionKind::UnknownRecordType(104).to_string(),
            "unknown record type 104"
        );
        let e = c.into_error();
        assert!(e.to_string().contains("offset 42"));
        assert!(e.to_string().contains("checksum mismatch"));
    }
}
