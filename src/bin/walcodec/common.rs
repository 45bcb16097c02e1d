//! What the subcommands share: exit status, errors, record formatting, and opening a
//! log for a record-by-record read.

use std::io::{self, Write};
use std::path::Path;

use clap::ValueEnum;
use walcodec::{
    block_start, Corruption, CorruptionKind, LogDecoder, LogDecoderBuilder, LogInput, LogReader,
    Recovery,
};

use crate::dialect::{DialectArgs, LogChoice};
pub(crate) use crate::failure::{io_message, Failure, Status};
use crate::input::{BlockingReader, Input, InputEnd};
pub(crate) use crate::limits::Limits;

/// How a reading command treats damage (RocksDB's WAL recovery modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum RecoveryArg {
    /// Report each damaged piece and go on with the next block (LevelDB's reader).
    SkipCorrupted,
    /// Stop at the first damage, a torn tail excepted.
    TolerateTail,
    /// Report the first damage and stop there quietly: what came before is the log.
    PointInTime,
    /// Stop at any damage, a torn tail included.
    AbsoluteConsistency,
}

impl From<RecoveryArg> for Recovery {
    fn from(arg: RecoveryArg) -> Recovery {
        match arg {
            RecoveryArg::SkipCorrupted => Recovery::SkipCorrupted,
            RecoveryArg::TolerateTail => Recovery::TolerateTail,
            RecoveryArg::PointInTime => Recovery::PointInTime,
            RecoveryArg::AbsoluteConsistency => Recovery::AbsoluteConsistency,
        }
    }
}

/// Appends `data` as printable ASCII: bytes 0x20..=0x7e as they are (a backslash
/// doubled), everything else as `\xNN`.
pub(crate) fn escape_into(data: &[u8], out: &mut Vec<u8>) {
    for &byte in data {
        match byte {
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x20..=0x7e => out.push(byte),
            _ => {
                out.extend_from_slice(b"\\x");
                hex_into(&[byte], out);
            }
        }
    }
}

/// Appends `data` as lowercase hex.
pub(crate) fn hex_into(data: &[u8], out: &mut Vec<u8>) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.reserve(data.len() * 2);
    for &byte in data {
        out.push(DIGITS[(byte >> 4) as usize]);
        out.push(DIGITS[(byte & 0xf) as usize]);
    }
}

