//! `LogRecordDecoder`: the decoder for `FramedRead` users who want each record's
//! position with it, so a checkpoint needs no side call.

use bytes::{Bytes, BytesMut};
use tokio_util::codec::Decoder;

use crate::decoder::error::CodecError;
use crate::decoder::LogDecoder;
use crate::format::Position;

/// One record of a log and where it sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    /// Where the record sits in the log; `position.end` is a checkpoint: reading with
    /// `start_offset(position.end)` resumes with the next record.
    pub position: Position,
    /// The record's payload.
    pub data: Bytes,
}

/// A [`LogDecoder`] whose items are [`LogRecord`]s: each record's bytes with its
/// [`Position`](crate::Position), whose `end` is a checkpoint to resume from.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), walcodec::Error> {
/// use bytes::BytesMut;
/// use futures::TryStreamExt;
/// use tokio_util::codec::FramedRead;
/// use walcodec::{LogEncoder, LogRecordDecoder};
///
/// let mut log = BytesMut::new();
/// let mut encoder = LogEncoder::new();
/// encoder.encode_record(b"one", &mut log);
/// encoder.encode_record(b"two", &mut log);
///
/// let records: Vec<_> = FramedRead::new(&log[..], LogRecordDecoder::new())
///     .try_collect()
///     .await?;
/// assert_eq!(records[1].data, &b"two"[..]);
/// assert_eq!((records[1].position.start, records[1].position.end), (10, 20));
/// # Ok(())
/// # }
/// ```
///
/// Any configured decoder converts: `LogRecordDecoder::from(builder.build())`.
#[derive(Debug, Clone, Default)]
pub struct LogRecordDecoder {
    decoder: LogDecoder,
}

impl LogRecordDecoder {
    /// A decoder with [`LogDecoder::new`]'s defaults.
    pub fn new() -> LogRecordDecoder {
        LogRecordDecoder::default()
    }

    /// The decoder underneath, for its offsets and statistics.
    pub fn decoder(&self) -> &LogDecoder {
        &self.decoder
    }

    /// Gives back the decoder underneath.
    pub fn into_inner(self) -> LogDecoder {
        self.decoder
    }

    fn positioned(&self, data: Option<bytes::Bytes>) -> Option<LogRecord> {
        data.map(|data| LogRecord {
            position: self
                .decoder
                .last_record()
                .expect("a returned record has a position"),
            data,
        })
    }
}

impl From<LogDecoder> for LogRecordDecoder {
    fn from(decoder: LogDecoder) -> LogRecordDecoder {
        LogRecordDecoder { decoder }
    }
}

impl Decoder for LogRecordDecoder {
    type Item = LogRecord;
    type Error = CodecError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<LogRecord>, CodecError> {
        let data = self.decoder.decode(src)?;
        Ok(self.positioned(data))
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<LogRecord>, CodecError> {
        let data = self.decoder.decode_eof(src)?;
        Ok(self.positioned(data))
    }
}
