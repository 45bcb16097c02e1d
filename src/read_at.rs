//! Reading a file at an offset from async code without a thread hop when the bytes
//! are in the page cache.
//!
//! `tokio::fs::File` runs every read on a blocking thread: two context switches and
//! a wake-up, tens of microseconds of CPU, for a follower that reads the hundred
//! bytes an append just wrote. Those bytes are in the page cache, where a read cannot
//! block. On Linux, `preadv2` with `RWF_NOWAIT` reads them on the task's own thread
//! and refuses (`EAGAIN`) rather than wait for the disk; only then does the read go
//! to a blocking thread. Elsewhere every read goes there.
//!
//! Reads are positional (`pread`), so the file has no cursor to keep in step: a
//! reader that goes back just reads from an earlier offset. Used by `DirReader`
//! (following in the writer's process reads what an append just wrote), by the
//! replication serve loop (it ships what a commit just made durable), and, for
//! their blocking reads, by the file guard of followers in other processes.

use std::fs::File;
use std::io;
use std::ops::Range;
use std::sync::Arc;

use bytes::BytesMut;

/// Reads up to `max` bytes of `file` at `offset`, appending them to `buf`; returns
/// how many (0 at the end of the file). Fewer than `max` may also mean that only
/// part of the range was cached: callers treat a short read as reaching the end,
/// which at worst costs one more read.
pub(crate) async fn read_at(
    file: &Arc<File>,
    buf: &mut BytesMut,
    offset: u64,
    max: usize,
) -> io::Result<usize> {
    let before = buf.len();
    // Zeroed rather than left uninitialised: the crate has no unsafe code, and a
    // memset of a read's size is small beside the read.
    buf.resize(before + max, 0);
    if let Some(read) = read_cached(file, &mut buf[before..], offset) {
        return finish(buf, before, read);
    }
    let file = Arc::clone(file);
    let mut owned = std::mem::take(buf);
    let (owned, read) = tokio::task::spawn_blocking(move || {
        let read = read_blocking(&file, &mut owned[before..], offset);
        (owned, read)
    })
    .await
    .map_err(io::Error::other)?;
    #[cfg(test)]
    tests::note_blocking_read();
    *buf = owned;
    finish(buf, before, read)
}

/// Keeps the bytes read and drops the rest of the zeroed room.
fn finish(buf: &mut BytesMut, before: usize, read: io::Result<usize>) -> io::Result<usize> {
    match read {
        Ok(n) => {
            buf.truncate(before + n);
            Ok(n)
        }
        Err(e) => {
            buf.truncate(before);
            Err(e)
        }
    }
}

/// The read, on this thread, if it can be served from the page cache: `None` when
/// it would wait for the disk (or the kernel cannot tell).
#[cfg(target_os = "linux")]
fn read_cached(file: &File, into: &mut [u8], offset: u64) -> Option<io::Result<usize>> {
    use rustix::io::{preadv2, Errno, ReadWriteFlags};
    #[cfg(test)]
    if tests::refusing_cached_reads() {
        return None;
    }
    loop {
        let mut slices = [io::IoSliceMut::new(into)];
        return match preadv2(file, &mut slices, offset, ReadWriteFlags::NOWAIT) {
            Ok(n) => Some(Ok(n)),
            Err(Errno::INTR) => continue,
            // EAGAIN: not cached; EOPNOTSUPP, ENOSYS, EINVAL: a kernel or file
            // system without RWF_NOWAIT.
            Err(Errno::AGAIN | Errno::OPNOTSUPP | Errno::NOSYS | Errno::INVAL) => None,
            Err(e) => Some(Err(e.into())),
        };
    }
}

#[cfg(not(target_os = "linux"))]
fn read_cached(_: &File, _: &mut [u8], _: u64) -> Option<io::Result<usize>> {
    None
}

