//! `verify FILE`: reads the whole log as LevelDB's reader does (skipping damage),
//! prints each piece of damage as LevelDB logs it, then a summary:
//!
//! ```text
//! offset N: dropping B bytes; REASON          one per piece of damage, in log order
//! records: N (B bytes)
//! dropped: B bytes in N corruptions
//! zero fill: B bytes
//! tail: clean | zeros after offset V (...) | torn after offset V (T bytes)
//!       | earlier use after offset V (...) | recycled end after offset V (...)   a recycled WAL
//! note: ...                                  how the read ended, when worth saying
//! result: clean | corrupt | torn tail
//! ```
//!
//! A log read as RocksDB's (`--dialect`) gets the lines of `wal` after `tail:`:
//! dialect and log number, header sizes, compression, metadata records, ignorable
//! and old fragments.
//!
//! Findings are printed as they are found, in log order (block by block: zero fill
//! that hides data, then LevelDB's reports), so memory stays bounded on an input of
//! any length; `--jobs N` prints the same. LevelDB's reports wait only while they may be about a torn tail (a
//! strict reader has not yet found damage); they are printed as soon as it has, or
//! dropped at the end, when the tail line says it all. With `--format json` the
//! findings go to stderr (`walcodec: FILE: offset N: ...`) and stdout holds one JSON
//! object (see `AFTER_HELP`).
//!
//! Whether the log is damaged or only torn is a strict (`TolerateTail`) reader's
//! verdict: zeros after a FIRST fragment up to EOF, which LevelDB reports as "error
//! in middle of record", is the torn tail a power cut leaves in a preallocated file.
//!
//! Beyond LevelDB's reports it flags preallocated (zero-header) space that is not all
//! zeros: a reader skips it without a word, so whatever was written there is lost
//! (google/leveldb#203).

use std::io::{self, Write};
use std::path::PathBuf;

use walcodec::inspect::{Item, ItemKind};
use walcodec::Corruption;

use crate::common::{finish, input_notes, stdout, Failure, Limits, Status};
use crate::dialect::{DialectArgs, LogChoice};
use crate::input::Input;
use crate::json::JsonObject;
use crate::scan::{scan, JobsArgs};
use crate::verdict::{json_end, result_text, tail_of, SummaryFormat, TailText};

/// The JSON fields and the exit status, for `verify --help`.
pub(crate) const AFTER_HELP: &str = concat!(
    "\
With --format json, one object on stdout (findings go to stderr):
  file             the input's name (\"stdin\" for -)
  bytes            bytes read
  records          records read (as LevelDB's reader reads them)
  record_bytes     their payload bytes
  corruptions      pieces of damage found
  dropped_bytes    bytes they dropped
  zero_fill_bytes  preallocated (zero) space skipped
  tail             \"clean\", \"zeros\" (preallocated space after the last record)
                   or \"torn\" (the last record cut short)
  valid_len        end of the last complete record a strict reader returned
  tail_bytes       bytes after it, for a \"zeros\" or \"torn\" tail
  wal              a log read as RocksDB's only: {dialect, log_number,
                   log_number_source, legacy_headers, recyclable_headers,
                   compression, compression_records, timestamp_size_records,
                   predecessor_wal_records, malformed_metadata_records,
                   ignorable_fragments, old_fragments, old_bytes,
                   live_end and old_log_number when an old fragment ends the log}
  complete         false when the read stopped at --max-input-bytes
  live             true when the file changed while it was read
  notes            sentences about how the read ended
  result           \"clean\", \"corrupt\" or \"torn_tail\"
  exit_code        the exit status: 0, 1 or 3",
    "\n\n",
    exit_status!()
);

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The log file; `-` reads stdin.
    file: PathBuf,
    /// How the summary is printed.
    #[arg(long, value_enum, default_value_t = SummaryFormat::Text)]
    format: SummaryFormat,
    #[command(flatten)]
    jobs: JobsArgs,
    #[command(flatten)]
    dialect: DialectArgs,
}

/// More LevelDB reports than this while a strict reader still sees no damage is not a
/// torn tail (whose reports are one or two): they are printed rather than held, so
/// that no input makes the checker hold an unbounded list.
const HELD_REPORTS_MAX: usize = 1024;

/// Prints what the pass finds as it finds it.
struct Checker<'a> {
    /// Where findings go, each after `prefix`: stdout, or stderr for JSON output.
    out: &'a mut dyn Write,
    prefix: String,
    /// LevelDB reports not printed yet: they may be about a torn tail.
    held: Vec<Corruption>,
    /// Whether reports are printed as they come (the log is damaged).
    damaged: bool,
    /// Pieces of zero fill that hide data (damage the decoder does not report).
    hidden: u64,
    hidden_bytes: u64,
}

