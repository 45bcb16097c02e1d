//! What keeps a follower honest about the file under it: appends only ever add
//! bytes, so a file that shrank below what was read, a path that now names another
//! file, or bytes already read that now differ all mean the log was cut or replaced.
//! Reading on would join the start of an old record to the end of a new one.

use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::BytesMut;

use crate::error::{Error, LogChange};
use crate::format::zeros::{first_difference, first_nonzero, last_nonzero};
use crate::open::open_to_read;
use crate::read_at::{read_exact_at, read_exact_cached};

/// How many bytes before the point a reader may go back to (the end of the last
/// record it returned) are kept to compare with the file, beside every byte read
/// after that point. A page: any rewrite that put other records there differs
/// in it (each fragment carries a checksum), and a follower polling every
/// millisecond compares it on each poll, so a block was eight times the work for
/// nothing more found.
const WINDOW_BYTES: usize = 4096;

/// Watches the file a [`LogTailer`](crate::LogTailer) follows, or the segment a
/// [`DirReader`](crate::DirReader) in another process reads.
#[derive(Debug)]
pub(crate) struct FileGuard {
    path: PathBuf,
    /// The file being read (the same open file, not the path, which may move on).
    file: Arc<File>,
    file_id: FileId,
    /// The last bytes read, ending at the read offset.
    recent: BytesMut,
    /// Where the zeros at the end of what was read begin (the read offset when the
    /// last byte read was not zero): preallocated space the writer will fill.
    zeros_from: u64,
    /// The read offset: just past the last byte read.
    end: u64,
}

/// Which file a path names: device and inode where the platform has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    device: u64,
    inode: u64,
}

impl FileId {
    #[cfg(unix)]
    fn of(metadata: &std::fs::Metadata) -> FileId {
        use std::os::unix::fs::MetadataExt;
        FileId {
            device: metadata.dev(),
            inode: metadata.ino(),
        }
    }

    #[cfg(not(unix))]
    fn of(_: &std::fs::Metadata) -> FileId {
        FileId {
            device: 0,
            inode: 0,
        }
    }
}

/// What a check needs, moved to a blocking thread and back.
#[derive(Debug)]
pub(crate) struct Check {
    path: PathBuf,
    file: Arc<File>,
    file_id: FileId,
    read_end: u64,
    /// The end of the last record returned: a change before it is an error, one
    /// after it only means the reader must read again from it.
    returned_end: u64,
    recent: BytesMut,
    zeros_from: u64,
}

/// What a check that passed found.
#[derive(Debug)]
pub(crate) struct Checked {
    /// The window, given back.
    pub(crate) recent: BytesMut,
    /// Bytes read after the last record returned have changed (a write in progress
    /// finished, a torn tail cut and written again): the reader must go back to
    /// that record's end and read them again.
    pub(crate) moved: bool,
}

impl FileGuard {
    /// Guards the follower of the file at `path` that was opened as `reading`, whose
    /// next read starts at `read_end`. The guard opens the path again for its own
    /// reads (so they never move the follower's position), and takes the block
    /// before `read_end` as the bytes already read.
    pub(crate) fn new(
        path: PathBuf,
        reading: &std::fs::Metadata,
        read_end: u64,
    ) -> Result<FileGuard, Error> {
        let file_id = FileId::of(reading);
        let file = open_to_read(&path)?;
        if FileId::of(&file.metadata()?) != file_id {
            return Err(Error::LogChanged(LogChange::Replaced));
        }
        let len = file.metadata()?.len();
        if len < read_end {
            return Err(Error::LogChanged(LogChange::Shrunk {
                len,
                read: read_end,
            }));
        }
        let window = read_end.min(WINDOW_BYTES as u64) as usize;
        let mut recent = BytesMut::zeroed(window);
        read_exact_at(&file, &mut recent, read_end - window as u64)?;
        let zeros_from = match last_nonzero(&recent) {
            Some(last) => read_end - window as u64 + last as u64 + 1,
            None => read_end - window as u64,
        };
        Ok(FileGuard {
            path,
            file: Arc::new(file),
            file_id,
            recent,
            zeros_from,
            end: read_end,
        })
    }

