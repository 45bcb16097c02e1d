//! `dump FILE`: one line per record.
//!
//! | `--format` | line                                                      |
//! |------------|-----------------------------------------------------------|
//! | `text`     | `OFFSET LEN PAYLOAD`, payload escaped (`\xNN`, `\\`)      |
//! | `hex`      | `OFFSET LEN HEX`                                          |
//! | `json`     | `{"offset":O,"end":E,"len":L,"data":"HEX"}`               |
//! | `batch`    | `SEQUENCE,COUNT,BYTES,OFFSET,OPERATIONS` (WriteBatch, as `ldb dump_wal --print_value`; see `batch`) |
//! | `batch-json` | `{"offset":O,"end":E,"sequence":S,"count":C,"byte_size":B,"operations":[...]}` |
//!
//! `OFFSET` is where the record's first header starts, `END` just past its last byte
//! (a checkpoint: `--start END` resumes after it). Damage goes to stderr as
//! `walcodec: FILE: offset N: dropping B bytes; reason`.
//!
//! `--max-bytes N` prints only the first N bytes of each payload; `LEN` stays the
//! record's length. A shortened payload ends with `…(+K bytes)` in text and hex (the
//! escaping never produces `…`, so the marker cannot be payload), and JSON lines get
//! `"omitted":K` (present on every line when --max-bytes is given).
//!
//! `--dialect` and `--log-number` choose how the log is read (see `dialect`). The
//! batch formats decode RocksDB's tags (a superset of LevelDB's), LevelDB's only with
//! `--dialect leveldb`, Pebble's kinds when the log is read as Pebble's.

use std::io::Write;
use std::path::PathBuf;

use clap::ValueEnum;
use walcodec::inspect::{Inspector, ItemKind};
use walcodec::write_batch::WriteBatchError;
use walcodec::{Dialect, LogRecord};

use crate::batch::format_batch;
use crate::common::{
    decoder_builder, escape_into, finish, hex_into, input_notes, read_end_status, recovery_for,
    stdout, Failure, Limits, RecoveryArg, Status,
};
use crate::dialect::{DialectArg, DialectArgs, LogChoice};
use crate::input::Input;
use crate::json;
use crate::scan::{read, JobsArgs};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The log file; `-` reads stdin.
    file: PathBuf,
    /// How each record is printed.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// List the physical layout instead: fragments (offset, block, type, length,
    /// checksum), trailers and damaged pieces, from the block holding --start.
    #[arg(long, conflicts_with_all = ["format", "recovery"])]
    physical: bool,
    /// Start with the first record whose first fragment is at or after this offset.
    #[arg(long, value_name = "OFFSET", default_value_t = 0)]
    start: u64,
    /// What to do with damage [default: skip-corrupted; for a RocksDB WAL
    /// tolerate-tail, as `ldb dump_wal`: a recycled WAL ends at its first old bytes].
    #[arg(long, value_enum, value_name = "MODE")]
    recovery: Option<RecoveryArg>,
    /// Print at most N bytes of each payload, then `…(+K bytes)` (JSON: "omitted":K).
    #[arg(long, value_name = "N", conflicts_with = "physical")]
    max_bytes: Option<usize>,
    #[command(flatten)]
    jobs: JobsArgs,
    #[command(flatten)]
    dialect: DialectArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// `OFFSET LEN PAYLOAD`, the payload's non-printable bytes as `\xNN`.
    Text,
    /// `OFFSET LEN HEX`.
    Hex,
    /// JSON lines: `{"offset":..,"end":..,"len":..,"data":"<hex>"}`.
    Json,
    /// Each record as a WriteBatch, as `ldb dump_wal --print_value` prints it:
    /// `SEQUENCE,COUNT,BYTES,OFFSET,PUT(CF) : 0xKEY : 0xVALUE ...`.
    Batch,
    /// Each record as a WriteBatch, in JSON lines.
    BatchJson,
}

impl Format {
    /// Whether records are decoded as WriteBatches.
    pub(crate) fn is_batch(self) -> bool {
        matches!(self, Format::Batch | Format::BatchJson)
    }

    /// Refuses the options a format does not take.
    pub(crate) fn check(self, max_bytes: Option<usize>) -> Result<(), Failure> {
        if self.is_batch() && max_bytes.is_some() {
            return Err(Failure::new(
                "--max-bytes shortens payloads; --format batch prints whole keys and values",
            ));
        }
        Ok(())
    }
}

/// The tags batches are decoded with: RocksDB's (a superset of LevelDB's), unless the
/// log is read as LevelDB's by request, or is read (`log_dialect`) as Pebble's.
pub(crate) fn batch_dialect(args: &DialectArgs, log_dialect: Dialect) -> Dialect {
    match (args.dialect, log_dialect) {
        (DialectArg::Leveldb, _) => Dialect::LevelDb,
        (_, Dialect::Pebble) => Dialect::Pebble,
        _ => Dialect::RocksDb,
    }
}

