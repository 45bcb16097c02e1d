//! `write OUT`: a log from records on stdin, the reverse of `cat`.
//!
//! | `--from` | stdin holds                                                   |
//! |----------|---------------------------------------------------------------|
//! | `lines`  | one record a line (without its `\n`); an empty line is an empty record |
//! | `hex`    | one record a line in hex (either case); an empty line is an empty record |
//! | `recordio` | Mesos RecordIO (`LENGTH\n` and the bytes, for each record); `--lenient` also takes empty lines and `\r\n` |
//!
//! With `--stream`, all of stdin is one record, of any size: it is framed a
//! fragment at a time ([`LogWriter`]), so memory stays at a block or two and
//! `--max-record-bytes` does not apply.
//!
//! A new file is created (an existing one is refused); `--append` continues an
//! existing log at its length, as LevelDB's writer does on reopen, once it has
//! checked that the log ends with a complete record. The data is synced (and a new
//! file's directory entry too) before the command succeeds. On bad input nothing is
//! left behind: a new file is removed, an appended one truncated back.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, Read, Write};
use std::path::{Path, PathBuf};

use bytes::BytesMut;
use clap::ValueEnum;
use tokio_util::codec::Decoder;
use walcodec::{LogEncoder, LogWriter, RecordIoCodec};

use crate::common::{parse_hex, Failure, Limits, Status};
use crate::dialect::{DialectArg, DialectArgs, LogChoice};
use crate::input::Input;
use crate::scan::{scan, JobsArgs};
use crate::verdict::tail_of;
use walcodec::inspect::Tail;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The log file to write.
    out: PathBuf,
    /// How the records on stdin are framed.
    #[arg(long, value_enum, default_value_t = From::Lines)]
    from: From,
    /// Append to OUT if it exists (its tail must be clean) instead of refusing it.
    #[arg(long)]
    append: bool,
    /// With --from recordio: also accept empty lines between records and `\r\n`
    /// after a length, as some Mesos clients send.
    #[arg(long)]
    lenient: bool,
    /// All of stdin is one record, of any size (streamed; --max-record-bytes does
    /// not apply).
    #[arg(long, conflicts_with_all = ["from", "lenient"])]
    stream: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum From {
    /// One record a line.
    Lines,
    /// One record a line, in hex.
    Hex,
    /// Mesos RecordIO.
    Recordio,
}

/// Bytes of encoded log gathered before a write to the file.
const WRITE_CHUNK_BYTES: usize = 1 << 20;

pub(crate) fn run(args: Args, limits: Limits) -> Result<Status, Failure> {
    let path = &args.out;
    let existing_len = if args.append && path.exists() {
        match check_tail(path, limits)? {
            Ok(len) => Some(len),
            Err(status) => return Ok(status),
        }
    } else {
        None
    };
    let mut file = match existing_len {
        Some(_) => OpenOptions::new().append(true).open(path),
        None => OpenOptions::new().write(true).create_new(true).open(path),
    }
    .map_err(|e| match e.kind() {
        io::ErrorKind::AlreadyExists => Failure::new(format!(
            "{}: already exists; refusing to overwrite it (--append adds to it)",
            path.display()
        )),
        _ => Failure::io(path, e),
    })?;

    let stdin = io::stdin().lock();
    let written = if args.stream {
        copy_stream(stdin, path, &mut file, existing_len.unwrap_or(0))
    } else {
        copy_records(stdin, &args, limits, &mut file, existing_len.unwrap_or(0))
    };
    if let Err(failure) = written {
        // Leave OUT as it was: bad input must not leave half a log behind.
        match existing_len {
            Some(len) => {
                let _ = file.set_len(len).and_then(|()| file.sync_all());
            }
            None => {
                drop(file);
                let _ = std::fs::remove_file(path);
            }
        }
        return Err(failure);
    }
    file.sync_all().map_err(|e| Failure::io(path, e))?;
    if existing_len.is_none() {
        sync_parent(path).map_err(|e| Failure::io(path, e))?;
    }
    Ok(Status::Clean)
}