    /// Notes bytes just read, which end at the read offset. `keep_from` is where
    /// the reader may go back to ([`rewind`](Self::rewind)): the window keeps a
    /// block before it, however far the reader has read past it since (at most
    /// the record it is putting together, and one read more).
    pub(crate) fn read(&mut self, bytes: &[u8], keep_from: u64) {
        if let Some(last) = last_nonzero(bytes) {
            self.zeros_from = self.end + last as u64 + 1;
        }
        self.end += bytes.len() as u64;
        let window_start = keep_from.min(self.end).saturating_sub(WINDOW_BYTES as u64);
        let read_from = self.end - bytes.len() as u64;
        let held_from = read_from - self.recent.len() as u64;
        if window_start >= read_from {
            self.recent.clear();
            let skip = (window_start - read_from) as usize;
            self.recent.extend_from_slice(&bytes[skip..]);
            return;
        }
        if window_start > held_from {
            let _ = self.recent.split_to((window_start - held_from) as usize);
        }
        self.recent.extend_from_slice(bytes);
    }

    /// The reader went back to `to`, before the end of what it read (a follower
    /// that met space the writer has not reached): the bytes after `to` are no
    /// longer taken as read, since the writer will fill them in. The window keeps
    /// what it held before `to` (less than a block when the reader went back
    /// further than its last read).
    pub(crate) fn rewind(&mut self, to: u64) {
        if to >= self.end {
            return;
        }
        let dropped = self.end - to;
        let kept = (self.recent.len() as u64).saturating_sub(dropped) as usize;
        self.recent.truncate(kept);
        self.end = to;
        let window_start = to - kept as u64;
        self.zeros_from = match last_nonzero(&self.recent) {
            Some(last) => window_start + last as u64 + 1,
            None => window_start,
        };
    }

    /// The state a check needs; `read_end` is the offset just past the last byte
    /// read, `returned_end` the end of the last record returned (at most
    /// `read_end`).
    pub(crate) fn check(&mut self, read_end: u64, returned_end: u64) -> Check {
        Check {
            path: self.path.clone(),
            file: self.file.clone(),
            file_id: self.file_id,
            read_end,
            returned_end: returned_end.min(read_end),
            recent: std::mem::take(&mut self.recent),
            zeros_from: self.zeros_from,
        }
    }

    /// Takes back the window after a check that passed.
    pub(crate) fn restore(&mut self, recent: BytesMut) {
        self.recent = recent;
    }

    /// Runs a check and takes the window back when it passes: on this thread when
    /// the bytes it compares are in the page cache, else on a blocking thread. For
    /// an async caller that awaits it (a [`DirReader`](crate::DirReader)), where a
    /// [`LogReader`](crate::LogReader) polls the same steps.
    /// Says whether bytes after `returned_end` moved (see [`Checked::moved`]).
    pub(crate) async fn verify(&mut self, read_end: u64, returned_end: u64) -> Result<bool, Error> {
        let check = self.check(read_end, returned_end);
        let checked = match check.run_cached() {
            Ok(checked) => checked?,
            Err(check) => tokio::task::spawn_blocking(move || check.run())
                .await
                .map_err(|join| Error::Io(io::Error::other(join)))??,
        };
        self.restore(checked.recent);
        Ok(checked.moved)
    }
}

impl FileGuard {
    /// The check a record assembled from more than one read needs before it is
    /// handed out: the file must still hold, in `[from, to)`, the bytes read there.
    /// A writer that cut the file and wrote it again between two of those reads
    /// changed them (the record would join the start of an old record to the end of
    /// a new one), and a record whose bytes all still read the same was, at the
    /// moment of the check, in the file whole. One read of the record's bytes, on
    /// this thread when they are cached ([`Span::run_cached`]); no `stat`: the
    /// bytes are read through the file the follower reads, which is what the record
    /// came from. `from` must not be before what the window holds (the window keeps
    /// every byte read after the point the reader may go back to).
    pub(crate) fn span(&mut self, from: u64, to: u64) -> Span {
        let window_start = self.end - self.recent.len() as u64;
        // Within the window, whatever the caller asks (what it does not hold was
        // never read through this guard).
        let to = to.clamp(window_start, self.end);
        Span {
            file: self.file.clone(),
            from: from.clamp(window_start, to),
            to,
            window_start,
            recent: std::mem::take(&mut self.recent),
        }
    }

