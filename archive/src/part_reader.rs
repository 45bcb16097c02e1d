//! Reading a segment file for its upload: part by part on a blocking thread,
//! each part checked as it lands ([`PartReader`]), and telling the upload
//! pipeline when the last part is read ([`ReadAll`]).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use bytes::Bytes;

use crate::error::ArchiveError;
use crate::scan::SegmentScan;

/// Says once (on the first call) that an upload has read its last part.
pub(crate) struct ReadAll(Mutex<Option<tokio::sync::oneshot::Sender<()>>>);

impl ReadAll {
    /// Says it on `read`.
    pub(crate) fn new(read: tokio::sync::oneshot::Sender<()>) -> ReadAll {
        ReadAll(Mutex::new(Some(read)))
    }

    /// For an upload nobody waits on.
    pub(crate) fn unwatched() -> ReadAll {
        ReadAll(Mutex::new(None))
    }

    /// The last part is read (again, on a retry: said once).
    pub(crate) fn done(&self) {
        let sender = self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(sender) = sender {
            let _ = sender.send(());
        }
    }
}

/// Reads a segment file part by part on a blocking thread, each part into a
/// buffer of its own (never zeroed first), and checks each piece of it as it
/// lands: one trip to the blocking pool a part (the file opened on the first),
/// and the bytes gone over while in cache rather than read back from memory for
/// each pass.
pub(crate) struct PartReader {
    /// `None` before the first read, and after a failed one.
    file: Option<std::fs::File>,
    opened: bool,
    scan: Option<SegmentScan>,
    path: PathBuf,
}

impl PartReader {
    /// A reader of the segment file at `path`, opened by the first read, its
    /// bytes fed to `scan`.
    pub(crate) fn new(path: &Path, scan: SegmentScan) -> PartReader {
        PartReader {
            file: None,
            opened: false,
            scan: Some(scan),
            path: path.to_path_buf(),
        }
    }

    /// The next `len` bytes of the file (a segment: its length is known).
    pub(crate) async fn next(&mut self, len: u64) -> Result<Bytes, ArchiveError> {
        let len = usize::try_from(len).map_err(|_| {
            ArchiveError::io(
                &self.path,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "part too large"),
            )
        })?;
        let file = self.file.take();
        let scan = self.scan.take();
        let (Some(scan), false) = (scan, file.is_none() && self.opened) else {
            // A read failed before: `upload_once` returned its error.
            return Err(ArchiveError::io(
                &self.path,
                std::io::Error::other("read after a failed read"),
            ));
        };
        self.opened = true;
        let path = self.path.clone();
        let (file, scan, read) = tokio::task::spawn_blocking(move || {
            let mut scan = scan;
            let file = match file.map_or_else(|| std::fs::File::open(path), Ok) {
                Ok(file) => file,
                Err(e) => return (None, scan, Err(e)),
            };
            let read = read_checked(&file, len, &mut scan);
            (Some(file), scan, read)
        })
        .await
        .map_err(|e| ArchiveError::io(&self.path, std::io::Error::other(e)))?;
        let bytes = read.map_err(|e| ArchiveError::io(&self.path, e))?;
        self.file = file;
        self.scan = Some(scan);
        Ok(bytes)
    }

    pub(crate) fn into_scan(self) -> SegmentScan {
        self.scan.expect("a scan after each successful read")
    }
}

/// Reads exactly `len` bytes of `file`, feeding `scan` each piece as it lands.
fn read_checked(
    mut file: &std::fs::File,
    len: usize,
    scan: &mut SegmentScan,
) -> std::io::Result<Bytes> {
    use std::io::Read;
    let mut buf = Vec::with_capacity(len);
    while buf.len() < len {
        let at = buf.len();
        let piece = (len - at).min(crate::scan::PIECE) as u64;
        // `read_to_end` fills the spare capacity without zeroing it first.
        let got = (&mut file).take(piece).read_to_end(&mut buf)?;
        if got as u64 != piece {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("the file ended {} bytes before its length", len - buf.len()),
            ));
        }
        scan.feed(&buf[at..]);
    }
    Ok(Bytes::from(buf))
}
