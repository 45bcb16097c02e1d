//! One writer per directory: an exclusive `flock` on the `LOCK` file. The kernel drops
//! it when the holder exits, however it exits, so a crash never leaves a stale lock
//! behind; a second open in the same process conflicts too, because each open has its
//! own file description.
//!
//! A busy lock is tried again for a moment ([`LOCK_PATIENCE`]) before it counts as
//! held: a process that forks a child (any `Command::spawn`) lends the child every
//! open file description until the child execs, so a log closed and reopened while
//! another thread spawns a process can find its own old lock still taken for that
//! instant. A lock another `LogDir` really holds is reported after the wait.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::fs::{blocking, DirStorage};
use crate::error::Error;

/// Creates `dir` if it is missing (its name synced into its parent, so that it
/// survives a crash too) and takes its lock: the first steps of opening a log
/// directory, for a [`LogDir`](crate::LogDir) and a [`Replica`](crate::Replica) alike.
pub(crate) async fn create_and_lock(
    dir: &Path,
    storage: &Arc<dyn DirStorage>,
) -> Result<File, Error> {
    let (dir, storage): (PathBuf, _) = (dir.to_path_buf(), Arc::clone(storage));
    let dir = blocking(move || {
        if !dir.is_dir() {
            std::fs::create_dir_all(&dir)?;
            match dir.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => storage.sync_dir(parent)?,
                _ => {}
            }
        }
        Ok(dir)
    })
    .await?;
    tokio::task::spawn_blocking(move || lock_dir(&dir))
        .await
        .map_err(std::io::Error::other)?
}

/// The lock file's name inside a log directory.
pub(crate) const LOCK_FILE: &str = "LOCK";

/// How long a busy lock is tried again before [`Error::Locked`]: far longer than a
/// forked child takes to exec, short enough for an operator who opened a directory
/// twice by mistake.
pub(crate) const LOCK_PATIENCE: Duration = Duration::from_millis(500);

/// Takes the directory's lock, or fails with [`Error::Locked`] when another
/// [`LogDir`](crate::LogDir) holds it for longer than [`LOCK_PATIENCE`].
pub(crate) fn lock_dir(dir: &Path) -> Result<File, Error> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join(LOCK_FILE))?;
    #[cfg(unix)]
    {
        use rustix::fs::{flock, FlockOperation};
        let deadline = Instant::now() + LOCK_PATIENCE;
        let mut pause = Duration::from_millis(1);
        loop {
            match flock(&file, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => break,
                Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
                    if Instant::now() >= deadline {
                        return Err(Error::Locked {
                            path: dir.to_path_buf(),
                        });
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
                Err(e) => return Err(std::io::Error::from(e).into()),
            }
        }
    }
    Ok(file)
}