/// Decodes one line of hex (either case); `None` when it is not hex.
pub(crate) fn parse_hex(line: &[u8]) -> Option<Vec<u8>> {
    fn digit(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    if line.len() % 2 != 0 {
        return None;
    }
    line.chunks_exact(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

/// The one place a command's decoders are configured: `recovery` mode, the records
/// at or after `start`, the limits, and the log's dialect and number (`log`).
/// Callers add a reporter, through `watched` (for the hint that a log read as
/// LevelDB's is a RocksDB WAL); a split read (`parallel`) clones the builder per
/// range and moves its start.
pub(crate) fn decoder_builder(
    log: &LogChoice,
    recovery: Recovery,
    start: u64,
    limits: Limits,
) -> LogDecoderBuilder {
    let mut builder = LogDecoder::builder();
    builder
        .dialect(log.dialect)
        .log_number(log.log_number)
        .recovery(recovery)
        // Files (and stdin holding one): a record cut at the end is a torn tail,
        // which the commands report as such.
        .input(LogInput::File)
        .start_offset(start)
        .max_record_bytes(limits.max_record_bytes);
    // A read from a later block does not see the type-9 record at the log's start.
    if let (Some(compression), true) = (log.compression, block_start(start) > 0) {
        builder.wal_compression(compression);
    }
    builder
}

/// `reporter`, after `log` has looked at each report (for the hint that a log read
/// as LevelDB's is a RocksDB WAL): what every decoder of `decoder_builder` reports to.
pub(crate) fn watched<F>(
    log: &LogChoice,
    mut reporter: F,
) -> impl FnMut(&Corruption) + Send + 'static
where
    F: FnMut(&Corruption) + Send + 'static,
{
    let watcher = log.clone();
    move |c: &Corruption| {
        watcher.watch(c);
        reporter(c)
    }
}

/// A decoder in `recovery` mode for the records at or after `start`, that prints
/// each piece of damage on stderr as it is found, prefixed with the file name.
pub(crate) fn stderr_decoder(
    name: &str,
    log: &LogChoice,
    recovery: RecoveryArg,
    start: u64,
    limits: Limits,
) -> LogDecoder {
    let name = name.to_string();
    decoder_builder(log, recovery.into(), start, limits)
        .on_corruption(watched(log, move |c: &Corruption| {
            eprintln!("walcodec: {name}: {c}")
        }))
        .build()
}

/// The status of a read of the input `name` by `decoder`, which ended cleanly or with
/// `error`. Damage that ended the read is printed on stderr; an I/O error is a
/// failure.
pub(crate) fn read_status(
    name: &str,
    decoder: &LogDecoder,
    error: Option<walcodec::Error>,
) -> Result<Status, Failure> {
    read_end_status(
        name,
        decoder.stats().corruptions,
        decoder.has_incomplete_tail(),
        error,
    )
}

/// `read_status` from what a decoder (or the decoders of a split read) counted.
pub(crate) fn read_end_status(
    name: &str,
    corruptions: u64,
    incomplete_tail: bool,
    error: Option<walcodec::Error>,
) -> Result<Status, Failure> {
    match error {
        None => {
            let status = Status::judge(corruptions, incomplete_tail);
            // Damage was reported as it was met; a torn tail has no report of its
            // own, and an exit status is never left unexplained.
            if status == Status::TornTail {
                eprintln!(
                    "walcodec: {name}: torn tail: its last record is cut short, as a writer that died mid-write leaves it (`walcodec repair` truncates it)"
                );
            }
            Ok(status)
        }
        Some(walcodec::Error::Io(e)) => Err(Failure::named(name, e)),
        Some(error) => {
            eprintln!("walcodec: {name}: {error}");
            let torn = matches!(
                error,
                walcodec::Error::Corruption {
                    kind: CorruptionKind::TruncatedTail,
                    ..
                }
            );
            Ok(if torn {
                Status::TornTail
            } else {
                Status::Corrupt
            })
        }
    }
}

/// The recovery mode of a read of `log`: `recovery` when given, else the dialect's
/// default. LevelDB's reader skips damage; RocksDB's tools read a WAL in
/// tolerate-tail mode, where a recycled WAL ends at its first bad checksum or length
/// (old bytes).
pub(crate) fn recovery_for(log: &LogChoice, recovery: Option<RecoveryArg>) -> RecoveryArg {
    recovery.unwrap_or(match log.dialect {
        // Pebble's reader ends a log as `TolerateTail` does in its dialect.
        walcodec::Dialect::RocksDb | walcodec::Dialect::Pebble => RecoveryArg::TolerateTail,
        _ => RecoveryArg::SkipCorrupted,
    })
}

/// Opens `path` (`-` for stdin) for a read of the records at or after `start`, up to
/// where `Input` says the read ends, in the dialect `dialect` resolves to (returned
/// with the reader), in `recovery` mode or the dialect's default.
pub(crate) fn open_reader(
    path: &Path,
    dialect: &DialectArgs,
    recovery: Option<RecoveryArg>,
    start: u64,
    limits: Limits,
) -> Result<(LogReader<BlockingReader>, LogChoice), Failure> {
    let mut input = Input::open(path, limits)?;
    let log = LogChoice::resolve(&mut input, path, dialect)?;
    let recovery = recovery_for(&log, recovery);
    input.skip_to(block_start(start))?;
    let decoder = stderr_decoder(input.name(), &log, recovery, start, limits);
    let reader = LogReader::new(BlockingReader(input), decoder).with_read_size(READ_SIZE);
    Ok((reader, log))
}

/// Ends the read of a reader from `open_reader`: says on stderr when it stopped at
/// `--max-input-bytes` or the file changed meanwhile, and gives the decoder back.
pub(crate) fn finish_reader(reader: LogReader<BlockingReader>) -> (String, LogDecoder) {
    let (BlockingReader(mut input), decoder) = reader.into_parts();
    let end = input.finish();
    for note in input_notes(&end) {
        eprintln!("walcodec: {}: {note}", input.name());
    }
    (input.name().to_string(), decoder)
}

/// Sentences about how a read ended, for a command's output or stderr: nothing for
/// a read of a whole input that did not change.
pub(crate) fn input_notes(end: &InputEnd) -> Vec<String> {
    let mut notes = Vec::new();
    if end.capped {
        notes.push(format!(
            "stopped at --max-input-bytes {}: the input may go on, and a record cut there reads as a torn tail",
            end.read_to
        ));
    }
    if let Some(change) = end.change {
        notes.push(format!(
            "the file changed while it was read (a live log: {} bytes at the start, {} at the end); this result is for the first {} bytes as they were read, and damage near where a writer was writing may be its work in progress",
            change.len_at_open, change.len_at_end, end.read_to
        ));
    }
    notes
}

/// Bytes read at a time from a log file (a multiple of the block size).
pub(crate) const READ_SIZE: usize = 32 * walcodec::BLOCK_SIZE;

/// A buffered stdout that is flushed (and its error reported) by `finish`.
pub(crate) fn stdout() -> io::BufWriter<io::StdoutLock<'static>> {
    io::BufWriter::with_capacity(64 * 1024, io::stdout().lock())
}

/// Flushes `out`, turning its error into a failure.
pub(crate) fn finish(mut out: impl Write) -> Result<(), Failure> {
    out.flush().map_err(Failure::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_keeps_printables_and_escapes_the_rest() {
        let mut out = Vec::new();
        escape_into(b"a b\\\x00\n\x7f\xff~", &mut out);
        assert_eq!(out, b"a b\\\\\\x00\\x0a\\x7f\\xff~");
    }

    #[test]
    fn hex_round_trips() {
        let mut out = Vec::new();
        hex_into(&[0, 0x5a, 0xff], &mut out);
        assert_eq!(out, b"005aff");
        assert_eq!(parse_hex(b"005AfF"), Some(vec![0, 0x5a, 0xff]));
        assert_eq!(parse_hex(b""), Some(vec![]));
        assert_eq!(parse_hex(b"0"), None);
        assert_eq!(parse_hex(b"0g"), None);
    }

    #[test]
    fn corruption_outranks_a_torn_tail() {
        assert_eq!(Status::judge(0, false), Status::Clean);
        assert_eq!(Status::judge(0, true), Status::TornTail);
        assert_eq!(Status::judge(2, true), Status::Corrupt);
        assert_eq!(Status::judge(1, false).code(), 1);
        assert_eq!(Status::judge(0, true).code(), 3);
    }
}