/// Checks that the log at `path` can be appended to: no damage, and nothing after its
/// last complete record. `Ok(len)` to append at `len`, `Err(status)` once explained.
fn check_tail(path: &Path, limits: Limits) -> Result<Result<u64, Status>, Failure> {
    let mut input = Input::open(path, limits)?;
    let auto = DialectArgs {
        dialect: DialectArg::Auto,
        log_number: None,
    };
    let log = LogChoice::resolve(&mut input, path, &auto)?;
    if log.dialect != walcodec::Dialect::LevelDb {
        let engine = match log.dialect {
            walcodec::Dialect::Pebble => "a Pebble WAL",
            _ => "a RocksDB WAL",
        };
        return Err(Failure::new(format!(
            "{}: refusing to append: {engine} ({}), and write appends LevelDB's format",
            path.display(),
            log.describe()
        )));
    }
    let end = scan(&mut input, &JobsArgs::default(), limits, &log, &mut |_| {
        Ok(())
    })?;
    let strict = &end.strict;
    if let Some(damage) = &strict.damage {
        eprintln!(
            "walcodec: {}: refusing to append: the log is corrupt ({damage}; see `walcodec verify`)",
            path.display(),
        );
        return Ok(Err(Status::Corrupt));
    }
    match tail_of(&end, false) {
        Tail::Clean => {}
        // Not damage (verify calls this log clean), but appending after the zeros
        // would hide the new records behind them: a reader skips zero fill.
        Tail::Zeros { after, bytes } => {
            return Err(Failure::new(format!(
                "{}: refusing to append: {bytes} bytes of zeros (preallocated space or block padding) follow the last complete record (offset {after}); run `walcodec repair` to trim them first",
                path.display()
            )));
        }
        // Only Pebble's dialect ends a log before its file; refused above.
        Tail::Ended { at, bytes, .. } => {
            return Err(Failure::new(format!(
                "{}: refusing to append: the log ends at offset {at}, {bytes} bytes before the file does",
                path.display()
            )));
        }
        // Appends after a recycled file's old bytes would leave them between.
        Tail::Torn { after, bytes }
        | Tail::EarlierUse { after, bytes }
        | Tail::RecycledEnd { after, bytes } => {
            eprintln!(
                "walcodec: {}: refusing to append: {bytes} bytes follow the last complete record (offset {after}); run `walcodec repair` first",
                path.display(),
            );
            return Ok(Err(Status::TornTail));
        }
    }
    Ok(Ok(end.file_len))
}

/// Appends encoded records to a file, a chunk at a time.
struct Output<'a> {
    file: &'a mut File,
    path: &'a Path,
    encoder: LogEncoder,
    pending: BytesMut,
}

impl Output<'_> {
    fn push(&mut self, record: &[u8]) -> Result<(), Failure> {
        self.encoder.encode_record(record, &mut self.pending);
        if self.pending.len() >= WRITE_CHUNK_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Failure> {
        self.file
            .write_all(&self.pending)
            .map_err(|e| Failure::io(self.path, e))?;
        self.pending.clear();
        Ok(())
    }
}

/// Encodes the records of `input` onto the end of `file`, a log `len` bytes long.
fn copy_records(
    input: impl BufRead,
    args: &Args,
    limits: Limits,
    file: &mut File,
    len: u64,
) -> Result<(), Failure> {
    let mut output = Output {
        file,
        path: &args.out,
        encoder: LogEncoder::with_offset(len),
        pending: BytesMut::with_capacity(WRITE_CHUNK_BYTES),
    };
    match args.from {
        From::Lines => copy_lines(input, false, limits, &mut output)?,
        From::Hex => copy_lines(input, true, limits, &mut output)?,
        From::Recordio => copy_recordio(input, args.lenient, limits, &mut output)?,
    }
    output.flush()
}

