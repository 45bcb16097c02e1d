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
//!
//! `--max-bytes N` prints only the first N bytes of each payload; `LEN` stays the
//! record's length. A shortened payload ends with `…(+K bytes)` in text and hex (the
//! escaping never produces `…`, so the marker cannot be payload), and JSON lines get
//! `"omitted":K` (present on every line when --max-bytes is given).

use std::io::Write;
use std::path::PathBuf;

use clap::ValueEnum;
use walcodec::LogRecord;

use crate::common::{
    decoder_builder, escape_into, finish, hex_into, input_notes, read_end_status, stdout, Failure,
    Limits, RecoveryArg, Status,
};
use crate::input::Input;
use crate::parallel::{read, JobsArgs, StrictMode};
use crate::scan::{Settings, What};

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
    /// What to do with damage.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = RecoveryArg::SkipCorrupted)]
    recovery: RecoveryArg,
    /// Print at most N bytes of each payload, then `…(+K bytes)` (JSON: "omitted":K).
    #[arg(long, value_name = "N", conflicts_with = "physical")]
    max_bytes: Option<usize>,
    #[command(flatten)]
    jobs: JobsArgs,
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

/// Formats one record as a line of `format` (with its newline), its payload cut to
/// `max_bytes` when given.
pub(crate) fn format_record(
    record: &LogRecord,
    format: Format,
    max_bytes: Option<usize>,
    line: &mut Vec<u8>,
) {
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
        Format::Json => {
            let end = record.position.end;
            line.extend_from_slice(
                format!("{{\"offset\":{start},\"end\":{end},\"len\":{len},\"data\":\"").as_bytes(),
            );
            hex_into(shown, line);
            line.push(b'"');
            if max_bytes.is_some() {
                line.extend_from_slice(format!(",\"omitted\":{omitted}").as_bytes());
            }
            line.push(b'}');
        }
    }
    line.push(b'\n');
}

pub(crate) async fn run(args: Args, limits: Limits) -> Result<Status, Failure> {
    if args.physical {
        return crate::physical::dump(&args.file, args.start, limits);
    }
    let mut input = Input::open(&args.file, limits)?;
    let name = input.name().to_string();
    let (format, max_bytes) = (args.format, args.max_bytes);
    let line = move |record: &LogRecord, line: &mut Vec<u8>| {
        format_record(record, format, max_bytes, line)
    };
    let settings = Settings {
        builder: decoder_builder(args.recovery.into(), args.start, limits),
        start: args.start,
        walk: false,
        eager_strict: None,
        line: Some(std::sync::Arc::new(line)),
    };
    let mut out = stdout();
    let (merged, end) = read(
        &mut input,
        &settings,
        &args.jobs,
        &StrictMode::None,
        &mut |item, text| {
            match &item.what {
                What::Record { line, .. } => out.write_all(&text[line.clone()])?,
                What::Report(report) => eprintln!("walcodec: {name}: {report}"),
                _ => {}
            }
            Ok(())
        },
    )?;
    finish(out)?;
    for note in input_notes(&end) {
        eprintln!("walcodec: {name}: {note}");
    }
    read_end_status(
        &name,
        merged.stats.corruptions,
        merged.incomplete_tail,
        merged.error,
    )
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
        format_record(&record, format, max_bytes, &mut out);
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
