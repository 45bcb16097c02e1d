//! Segment recycling ([`LogDirOptions::recycle_segments`](super::LogDirOptions::recycle_segments)):
//! purged segment files kept in a pool and reused as new segments, as RocksDB's
//! `recycle_log_file_num` reuses WAL files.
//!
//! Why: appending into a file that is already long enough only overwrites data, so
//! each `fdatasync` flushes data and commits no file size, the same saving as
//! [`WriterOptions::preallocate`](crate::WriterOptions::preallocate) without writing
//! the zeros first.
//!
//! What makes it safe is the format: with recycling on, every new segment is
//! written in RocksDB's recyclable format with its own number in every header, so
//! the bytes a reused file still holds from its earlier use (another number) are
//! where the segment's log ends for every reader, never records. That is also why
//! only files written in that format, by this crate, with their own number, are ever
//! pooled: the stale bytes of a legacy-format file would read as records.
//!
//! A pooled file is `NNNNNN.log.recycle`, named after the segment it was: not a
//! segment name, so no reader or tool takes it for part of the log.

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::segment::{parse_segment_name, segment_name};
use crate::codec::encoder::LogFormat;
use crate::format::fragment::{intact_fragment, sniff, FragmentType};
use crate::format::BLOCK_SIZE;

const POOLED_SUFFIX: &str = ".recycle";

/// Where segment `number`'s file waits for reuse.
pub(crate) fn pooled_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{}{POOLED_SUFFIX}", segment_name(number)))
}

/// The pooled files in `dir`, by the numbers of the segments they were, oldest
/// first.
pub(crate) fn list_pool(dir: &Path) -> io::Result<Vec<u64>> {
    let mut pool = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(number) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.strip_suffix(POOLED_SUFFIX))
            .and_then(parse_segment_name)
        {
            pool.push(number);
        }
    }
    pool.sort_unstable();
    Ok(pool)
}

/// The format a segment is written in: RocksDB's recyclable one with the segment's
/// number when recycling is on, LevelDB's otherwise.
pub(crate) fn segment_format(number: u64, recycling: bool) -> LogFormat {
    if recycling {
        LogFormat::leveldb().recyclable(number)
    } else {
        LogFormat::leveldb()
    }
}

/// RocksDB's recyclable format with log `number`, with WAL compression when
/// `compressed` (and the `zstd` feature is on; without it a compressed segment is
/// refused when a writer goes on in it, as a log it cannot write).
pub(crate) fn recyclable_format(number: u64, compressed: bool) -> LogFormat {
    let format = segment_format(number, true);
    #[cfg(feature = "zstd")]
    if compressed {
        return format.zstd();
    }
    let _ = compressed;
    format
}

/// What the start of segment `number`'s file says of how it was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Written {
    /// An intact legacy data fragment first.
    Legacy,
    /// Nothing intact at its start: an empty file, or a first write torn.
    Unknown,
    /// Recyclable headers with its own number.
    Recyclable,
    /// Pebble's WAL-sync headers with its own number, or only the EOF trailer that
    /// closes it (a Pebble segment sealed or closed empty).
    WalSync,
    /// Recyclable headers with another number: a reused file in which nothing of
    /// its new use has reached the disk.
    Stale,
}

/// Reads the first block of the file at `path` (segment `number`) and tells how it
/// was written.
pub(crate) fn written_as(path: &Path, number: u64) -> io::Result<Written> {
    Ok(written_start(path, number)?.0)
}

/// [`written_as`], and whether the file starts with RocksDB's compression-type
/// record (a writer going on in it must compress as its records are), from one
/// read of its first block.
pub(crate) fn written_start(path: &Path, number: u64) -> io::Result<(Written, bool)> {
    let mut start = Vec::with_capacity(BLOCK_SIZE);
    std::fs::File::open(path)?
        .take(BLOCK_SIZE as u64)
        .read_to_end(&mut start)?;
    let sniffed = sniff(&start);
    Ok((
        classify(&start, sniffed.log_number, number),
        sniffed.compressed,
    ))
}

/// How `start`, the first block of segment `number`'s file whose sniffed
/// recyclable log number is `log_number`, was written.
fn classify(start: &[u8], log_number: Option<u32>, number: u64) -> Written {
    match log_number {
        Some(n) if n == number as u32 => Written::Recyclable,
        Some(_) => Written::Stale,
        None => match intact_fragment(start) {
            Some((
                FragmentType::Full
                | FragmentType::First
                | FragmentType::Middle
                | FragmentType::Last,
                _,
            )) => Written::Legacy,
            _ => match crate::format::detect::detect(start) {
                // A reused file's earlier use as another Pebble segment is stale
                // too: Pebble's reader takes another number for the log's end.
                crate::format::detect::Detected::Dialect {
                    dialect: crate::format::fragment::Dialect::Pebble,
                    log_number: Some(n),
                    ..
                } => {
                    if n == number as u32 {
                        Written::WalSync
                    } else {
                        Written::Stale
                    }
                }
                _ => Written::Unknown,
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooled_files_are_not_segments() {
        let dir = Path::new("/d");
        let path = pooled_path(dir, 7);
        assert_eq!(path, Path::new("/d/000007.log.recycle"));
        let name = path.file_name().unwrap().to_str().unwrap();
        assert_eq!(parse_segment_name(name), None);
    }

    #[test]
    fn the_start_of_a_file_tells_how_it_was_written() {
        use crate::codec::encoder::LogEncoder;
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, format: Option<LogFormat>| {
            let mut log = bytes::BytesMut::new();
            if let Some(format) = format {
                LogEncoder::builder()
                    .format(format)
                    .build()
                    .encode_record(b"record", &mut log);
            }
            let path = dir.path().join(name);
            std::fs::write(&path, &log).unwrap();
            path
        };
        let cases = [
            (None, Written::Unknown),
            (Some(LogFormat::leveldb()), Written::Legacy),
            (
                Some(LogFormat::leveldb().recyclable(5)),
                Written::Recyclable,
            ),
            (Some(LogFormat::leveldb().recyclable(4)), Written::Stale),
            (Some(LogFormat::pebble(5)), Written::WalSync),
            (Some(LogFormat::pebble(4)), Written::Stale),
        ];
        for (i, (format, expected)) in cases.into_iter().enumerate() {
            let path = write(&format!("{i}.log"), format);
            assert_eq!(written_as(&path, 5).unwrap(), expected, "{format:?}");
        }
        // A Pebble segment sealed or closed empty: only its EOF trailer.
        for (number, expected) in [(5, Written::WalSync), (4, Written::Stale)] {
            let mut log = bytes::BytesMut::new();
            let mut encoder: LogEncoder = LogEncoder::builder()
                .format(LogFormat::pebble(number))
                .build();
            encoder.encode_eof_trailer(&mut log);
            let path = dir.path().join(format!("trailer-{number}.log"));
            std::fs::write(&path, &log).unwrap();
            assert_eq!(written_as(&path, 5).unwrap(), expected);
        }
    }
}