/// Fills `buf[range]` with the bytes of `file` at `offset`, which must all exist
/// ([`io::ErrorKind::UnexpectedEof`] otherwise): from the page cache on this thread
/// as far as it holds them, the rest on a blocking thread. `buf` is moved there and
/// back for that.
pub(crate) async fn read_exact_into(
    file: &Arc<File>,
    mut buf: Vec<u8>,
    mut range: Range<usize>,
    mut offset: u64,
) -> io::Result<Vec<u8>> {
    while !range.is_empty() {
        match read_cached(file, &mut buf[range.clone()], offset) {
            Some(Ok(0)) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Some(Ok(n)) => {
                range.start += n;
                offset += n as u64;
            }
            Some(Err(e)) => return Err(e),
            None => {
                let file = Arc::clone(file);
                let read = tokio::task::spawn_blocking(move || {
                    read_exact_at(&file, &mut buf[range], offset)?;
                    Ok(buf)
                })
                .await
                .map_err(io::Error::other)?;
                #[cfg(test)]
                tests::note_blocking_read();
                return read;
            }
        }
    }
    Ok(buf)
}

/// Fills `into` with the bytes of `file` at `offset` from the page cache, on this
/// thread: `None` when some of them would wait for the disk (the caller then reads
/// on a blocking thread), [`io::ErrorKind::UnexpectedEof`] if the file ends first.
pub(crate) fn read_exact_cached(
    file: &File,
    mut into: &mut [u8],
    mut offset: u64,
) -> Option<io::Result<()>> {
    while !into.is_empty() {
        match read_cached(file, into, offset)? {
            Ok(0) => return Some(Err(io::ErrorKind::UnexpectedEof.into())),
            Ok(n) => {
                into = &mut into[n..];
                offset += n as u64;
            }
            Err(e) => return Some(Err(e)),
        }
    }
    Some(Ok(()))
}

/// The read on a blocking thread, which may wait for the disk.
fn read_blocking(file: &File, into: &mut [u8], offset: u64) -> io::Result<usize> {
    loop {
        #[cfg(unix)]
        let read = std::os::unix::fs::FileExt::read_at(file, into, offset);
        #[cfg(windows)]
        let read = std::os::windows::fs::FileExt::seek_read(file, into, offset);
        match read {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            read => return read,
        }
    }
}