/// Writes all of `input` as one record onto the end of `file`, a log `len` bytes
/// long, a fragment at a time.
fn copy_stream(
    input: impl Read + Unpin,
    path: &Path,
    file: &mut File,
    len: u64,
) -> Result<(), Failure> {
    let mut writer = LogWriter::with_offset(Blocking(io::BufWriter::new(file)), len);
    // The reads and writes block, as the rest of this command's do: nothing else
    // runs meanwhile, so a plain executor drives the writer.
    futures::executor::block_on(writer.append_stream(Blocking(input))).map_err(|e| {
        let message = e.to_string();
        if message.starts_with("stdin:") {
            Failure::new(message)
        } else {
            Failure::new(format!("{}: {message}", path.display()))
        }
    })?;
    let Blocking(mut out) = writer.into_inner();
    out.flush().map_err(|e| Failure::io(path, e))
}

/// A blocking reader or writer as a tokio one, for [`LogWriter`]: every call
/// completes at once.
struct Blocking<T>(T);

impl<R: Read + Unpin> tokio::io::AsyncRead for Blocking<R> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match this.0.read(buf.initialize_unfilled()) {
                Ok(n) => {
                    buf.advance(n);
                    return std::task::Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return std::task::Poll::Ready(Err(io::Error::new(
                        e.kind(),
                        format!("stdin: {e}"),
                    )))
                }
            }
        }
    }
}

impl<W: Write + Unpin> tokio::io::AsyncWrite for Blocking<W> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        std::task::Poll::Ready(self.get_mut().0.write(buf))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::task::Poll::Ready(self.get_mut().0.flush())
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

/// Reads Mesos RecordIO from `input`, bounded by the record limit.
fn copy_recordio(
    mut input: impl BufRead,
    lenient: bool,
    limits: Limits,
    output: &mut Output<'_>,
) -> Result<(), Failure> {
    let mut codec = RecordIoCodec::builder()
        .max_record_bytes(limits.max_record_bytes)
        .lenient(lenient)
        .new_codec();
    let mut buffer = BytesMut::new();
    let stdin_error = |e: walcodec::RecordIoError| Failure::new(format!("stdin: {e}"));
    loop {
        let chunk = input
            .fill_buf()
            .map_err(|e| Failure::new(format!("stdin: {e}")))?;
        if chunk.is_empty() {
            break;
        }
        buffer.extend_from_slice(chunk);
        let n = chunk.len();
        input.consume(n);
        while let Some(record) = codec.decode(&mut buffer).map_err(stdin_error)? {
            output.push(&record)?;
        }
    }
    while let Some(record) = codec.decode_eof(&mut buffer).map_err(stdin_error)? {
        output.push(&record)?;
    }
    Ok(())
}

/// Reads one record a line (as is, or in hex) from `input`.
fn copy_lines(
    mut input: impl BufRead,
    hex: bool,
    limits: Limits,
    output: &mut Output<'_>,
) -> Result<(), Failure> {
    let mut line = Vec::new();
    let mut line_number = 0u64;
    let max = limits.max_record_bytes;
    // The longest line a record within the limit makes: the record (twice as long in
    // hex), "\r" and "\n". A line cut at this length without its "\n" is too long.
    let line_limit = if hex {
        max.saturating_mul(2).saturating_add(2)
    } else {
        max.saturating_add(1)
    };
    loop {
        line.clear();
        line_number += 1;
        let read = (&mut input)
            .take(line_limit as u64)
            .read_until(b'\n', &mut line)
            .map_err(|e| Failure::new(format!("stdin: {e}")))?;
        if read == 0 {
            break;
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        } else if line.len() >= line_limit {
            return Err(too_large(line_number, max));
        }
        if hex {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            line = parse_hex(&line).ok_or_else(|| {
                Failure::new(format!("stdin line {line_number}: not a line of hex"))
            })?;
        }
        let record = &line[..];
        if record.len() > max {
            return Err(too_large(line_number, max));
        }
        output.push(record)?;
    }
    Ok(())
}

fn too_large(line_number: u64, max: usize) -> Failure {
    Failure::new(format!(
        "stdin line {line_number}: record larger than {max} bytes (see --max-record-bytes)"
    ))
}

/// Syncs the directory holding `path`, so a new file's name survives a crash too.
pub(crate) fn sync_parent(path: &Path) -> io::Result<()> {
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    File::open(parent)?.sync_all()
}