/// Formats one record as a line of `format` (with its newline), its payload cut to
/// `max_bytes` when given; the batch formats decode it with the tags of
/// `batch_dialect`, and fail for a record that is not a whole WriteBatch (what of it
/// decodes is still formatted).
pub(crate) fn format_record(
    record: &LogRecord,
    format: Format,
    max_bytes: Option<usize>,
    batch_dialect: Dialect,
    line: &mut Vec<u8>,
) -> Result<(), WriteBatchError> {
    let start = record.position.start;
    let len = record.data.len();
    let shown = &record.data[..max_bytes.map_or(len, |max| max.min(len))];
    let omitted = len - shown.len();
    match format {
        Format::Text | Format::Hex => {
            line.extend_from_slice(format!("{start} {len} ").as_bytes());
            if format == Format::Text {
                escape_into(shown, line);
            } else {
                hex_into(shown, line);
            }
            if omitted > 0 {
                line.extend_from_slice(format!("…(+{omitted} bytes)").as_bytes());
            }
        }
        Format::Json => json::write_line(
            &json::FileRecordLine {
                offset: start,
                end: record.position.end,
                len,
                data: json::Hex(shown),
                omitted: max_bytes.map(|_| omitted),
            },
            line,
        ),
        Format::Batch | Format::BatchJson => {
            return format_batch(record, batch_dialect, format == Format::BatchJson, line);
        }
    }
    line.push(b'\n');
    Ok(())
}

/// Says on stderr that the record at `record` is not a whole WriteBatch.
pub(crate) fn report_batch_error(name: &str, record: &LogRecord, error: WriteBatchError) {
    eprintln!("walcodec: {name}: {}", batch_error(record, error));
}

/// What `report_batch_error` says after the input's name.
fn batch_error(record: &LogRecord, error: WriteBatchError) -> String {
    format!(
        "offset {}: record of {} bytes is not a whole WriteBatch: {error}",
        record.position.start,
        record.data.len()
    )
}

pub(crate) async fn run(args: Args, limits: Limits) -> Result<Status, Failure> {
    if args.physical {
        return crate::physical::dump(&args.file, &args.dialect, args.start, &args.jobs, limits);
    }
    args.format.check(args.max_bytes)?;
    let mut input = Input::open(&args.file, limits)?;
    let log = LogChoice::resolve(&mut input, &args.file, &args.dialect)?;
    let recovery = recovery_for(&log, args.recovery);
    let name = input.name().to_string();
    let (format, max_bytes) = (args.format, args.max_bytes);
    let batch_dialect = batch_dialect(&args.dialect, log.dialect);
    let line = move |record: &LogRecord, line: &mut Vec<u8>| {
        format_record(record, format, max_bytes, batch_dialect, line)
            .err()
            .map(|e| batch_error(record, e).into_boxed_str())
    };
    let mut inspector = Inspector::new(
        decoder_builder(&log, recovery.into(), args.start, limits),
        log.rules(),
    );
    inspector.render(line);
    let mut out = stdout();
    let mut not_batches = false;
    let (inspection, end) = read(
        &mut input,
        &mut inspector,
        args.start,
        &log,
        &args.jobs,
        &mut |item, rendered| {
            match &item.kind {
                ItemKind::Record { note, .. } => {
                    out.write_all(rendered)?;
                    if let Some(message) = note {
                        // In order with stdout, for a reader of both.
                        out.flush()?;
                        eprintln!("walcodec: {name}: {message}");
                        not_batches = true;
                    }
                }
                ItemKind::Report(report) => eprintln!("walcodec: {name}: {report}"),
                _ => {}
            }
            Ok(())
        },
    )?;
    finish(out)?;
    for note in input_notes(&end) {
        eprintln!("walcodec: {name}: {note}");
    }
    let status = read_end_status(
        &name,
        inspection.stats.corruptions,
        inspection.incomplete_tail,
        inspection.error.map(walcodec::Error::from),
    )?;
    Ok(if not_batches {
        status.max(Status::Corrupt)
    } else {
        status
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use walcodec::Position;

    fn line(data: &'static [u8], format: Format) -> String {
        shortened(data, format, None)
    }

    fn shortened(data: &'static [u8], format: Format, max_bytes: Option<usize>) -> String {
        let record = LogRecord {
            position: Position { start: 7, end: 17 },
            data: Bytes::from_static(data),
        };
        let mut out = Vec::new();
        format_record(&record, format, max_bytes, Dialect::RocksDb, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn record_lines() {
        assert_eq!(line(b"a\x00\"", Format::Text), "7 3 a\\x00\"\n");
        assert_eq!(line(b"a\x00\"", Format::Hex), "7 3 610022\n");
        assert_eq!(
            line(b"a\x00\"", Format::Json),
            "{\"offset\":7,\"end\":17,\"len\":3,\"data\":\"610022\"}\n"
        );
        assert_eq!(line(b"", Format::Text), "7 0 \n");
    }

    #[test]
    fn max_bytes_shortens_payloads_and_says_how_much_is_left_out() {
        let text = |max| shortened(b"a\x00\"b", Format::Text, Some(max));
        assert_eq!(text(2), "7 4 a\\x00…(+2 bytes)\n");
        assert_eq!(text(0), "7 4 …(+4 bytes)\n");
        assert_eq!(text(4), "7 4 a\\x00\"b\n");
        assert_eq!(text(9), "7 4 a\\x00\"b\n");
        assert_eq!(
            shortened(b"a\x00\"b", Format::Hex, Some(1)),
            "7 4 61…(+3 bytes)\n"
        );
        assert_eq!(
            shortened(b"a\x00\"b", Format::Json, Some(1)),
            "{\"offset\":7,\"end\":17,\"len\":4,\"data\":\"61\",\"omitted\":3}\n"
        );
        assert_eq!(
            shortened(b"a", Format::Json, Some(1)),
            "{\"offset\":7,\"end\":17,\"len\":1,\"data\":\"61\",\"omitted\":0}\n"
        );
    }
}
