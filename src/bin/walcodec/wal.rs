//! What the pass over a log learns of a RocksDB WAL beyond LevelDB's format, for the
//! summaries of `verify` and `stat` (printed only for a log read as RocksDB's):
//!
//! ```text
//! dialect: rocksdb, log N (from the file name)
//! headers: A of 7 bytes, B of 11 bytes (recyclable)
//! compression: zstd (type-9 record at offset 0)        or "none (no type-9 record)"
//! metadata records: T timestamp-size, P predecessor-WAL (log L, S bytes, last sequence Q), M malformed
//! ignorable fragments: N                               unknown types with bit 7 set
//! old fragments: N (B bytes) from offset O: log N ends there, old log M follows
//! ```

use std::io::{self, Write};

use walcodec::metadata::{PredecessorWalInfo, WalCompressionType};
use walcodec::physical::{Metadata, Piece};

use crate::dialect::LogChoice;
use crate::json::JsonObject;

/// Counts of a RocksDB WAL's pieces.
#[derive(Debug, Default, Clone)]
pub(crate) struct WalFacts {
    /// Complete fragments by header size (old ones excepted).
    pub(crate) legacy_headers: u64,
    pub(crate) recyclable_headers: u64,
    /// Type-9 records, and the first one's offset and value.
    pub(crate) compression_records: u64,
    pub(crate) compression: Option<(u64, WalCompressionType)>,
    pub(crate) timestamp_size_records: u64,
    pub(crate) predecessor_records: u64,
    pub(crate) predecessor: Option<PredecessorWalInfo>,
    /// Metadata records whose payload does not parse.
    pub(crate) malformed_metadata: u64,
    pub(crate) ignorable: u64,
    pub(crate) old_fragments: u64,
    pub(crate) old_bytes: u64,
    /// The first old fragment: its offset and log number (where the log ends).
    pub(crate) first_old: Option<(u64, u32)>,
}

impl WalFacts {
    /// Counts `piece`.
    pub(crate) fn add(&mut self, piece: &Piece<'_>) {
        match *piece {
            Piece::Fragment {
                fragment,
                checksum_ok: true,
                ..
            } => {
                self.count_header(fragment.header_len());
                self.ignorable += u64::from(fragment.is_ignorable());
            }
            Piece::Metadata {
                fragment, record, ..
            } => {
                self.count_header(fragment.header_len());
                match record {
                    Ok(Metadata::Compression(compression)) => {
                        self.compression_records += 1;
                        self.compression
                            .get_or_insert((piece.offset(), compression));
                    }
                    Ok(Metadata::TimestampSizes(_)) => self.timestamp_size_records += 1,
                    Ok(Metadata::PredecessorWal(info)) => {
                        self.predecessor_records += 1;
                        self.predecessor.get_or_insert(info);
                    }
                    Ok(_) | Err(_) => self.malformed_metadata += 1,
                }
            }
            Piece::Old { fragment, .. } => {
                self.old_fragments += 1;
                self.old_bytes += piece.len();
                self.first_old
                    .get_or_insert((piece.offset(), fragment.log_number().unwrap_or_default()));
            }
            _ => {}
        }
    }

    /// Adds the facts of the pieces that follow this one's (a later range of a split
    /// read): counts add up, firsts stay this one's when it has them.
    pub(crate) fn merge(&mut self, later: &WalFacts) {
        self.legacy_headers += later.legacy_headers;
        self.recyclable_headers += later.recyclable_headers;
        self.compression_records += later.compression_records;
        self.compression = self.compression.or(later.compression);
        self.timestamp_size_records += later.timestamp_size_records;
        self.predecessor_records += later.predecessor_records;
        self.predecessor = self.predecessor.or(later.predecessor);
        self.malformed_metadata += later.malformed_metadata;
        self.ignorable += later.ignorable;
        self.old_fragments += later.old_fragments;
        self.old_bytes += later.old_bytes;
        self.first_old = self.first_old.or(later.first_old);
    }

    fn count_header(&mut self, len: usize) {
        if len > walcodec::HEADER_SIZE {
            self.recyclable_headers += 1;
        } else {
            self.legacy_headers += 1;
        }
    }

    /// The summary lines (see the module documentation).
    pub(crate) fn write_text(&self, log: &LogChoice, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "dialect: {}", log.describe())?;
        writeln!(
            out,
            "headers: {} of 7 bytes, {} of 11 bytes (recyclable)",
            self.legacy_headers, self.recyclable_headers
        )?;
        match self.compression {
            Some((offset, compression)) => writeln!(
                out,
                "compression: {} (type-9 record at offset {offset}{})",
                compression_name(compression),
                match self.compression_records {
                    1 => String::new(),
                    n => format!(", {n} in all"),
                }
            )?,
            None => writeln!(out, "compression: none (no type-9 record)")?,
        }
        let predecessor = match self.predecessor {
            Some(info) => format!(
                " (log {}, {} bytes, last sequence {})",
                info.log_number, info.size_bytes, info.last_sequence
            ),
            None => String::new(),
        };
        writeln!(
            out,
            "metadata records: {} timestamp-size, {} predecessor-WAL{predecessor}, {} malformed",
            self.timestamp_size_records, self.predecessor_records, self.malformed_metadata
        )?;
        writeln!(out, "ignorable fragments: {}", self.ignorable)?;
        match self.first_old {
            Some((offset, old)) => writeln!(
                out,
                "old fragments: {} ({} bytes) from offset {offset}: log {} ends there, old log {old} follows",
                self.old_fragments, self.old_bytes, log.log_number
            ),
            None => writeln!(out, "old fragments: 0"),
        }
    }

    /// The same as a JSON object.
    pub(crate) fn json(&self, log: &LogChoice) -> JsonObject {
        let mut object = JsonObject::new();
        object
            .string("dialect", log.dialect_name())
            .number("log_number", log.log_number)
            .string("log_number_source", &log.number_source.to_string())
            .number("legacy_headers", self.legacy_headers)
            .number("recyclable_headers", self.recyclable_headers)
            .string(
                "compression",
                self.compression
                    .map_or("none", |(_, compression)| compression_name(compression)),
            )
            .number("compression_records", self.compression_records)
            .number("timestamp_size_records", self.timestamp_size_records)
            .number("predecessor_wal_records", self.predecessor_records)
            .number("malformed_metadata_records", self.malformed_metadata)
            .number("ignorable_fragments", self.ignorable)
            .number("old_fragments", self.old_fragments)
            .number("old_bytes", self.old_bytes);
        if let Some((offset, old)) = self.first_old {
            object
                .number("live_end", offset)
                .number("old_log_number", u64::from(old));
        }
        object
    }
}

/// A compression type's name in output.
pub(crate) fn compression_name(compression: WalCompressionType) -> &'static str {
    match compression {
        WalCompressionType::None => "none",
        WalCompressionType::Zstd => "zstd",
        _ => "unsupported",
    }
}
