//! Where a reading command's bytes come from, and where the read stops.
//!
//! | input                                   | read                                   |
//! |-----------------------------------------|----------------------------------------|
//! | a regular file                          | up to the length it had when opened    |
//! | a block device                          | up to its size                         |
//! | `-` (stdin), a pipe, a socket           | until its writer closes it             |
//! | a character device (`/dev/zero`, a tty) | refused without `--max-input-bytes`    |
//!
//! `--max-input-bytes N` stops every read at offset N.
//!
//! Why: a file that a writer appends to would otherwise never end for a reader that
//! keeps up, and a character device such as `/dev/zero` never ends at all. Reading a
//! regular file only up to its length at open makes every run finish; comparing its
//! size and modification time at the end tells whether a writer was at work, so the
//! command can say its result is for a live log (a writer filling preallocated space
//! changes no size, only the time). Nothing here seeks unless the input is a file or
//! a device, so pipes work; `--start` skips by reading there.

use std::fs::File;
use std::io::{self, IsTerminal, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::SystemTime;

use indicatif::{ProgressBar, ProgressStyle};
use tokio::io::{AsyncRead, ReadBuf};

pub(crate) use crate::failure::{input_name, Failure, STDIN};
use crate::limits::Limits;

/// An input opened again, for reads of its own at offsets of their own: a
/// `std::fs::File` each, which std reads into spare capacity without zeroing it.
#[derive(Debug, Clone)]
pub(crate) struct SplitSource {
    path: PathBuf,
    identity: Option<(u64, u64)>,
}

impl SplitSource {
    /// The bytes `[from, to)` of the input.
    pub(crate) fn open(&self, from: u64, to: u64) -> io::Result<io::Take<File>> {
        let mut file = File::open(&self.path)?;
        if identity(&file.metadata()?) != self.identity {
            return Err(io::Error::other("the file was replaced while it was read"));
        }
        file.seek(SeekFrom::Start(from))?;
        Ok(file.take(to.saturating_sub(from)))
    }
}

/// What tells a file from another one at the same path.
#[cfg(unix)]
fn identity(metadata: &std::fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((metadata.dev(), metadata.ino()))
}

#[cfg(not(unix))]
fn identity(_metadata: &std::fs::Metadata) -> Option<(u64, u64)> {
    None
}

/// Regular files smaller than this are read without a progress bar: they take no time.
const PROGRESS_MIN_BYTES: u64 = 16 << 20;

/// A log being read: a file, a device or a stream, bounded as the table above says.
#[derive(Debug)]
pub(crate) struct Input {
    /// How messages name it: the path as given, or "stdin".
    name: String,
    /// The path as given (`None` for stdin).
    path: Option<PathBuf>,
    file: File,
    /// The offset of the next byte read.
    position: u64,
    /// Where the read stops (`None`: at the input's end).
    end: Option<u64>,
    /// Whether `end` is `--max-input-bytes` rather than the input's own length.
    capped: bool,
    /// A file or a device: `skip_to` seeks.
    seekable: bool,
    /// The file as it was at open, to notice a writer (regular files only).
    at_open: Option<Snapshot>,
    progress: Option<ProgressBar>,
    /// Bytes read ahead by `peek` and not yet handed out: the next reads return them
    /// first, so a stream can be looked at before it is read.
    peeked: Vec<u8>,
    /// How many of `peeked` were handed out.
    peeked_read: usize,
}

/// What a regular file looked like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Snapshot {
    len: u64,
    modified: Option<SystemTime>,
}

impl Snapshot {
    fn of(file: &File) -> io::Result<Snapshot> {
        let metadata = file.metadata()?;
        Ok(Snapshot {
            len: metadata.len(),
            modified: metadata.modified().ok(),
        })
    }
}

/// How far a read went, and whether the input changed under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InputEnd {
    /// The offset just past the last byte read.
    pub(crate) read_to: u64,
    /// Whether the read stopped at `--max-input-bytes`: the input may go on.
    pub(crate) capped: bool,
    /// Set when a regular file's size or modification time changed during the read.
    pub(crate) change: Option<FileChange>,
}

/// A regular file that a writer changed while it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileChange {
    pub(crate) len_at_open: u64,
    pub(crate) len_at_end: u64,
}

