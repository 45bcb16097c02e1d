//! walcodec: the LevelDB log format as a first-class Tokio codec.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), walcodec::Error> {
//! use futures::{SinkExt, TryStreamExt};
//! use tokio_util::codec::{FramedRead, FramedWrite};
//! use walcodec::{LogDecoder, LogEncoder};
//!
//! // Write three records into an in-memory log, exactly as LevelDB would.
//! let mut log = Vec::new();
//! let mut sink = FramedWrite::new(&mut log, LogEncoder::new());
//! for record in ["alpha", "", "gamma"] {
//!     sink.send(record.as_bytes()).await?;
//! }
//!
//! // Read them back.
//! let records: Vec<_> = FramedRead::new(&log[..], LogDecoder::new()).try_collect().await?;
//! assert_eq!(records, ["alpha", "", "gamma"].map(str::as_bytes));
//! # Ok(())
//! # }
//! ```
//!
//! The format: a log is a sequence of 32 KiB blocks; each record is cut into
//! fragments with a 7-byte header (masked crc32c, length, type). See [`format`](mod@format).
//!
//! Design goal: byte-identical output to LevelDB's writer, and a reader that takes
//! any chunking of the bytes (files, sockets, pipes), bounds every allocation, and
//! reports exactly what it drops.
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]
#![doc(test(attr(deny(warnings))))]

mod codec;
mod decoder;
mod encoder;
mod error;
pub mod format;
mod framed;
pub mod physical;
mod reader;
mod record_decoder;
pub mod recordio;
mod repair;
mod writer;

pub use codec::LogCodec;
pub use decoder::{
    DecodeStats, LogDecoder, LogDecoderBuilder, ParseRecoveryError, Recovery,
    DEFAULT_MAX_RECORD_BYTES,
};
pub use encoder::LogEncoder;
pub use error::{Corruption, CorruptionKind, Error, LogChange};
pub use format::{block_start, Position, RecordType, BLOCK_SIZE, HEADER_SIZE};
pub use framed::{FRAMED_READ_CAPACITY, FRAMED_WRITE_BUFFER};
pub use reader::{
    split_ranges, LogReader, LogRecord, LogTailer, ReadAhead, ReadAheadBuilder,
    DEFAULT_CHUNKS_IN_FLIGHT, DEFAULT_CHUNK_BYTES, DEFAULT_POLL_INTERVAL,
};
pub use record_decoder::LogRecordDecoder;
pub use recordio::{RecordIoCodec, RecordIoCodecBuilder, RecordIoError};
pub use repair::{repair_log, scan_log, RepairOptions, TailScan};
#[allow(deprecated)]
pub use repair::{repair_log_with_limit, scan_log_with_limit};
pub use writer::{
    AsyncLogWriter, WriterOptions, WriterStats, DEFAULT_IDLE_SPIN, DEFAULT_MAX_BATCH_BYTES,
    DEFAULT_MAX_QUEUED_BYTES,
};

/// Hooks for this crate's own tests (fault injection). Not a stable API.
#[doc(hidden)]
pub mod testing {
    pub use crate::writer::{FileStorage, Storage};
}
