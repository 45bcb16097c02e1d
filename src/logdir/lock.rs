//! One writer per directory: an exclusive `flock` on the `LOCK` file, taken without
//! waiting. The kernel drops it when the holder exits, however it exits, so a crash
//! never leaves a stale lock behind; a second open in the same process conflicts
//! too, because each open has its own file description.

use std::fs::{File, OpenOptions};
use std::path::Path;

use crate::Error;

/// The lock file's name inside a log directory.
pub(crate) const LOCK_FILE: &str = "LOCK";

/// Takes the directory's lock, or fails with [`Error::Locked`] when another
/// [`LogDir`](crate::LogDir) holds it.
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
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
                return Err(Error::Locked {
                    path: dir.to_path_buf(),
                })
            }
            Err(e) => return Err(std::io::Error::from(e).into()),
        }
    }
    Ok(file)
}