impl Input {
    /// Opens `path` (`-` for stdin) for reading from offset 0.
    pub(crate) fn open(path: &Path, limits: Limits) -> Result<Input, Failure> {
        let name = input_name(path);
        let file = if path == Path::new(STDIN) {
            stdin_file()
        } else {
            File::open(path)
        };
        let file = file.map_err(|e| Failure::named(&name, e))?;
        let failure = |e: io::Error| Failure::io(path, e);
        let metadata = file.metadata().map_err(failure)?;
        let mut input = Input {
            name,
            path: (path != Path::new(STDIN)).then(|| path.to_path_buf()),
            file,
            position: 0,
            end: None,
            capped: false,
            seekable: false,
            at_open: None,
            progress: None,
            peeked: Vec::new(),
            peeked_read: 0,
        };
        if metadata.is_dir() {
            // Only a log directory's own readers (`dir.rs`) take a directory.
            return Err(Failure::new(format!(
                "{}: a directory, not a log file (verify, stat, dump, cat and tail read a log directory's segments)",
                input.name
            )));
        }
        let kind = Kind::of(&metadata.file_type());
        input.seekable = matches!(kind, Kind::Regular | Kind::BlockDevice);
        let own_end = match kind {
            Kind::Regular => {
                let snapshot = Snapshot::of(&input.file).map_err(failure)?;
                input.at_open = Some(snapshot);
                Some(snapshot.len)
            }
            Kind::BlockDevice => {
                let size = input.file.seek(SeekFrom::End(0)).map_err(failure)?;
                input.file.rewind().map_err(failure)?;
                Some(size)
            }
            Kind::Stream => None,
            Kind::Endless if limits.max_input_bytes.is_none() => {
                let why = if input.file.is_terminal() {
                    "a terminal: pipe a log in (`cat LOG | walcodec dump -`) or name its file"
                } else {
                    "a character device, which may never end: give --max-input-bytes N to read its first N bytes"
                };
                return Err(Failure::new(format!("{}: {why}", input.name)));
            }
            Kind::Endless => None,
        };
        input.end = match (own_end, limits.max_input_bytes) {
            (Some(own), Some(cap)) if cap < own => {
                input.capped = true;
                Some(cap)
            }
            (own @ Some(_), _) => own,
            (None, cap) => {
                input.capped = cap.is_some();
                cap
            }
        };
        input.progress = progress(input.end);
        Ok(input)
    }

    /// The name messages use for the input.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The next (up to) `len` bytes, which the next reads return again: how a command
    /// looks at the start of a log before reading it, also on a pipe.
    pub(crate) fn peek(&mut self, len: usize) -> Result<&[u8], Failure> {
        let wanted = match self.end {
            Some(end) => end.saturating_sub(self.position).min(len as u64) as usize,
            None => len,
        };
        let mut peeked = std::mem::take(&mut self.peeked);
        peeked.drain(..self.peeked_read);
        self.peeked_read = 0;
        let have = peeked.len();
        if have < wanted {
            peeked.resize(wanted, 0);
            let mut filled = have;
            while filled < wanted {
                match self.file.read(&mut peeked[filled..]) {
                    Ok(0) => break,
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(self.failure(e)),
                }
            }
            peeked.truncate(filled);
        }
        self.peeked = peeked;
        Ok(&self.peeked[..wanted.min(self.peeked.len())])
    }

    /// Moves to `offset`: a seek on a file or a device, reading and dropping bytes on
    /// a stream, which cannot seek.
    pub(crate) fn skip_to(&mut self, offset: u64) -> Result<(), Failure> {
        let offset = self.end.map_or(offset, |end| offset.min(end));
        if self.seekable {
            // The seek moves past (or back before) any bytes peeked at.
            self.peeked.clear();
            self.peeked_read = 0;
            self.file
                .seek(SeekFrom::Start(offset))
                .map_err(|e| self.failure(e))?;
            self.position = offset;
        } else {
            let wanted = offset.saturating_sub(self.position);
            io::copy(&mut self.by_ref().take(wanted), &mut io::sink())
                .map_err(|e| self.failure(e))?;
        }
        if let Some(bar) = &self.progress {
            bar.set_position(self.position);
        }
        Ok(())
    }

    /// A file or a device named by a path whose read ends at a known offset: how to
    /// open it again for reads of its own, and that end. `None` for stdin and
    /// streams.
    pub(crate) fn split_source(&self) -> Option<(SplitSource, u64)> {
        if !self.seekable {
            return None;
        }
        let end = self.end?;
        let path = self.path.clone()?;
        let identity = identity(&self.file.metadata().ok()?);
        Some((SplitSource { path, identity }, end))
    }

    /// The progress bar, for reads made beside this input (`split_source`).
    pub(crate) fn progress_bar(&self) -> Option<ProgressBar> {
        self.progress.clone()
    }

    /// A reader of the rest of this input, for a thread of its own: the same file
    /// handle, position, end and progress bar. `set_read_to` says how far it read.
    pub(crate) fn reader(&self) -> io::Result<Input> {
        Ok(Input {
            name: self.name.clone(),
            path: self.path.clone(),
            file: self.file.try_clone()?,
            // What `peek` read ahead (the first block, for `LogChoice`) and this
            // input has not handed out yet: the new reader's first bytes.
            peeked: self.peeked[self.peeked_read..].to_vec(),
            peeked_read: 0,
            position: self.position,
            end: self.end,
            capped: self.capped,
            seekable: self.seekable,
            at_open: None,
            progress: self.progress.clone(),
        })
    }

    /// Notes that reads beside this input (`split_source`) went up to `offset`.
    pub(crate) fn set_read_to(&mut self, offset: u64) {
        self.position = offset;
    }

