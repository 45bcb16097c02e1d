//! Torn-tail scan and repair: find where a log's last complete record ends, and cut
//! what follows before appending.
//!
//! A writer that dies mid-write leaves a torn tail: a header or payload cut short, or
//! a fragmented record with no LAST fragment. Preallocated space leaves zeros after the
//! last record. LevelDB reopens such a log and appends after the garbage
//! (google/leveldb#1287), so readers either drop the new records (they follow zero
//! fill, which is skipped to the block end) or report corruption in the middle of the
//! log. [`repair_log`] cuts the tail first, durably.
//!
//! Damage that is *not* at the tail (a checksum mismatch with more log after it, a bad
//! length) is returned as an error and nothing is cut: only the caller can decide to
//! give up good records.

use std::io::SeekFrom;
use std::path::Path;

use futures::TryStreamExt;
use tokio::fs::{File, OpenOptions};
use tokio::io::AsyncSeekExt;
use tokio_util::codec::FramedRead;

use crate::codec::encoder::LogFormat;
use crate::decoder::error::{CodecError, CorruptionKind};
use crate::decoder::LogDecoder;
use crate::error::Error;
use crate::format::fragment::Dialect;
use crate::format::zeros::{all_zero, first_nonzero, last_nonzero};
use crate::format::BLOCK_SIZE;

/// What [`scan_log`] found at the end of a log.
///
/// ```text
///  0                      valid_len                  file_len
///  |  complete records    |  torn record and/or zeros |
/// ```
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TailScan {
    /// End of the last complete record (0 for a log without one): the length to cut
    /// the file to before appending. Resume the encoder at this offset.
    pub valid_len: u64,
    /// Length of the file when it was scanned.
    pub file_len: u64,
    /// Whether the bytes after `valid_len` begin a record that was cut short (a torn
    /// header, a torn payload, or a FIRST fragment without its LAST). `false` when
    /// they are only zeros (preallocated space, a trailer) or when there are none.
    pub incomplete_tail: bool,
}

impl TailScan {
    /// Whether bytes follow the last complete record, so the file must be cut to
    /// [`valid_len`](Self::valid_len) before anything is appended to it.
    pub fn needs_repair(&self) -> bool {
        self.valid_len < self.file_len
    }

    /// Bytes after the last complete record.
    pub fn tail_bytes(&self) -> u64 {
        self.file_len - self.valid_len
    }
}

/// Reads the log at `path` and reports where its valid prefix ends. The file is not
/// changed.
///
/// Records are checked as a reader checks them ([`LogDecoder`] with
/// [`Recovery::TolerateTail`](crate::Recovery::TolerateTail) and checksums on).
///
/// # Errors
/// [`Error::Corruption`] or [`Error::RecordTooLarge`] for damage before the tail: a
/// log with good records after a bad one must not be cut. Zeros that run from inside
/// an unfinished fragmented record to the end of the file are a torn tail (the shape
/// a power cut leaves when the file's size reached the disk before its data), not
/// damage; so are zeros that run from inside a fragment's payload to the end of the
/// file (a write cut short in space grown by
/// [`WriterOptions::preallocate`](crate::WriterOptions::preallocate)).
/// [`Error::Io`] when the file cannot be read.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), walcodec::Error> {
/// use bytes::BytesMut;
/// use walcodec::{scan_log, LogEncoder};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("000001.log");
/// let mut log = BytesMut::new();
/// let mut encoder = LogEncoder::new();
/// encoder.encode_record(b"complete", &mut log);
/// let cut = encoder.encode_record(b"torn by a crash", &mut log);
/// std::fs::write(&path, &log[..log.len() - 4])?;
///
/// let scan = scan_log(&path).await?;
/// assert_eq!(scan.valid_len, cut.start);
/// assert!(scan.incomplete_tail && scan.needs_repair());
/// # Ok(())
/// # }
/// ```
pub async fn scan_log(path: impl AsRef<Path>) -> Result<TailScan, Error> {
    RepairOptions::new().scan(path).await
}

