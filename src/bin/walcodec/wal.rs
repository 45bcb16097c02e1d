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

use walcodec::inspect::WalFacts;
use walcodec::metadata::WalCompressionType;

use crate::dialect::LogChoice;
use crate::json::JsonObject;

/// The summary lines of `facts` (see the module documentation).
pub(crate) fn write_text(facts: &WalFacts, log: &LogChoice, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "dialect: {}", log.describe())?;
    writeln!(
        out,
        "headers: {} of 7 bytes, {} of 11 bytes (recyclable)",
        facts.legacy_headers, facts.recyclable_headers
    )?;
    match facts.compression {
        Some((offset, compression)) => writeln!(
            out,
            "compression: {} (type-9 record at offset {offset}{})",
            compression_name(compression),
            match facts.compression_records {
                1 => String::new(),
                n => format!(", {n} in all"),
            }
        )?,
        None => writeln!(out, "compression: none (no type-9 record)")?,
    }
    let predecessor = match facts.predecessor {
        Some(info) => format!(
            " (log {}, {} bytes, last sequence {})",
            info.log_number, info.size_bytes, info.last_sequence
        ),
        None => String::new(),
    };
    writeln!(
        out,
        "metadata records: {} timestamp-size, {} predecessor-WAL{predecessor}, {} malformed",
        facts.timestamp_size_records, facts.predecessor_records, facts.malformed_metadata
    )?;
    writeln!(out, "ignorable fragments: {}", facts.ignorable)?;
    match facts.first_old {
            Some((offset, old)) => writeln!(
                out,
                "old fragments: {} ({} bytes) from offset {offset}: log {} ends there, old log {old} follows",
                facts.old_fragments, facts.old_bytes, log.log_number
            ),
            None => writeln!(out, "old fragments: 0"),
        }
}

/// The same as a JSON object.
pub(crate) fn json(facts: &WalFacts, log: &LogChoice) -> JsonObject {
    let mut object = JsonObject::new();
    object
        .string("dialect", log.dialect_name())
        .number("log_number", log.log_number)
        .string("log_number_source", &log.number_source.to_string())
        .number("legacy_headers", facts.legacy_headers)
        .number("recyclable_headers", facts.recyclable_headers)
        .string(
            "compression",
            facts
                .compression
                .map_or("none", |(_, compression)| compression_name(compression)),
        )
        .number("compression_records", facts.compression_records)
        .number("timestamp_size_records", facts.timestamp_size_records)
        .number("predecessor_wal_records", facts.predecessor_records)
        .number("malformed_metadata_records", facts.malformed_metadata)
        .number("ignorable_fragments", facts.ignorable)
        .number("old_fragments", facts.old_fragments)
        .number("old_bytes", facts.old_bytes);
    if let Some((offset, old)) = facts.first_old {
        object
            .number("live_end", offset)
            .number("old_log_number", u64::from(old));
    }
    object
}

/// A compression type's name in output.
pub(crate) fn compression_name(compression: WalCompressionType) -> &'static str {
    match compression {
        WalCompressionType::None => "none",
        WalCompressionType::Zstd => "zstd",
        _ => "unsupported",
    }
}
