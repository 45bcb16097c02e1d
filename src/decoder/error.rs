//! The codecs' error: only what decoding and encoding a log's bytes can raise.
//!
//! A [`FramedRead`](tokio_util::codec::FramedRead) over a [`LogDecoder`](crate::LogDecoder)
//! (or a [`LogRecordDecoder`](crate::LogRecordDecoder), a [`LogCodec`](crate::LogCodec))
//! yields [`CodecError`]: an I/O failure of the source, damage the recovery mode does not
//! skip, a stream cut inside a record, or a record over the limit. Encoding fails only with
//! its sink ([`CodecError::Io`]); it is the same type so that a decoder's stream forwards
//! into an encoder's sink as written (`FramedRead::new(src, LogDecoder::new())
//! .forward(FramedWrite::new(dst, LogEncoder::new()))`). The layers above (files, the
//! directory, replication) wrap it into [`Error`](crate::Error) through `From`, variant for
//! variant, so a `LogReader` or `LogDir` user still matches one type.

use std::borrow::Cow;
use std::fmt;
use std::io;

/// What decoding and encoding a log can raise: the `Decoder::Error` of
/// [`LogDecoder`](crate::LogDecoder), [`LogRecordDecoder`](crate::LogRecordDecoder) and
/// [`LogCodec`](crate::LogCodec), the `Encoder::Error` of [`LogEncoder`](crate::LogEncoder)
/// and `LogCodec` (which only ever raise [`CodecError::Io`], from their sink).
///
/// Each variant has a namesake in [`Error`](crate::Error), which takes a `CodecError`
/// through `From` (`?` converts it), with the same message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
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
}

impl CodecError {
    /// See [`CorruptionKind::unwritten_while_live`].
    pub(crate) fn unwritten_while_live(&self) -> bool {
        matches!(self, CodecError::Corruption { kind, .. } if kind.unwritten_while_live())
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

    pub(crate) fn into_error(self) -> CodecError {
        CodecError::Corruption {
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