/// Options for [`scan_log`] and [`repair_log`]: how large a record may be and still
/// count as complete.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), walcodec::Error> {
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("000001.log");
/// # std::fs::write(&path, b"")?;
/// use walcodec::RepairOptions;
///
/// // A log whose records may reach 256 MiB.
/// let scan = RepairOptions::new()
///     .max_record_bytes(256 << 20)
///     .repair(&path)
///     .await?;
/// assert!(!scan.needs_repair());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct RepairOptions {
    max_record_bytes: usize,
}

impl Default for RepairOptions {
    fn default() -> Self {
        RepairOptions {
            max_record_bytes: LogDecoder::DEFAULT_MAX_RECORD_BYTES,
        }
    }
}

impl RepairOptions {
    /// The defaults: records up to [`LogDecoder::DEFAULT_MAX_RECORD_BYTES`] (64 MiB).
    pub fn new() -> RepairOptions {
        RepairOptions::default()
    }

    /// The largest record that counts as complete; a larger one is damage.
    pub fn max_record_bytes(&mut self, bytes: usize) -> &mut Self {
        self.max_record_bytes = bytes;
        self
    }

    /// [`scan_log`] with these options.
    pub async fn scan(&self, path: impl AsRef<Path>) -> Result<TailScan, Error> {
        let mut file = File::open(path).await?;
        scan_file(&mut file, self.max_record_bytes).await
    }

    /// [`repair_log`] with these options.
    pub async fn repair(&self, path: impl AsRef<Path>) -> Result<TailScan, Error> {
        let mut file = OpenOptions::new().read(true).write(true).open(path).await?;
        repair_file(&mut file, self.max_record_bytes).await
    }
}

/// Scans the log at `path` like [`scan_log`] and, when bytes follow the last complete
/// record, truncates the file to [`TailScan::valid_len`] and syncs it (`fsync`), so
/// the cut survives a crash. Returns the scan made before the cut.
///
/// # Errors
/// As [`scan_log`]; on damage before the tail the file is left as it is.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), walcodec::Error> {
/// # use bytes::BytesMut;
/// # use walcodec::LogEncoder;
/// use walcodec::repair_log;
///
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("000001.log");
/// # let mut log = BytesMut::new();
/// # let mut encoder = LogEncoder::new();
/// # let kept = encoder.encode_record(b"complete", &mut log);
/// # encoder.encode_record(b"torn", &mut log);
/// # std::fs::write(&path, &log[..log.len() - 2])?;
/// let scan = repair_log(&path).await?;
/// assert_eq!(std::fs::metadata(&path)?.len(), scan.valid_len);
/// # assert_eq!(scan.valid_len, kept.end);
/// # Ok(())
/// # }
/// ```
pub async fn repair_log(path: impl AsRef<Path>) -> Result<TailScan, Error> {
    RepairOptions::new().repair(path).await
}

/// Scans an open log and cuts its tail durably. The file's position afterwards is
/// unspecified.
pub(crate) async fn repair_file(
    file: &mut File,
    max_record_bytes: usize,
) -> Result<TailScan, Error> {
    let scan = scan_file(file, max_record_bytes).await?;
    cut_tail(file, scan).await
}

/// Scans an open log from its start. The file's position afterwards is unspecified.
pub(crate) async fn scan_file(file: &mut File, max_record_bytes: usize) -> Result<TailScan, Error> {
    let (scan, failure, _) = scan_to_damage(file, max_record_bytes, LogFormat::leveldb()).await?;
    match failure {
        None => Ok(scan),
        Some((e, _)) => Err(e),
    }
}

/// Scans an open log from its start as written in `format` (RocksDB's dialect and
/// its log number for a RocksDB format). The file's position afterwards is
/// unspecified.
pub(crate) async fn scan_file_as(
    file: &mut File,
    max_record_bytes: usize,
    format: LogFormat,
) -> Result<TailScan, Error> {
    let (scan, failure, _) = scan_to_damage(file, max_record_bytes, format).await?;
    match failure {
        None => Ok(scan),
        Some((e, _)) => Err(e),
    }
}

/// What a scan learned of the format the log's records were written in.
#[derive(Debug, Clone, Copy)]
struct Written {
    /// The data fragments read had recyclable headers.
    recyclable: bool,
    /// A type-9 record turned compression on.
    compressed: bool,
    /// Records of the log were read.
    records: bool,
    /// Bytes of a recycled file's earlier use were found (where the log ended).
    old_fragments: bool,
}