    /// [`span`](Self::span), awaited: on this thread when the bytes are cached,
    /// else on a blocking thread. The window is taken back whatever the outcome.
    pub(crate) async fn verify_span(&mut self, from: u64, to: u64) -> Result<(), Error> {
        let (recent, result) = match self.span(from, to).run_cached() {
            Ok(done) => done,
            Err(span) => tokio::task::spawn_blocking(move || span.run())
                .await
                .map_err(|join| Error::Io(io::Error::other(join)))?,
        };
        self.restore(recent);
        result
    }
}

/// A span check under way (see [`FileGuard::span`]); it holds the guard's window,
/// given back with its outcome.
#[derive(Debug)]
pub(crate) struct Span {
    file: Arc<File>,
    from: u64,
    to: u64,
    window_start: u64,
    recent: BytesMut,
}

impl Span {
    /// Runs the check, blocking. Gives back the window and the outcome:
    /// [`LogChange::Rewritten`] at the first byte that differs,
    /// [`LogChange::Shrunk`] when the file now ends before `to`.
    pub(crate) fn run(self) -> (BytesMut, Result<(), Error>) {
        let blocking: ReadExact = |file, into, offset| Some(read_exact_at(file, into, offset));
        match self.run_reading(blocking) {
            Ok(done) => done,
            Err(span) => (
                span.recent,
                Err(io::Error::other("a blocking read would wait").into()),
            ),
        }
    }

    /// Gives back the window, the check not run.
    pub(crate) fn into_window(self) -> BytesMut {
        self.recent
    }

    /// Runs the check on this thread when the bytes are in the page cache; gives it
    /// back otherwise, to [`run`](Self::run) on a blocking thread.
    pub(crate) fn run_cached(self) -> Result<(BytesMut, Result<(), Error>), Span> {
        self.run_reading(read_exact_cached)
    }

    fn run_reading(self, read: ReadExact) -> Result<(BytesMut, Result<(), Error>), Span> {
        let len = (self.to - self.from) as usize;
        let mut now = vec![0u8; len];
        let result = match read(&self.file, &mut now, self.from) {
            None => return Err(self),
            Some(Ok(())) => {
                let held = (self.from - self.window_start) as usize;
                match first_difference(&now, &self.recent[held..held + len]) {
                    Some(at) => Err(Error::LogChanged(LogChange::Rewritten {
                        offset: self.from + at as u64,
                    })),
                    None => Ok(()),
                }
            }
            Some(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => {
                match self.file.metadata() {
                    Ok(metadata) => Err(Error::LogChanged(LogChange::Shrunk {
                        len: metadata.len(),
                        read: self.to,
                    })),
                    Err(e) => Err(e.into()),
                }
            }
            Some(Err(e)) => Err(e.into()),
        };
        Ok((self.recent, result))
    }
}

/// A check's read: fills the buffer, or `None` when it would wait for the disk.
type ReadExact = fn(&File, &mut [u8], u64) -> Option<io::Result<()>>;

/// What a check's read met: the check cannot go on on this thread.
struct WouldWait;

impl Check {
    /// Runs the check (blocking: a stat, an fstat and one read of at most a block).
    /// Gives back the window when the file is still the one that was read.
    pub(crate) fn run(mut self) -> Result<Checked, Error> {
        let blocking: ReadExact = |file, into, offset| Some(read_exact_at(file, into, offset));
        match self.run_reading(blocking) {
            Ok(checked) => checked,
            Err(WouldWait) => Err(io::Error::other("a blocking read would wait").into()),
        }
    }

    /// Runs the check on this thread if the bytes it compares are in the page
    /// cache (a follower polling every millisecond spent most of its time handing
    /// each check to a blocking thread and back); gives it back otherwise, to be
    /// [`run`](Self::run) on a blocking thread. The stat and fstat run here too: the
    /// inode of a file being read is in the inode cache.
    pub(crate) fn run_cached(mut self) -> Result<Result<Checked, Error>, Check> {
        self.run_reading(read_exact_cached)
            .map_err(|WouldWait| self)
    }