/// Fills `into` with the bytes of `file` at `offset`, blocking: `pread` until
/// done, [`io::ErrorKind::UnexpectedEof`] if the file ends first.
pub(crate) fn read_exact_at(file: &File, mut into: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !into.is_empty() {
        match read_blocking(file, into, offset)? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => {
                into = &mut into[n..];
                offset += n as u64;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::io::Write;

    // Per thread: a current-thread runtime runs a test's reads on the test's own
    // thread, so tests running in parallel do not see each other's.
    thread_local! {
        /// Reads that went to a blocking thread, counted on the calling thread.
        static BLOCKING_READS: Cell<usize> = const { Cell::new(0) };
        /// The page cache is taken to hold nothing: what a kernel says of evicted
        /// bytes (`EAGAIN`), whatever the file system.
        static REFUSE_CACHED: Cell<bool> = const { Cell::new(false) };
    }

    pub(super) fn note_blocking_read() {
        BLOCKING_READS.with(|n| n.set(n.get() + 1));
    }

    pub(super) fn refusing_cached_reads() -> bool {
        REFUSE_CACHED.with(Cell::get)
    }

    fn blocking_reads() -> usize {
        BLOCKING_READS.with(Cell::get)
    }

    /// Reads the cache cannot serve go to a blocking thread, and read the same
    /// bytes: the counter shows that path ran, once per read.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn reads_the_cache_refuses_run_on_a_blocking_thread() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"0123456789").unwrap();
        let file = Arc::new(file);
        REFUSE_CACHED.with(|r| r.set(true));
        let mut probe = [0u8; 4];
        assert!(read_cached(&file, &mut probe, 0).is_none());
        let mut buf = BytesMut::from(&b"ab"[..]);
        assert_eq!(read_at(&file, &mut buf, 3, 4).await.unwrap(), 4);
        assert_eq!(&buf[..], b"ab3456");
        assert_eq!(blocking_reads(), 1);
        assert_eq!(read_at(&file, &mut buf, 10, 4).await.unwrap(), 0);
        assert_eq!(&buf[..], b"ab3456");
        assert_eq!(blocking_reads(), 2);
        let buf = read_exact_into(&file, vec![b'-'; 8], 2..6, 5)
            .await
            .unwrap();
        assert_eq!(&buf, b"--5678--");
        assert_eq!(blocking_reads(), 3);
        let short = read_exact_into(&file, vec![0; 8], 0..8, 5)
            .await
            .unwrap_err();
        assert_eq!(short.kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(blocking_reads(), 4);
        REFUSE_CACHED.with(|r| r.set(false));
    }

    #[tokio::test]
    async fn reads_at_offsets_appending_and_stops_at_the_end() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"0123456789").unwrap();
        let file = Arc::new(file);
        let mut buf = BytesMut::from(&b"ab"[..]);
        assert_eq!(read_at(&file, &mut buf, 3, 4).await.unwrap(), 4);
        assert_eq!(&buf[..], b"ab3456");
        assert_eq!(read_at(&file, &mut buf, 8, 64).await.unwrap(), 2);
        assert_eq!(&buf[..], b"ab345689");
        assert_eq!(read_at(&file, &mut buf, 10, 64).await.unwrap(), 0);
        assert_eq!(&buf[..], b"ab345689");
    }

    /// Bytes evicted from the page cache: the cached read refuses them (on a file
    /// system that can tell) and the read goes to a blocking thread, with the same
    /// result.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn bytes_not_in_the_page_cache_are_read_on_a_blocking_thread() {
        use rustix::fs::{fadvise, Advice};
        let data: Vec<u8> = (0..256 * 1024u32).map(|i| (i % 251) as u8).collect();
        let dir = tempfile::tempdir().unwrap();
        let mut file = std::fs::File::create(dir.path().join("evicted")).unwrap();
        file.write_all(&data).unwrap();
        file.sync_all().unwrap();
        fadvise(&file, 0, None, Advice::DontNeed).unwrap();
        let file = Arc::new(std::fs::File::open(dir.path().join("evicted")).unwrap());
        let mut probe = [0u8; 4096];
        let cached = read_cached(&file, &mut probe, 100 * 1024);
        let mut buf = BytesMut::new();
        let n = read_at(&file, &mut buf, 100 * 1024, 64 * 1024)
            .await
            .unwrap();
        assert_eq!(&buf[..n], &data[100 * 1024..100 * 1024 + n]);
        assert!(n > 0);
        // Where the file system evicts on request, the probe was refused (and
        // the read above most likely went the blocking way: the probe may itself
        // start read-ahead, so this does not count on it; the test above does);
        // tmpfs keeps everything cached.
        if let Some(read) = cached {
            assert_eq!(&probe[..read.unwrap()], &data[100 * 1024..104 * 1024]);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn exact_reads_fill_the_range_or_fail_at_the_end() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"0123456789").unwrap();
        let file = Arc::new(file);
        let buf = read_exact_into(&file, vec![b'-'; 8], 2..6, 5)
            .await
            .unwrap();
        assert_eq!(&buf, b"--5678--");
        let short = read_exact_into(&file, vec![0; 8], 0..8, 5)
            .await
            .unwrap_err();
        assert_eq!(short.kind(), io::ErrorKind::UnexpectedEof);
        let mut into = [0u8; 3];
        read_exact_at(&file, &mut into, 7).unwrap();
        assert_eq!(&into, b"789");
        let short = read_exact_at(&file, &mut into, 8).unwrap_err();
        assert_eq!(short.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[tokio::test]
    async fn the_blocking_path_reads_the_same() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"0123456789").unwrap();
        let mut into = [0u8; 4];
        assert_eq!(read_blocking(&file, &mut into, 6).unwrap(), 4);
        assert_eq!(&into, b"6789");
        assert_eq!(read_blocking(&file, &mut into, 10).unwrap(), 0);
    }
}