impl Written {
    /// Refuses to append records of `format` to a log written in another one: the
    /// log's readers would take the new records for damage (a recyclable header
    /// after legacy ones, raw bytes where a zstd frame belongs) or for the end of
    /// the log.
    ///
    /// Also refuses a recycled file that holds no record of the format's log number:
    /// either nothing of this log was written yet or the number is wrong, and only
    /// the caller knows which; cutting would lose a whole log on a wrong number.
    fn check(&self, format: LogFormat, valid_len: u64) -> Result<(), Error> {
        if !self.records && self.old_fragments {
            return Err(Error::Io(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "the log holds no record of log number {} before fragments of \
                     another log: a recycled file not yet written, or the wrong number",
                    format.log_number().unwrap_or(0)
                ),
            )));
        }
        if valid_len == 0 {
            return Ok(());
        }
        let recyclable = format.log_number().is_some();
        let mismatch = if self.compressed != format.is_compressed() {
            Some(if self.compressed {
                "the log is compressed (RocksDB WAL compression) and the writer's format is not"
            } else {
                "the writer's format is compressed and the log is not"
            })
        } else if self.records && self.recyclable != recyclable {
            Some(if self.recyclable {
                "the log has recyclable headers and the writer's format does not"
            } else {
                "the writer's format is recyclable and the log has legacy headers"
            })
        } else {
            None
        };
        match mismatch {
            None => Ok(()),
            Some(why) => Err(Error::Io(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("cannot append to this log in another format: {why}"),
            ))),
        }
    }
}

/// Reads the log in `file` with a `TolerateTail` decoder for `format`: what it found
/// up to the first damage, that damage (an error that is not the file's own I/O),
/// and what it learned of the format the log was written in.
///
/// In a RocksDB format the decoder reads RocksDB's dialect, with the format's log
/// number: a recyclable fragment of another number (left from the file's earlier
/// use) is where the log ends, as RocksDB's reader takes it.
async fn scan_to_damage(
    file: &mut File,
    max_record_bytes: usize,
    format: LogFormat,
) -> Result<(TailScan, Option<(Error, u64)>, Written), Error> {
    file.seek(SeekFrom::Start(0)).await?;
    let file_len = file.metadata().await?.len();
    let mut decoder = LogDecoder::builder();
    decoder
        .max_record_bytes(max_record_bytes)
        .input(crate::decoder::LogInput::File);
    if format.dialect() != Dialect::LevelDb {
        decoder
            .dialect(format.dialect())
            .log_number(format.log_number().unwrap_or(0));
    }
    let mut records = FramedRead::with_capacity(&mut *file, decoder.build(), READ_CHUNK);
    let failure = loop {
        match records.try_next().await {
            Ok(Some(_)) => {}
            Ok(None) => break None,
            Err(CodecError::Io(e)) => return Err(Error::Io(e)),
            // With how far the decoder had read when it saw the damage.
            Err(e) => break Some((e.into(), records.decoder().offset())),
        }
    };
    let decoder = records.decoder();
    let scan = TailScan {
        valid_len: decoder.valid_prefix_len(),
        file_len,
        incomplete_tail: decoder.has_incomplete_tail(),
    };
    let written = Written {
        recyclable: decoder.is_recycled(),
        compressed: decoder.wal_compression().is_some(),
        records: decoder.stats().records > 0,
        old_fragments: decoder.stats().old_fragment_bytes > 0,
    };
    Ok((scan, failure, written))
}

/// The unit a disk writes whole: a page lost in a power cut reads as zeros in whole
/// sectors.
const SECTOR_BYTES: u64 = 512;