    /// An I/O error reading this input, as a failure.
    pub(crate) fn failure(&self, error: io::Error) -> Failure {
        Failure::named(&self.name, error)
    }

    /// Ends the read: clears the progress bar and says how far it went.
    pub(crate) fn finish(&mut self) -> InputEnd {
        if let Some(bar) = self.progress.take() {
            bar.finish_and_clear();
        }
        let capped = self.capped && Some(self.position) == self.end;
        let change = self.at_open.and_then(|open| {
            // A file that can no longer be looked at is not known to have changed.
            let now = Snapshot::of(&self.file).ok()?;
            (now != open).then_some(FileChange {
                len_at_open: open.len,
                len_at_end: now.len,
            })
        });
        InputEnd {
            read_to: self.position,
            capped,
            change,
        }
    }
}

impl Read for Input {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let wanted = match self.end {
            Some(end) => end.saturating_sub(self.position).min(buffer.len() as u64) as usize,
            None => buffer.len(),
        };
        if wanted == 0 {
            return Ok(0);
        }
        let n = if self.peeked_read < self.peeked.len() {
            let peeked = &self.peeked[self.peeked_read..];
            let n = peeked.len().min(wanted);
            buffer[..n].copy_from_slice(&peeked[..n]);
            self.peeked_read += n;
            n
        } else {
            self.file.read(&mut buffer[..wanted])?
        };
        self.position += n as u64;
        if let Some(bar) = &self.progress {
            bar.set_position(self.position);
        }
        Ok(n)
    }
}

/// The most `BlockingReader` asks for at a time.
const MAX_READ_BYTES: usize = 256 << 10;

/// [`Input`] as a tokio reader, for `LogReader`. Its reads block the thread, which is
/// what a tokio file would do on a thread of its own: the tool's runtime has one
/// thread and nothing else to run while a command reads its input.
#[derive(Debug)]
pub(crate) struct BlockingReader(pub(crate) Input);

impl AsyncRead for BlockingReader {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let input = &mut self.get_mut().0;
        // A read into uninitialized memory must zero it first: asking for at most
        // this much keeps that cheap when a pipe hands over 64 KiB at a time.
        let wanted = buffer.remaining().min(MAX_READ_BYTES);
        loop {
            match input.read(buffer.initialize_unfilled_to(wanted)) {
                Ok(n) => {
                    buffer.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

/// What an input is, for where its read ends.
enum Kind {
    Regular,
    BlockDevice,
    /// Ends when its writer closes it: a pipe or a socket.
    Stream,
    /// May never end: a character device.
    Endless,
}

impl Kind {
    #[cfg(unix)]
    fn of(file_type: &std::fs::FileType) -> Kind {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_file() {
            Kind::Regular
        } else if file_type.is_block_device() {
            Kind::BlockDevice
        } else if file_type.is_fifo() || file_type.is_socket() {
            Kind::Stream
        } else {
            Kind::Endless
        }
    }

    #[cfg(not(unix))]
    fn of(file_type: &std::fs::FileType) -> Kind {
        if file_type.is_file() {
            Kind::Regular
        } else {
            Kind::Stream
        }
    }
}

/// Stdin as a file, so that it is read (and looked at) like any other input: a
/// regular file redirected to stdin is bounded by its length too.
#[cfg(unix)]
fn stdin_file() -> io::Result<File> {
    use std::os::fd::AsFd;
    Ok(File::from(io::stdin().as_fd().try_clone_to_owned()?))
}

#[cfg(windows)]
fn stdin_file() -> io::Result<File> {
    use std::os::windows::io::AsHandle;
    Ok(File::from(io::stdin().as_handle().try_clone_to_owned()?))
}

/// A progress bar on stderr, only when stderr is a terminal: piped output stays
/// clean. Over the bytes to read for a large bounded input; for an input without a
/// known end, a count of the bytes read so far, so that a read that goes on says
/// what it is waiting for.
fn progress(end: Option<u64>) -> Option<ProgressBar> {
    if !io::stderr().is_terminal() {
        return None;
    }
    match end {
        Some(total) => {
            if total < PROGRESS_MIN_BYTES {
                return None;
            }
            let bar = ProgressBar::new(total);
            bar.set_style(
                ProgressStyle::with_template(
                    "{bar:40} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} eta {eta}",
                )
                .expect("a valid template"),
            );
            Some(bar)
        }
        None => {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} {binary_bytes} read, {binary_bytes_per_sec}; reading until the input ends (--max-input-bytes N stops earlier)",
                )
                .expect("a valid template"),
            );
            Some(bar)
        }
    }
}

/// Each range of a split read opens the file again, and fails if the path now names
/// another file than the one opened.
impl walcodec::inspect::RangeSource for SplitSource {
    fn open_range(&self, from: u64, to: u64) -> io::Result<Box<dyn Read + '_>> {
        Ok(Box::new(self.open(from, to)?))
    }
}
