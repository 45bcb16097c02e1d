//! Errors and corruption reports of the log codec.

use std::borrow::Cow;
use std::fmt;
use std::io;
use std::sync::Arc;

/// Errors of the LevelDB log codec and writer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The underlying source or sink failed.
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),

    /// The log is damaged at `offset`, in a way the decoder's [`Recovery`] mode does
    /// not skip.
    ///
    /// [`Recovery`]: crate::Recovery
    #[error("corrupt log at offset {offset}: {reason} ({bytes} bytes)")]
    Corruption {
        /// Log offset of the damaged fragment (or of the record it belonged to).
        offset: u64,
        /// Bytes the damage covers.
        bytes: u64,
        /// What is wrong, in LevelDB's words.
        reason: CorruptionKind,
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

    /// The [`AsyncLogWriter`](crate::AsyncLogWriter) was closed, or its flusher is gone.
    #[error("log writer is closed")]
    Closed,
}

/// What is wrong with a damaged piece of a log.
///
/// Displays as the reason text LevelDB's `log::Reader` gives (without its numeric
/// suffixes), so reports can be compared with LevelDB's.
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
}

impl CorruptionKind {
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
            reason: self.kind,
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