/// Repairs a log that a writer of this crate kept, after a crash or power cut: as
/// [`repair_file`], and also when the first damage has the shape a power cut leaves
/// in the bytes written after the last sync. Storage may write back the pages of
/// unsynced writes in any order, so a page can be lost (zeros) while a later one
/// survives: the fragment holding it fails its checksum with more log after it.
/// Such damage is cut as the unsynced tail it is when (1) the damaged piece holds a
/// whole sector of zeros, as a lost page does and a flipped bit does not, and (2) it
/// lies within `unsynced_window` bytes of the end of the log's data, the most a
/// writer can have written without syncing. Damage of any other shape, or further
/// back, is refused as [`repair_file`] refuses it: only the caller can give up
/// records that were acknowledged.
///
/// The log is read in `format`, the one records will be appended in; a log written
/// in another format is refused before anything is cut (see [`Written::check`]).
pub(crate) async fn recover_file(
    file: &mut File,
    max_record_bytes: usize,
    unsynced_window: u64,
    format: LogFormat,
) -> Result<TailScan, Error> {
    let (scan, failure, written) = scan_to_damage(file, max_record_bytes, format).await?;
    written.check(format, scan.valid_len)?;
    let header_size = format.header_size() as u64;
    let scan = match failure {
        None => scan,
        Some((Error::Corruption { offset, kind, .. }, seen))
            if lost_after_sync(
                file,
                &scan,
                kind,
                offset,
                seen,
                unsynced_window,
                header_size,
            )
            .await? =>
        {
            TailScan {
                incomplete_tail: true,
                ..scan
            }
        }
        Some((e, _)) => return Err(e),
    };
    cut_tail(file, scan).await
}

/// Cuts what follows the last complete record, durably (a size change is metadata:
/// `sync_all`), and returns the scan.
async fn cut_tail(file: &mut File, scan: TailScan) -> Result<TailScan, Error> {
    if scan.needs_repair() {
        file.set_len(scan.valid_len).await?;
        file.sync_all().await?;
    }
    Ok(scan)
}

/// Whether damage at `offset`, which the decoder saw by the time it had read up to
/// `seen`, has the shape of pages lost after the last sync (see [`recover_file`]).
async fn lost_after_sync(
    file: &mut File,
    scan: &TailScan,
    kind: CorruptionKind,
    offset: u64,
    seen: u64,
    unsynced_window: u64,
    header_size: u64,
) -> Result<bool, Error> {
    let file_len = scan.file_len;
    // The end of the data: zeros after it are preallocated space.
    let mut data_end = file_len;
    let mut chunk = vec![0u8; READ_CHUNK];
    while data_end > offset {
        let from = data_end.saturating_sub(READ_CHUNK as u64).max(offset);
        let len = (data_end - from) as usize;
        read_at(file, from, &mut chunk[..len]).await?;
        match last_nonzero(&chunk[..len]) {
            Some(last) => {
                data_end = from + last as u64 + 1;
                break;
            }
            None => data_end = from,
        }
    }
    if offset.saturating_add(unsynced_window) < data_end {
        return Ok(false);
    }
    // Only zeros between the last complete record and the damage, where a header
    // could start (not a block's trailer): what came next was lost (a sector
    // holding the synced bytes and then nothing of the rest).
    let block_left = BLOCK_SIZE as u64 - scan.valid_len % BLOCK_SIZE as u64;
    if scan.valid_len < offset && block_left >= header_size {
        let mut between = vec![0u8; (offset - scan.valid_len) as usize];
        read_at(file, scan.valid_len, &mut between).await?;
        if all_zero(&between) {
            return Ok(true);
        }
    }
    // A whole zero sector in what showed the damage. Zeros merely after it do not
    // count: a flipped bit in the last record before preallocated space, or before
    // a page lost after the last sync, has those too, and is corruption.
    let block_end = (offset / BLOCK_SIZE as u64 + 1) * BLOCK_SIZE as u64;
    let (from, to) = match kind {
        // A lost sector that overlaps the fragment that failed its checksum: one
        // wholly inside it, or one that begins inside it where its bytes turn to
        // zeros for good (the sector then runs on past it). A payload that merely
        // ends in a zero byte before lost pages does not count: no lost sector
        // overlaps it, so it is the fragment's own damage.
        CorruptionKind::ChecksumMismatch => {
            // The length sits at the same place in both header layouts.
            let mut header = [0u8; crate::format::HEADER_SIZE];
            if offset + header_size > file_len {
                return Ok(false);
            }
            read_at(file, offset, &mut header).await?;
            let length = u64::from(u16::from_le_bytes([header[4], header[5]]));
            let end = (offset + header_size + length).min(block_end).min(file_len);
            let mut fragment = vec![0u8; (end - offset) as usize];
            read_at(file, offset, &mut fragment).await?;
            // A write that began right after the last complete record, mid-sector,
            // whose first page was lost while later ones landed: the fragment
            // starts with zeros up to the sector's end, then holds data.
            let sector_end = offset.next_multiple_of(SECTOR_BYTES);
            if offset == scan.valid_len
                && sector_end > offset
                && sector_end < end
                && all_zero(&fragment[..(sector_end - offset) as usize])
            {
                return Ok(true);
            }
            let zeros_from = match last_nonzero(&fragment) {
                Some(last) => offset + last as u64 + 1,
                None => offset,
            };
            let sector = zeros_from.next_multiple_of(SECTOR_BYTES);
            if sector < end && sector + SECTOR_BYTES <= file_len {
                let mut bytes = [0u8; SECTOR_BYTES as usize];
                read_at(file, sector, &mut bytes).await?;
                if all_zero(&bytes) {
                    return Ok(true);
                }
            }
            (offset, end)
        }
        // Zeros that cut a record or hid a block: the run of zeros the decoder was
        // in when it found data (it had read up to `seen`), up to that data.
        CorruptionKind::ErrorInMiddleOfRecord
        | CorruptionKind::ZeroedBlock
        | CorruptionKind::MissingStart
        | CorruptionKind::PartialRecordWithoutEnd => {
            let from = seen.min(data_end);
            (from, next_data(file, from, data_end).await?)
        }
        _ => return Ok(false),
    };
    let first = from.next_multiple_of(SECTOR_BYTES);
    if first + SECTOR_BYTES > to {
        return Ok(false);
    }
    let mut bytes = vec![0u8; (to - first) as usize];
    read_at(file, first, &mut bytes).await?;
    Ok(bytes.chunks_exact(SECTOR_BYTES as usize).any(all_zero))
}

