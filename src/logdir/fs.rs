//! The seam between a [`LogDir`](crate::LogDir) and its directory: creating,
//! syncing, renaming and deleting its files. Tests put a fault-injecting implementation in
//! its place to fail any step of a rotation, a purge or a truncation.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

use crate::writer::{FileStorage, Storage};

/// Blocking file-system steps of a [`LogDir`](crate::LogDir). Every method has the
/// real implementation as its default, so a test overrides only the step it fails.
///
/// Calls run on blocking threads, never on an async task. Not part of the stable
/// API: it exists so tests can inject failures.
pub trait DirStorage: Send + Sync + std::fmt::Debug + 'static {
    /// Creates a new, empty file at `path`, failing if it exists.
    fn create(&self, path: &Path) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
    }

    /// Makes a file's data and metadata durable (`fsync`).
    fn sync_file(&self, file: &File) -> io::Result<()> {
        file.sync_all()
    }

    /// Makes the directory's entries durable: created, renamed and deleted names.
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        #[cfg(unix)]
        {
            File::open(dir)?.sync_all()
        }
        #[cfg(not(unix))]
        {
            let _ = dir;
            Ok(())
        }
    }

    /// Deletes the file at `path`.
    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    /// Renames `from` to `to`, replacing `to` atomically (durable after the next
    /// [`sync_dir`](Self::sync_dir)).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    /// The writer's storage on an open segment file, positioned where the next
    /// record goes.
    fn storage(&self, file: File) -> Box<dyn Storage> {
        Box::new(FileStorage::new(file))
    }
}

/// [`DirStorage`] on the real file system: every default.
#[derive(Debug, Clone, Copy, Default)]
pub struct OsDirStorage;

impl DirStorage for OsDirStorage {}

/// Runs a blocking file-system step off the async runtime.
pub(crate) async fn blocking<T, F>(f: F) -> io::Result<T>
where
    F: FnOnce() -> io::Result<T> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(io::Error::other)?
}
