//! `Recovery`: what a decoder does with a damaged log, and its names on the
//! command line and in configuration.

use std::fmt;
use std::str::FromStr;

/// What the decoder does with a damaged log, modelled on RocksDB's `WALRecoveryMode`.
///
/// | mode                  | torn tail at a file's EOF | other damage                        |
/// |-----------------------|---------------------------|-------------------------------------|
/// | `TolerateTail`        | clean end                 | `Err`, ends the stream              |
/// | `AbsoluteConsistency` | `Err`                     | `Err`, ends the stream              |
/// | `PointInTime`         | clean end                 | reported, then a clean end there    |
/// | `SkipCorrupted`       | clean end                 | reported and skipped, as LevelDB    |
///
/// The torn-tail column is for a decoder reading a file
/// ([`LogInput::File`](crate::LogInput::File), as [`LogReader::open`](crate::LogReader::open),
/// [`LogTailer`](crate::LogTailer), [`LogDir`](crate::LogDir) and the CLI read): three
/// modes keep LevelDB's tolerant tail, where a writer that died mid-record leaves
/// the log's end. A decoder reading a stream (the default,
/// [`LogInput::Stream`](crate::LogInput::Stream)) ends with
/// [`CodecError::IncompleteRecord`](crate::CodecError::IncompleteRecord) in every mode when the
/// stream stops inside a record (`AbsoluteConsistency` with its own error first):
/// a cut stream is a transfer that failed, not a log's end.
///
/// In Pebble's dialect ([`Dialect::Pebble`](crate::Dialect::Pebble)) "other damage"
/// is only what Pebble's reader calls corruption: an invalid chunk that a later
/// WAL-sync fragment promised synced. An invalid chunk nothing after it promised is
/// the log's end (torn, or the recycled file's old bytes): a clean end in
/// `TolerateTail` and `PointInTime`, an error in `AbsoluteConsistency` (a clean
/// close ends with the EOF trailer, which every mode takes as the end).
/// `SkipCorrupted` reports and skips invalid chunks as LevelDB does.
///
/// An error's byte count is what the damage covers: the rest of the block, or of
/// the log when it ends first (a 14-byte log whose one record fails its checksum
/// reports 14 bytes in every mode).
///
/// A read error of the source (the `AsyncRead` under a `FramedRead`) ends the
/// stream with [`CodecError::Io`](crate::CodecError::Io) in every mode. LevelDB's and
/// RocksDB's readers instead drop the block, report "read error" with its bytes,
/// and go on; a Tokio codec never sees the bytes that failed, and the caller may
/// retry the read, so the error is handed back rather than skipped.
///
/// A *torn tail* is what a writer that died mid-write leaves: a header cut by EOF, a
/// payload cut by EOF, or a fragmented record with no LAST fragment before EOF. In a
/// file grown ahead with zeros ([`WriterOptions::preallocate`](crate::WriterOptions::preallocate))
/// the same crash leaves a fragment whose payload ends in zeros that run on to EOF,
/// so it fails its checksum: with nothing but zeros after it, that is a torn tail too
/// (`SkipCorrupted` still reports it, as LevelDB's reader does). Only zeros that
/// begin at a 512-byte sector boundary inside the fragment count: that is where a
/// write can stop.
///
/// ```
/// use tokio_util::codec::Decoder;
/// use walcodec::{LogDecoder, LogEncoder, LogInput, Recovery};
///
/// let mut log = bytes::BytesMut::new();
/// LogEncoder::new().encode_record(b"complete", &mut log);
/// LogEncoder::with_offset(log.len() as u64).encode_record(b"torn", &mut log);
/// log.truncate(log.len() - 2); // the writer died mid-record
///
/// for recovery in Recovery::ALL {
///     let mut decoder = LogDecoder::builder()
///         .recovery(recovery)
///         .input(LogInput::File)
///         .build();
///     let mut src = log.clone();
///     let first = decoder.decode_eof(&mut src);
///     if recovery == Recovery::AbsoluteConsistency {
///         // A clean close was promised: a torn tail is an error.
///         assert!(first.is_ok() && decoder.decode_eof(&mut src).is_err());
///     } else {
///         assert_eq!(first.unwrap().unwrap(), &b"complete"[..]);
///         assert_eq!(decoder.decode_eof(&mut src).unwrap(), None);
///         assert!(decoder.has_incomplete_tail());
///     }
/// }
/// ```
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Recovery {
    /// A torn tail is the end of the log; any other damage is an error.
    #[default]
    TolerateTail,
    /// Any damage, a torn tail included, is an error: for logs that were closed cleanly.
    AbsoluteConsistency,
    /// Stop quietly at the first damage: everything before it is returned, nothing
    /// after. [`LogDecoder::halted_at`](crate::LogDecoder::halted_at) tells where the good prefix ends.
    PointInTime,
    /// LevelDB's reader: report each damaged piece and go on with the next block.
    SkipCorrupted,
}