    /// The check, reading with `read`; the window is taken into what it returns,
    /// and left in place when a read would wait.
    fn run_reading(&mut self, read: ReadExact) -> Result<Result<Checked, Error>, WouldWait> {
        match std::fs::metadata(&self.path) {
            Ok(metadata) if FileId::of(&metadata) == self.file_id => {}
            Ok(_) => return Ok(Err(Error::LogChanged(LogChange::Replaced))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(Err(Error::LogChanged(LogChange::Removed)))
            }
            Err(e) => return Ok(Err(e.into())),
        }
        // A change after the last record returned is no error: those bytes were
        // never handed out, and are read again.
        let len = match self.file.metadata() {
            Ok(metadata) => metadata.len(),
            Err(e) => return Ok(Err(e.into())),
        };
        if len < self.returned_end {
            return Ok(Err(Error::LogChanged(LogChange::Shrunk {
                len,
                read: self.returned_end,
            })));
        }
        if len < self.read_end {
            return Ok(Ok(self.moved()));
        }
        if !self.recent.is_empty() {
            // The bytes before the read offset must be the ones already read: else
            // the file was cut and has grown again past the read offset, or space
            // that was read as zeros (preallocated) is being written in place.
            // One read of at most a block per wait at EOF.
            let window_start = self.read_end - self.recent.len() as u64;
            let mut now = vec![0u8; self.recent.len()];
            if let Err(e) = read(&self.file, &mut now, window_start).ok_or(WouldWait)? {
                return Ok(self.cut_while_checked(e));
            }
            if let Some(at) = first_difference(&now, &self.recent) {
                let offset = window_start + at as u64;
                if offset >= self.returned_end {
                    return Ok(Ok(self.moved()));
                }
                return Ok(Err(Error::LogChanged(LogChange::Rewritten { offset })));
            }
        }
        if self.zeros_from < self.read_end {
            // Zeros read at the end (preallocated space, read as zero fill): a writer
            // filling them in writes where they begin, which the follower has
            // already passed. Seeing that is the only way not to skip its records.
            let len = (self.read_end - self.zeros_from).min(WINDOW_BYTES as u64) as usize;
            let mut now = vec![0u8; len];
            if let Err(e) = read(&self.file, &mut now, self.zeros_from).ok_or(WouldWait)? {
                return Ok(self.cut_while_checked(e));
            }
            if let Some(at) = first_nonzero(&now) {
                let offset = self.zeros_from + at as u64;
                if offset >= self.returned_end {
                    return Ok(Ok(self.moved()));
                }
                return Ok(Err(Error::LogChanged(LogChange::Rewritten { offset })));
            }
        }
        Ok(Ok(Checked {
            recent: std::mem::take(&mut self.recent),
            moved: false,
        }))
    }

    /// A read of the check failed: the file was cut while it ran (a rewrite
    /// truncates first) when it now ends before what the read wanted.
    fn cut_while_checked(&mut self, error: io::Error) -> Result<Checked, Error> {
        if error.kind() != io::ErrorKind::UnexpectedEof {
            return Err(error.into());
        }
        let len = self.file.metadata()?.len();
        if len < self.returned_end {
            return Err(Error::LogChanged(LogChange::Shrunk {
                len,
                read: self.returned_end,
            }));
        }
        Ok(self.moved())
    }

