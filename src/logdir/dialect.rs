//! The dialect a [`LogDir`](crate::LogDir)'s segments are written in
//! ([`LogDirOptions::dialect`](super::LogDirOptions::dialect)), and how every path
//! that reads a segment learns it.
//!
//! | dialect asked for | segment N is written as | read as | `DIALECT` file |
//! |-------------------|-------------------------|---------|----------------|
//! | `LevelDb` (default) | the writer's format (LevelDB's), recyclable with N when recycling | RocksDB's dialect, log N | none |
//! | `RocksDb`         | RocksDB's recyclable format with N | RocksDB's dialect, log N | none |
//! | `Pebble`          | Pebble's WAL-sync format with N, EOF trailer when sealed or closed | Pebble's dialect, log N | `pebble` |
//!
//! LevelDB's and RocksDB's segments read alike (RocksDB's dialect reads both), so
//! one directory may hold both and needs no record of which. Pebble's do not (types
//! 9–12 mean other things to RocksDB), so a Pebble directory says so durably in its
//! `DIALECT` file, written before its first segment: readers in any process
//! ([`DirReader::open`](crate::DirReader::open), the CLI) read it, and
//! [`open`](super::LogDirOptions::open) refuses, with [`Error::WrongDialect`], a
//! directory of the other kind (a segment's own headers tell too, when the file is
//! missing).

use std::io;
use std::path::Path;
use std::sync::Arc;

use super::fs::DirStorage;
use crate::decoder::LogDecoder;
use crate::decoder::LogDecoderBuilder;
use crate::error::Error;
use crate::format::fragment::Dialect;
use crate::format::fragment::RECYCLABLE_HEADER_SIZE;

/// The file that marks a directory of Pebble segments.
pub(crate) const DIALECT_FILE: &str = "DIALECT";
const PEBBLE_MARK: &str = "pebble";

/// Pebble's EOF trailer, which ends a sealed (or cleanly closed) Pebble segment.
pub(crate) const EOF_TRAILER_BYTES: u64 = RECYCLABLE_HEADER_SIZE as u64;

/// Whether the directory `dir` is marked as holding Pebble segments.
pub(crate) fn is_marked_pebble(dir: &Path) -> io::Result<bool> {
    match std::fs::read_to_string(dir.join(DIALECT_FILE)) {
        Ok(text) if text.trim() == PEBBLE_MARK => Ok(true),
        Ok(text) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "unreadable {DIALECT_FILE} file in the log directory: {:?}",
                text.trim()
            ),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Marks `dir` as holding Pebble segments, durably (a synced file renamed into
/// place, the directory synced).
pub(crate) fn mark_pebble(dir: &Path, fs: &Arc<dyn DirStorage>) -> io::Result<()> {
    use std::io::Write;
    let tmp = dir.join(format!("{DIALECT_FILE}.tmp"));
    let _ = std::fs::remove_file(&tmp);
    let mut file = fs.create(&tmp)?;
    file.write_all(format!("{PEBBLE_MARK}\n").as_bytes())?;
    fs.sync_file(&file)?;
    drop(file);
    fs.rename(&tmp, &dir.join(DIALECT_FILE))?;
    fs.sync_dir(dir)
}

/// The decoder of segment `number` of a directory of Pebble segments (`pebble`)
/// or of LevelDB's and RocksDB's.
pub(crate) fn segment_decoder(number: u64, pebble: bool) -> LogDecoderBuilder {
    let dialect = if pebble {
        Dialect::Pebble
    } else {
        Dialect::RocksDb
    };
    let mut builder = LogDecoder::builder();
    // A segment is a file: a record its end cuts is a torn tail (the last
    // segment's, where the writer died) or a write in progress (a follower's).
    builder
        .dialect(dialect)
        .log_number(number)
        .input(crate::decoder::LogInput::File);
    builder
}

/// The error of a directory of `found` segments opened for `expected` ones.
pub(crate) fn wrong_dialect(dir: &Path, pebble_found: bool) -> Error {
    let (found, expected) = if pebble_found {
        (Dialect::Pebble, Dialect::LevelDb)
    } else {
        (Dialect::LevelDb, Dialect::Pebble)
    };
    Error::WrongDialect {
        path: dir.to_path_buf(),
        found,
        expected,
    }
}

impl super::LogDir {
    /// The dialect the log's segments are written in
    /// ([`LogDirOptions::dialect`](super::LogDirOptions::dialect)): what a copy of
    /// its segments needs to be read, or restored as a log directory, elsewhere.
    pub fn dialect(&self) -> Dialect {
        self.inner.options.dialect_in_use()
    }
}