/// The corruption callback, shared by every decoder a builder builds (and by a
/// decoder's clones): reports from all of them arrive at the one closure.
impl Recovery {
    /// Every mode, in the order of the table above.
    pub const ALL: [Recovery; 4] = [
        Recovery::TolerateTail,
        Recovery::AbsoluteConsistency,
        Recovery::PointInTime,
        Recovery::SkipCorrupted,
    ];

    /// The mode's name in kebab case, as `Display` prints it and `FromStr` reads it
    /// (e.g. `"tolerate-tail"`).
    pub const fn name(self) -> &'static str {
        match self {
            Recovery::TolerateTail => "tolerate-tail",
            Recovery::AbsoluteConsistency => "absolute-consistency",
            Recovery::PointInTime => "point-in-time",
            Recovery::SkipCorrupted => "skip-corrupted",
        }
    }

    /// RocksDB's name for the mode (`WALRecoveryMode`).
    pub const fn rocksdb_name(self) -> &'static str {
        match self {
            Recovery::TolerateTail => "kTolerateCorruptedTailRecords",
            Recovery::AbsoluteConsistency => "kAbsoluteConsistency",
            Recovery::PointInTime => "kPointInTimeRecovery",
            Recovery::SkipCorrupted => "kSkipAnyCorruptedRecords",
        }
    }
}

/// Prints the kebab-case name: `tolerate-tail`, `absolute-consistency`,
/// `point-in-time`, `skip-corrupted`.
impl fmt::Display for Recovery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name [`Recovery::from_str`] does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseRecoveryError {
    input: String,
}

impl fmt::Display for ParseRecoveryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown recovery mode {:?} (expected tolerate-tail, absolute-consistency, point-in-time or skip-corrupted)",
            self.input
        )
    }
}

impl std::error::Error for ParseRecoveryError {}

/// Reads the kebab-case name (`Display`'s), case-insensitively and with `_` for
/// `-`, or RocksDB's `WALRecoveryMode` name.
///
/// ```
/// use walcodec::Recovery;
///
/// let mode: Recovery = "point-in-time".parse().unwrap();
/// assert_eq!(mode, Recovery::PointInTime);
/// assert_eq!("kSkipAnyCorruptedRecords".parse(), Ok(Recovery::SkipCorrupted));
/// assert_eq!(Recovery::TolerateTail.to_string(), "tolerate-tail");
/// assert!("sometimes".parse::<Recovery>().is_err());
/// ```
impl FromStr for Recovery {
    type Err = ParseRecoveryError;

    fn from_str(input: &str) -> Result<Recovery, ParseRecoveryError> {
        let wanted = input.trim().to_ascii_lowercase().replace('_', "-");
        Recovery::ALL
            .into_iter()
            .find(|mode| mode.name() == wanted || mode.rocksdb_name() == input.trim())
            .ok_or_else(|| ParseRecoveryError {
                input: input.to_owned(),
            })
    }
}
