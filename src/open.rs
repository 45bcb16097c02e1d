//! Opening a log to read it without writing to it.
//!
//! On most Linux file systems (`relatime`, the default) a read updates the file's
//! access time whenever it is older than its modification time. A follower reads
//! a file the writer modifies between every two of its reads, so each poll
//! dirtied the inode and started a journal transaction beside the writer's own:
//! metadata work on the writer's file system for a time stamp nobody asked for.
//! `O_NOATIME` leaves it alone. The kernel grants it only to the file's owner (or
//! a process with `CAP_FOWNER`); anyone else reads with the usual open.

use std::fs::File;
use std::io;
use std::path::Path;

/// Opens `path` for reading, without updating its access time where the platform
/// allows it (see the module's docs).
pub(crate) fn open_to_read(path: &Path) -> io::Result<File> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let flags = rustix::fs::OFlags::NOATIME.bits() as i32;
        match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(flags)
            .open(path)
        {
            // Not the file's owner: the flag is refused, the open is not.
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {}
            opened => return opened,
        }
    }
    File::open(path)
}

/// [`open_to_read`] for async callers: on a blocking thread, as
/// `tokio::fs::File::open` does, and as a Tokio file.
pub(crate) async fn open_to_read_async(path: &Path) -> io::Result<tokio::fs::File> {
    let path = path.to_path_buf();
    let file = tokio::task::spawn_blocking(move || open_to_read(&path))
        .await
        .map_err(io::Error::other)??;
    Ok(tokio::fs::File::from_std(file))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::time::{Duration, SystemTime};

    /// The file's access time, set an hour before its modification time, is where
    /// `relatime` would move it on any read.
    fn stale_atime_file(dir: &Path) -> (std::path::PathBuf, SystemTime) {
        let path = dir.join("log");
        let mut file = File::create(&path).unwrap();
        file.write_all(b"written").unwrap();
        let modified = file.metadata().unwrap().modified().unwrap();
        let accessed = modified - Duration::from_secs(3600);
        file.set_times(std::fs::FileTimes::new().set_accessed(accessed))
            .unwrap();
        (path, accessed)
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn reading_leaves_the_access_time_alone() {
        let dir = tempfile::tempdir().unwrap();
        let (path, accessed) = stale_atime_file(dir.path());
        let mut read = String::new();
        open_to_read(&path)
            .unwrap()
            .read_to_string(&mut read)
            .unwrap();
        assert_eq!(read, "written");
        assert_eq!(
            std::fs::metadata(&path).unwrap().accessed().unwrap(),
            accessed
        );

        // What makes the assertion above mean something: a plain read moves it
        // (a file system mounted `noatime` moves it for no one).
        let mut plain = String::new();
        File::open(&path)
            .unwrap()
            .read_to_string(&mut plain)
            .unwrap();
        if std::fs::metadata(&path).unwrap().accessed().unwrap() == accessed {
            eprintln!("this file system does not update access times: nothing to show");
        }
    }

    #[tokio::test]
    async fn the_async_open_reads_the_file() {
        use tokio::io::AsyncReadExt;
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = stale_atime_file(dir.path());
        let mut read = String::new();
        open_to_read_async(&path)
            .await
            .unwrap()
            .read_to_string(&mut read)
            .await
            .unwrap();
        assert_eq!(read, "written");
    }
}
