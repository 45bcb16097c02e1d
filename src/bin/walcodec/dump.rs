//! `dump FILE`: one line per record.
//!
//! | `--format` | line                                                      |
//! |------------|-----------------------------------------------------------|
//! | `text`     | `OFFSET LEN PAYLOAD`, payload escaped (`\xNN`, `\\`)      |
//! | `hex`      | `OFFSET LEN HEX`                                          |
//! | `json`     | `{"offset":O,"end":E,"len":L,"data":"HEX"}`               |
//!
//! `OFFSET` is where the record's first header starts, `END` just past its last byte
//! (a checkpoint: `--start END` resumes after it). Damage goes to stderr as
//! `walcodec: FILE: offset N: dropping B bytes; reason`.

use std::io::Write;
use std::path::PathBuf;

use clap::ValueEnum;
use walcodec::LogRecord;

use crate::common::{
    escape_into, finish, hex_into, open_reader, read_status, stdout, Failure, Limits, RecoveryArg,
    Status,
};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The log file.
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
    /// What to do with damage.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = RecoveryArg::SkipCorrupted)]
    recovery: RecoveryArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// `OFFSET LEN PAYLOAD`, the payload's non-printable bytes as `\xNN`.
    Text,
    /// `OFFSET LEN HEX`.
    Hex,
    /// JSON lines: `{"offset":..,"end":..,"len":..,"data":"<hex>"}`.
    Json,
}

/// Formats one record as a line of `format` (with its newline).
pub(crate) fn format_record(record: &LogRecord, format: Format, line: &mut Vec<u8>) {
    let start = record.position.start;
    let len = record.data.len();
    match format {
        Format::Text => {
            line.extend_from_slice(format!("{start} {len} ").as_bytes());
            escape_into(&record.data, line);
        }
        Format::Hex => {
            line.extend_from_slice(format!("{start} {len} ").as_bytes());
            hex_into(&record.data, line);
        }
        Format::Json => {
            let end = record.position.end;
            line.extend_from_slice(
                format!("{{\"offset\":{start},\"end\":{end},\"len\":{len},\"data\":\"").as_bytes(),
            );
            hex_into(&record.data, line);
            line.extend_from_slice(b"\"}");
        }
    }
    line.push(b'\n');
}

pub(crate) async fn run(args: Args, limits: Limits) -> Result<Status, Failure> {
    if args.physical {
        return crate::physical::dump(&args.file, args.start, limits);
    }
    let (mut reader, len) = open_reader(&args.file, args.recovery, args.start, limits).await?;
    let progress = crate::common::progress_bar(len);
    let mut out = stdout();
    let mut line = Vec::new();
    let mut error = None;
    while let Some(record) = reader.next_record().await {
        match record {
            Ok(record) => {
                line.clear();
                format_record(&record, args.format, &mut line);
                out.write_all(&line)?;
                if let Some(bar) = &progress {
                    bar.set_position(record.position.end);
                }
            }
            Err(e) => error = Some(e),
        }
    }
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    finish(out)?;
    read_status(&args.file, reader.decoder(), error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use walcodec::Position;

    fn line(data: &'static [u8], format: Format) -> String {
        let record = LogRecord {
            position: Position { start: 7, end: 17 },
            data: Bytes::from_static(data),
        };
        let mut out = Vec::new();
        format_record(&record, format, &mut out);
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
}
