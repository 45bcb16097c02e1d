//! `LogInput`: what the end of a decoder's input means.

/// What a [`LogDecoder`](crate::LogDecoder) reads, which decides what the end of
/// its input means when it falls inside a record.
///
/// | input    | its end inside a record is                 | so, at EOF                                                                 |
/// |----------|--------------------------------------------|----------------------------------------------------------------------------|
/// | `Stream` | a cut: the sender stopped or the link broke | [`CodecError::IncompleteRecord`](crate::CodecError::IncompleteRecord), in every [`Recovery`](crate::Recovery) mode |
/// | `File`   | a torn tail: a writer died mid-write       | the log's end in `TolerateTail`, `PointInTime` and `SkipCorrupted` (LevelDB's reader drops it silently); `Err` in `AbsoluteConsistency` |
///
/// Either way [`LogDecoder::has_incomplete_tail`](crate::LogDecoder::has_incomplete_tail)
/// says the input ended inside a record, and nothing of the cut record is
/// consumed. `Stream` is the default, so a relay built the obvious way,
/// `FramedRead` to `FramedWrite`, fails when its source is cut mid-record rather
/// than closing its output as if the log were whole. The readers of files by path
/// ([`LogReader::open`](crate::LogReader::open) and its siblings, [`LogTailer`](crate::LogTailer),
/// [`LogDir`](crate::LogDir) and its readers, the CLI) read as `File`.
///
/// ```
/// use tokio_util::codec::Decoder;
/// use walcodec::{CodecError, LogDecoder, LogEncoder, LogInput};
///
/// let mut log = bytes::BytesMut::new();
/// let mut encoder = LogEncoder::new();
/// encoder.encode_record(b"whole", &mut log);
/// encoder.encode_record(&[7; 1000], &mut log);
/// log.truncate(log.len() - 400); // cut inside the second record
///
/// // A stream: the cut is an error once the whole records are out.
/// let mut decoder = LogDecoder::new();
/// let mut src = log.clone();
/// assert_eq!(decoder.decode_eof(&mut src).unwrap().unwrap(), &b"whole"[..]);
/// assert!(matches!(
///     decoder.decode_eof(&mut src),
///     Err(CodecError::IncompleteRecord { offset: 12, bytes: 607 })
/// ));
///
/// // A file: a torn tail, the log's end.
/// let mut decoder = LogDecoder::builder().input(LogInput::File).build();
/// let mut src = log.clone();
/// assert_eq!(decoder.decode_eof(&mut src).unwrap().unwrap(), &b"whole"[..]);
/// assert_eq!(decoder.decode_eof(&mut src).unwrap(), None);
/// assert!(decoder.has_incomplete_tail());
/// ```
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum LogInput {
    /// A stream (a socket, a pipe, a buffer handed over whole): its end inside a
    /// record is [`CodecError::IncompleteRecord`](crate::CodecError::IncompleteRecord).
    #[default]
    Stream,
    /// A file a writer may have died writing: its end inside a record is a torn
    /// tail, handled by the [`Recovery`](crate::Recovery) mode.
    File,
}
