//! The seam between the writer's flusher and the file: three blocking calls.
//!
//! The flusher reaches storage only through [`Storage`], so tests can put a
//! fault-injecting implementation in place of the file and fail any write or sync.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};

/// Blocking storage under an [`AsyncLogWriter`](crate::AsyncLogWriter).
///
/// Every call runs on the writer's flusher thread, never on an async task, so an
/// implementation may block. Not part of the stable API: it exists so tests can
/// inject failures.
pub trait Storage: Send + 'static {
    /// Writes some of `buf` at the current end of the log and returns how many bytes
    /// were written, like [`std::io::Write::write`]. A short count is not an error:
    /// the writer calls again with the rest. `Ok(0)` for a non-empty `buf` is.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize>;

    /// Makes every byte written so far durable (`fdatasync`).
    fn sync(&mut self) -> io::Result<()>;

    /// Cuts the log to `len` bytes, durably, and positions the next write there.
    /// Used to take back a batch whose write or sync failed, and to cut preallocated
    /// zeros when the writer closes.
    fn truncate(&mut self, len: u64) -> io::Result<()>;

    /// Fills `from..to` (past the end of the log) with zeros, durably, without
    /// moving the position of the next write; see
    /// [`WriterOptions::preallocate`](crate::WriterOptions::preallocate). Storage that
    /// gains nothing from it may do nothing, which is the default.
    fn preallocate(&mut self, from: u64, to: u64) -> io::Result<()> {
        let _ = (from, to);
        Ok(())
    }
}

/// [`Storage`] on a [`std::fs::File`]: `write(2)`, `fdatasync(2)`, `ftruncate(2)`.
///
/// The writer works on the std file, not on `tokio::fs::File`, because tokio's file
/// can report a successful sync after a write that failed in the background
/// (tokio-rs/tokio#6005, #6325): here each call's result is the syscall's own.
#[derive(Debug)]
pub struct FileStorage {
    file: File,
}

impl FileStorage {
    /// Storage that writes at `file`'s current position.
    pub fn new(file: File) -> FileStorage {
        FileStorage { file }
    }
}

impl Storage for FileStorage {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.file.set_len(len)?;
        self.file.seek(SeekFrom::Start(len))?;
        // A size change is metadata: sync_all, not sync_data, makes it durable
        // everywhere (fdatasync covers size growth, not every filesystem's shrink).
        self.file.sync_all()
    }

    fn preallocate(&mut self, from: u64, to: u64) -> io::Result<()> {
        // Real zeros, not `fallocate`: unwritten extents would still make the first
        // sync over each of them commit metadata, which is the cost this avoids.
        static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];
        let resume = self.file.stream_position()?;
        self.file.seek(SeekFrom::Start(from))?;
        let mut at = from;
        while at < to {
            let n = (to - at).min(ZEROS.len() as u64) as usize;
            self.file.write_all(&ZEROS[..n])?;
            at += n as u64;
        }
        self.file.seek(SeekFrom::Start(resume))?;
        // The new size is metadata the next data sync would otherwise have to commit.
        self.file.sync_data()
    }
}

/// Writes all of `buf`, retrying short writes and interrupted calls.
pub(crate) fn write_all(storage: &mut dyn Storage, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match storage.write(buf) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "storage accepted no bytes of a write",
                ))
            }
            Ok(n) if n <= buf.len() => buf = &buf[n..],
            Ok(n) => {
                return Err(io::Error::other(format!(
                    "storage claims {n} bytes written of a {}-byte write",
                    buf.len()
                )))
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