impl Checker<'_> {
    fn print(&mut self, finding: &dyn std::fmt::Display) -> Result<(), Failure> {
        writeln!(self.out, "{}{finding}", self.prefix)?;
        Ok(())
    }

    fn print_held(&mut self) -> Result<(), Failure> {
        for report in std::mem::take(&mut self.held) {
            self.print(&report)?;
        }
        Ok(())
    }

    fn item(&mut self, item: &Item) -> Result<(), Failure> {
        match &item.kind {
            ItemKind::HiddenData { offset, len } => {
                self.hidden += 1;
                self.hidden_bytes += len;
                self.print(&format_args!(
                    "offset {offset}: dropping {len} bytes; zero header skips non-zero bytes"
                ))
            }
            ItemKind::Report(corruption) => {
                if self.damaged {
                    return self.print(corruption);
                }
                self.held.push(corruption.clone());
                if self.held.len() > HELD_REPORTS_MAX {
                    self.damaged = true;
                    self.print_held()?;
                }
                Ok(())
            }
            // The strict reader found damage: from here on, every report is about
            // damage (until now, reports might have been about a torn tail).
            ItemKind::StrictFailed => {
                self.damaged = true;
                self.print_held()
            }
            ItemKind::Record { .. } | ItemKind::Diverged => Ok(()),
            _ => Ok(()),
        }
    }
}

pub(crate) fn run(args: Args, limits: Limits) -> Result<Status, Failure> {
    let mut input = Input::open(&args.file, limits)?;
    let name = input.name().to_string();
    let log = LogChoice::resolve(&mut input, &args.file, &args.dialect)?;
    let mut out = stdout();
    let mut stderr = io::stderr();
    let (findings, prefix): (&mut dyn Write, String) = match args.format {
        SummaryFormat::Text => (&mut out, String::new()),
        SummaryFormat::Json => (&mut stderr, format!("walcodec: {name}: ")),
    };
    let mut checker = Checker {
        out: findings,
        prefix,
        held: Vec::new(),
        damaged: false,
        hidden: 0,
        hidden_bytes: 0,
    };
    let end = scan(&mut input, &args.jobs, limits, &log, &mut |item| {
        checker.item(item)
    })?;
    let (hidden, hidden_bytes) = (checker.hidden, checker.hidden_bytes);
    let stats = end.stats;
    // Without damage, LevelDB's reports are all about the torn tail (zeros cutting a
    // record), which the tail line tells: they are not counted as corruptions.
    let (mut corruptions, mut dropped) = (hidden, hidden_bytes);
    if end.strict.damage.is_some() {
        corruptions += stats.corruptions;
        dropped += stats.dropped_bytes;
    }
    // LevelDB's reader skips a zeroed block silently (so there is no report of it
    // above), but zero fill from a block's start with data after it is lost data.
    corruptions += stats.zeroed_blocks;
    if stats.zeroed_blocks > 0 {
        writeln!(
            checker.out,
            "{}{} zeroed block(s) followed by data: zero fill from a block's first byte hides lost records{}",
            checker.prefix,
            stats.zeroed_blocks,
            end.strict
                .damage
                .as_deref()
                .map(|first| format!(" (first: {first})"))
                .unwrap_or_default()
        )?;
    }
    let tail = tail_of(&end, hidden > 0);
    let status = Status::judge(corruptions, end.strict.incomplete_tail);
    let notes = input_notes(&end.input);

    match args.format {
        SummaryFormat::Text => {
            writeln!(
                out,
                "records: {} ({} bytes)",
                stats.records, stats.record_bytes
            )?;
            writeln!(out, "dropped: {dropped} bytes in {corruptions} corruptions")?;
            writeln!(out, "zero fill: {} bytes", stats.zero_fill_bytes)?;
            writeln!(out, "tail: {}", tail.describe())?;
            if log.dialect == walcodec::Dialect::RocksDb {
                crate::wal::write_text(&end.wal, &log, &mut out)?;
            }
            if log.dialect == walcodec::Dialect::Pebble {
                writeln!(out, "dialect: {}", log.describe())?;
            }
            for note in &notes {
                writeln!(out, "note: {note}")?;
            }
            writeln!(out, "result: {}", result_text(status))?;
        }
        SummaryFormat::Json => {
            let mut object = JsonObject::new();
            object
                .string("file", &name)
                .number("bytes", end.file_len)
                .number("records", stats.records)
                .number("record_bytes", stats.record_bytes)
                .number("corruptions", corruptions)
                .number("dropped_bytes", dropped)
                .number("zero_fill_bytes", stats.zero_fill_bytes);
            tail.json(&mut object, &end);
            if log.dialect == walcodec::Dialect::RocksDb {
                object.object("wal", crate::wal::json(&end.wal, &log));
            }
            json_end(&mut object, &end, &notes, status);
            writeln!(out, "{}", object.finish())?;
        }
    }
    finish(out)?;
    Ok(status)
}
