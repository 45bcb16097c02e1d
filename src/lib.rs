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
//! RocksDB's WAL dialect: [`LogDecoderBuilder::dialect`] with
//! [`Dialect::RocksDb`] and [`LogDecoderBuilder::log_number`] read its WALs
//! (recyclable fragments, a reused file's old records telling where the log ends,
//! compressed records inflated within `max_record_bytes`, metadata records kept, not
//! returned); [`LogEncoder::builder`] and [`WriterOptions::format`] write its
//! recyclable and (feature `zstd`) compressed WALs byte for byte as RocksDB does;
//! [`fragment`] is the one parser of both header layouts that every reader stands on,
//! [`metadata`] parses the metadata records and [`write_batch`] the WriteBatches both
//! engines store in their records.
//!
//! Design goal: byte-identical output to LevelDB's writer, and a reader that takes
//! any chunking of the bytes (files, sockets, pipes), bounds every allocation, and
//! reports exactly what it drops.
//!
//! # Where to start
//!
//! - In memory or over any stream: [`LogEncoder`] and [`LogDecoder`] (or
//!   [`LogRecordDecoder`], whose items carry their [`Position`]) with tokio-util's
//!   `FramedWrite` / `FramedRead`; [`LogCodec`] for both directions of a socket.
//! - Files: [`LogReader::open`], [`LogReader::open_at`] (from a checkpoint),
//!   [`LogReader::open_range`] with [`split_ranges`] (parallel reads),
//!   [`LogTailer`] (a live log).
//! - Durable appends from many tasks: [`AsyncLogWriter`] (group commit) on one file;
//!   [`LogDir`] for a log of segments that lives for months (rotation, retention,
//!   recycling, checkpoints as [`LogPosition`]s), read and followed with
//!   [`DirReader`] in any process.
//! - Shipping a log to replicas: [`LogDir::serve_replica`] on the primary,
//!   [`Replica`] on the copy (over TCP, TLS, any byte stream), `promote` on failover.
//! - Damage: [`Recovery`] modes, [`LogDecoderBuilder::on_corruption`] reports,
//!   [`scan_log`] / [`repair_log`] for a torn tail; [`inspect`] for a checker's pass
//!   over a whole log (what `walcodec verify` prints, typed, read on threads).
//! - Mesos RecordIO: [`RecordIoCodec`].
//!
//! # Cargo features
//!
//! | feature | what it adds |
//! |---|---|
//! | `cli` | the `walcodec` command-line tool (dump, verify, stat, repair, cat, write, tail) |
//! | `crc-fast` | fragment checksums through the `crc-fast` crate: the same bytes, about twice the crc throughput from 1 KiB records up on x86-64 |
//! | `zstd` | RocksDB's WAL compression: `LogFormat::zstd` writes compressed WALs, `LogDecoder` in RocksDB's dialect inflates their records within a limit (builds libzstd: needs a C compiler) |
//! | `serde` | `Serialize`/`Deserialize` for the plain-data types; a [`LogPosition`] is the string `000007:1234` in human-readable formats |
//! | `tracing` | events and spans through the `tracing` crate: torn tails cut, damage skipped, a poisoned writer, slow syncs, opens and recoveries, rotation, purge, retention, recycling |
//! | `metrics` | counters, histograms and gauges through the `metrics` facade, labelled `log` with [`WriterOptions::name`] / [`LogDirOptions::name`] |
//!
//! None is on by default: the library depends on tokio, tokio-util, bytes, crc32c,
//! futures and thiserror only. Without `tracing` and `metrics` the instrumentation
//! compiles to nothing.
#![forbid(unsafe_code)]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]
#![doc(test(attr(deny(warnings))))]

// The layers, bottom up: the bytes (`format`), assembling records (`decoder`), the
// tokio-util codecs (`codec`), files (`reader`, `inspect`, `writer`), the segmented
// directory (`logdir`), shipping it to replicas (`replica`). Leaves every layer may use:
// `error`, `position`, `log_id`, `observe`, `read_at`, `open`, `names`. This file only
// declares and re-exports.
mod codec;
mod decoder;
mod error;
pub mod format;
pub mod inspect;
mod log_id;
mod logdir;
mod names;
pub mod observe;
mod open;
mod position;
mod read_at;
mod reader;
mod replica;
mod writer;

pub use codec::recordio;
#[cfg(feature = "zstd")]
pub use format::compression;
pub use format::{detect, fragment, metadata, physical, write_batch};

pub use codec::encoder::{LogEncoder, LogEncoderBuilder, LogFormat};
pub use codec::framed::{FRAMED_READ_CAPACITY, FRAMED_WRITE_BUFFER};
pub use codec::log_codec::LogCodec;
pub use codec::record_decoder::LogRecordDecoder;
pub use codec::recordio::{RecordIoCodec, RecordIoCodecBuilder, RecordIoError};
pub use decoder::error::{CodecError, Corruption, CorruptionKind};
pub use decoder::{
    DecodeStats, LogDecoder, LogDecoderBuilder, LogInput, ParseRecoveryError, Recovery,
    DEFAULT_MAX_RECORD_BYTES,
};
pub use error::{Error, LogChange};
pub use format::fragment::Dialect;
pub use format::{block_start, Position, RecordType, BLOCK_SIZE, HEADER_SIZE};
pub use logdir::{
    DirReader, DirRecord, Epoch, History, LogDir, LogDirOptions, LogId, LogPosition,
    ParsePositionError, RetentionHold, SegmentInfo, SegmentList, DEFAULT_WAKE_INTERVAL,
};
pub use reader::record::RecordReader;
pub use reader::repair::{repair_log, scan_log, RepairOptions, TailScan};
pub use reader::{
    split_ranges, ChunkReader, LogReader, LogRecord, LogTailer, ReadAhead, ReadAheadBuilder,
    CHUNK_ALIGN,
};
/// The version of the replication protocol (see [`Replica`]).
pub use replica::PROTOCOL_VERSION as REPLICATION_PROTOCOL_VERSION;
pub use replica::{Replica, ShipStats, SyncEnd};
pub use writer::record_writer::{LogWriter, RecordWriter};
pub use writer::{AsyncLogWriter, WriterOptions, WriterStats};

// Every Rust snippet of docs/ is compiled (and, unless `no_run`, run) as a test. The
// README's are, in walcodec-raft (its Raft example needs that crate).
#[cfg(doctest)]
mod docs {
    #[doc = include_str!("../docs/codec.md")]
    mod codec {}
    #[doc = include_str!("../docs/reading-files.md")]
    mod reading_files {}
    #[doc = include_str!("../docs/writer.md")]
    mod writer {}
    #[doc = include_str!("../docs/logdir.md")]
    mod logdir {}
    #[doc = include_str!("../docs/observability.md")]
    mod observability {}
    #[doc = include_str!("../docs/replication.md")]
    mod replication {}
    #[doc = include_str!("../docs/dialects.md")]
    mod dialects {}
    #[doc = include_str!("../docs/streaming.md")]
    mod streaming {}
    #[doc = include_str!("../docs/cli.md")]
    mod cli {}
}

/// Hooks for this crate's own tests (fault injection). Not a stable API.
#[doc(hidden)]
pub mod testing {
    pub use crate::logdir::{DirStorage, OsDirStorage};
    pub use crate::writer::report::batch_report_cost;
    pub use crate::writer::{FileStorage, Storage};
}
