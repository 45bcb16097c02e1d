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

use crate::{Error, LogDecoder, DEFAULT_MAX_RECORD_BYTES};

/// What [`scan_log`] found at the end of a log.
///
/// ```text
///  0                      valid_len                  file_len
///  |  complete records    |  torn record and/or zeros |
/// ```
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

/// [`scan_log`] for logs whose records may exceed the default 64 MiB limit (or should
/// be held to a smaller one): records up to `max_record_bytes` count as complete.
#[deprecated(note = "use `RepairOptions::new().max_record_bytes(n).scan(path)`")]
pub async fn scan_log_with_limit(
    path: impl AsRef<Path>,
    max_record_bytes: usize,
) -> Result<TailScan, Error> {
    RepairOptions::new()
        .max_record_bytes(max_record_bytes)
        .scan(path)
        .await
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
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
        }
    }
}

impl RepairOptions {
    /// The defaults: records up to [`DEFAULT_MAX_RECORD_BYTES`] (64 MiB).
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

/// [`repair_log`] with a record-size limit other than the default 64 MiB.
#[deprecated(note = "use `RepairOptions::new().max_record_bytes(n).repair(path)`")]
pub async fn repair_log_with_limit(
    path: impl AsRef<Path>,
    max_record_bytes: usize,
) -> Result<TailScan, Error> {
    RepairOptions::new()
        .max_record_bytes(max_record_bytes)
        .repair(path)
        .await
}

/// Scans an open log and cuts its tail durably. The file's position afterwards is
/// unspecified.
pub(crate) async fn repair_file(
    file: &mut File,
    max_record_bytes: usize,
) -> Result<TailScan, Error> {
    let scan = scan_file(file, max_record_bytes).await?;
    if scan.needs_repair() {
        file.set_len(scan.valid_len).await?;
        file.sync_all().await?;
    }
    Ok(scan)
}

/// Scans an open log from its start. The file's position afterwards is unspecified.
pub(crate) async fn scan_file(file: &mut File, max_record_bytes: usize) -> Result<TailScan, Error> {
    file.seek(SeekFrom::Start(0)).await?;
    let file_len = file.metadata().await?.len();
    let mut records = FramedRead::with_capacity(
        &mut *file,
        LogDecoder::builder()
            .max_record_bytes(max_record_bytes)
            .build(),
        READ_CHUNK,
    );
    let failure = loop {
        match records.try_next().await {
            Ok(Some(_)) => {}
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
    };
    let decoder = records.decoder();
    let scan = TailScan {
        valid_len: decoder.valid_prefix_len(),
        file_len,
        incomplete_tail: decoder.has_incomplete_tail(),
    };
    match failure {
        None => Ok(scan),
        Some(e) => Err(e),
    }
}

const READ_CHUNK: usize = 64 * 1024;