    fn moved(&mut self) -> Checked {
        Checked {
            recent: std::mem::take(&mut self.recent),
            moved: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// A guard over `len` bytes of a file that holds them, as a follower that read
    /// them all; the file and its path.
    fn guarded(len: usize) -> (tempfile::TempDir, PathBuf, File, FileGuard) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut file = File::create(&path).unwrap();
        let data: Vec<u8> = (0..len as u32).map(|i| (i % 251) as u8 + 1).collect();
        file.write_all(&data).unwrap();
        file.sync_all().unwrap();
        let metadata = file.metadata().unwrap();
        let guard = FileGuard::new(path.clone(), &metadata, len as u64).unwrap();
        (dir, path, file, guard)
    }

    #[test]
    fn a_check_of_cached_bytes_runs_on_this_thread_and_finds_what_run_finds() {
        let (_dir, path, file, mut guard) = guarded(48 * 1024);
        // A second follower's guard: a failed check ends the follower it guards.
        let mut other = FileGuard::new(path, &file.metadata().unwrap(), 48 * 1024).unwrap();
        let check = guard.check(48 * 1024, 48 * 1024);
        let Ok(checked) = check.run_cached() else {
            panic!("bytes just written were taken for bytes on disk");
        };
        let checked = checked.unwrap();
        assert!(!checked.moved);
        guard.restore(checked.recent);

        // A byte before the last record returned rewritten (in the window the
        // guard compares): both ways fail alike.
        let rewritten = (48 * 1024 - WINDOW_BYTES / 2) as u64;
        std::os::unix::fs::FileExt::write_at(&file, b"\0", rewritten).unwrap();
        let cached = guard.check(48 * 1024, 48 * 1024).run_cached();
        let Ok(Err(Error::LogChanged(LogChange::Rewritten { offset }))) = cached else {
            panic!("{cached:?}");
        };
        assert_eq!(offset, rewritten);
        let blocking = other.check(48 * 1024, 48 * 1024).run();
        assert!(matches!(
            blocking,
            Err(Error::LogChanged(LogChange::Rewritten { offset: o })) if o == offset
        ));
    }

    /// Bytes evicted from the page cache: the check is given back untouched, to run
    /// on a blocking thread (where the file system can tell; tmpfs keeps all).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_check_of_bytes_on_disk_is_given_back_to_run_blocking() {
        use rustix::fs::{fadvise, Advice};
        let (_dir, _path, file, mut guard) = guarded(256 * 1024);
        fadvise(&file, 0, None, Advice::DontNeed).unwrap();
        match guard.check(256 * 1024, 256 * 1024).run_cached() {
            Err(check) => {
                assert_eq!(check.recent.len(), WINDOW_BYTES, "the window was kept");
                let checked = check.run().unwrap();
                assert!(!checked.moved);
                assert_eq!(checked.recent.len(), WINDOW_BYTES);
            }
            Ok(checked) => assert!(!checked.unwrap().moved),
        }
    }

    /// A record's span read in two pieces, the file cut and written again in
    /// between: the span check finds the first byte that differs, or the cut.
    #[test]
    fn a_span_check_finds_a_rewrite_between_two_reads() {
        let (_dir, _path, file, mut guard) = guarded(8 * 1024);
        let first: Vec<u8> = (0..4096u32).map(|i| (i % 13) as u8 + 1).collect();
        std::os::unix::fs::FileExt::write_at(&file, &first, 8 * 1024).unwrap();
        guard.read(&first, 8 * 1024);
        // The file cut at 10 KiB and written again: the second read gets new bytes.
        file.set_len(10 * 1024).unwrap();
        let second = vec![0xabu8; 4096];
        std::os::unix::fs::FileExt::write_at(&file, &second, 10 * 1024).unwrap();
        std::os::unix::fs::FileExt::write_at(&file, &second, 12 * 1024).unwrap();
        guard.read(&second, 8 * 1024);
        // Unchanged bytes pass; the span across the rewrite fails where it differs.
        let (recent, ok) = guard.span(8 * 1024, 10 * 1024).run();
        guard.restore(recent);
        assert!(ok.is_ok(), "{ok:?}");
        let (recent, changed) = guard.span(9 * 1024, 14 * 1024).run();
        guard.restore(recent);
        assert!(matches!(
            changed,
            Err(Error::LogChanged(LogChange::Rewritten { offset })) if offset == 10 * 1024
        ));
        file.set_len(11 * 1024).unwrap();
        let (_, cut) = guard.span(9 * 1024, 14 * 1024).run();
        assert!(matches!(
            cut,
            Err(Error::LogChanged(LogChange::Shrunk { len, .. })) if len == 11 * 1024
        ));
    }

    #[test]
    fn a_replaced_or_removed_file_fails_the_check_on_this_thread() {
        let (_dir, path, _file, mut guard) = guarded(1024);
        std::fs::remove_file(&path).unwrap();
        let removed = guard.check(1024, 1024).run_cached();
        assert!(matches!(
            removed,
            Ok(Err(Error::LogChanged(LogChange::Removed)))
        ));
        std::fs::write(&path, b"another file").unwrap();
        let replaced = guard.check(1024, 1024).run_cached();
        assert!(matches!(
            replaced,
            Ok(Err(Error::LogChanged(LogChange::Replaced)))
        ));
    }
}