/// The offset of the first non-zero byte at or after `from` (`end` if none before it).
async fn next_data(file: &mut File, from: u64, end: u64) -> Result<u64, Error> {
    let mut at = from;
    let mut chunk = vec![0u8; READ_CHUNK];
    while at < end {
        let len = (end - at).min(READ_CHUNK as u64) as usize;
        read_at(file, at, &mut chunk[..len]).await?;
        if let Some(i) = first_nonzero(&chunk[..len]) {
            return Ok(at + i as u64);
        }
        at += len as u64;
    }
    Ok(end)
}

/// Reads `buf.len()` bytes of `file` from offset `at`.
async fn read_at(file: &mut File, at: u64, buf: &mut [u8]) -> Result<(), Error> {
    use tokio::io::AsyncReadExt;

    file.seek(SeekFrom::Start(at)).await?;
    file.read_exact(buf).await?;
    Ok(())
}

const READ_CHUNK: usize = 64 * 1024;

/// The tail of the log file at `path` (of the writer or directory named `log`)
/// was scanned on open: says what was cut, if anything.
#[allow(unused_variables)]
pub(crate) fn report_tail_cut(log: &str, path: &Path, scan: &TailScan) {
    #[cfg(feature = "metrics")]
    if scan.needs_repair() && scan.incomplete_tail {
        crate::observe::describe_metrics();
        let bytes = scan.file_len.saturating_sub(scan.valid_len);
        metrics::counter!("walcodec_torn_tails_cut_total", "log" => log.to_string()).increment(1);
        metrics::counter!("walcodec_torn_tail_bytes_cut_total", "log" => log.to_string())
            .increment(bytes);
    }
    #[cfg(feature = "tracing")]
    if scan.needs_repair() {
        let bytes = scan.file_len - scan.valid_len;
        if scan.incomplete_tail {
            tracing::warn!(
                target: "walcodec",
                log,
                path = %path.display(),
                offset = scan.valid_len,
                bytes,
                incomplete = true,
                "torn tail cut"
            );
        } else {
            tracing::debug!(
                target: "walcodec",
                log,
                path = %path.display(),
                offset = scan.valid_len,
                bytes,
                "zero fill cut"
            );
        }
    }
}
