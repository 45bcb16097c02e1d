//! A log directory ([`walcodec::LogDir`]: segments `NNNNNN.log`) wherever a log is
//! taken: `verify`, `stat`, `dump`, `cat` and `tail` given a directory work on its
//! segments in order, as [`LogDir::list`] lists them.
//!
//! | command      | on a directory                                                     |
//! |--------------|--------------------------------------------------------------------|
//! | `verify`     | each segment as `verify FILE` does (`--dialect auto`: a recycled segment reads in RocksDB's dialect, a Pebble one in Pebble's, its number from its name) under a `== 000007.log` header, then a directory summary |
//! | `stat`       | each segment as `stat FILE` does, under the same headers, then the summary with the log's id and epochs (its `HISTORY` file; `log id: none` without one) |
//! | `dump`       | every record in order, positions as `000007:1234` (a [`LogPosition`]); `--from POSITION` starts there |
//! | `cat`        | every payload in order; `--from POSITION` too                      |
//! | `tail [-f]`  | the last N records; with `-f`, then follows across rotations       |
//!
//! Judging a directory (`verify`, `stat`): every sealed segment (all but the last)
//! must end cleanly, so a torn tail there is damage ("badly sealed"); a number
//! missing between the first segment and the last is a hole, named and counted as
//! damage; the exit status is the worst over the directory (only the last
//! segment's torn tail gives 3). With `--format json`, stdout holds JSON lines:
//! each segment's object as `verify FILE --format json` prints it, then one
//! summary object (`directory`, `segments`, `first_segment`, `last_segment`,
//! `bytes`, `holes`, `badly_sealed`, with `stat` `log_id` (null without a
//! `HISTORY` file) and `epochs` (`[{number, id, start}]`), then `result`,
//! `exit_code`).
//!
//! Reading records (`dump`, `cat`, `tail`) goes through [`DirReader`], which stops
//! at the first damage, hole or badly sealed segment: that is reported on stderr
//! and the exit status is 1 (`verify DIR` lists all of it). A torn tail at the end
//! of the last segment (bytes after its last record that are not all zeros: a
//! record cut short, or one a writer is writing) is left out and gives exit 3, as
//! for a file; a Pebble segment's EOF trailer (a clean close) and a reused
//! segment's earlier use are its end. The records of a directory of Pebble's
//! segments (its `DIALECT` file) are read in Pebble's dialect.
//!
//! A directory with no segment file is not a log directory: every command says
//! so and exits 2, as for a file that is not a log (`tail -f` does not wait for
//! segments to appear). `repair` and `write` take a log file, never a directory.
//!
//! Options about one file's bytes (`--start`, `--physical`, `--record`,
//! `--recovery`, `--dialect`, `--log-number`, the batch formats, the input limits
//! for the commands that read records) are refused on a directory (exit 2).

use std::ffi::OsString;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgMatches, FromArgMatches, ValueEnum};
use walcodec::{DirReader, DirRecord, LogDir, LogPosition, SegmentList};

use crate::cat::{PayloadWriter, To};
use crate::common::{escape_into, finish, hex_into, stdout, Failure, Limits, Status};
use crate::dump::Format;
use crate::json::{self, JsonObject};
use crate::verdict::{result_text, SummaryFormat};

/// The options each command takes on a directory (with the path itself, `file`).
const VERIFY_OPTIONS: &[&str] = &["file", "format", "max_record_bytes", "max_input_bytes"];
const STAT_OPTIONS: &[&str] = VERIFY_OPTIONS;
const DUMP_OPTIONS: &[&str] = &["file", "format", "max_bytes", "from"];
const CAT_OPTIONS: &[&str] = &["file", "to", "from"];
const TAIL_OPTIONS: &[&str] = &[
    "file",
    "follow",
    "records",
    "format",
    "max_bytes",
    "poll_interval",
];

/// The commands that take `--from POSITION` on a directory.
const FROM_COMMANDS: &[&str] = &["dump", "cat"];

/// Adds `--from POSITION` to the commands that read records from a position: an
/// option of directories only, so it lives here rather than in each command's
/// `Args` (which ignore it).
pub(crate) fn augment(mut command: clap::Command) -> clap::Command {
    for name in FROM_COMMANDS {
        command = command.mut_subcommand(*name, |sub| {
            sub.arg(
                clap::Arg::new("from")
                    .long("from")
                    .value_name("POSITION")
                    .value_parser(|text: &str| {
                        text.parse::<LogPosition>().map_err(|e| e.to_string())
                    })
                    .help(
                        "On a log directory: start with the first record at or after this \
                         position (`000007:1234`, as `dump` prints positions)",
                    ),
            )
        });
    }
    command
}

/// Runs the command of `matches` on a log directory when its input is one;
/// `None` when it is not (a file, stdin, another command): the command runs as
/// usual.
pub(crate) async fn run(matches: &ArgMatches, limits: Limits) -> Result<Option<Status>, Failure> {
    let Some((command, sub)) = matches.subcommand() else {
        return Ok(None);
    };
    let options = match command {
        "verify" => VERIFY_OPTIONS,
        "stat" => STAT_OPTIONS,
        "dump" => DUMP_OPTIONS,
        "cat" => CAT_OPTIONS,
        "tail" => TAIL_OPTIONS,
        _ => return Ok(None),
    };
    let Ok(Some(path)) = sub.try_get_one::<PathBuf>("file") else {
        return Ok(None);
    };
    if path.as_os_str() == "-" || !path.is_dir() {
        if sub
            .try_get_one::<LogPosition>("from")
            .ok()
            .flatten()
            .is_some()
        {
            return Err(Failure::new(format!(
                "{}: --from takes a log directory; for a file, --start OFFSET",
                crate::input::input_name(path)
            )));
        }
        return Ok(None);
    }
    refuse_options(command, sub, options, path)?;
    // A directory without segments is not a log, for every command alike (and
    // `tail -f` does not wait for one to appear): said, and exit 2, as for a file.
    list(path)?;
    let status = match command {
        "verify" | "stat" => judge(command, sub, path, limits)?,
        "dump" => dump(sub, path).await?,
        "cat" => cat(sub, path).await?,
        _ => tail(sub, path).await?,
    };
    Ok(Some(status))
}

/// Fails on an option given on the command line that `command` does not take on a
/// directory.
fn refuse_options(
    command: &str,
    sub: &ArgMatches,
    options: &[&str],
    path: &Path,
) -> Result<(), Failure> {
    for id in sub.ids() {
        let id = id.as_str();
        if options.contains(&id) || sub.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        return Err(Failure::new(format!(
            "{}: --{} does not apply to a log directory (`{command}` reads its segments in order)",
            path.display(),
            id.replace('_', "-")
        )));
    }
    Ok(())
}

/// The segments of the directory at `path`; a directory with none is not a log
/// directory.
fn list(path: &Path) -> Result<SegmentList, Failure> {
    let listed = LogDir::list(path).map_err(|e| Failure::log(path, e))?;
    if listed.segments.is_empty() {
        return Err(Failure::new(format!(
            "{}: no segment files (NNNNNN.log): not a log directory",
            path.display()
        )));
    }
    Ok(listed)
}

/// `NNNNNN.log`, or `NNNNNN.log..MMMMMM.log` for a run of missing numbers.
fn hole_name(hole: &std::ops::RangeInclusive<u64>) -> String {
    if hole.start() == hole.end() {
        segment_name(*hole.start())
    } else {
        format!(
            "{}..{}",
            segment_name(*hole.start()),
            segment_name(*hole.end())
        )
    }
}

fn segment_name(number: u64) -> String {
    format!("{number:06}.log")
}

/// `verify DIR` and `stat DIR`: the command on each segment, then the summary.
fn judge(command: &str, sub: &ArgMatches, path: &Path, limits: Limits) -> Result<Status, Failure> {
    let format = sub
        .get_one::<SummaryFormat>("format")
        .copied()
        .unwrap_or(SummaryFormat::Text);
    let listed = list(path)?;
    let holes = listed.holes();
    let last = listed.segments.last().map_or(0, |s| s.number);
    let mut worst = Status::Clean;
    let mut badly_sealed = Vec::new();
    for segment in &listed.segments {
        if format == SummaryFormat::Text {
            let mut out = std::io::stdout().lock();
            for hole in holes.iter().filter(|h| *h.end() + 1 == segment.number) {
                writeln!(out, "== missing {}: a hole in the log", hole_name(hole))?;
            }
            writeln!(out, "== {}", segment_name(segment.number))?;
            out.flush()?;
        }
        let result = if command == "verify" {
            crate::verify::run(segment_args("verify", format, &segment.path)?, limits)
        } else {
            crate::stat::run(segment_args("stat", format, &segment.path)?, limits)
        };
        let status = match result {
            Ok(status) => status,
            // A live writer's retention may purge a segment after it was listed.
            Err(_) if purged_since_listed(path, segment.number) => {
                eprintln!(
                    "walcodec: {}: {} was purged while the directory was read: skipped",
                    path.display(),
                    segment_name(segment.number)
                );
                continue;
            }
            Err(failure) => return Err(failure),
        };
        let status = if status == Status::TornTail && segment.number != last {
            badly_sealed.push(segment_name(segment.number));
            if format == SummaryFormat::Text {
                let mut out = std::io::stdout().lock();
                writeln!(
                    out,
                    "badly sealed: {} is not the last segment, so its torn tail is damage",
                    segment_name(segment.number)
                )?;
                out.flush()?;
            }
            Status::Corrupt
        } else {
            status
        };
        worst = worst.max(status);
    }
    if !holes.is_empty() {
        worst = Status::Corrupt;
    }
    let first = listed.segments.first().map_or(0, |s| s.number);
    let hole_names: Vec<String> = holes.iter().map(hole_name).collect();
    // `stat` only: the log's identity and history (`verify` judges bytes).
    let history = if command == "stat" {
        Some(LogDir::read_history(path).map_err(|e| Failure::log(path, e))?)
    } else {
        None
    };
    let mut out = stdout();
    match format {
        SummaryFormat::Text => {
            writeln!(out, "== directory {}", path.display())?;
            writeln!(
                out,
                "segments: {} ({}..{})",
                listed.segments.len(),
                segment_name(first),
                segment_name(last)
            )?;
            writeln!(out, "bytes: {}", listed.total_bytes())?;
            writeln!(out, "holes: {}", list_or_none(&hole_names))?;
            writeln!(out, "badly sealed: {}", list_or_none(&badly_sealed))?;
            match &history {
                Some(Some((id, history))) => {
                    writeln!(out, "log id: {id}")?;
                    writeln!(out, "epochs: {}", history.epochs.len())?;
                    for epoch in &history.epochs {
                        writeln!(
                            out,
                            "  epoch {} ({:016x}) from {}",
                            epoch.number, epoch.id, epoch.start
                        )?;
                    }
                }
                Some(None) => writeln!(out, "log id: none (no HISTORY file)")?,
                None => {}
            }
            writeln!(out, "result: {}", result_text(worst))?;
        }
        SummaryFormat::Json => {
            let result = match worst {
                Status::Clean => "clean",
                Status::Corrupt => "corrupt",
                Status::TornTail => "torn_tail",
            };
            let mut object = JsonObject::new();
            object
                .string("directory", &path.display().to_string())
                .number("segments", listed.segments.len() as u64)
                .number("first_segment", first)
                .number("last_segment", last)
                .number("bytes", listed.total_bytes())
                .strings("holes", &hole_names)
                .strings("badly_sealed", &badly_sealed);
            if let Some(history) = &history {
                let (id, epochs) = match history {
                    Some((id, history)) => (Some(id.to_string()), history.epochs.as_slice()),
                    None => (None, &[][..]),
                };
                let epochs = epochs
                    .iter()
                    .map(|epoch| {
                        let mut object = JsonObject::new();
                        object
                            .number("number", epoch.number)
                            .string("id", &format!("{:016x}", epoch.id))
                            .string("start", &epoch.start.to_string());
                        object
                    })
                    .collect();
                match id {
                    Some(id) => object.string("log_id", &id),
                    None => object.null("log_id"),
                };
                object.objects("epochs", epochs);
            }
            object
                .string("result", result)
                .number("exit_code", u64::from(worst.code()));
            writeln!(out, "{}", object.finish())?;
        }
    }
    finish(out)?;
    Ok(worst)
}

/// Whether segment `number` of the directory at `path` is gone and a purge covers
/// it (its `PURGED` file is written before the purge deletes anything).
fn purged_since_listed(path: &Path, number: u64) -> bool {
    LogDir::list(path).is_ok_and(|listed| {
        listed.purged_through.segment >= number
            && !listed.segments.iter().any(|s| s.number == number)
    })
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

/// The arguments of `command` (`verify` or `stat`) for one segment file: its own
/// parser, so the command runs on the segment exactly as on any file, with the
/// dialect told by its start (a segment of a recycling `LogDir` is a recyclable
/// RocksDB WAL numbered as its name says; the others are LevelDB logs).
fn segment_args<A: clap::Args + FromArgMatches>(
    command: &'static str,
    format: SummaryFormat,
    segment: &Path,
) -> Result<A, Failure> {
    let format = format
        .to_possible_value()
        .map(|value| value.get_name().to_string())
        .unwrap_or_else(|| "text".to_string());
    let argv: [OsString; 7] = [
        command.into(),
        "--format".into(),
        format.into(),
        "--dialect".into(),
        "auto".into(),
        "--".into(),
        segment.into(),
    ];
    let parsed = A::augment_args(clap::Command::new(command))
        .try_get_matches_from(argv)
        .and_then(|matches| A::from_arg_matches(&matches));
    parsed.map_err(|e| Failure::new(format!("{}: {e}", segment.display())))
}

/// A reading error: damage (exit 1, reading stops there), or an I/O error (exit 2).
fn read_error(path: &Path, error: walcodec::Error) -> Result<Status, Failure> {
    match error {
        walcodec::Error::Io(e) => Err(Failure::io(path, e)),
        other => {
            eprintln!("walcodec: {}: {other}", path.display());
            Ok(Status::Corrupt)
        }
    }
}

/// Whether `tail`, the bytes after the last record of segment `number` (at
/// `path`, the record ending at `from`), are its end rather than a write of its
/// own cut short: the segment is a recycled one (its first fragment has a
/// recyclable or WAL-sync header of its number) and `tail` does not start with
/// such a header of that number (it is what the file held in an earlier use), or
/// the segment is Pebble's and `tail` is the EOF trailer of a clean close.
fn earlier_use(path: &Path, number: u64, from: u64, tail: &[u8]) -> Result<bool, Failure> {
    let mut start = vec![0u8; walcodec::BLOCK_SIZE];
    let mut file = std::fs::File::open(path).map_err(|e| Failure::io(path, e))?;
    let n = file.read(&mut start).map_err(|e| Failure::io(path, e))?;
    let (dialect, first) = match walcodec::detect::detect(&start[..n]) {
        walcodec::detect::Detected::Dialect {
            dialect: walcodec::Dialect::Pebble,
            log_number,
            ..
        } => (walcodec::Dialect::Pebble, log_number),
        _ => (
            walcodec::Dialect::RocksDb,
            walcodec::fragment::sniff(&start[..n]).log_number,
        ),
    };
    if first != Some(number as u32) {
        return Ok(false);
    }
    let header = if dialect == walcodec::Dialect::Pebble {
        // The EOF trailer, after zeros to the block's end when fewer bytes than a
        // trailer were left in it.
        let block_left = walcodec::BLOCK_SIZE - (from % walcodec::BLOCK_SIZE as u64) as usize;
        let padded = block_left < walcodec::fragment::RECYCLABLE_HEADER_SIZE
            && tail
                .get(..block_left)
                .is_some_and(|pad| pad.iter().all(|&b| b == 0));
        let after_pad = if padded { &tail[block_left..] } else { tail };
        if walcodec::detect::eof_trailer(after_pad) == Some(number as u32 + 1) {
            return Ok(true);
        }
        walcodec::fragment::WAL_SYNC_HEADER_SIZE
    } else {
        walcodec::fragment::RECYCLABLE_HEADER_SIZE
    };
    // checksum (4), length (2), type (1), log number (4), [synced offset (8)]: only
    // the type and the number decide, since a write cut short has neither length
    // nor checksum intact.
    let Some(head) = tail.get(..header) else {
        return Ok(false);
    };
    let mut probe = [0u8; walcodec::fragment::WAL_SYNC_HEADER_SIZE];
    probe[..header].copy_from_slice(head);
    probe[4] = 0;
    probe[5] = 0;
    let probe = &probe[..header];
    let rules = walcodec::fragment::FragmentRules::new(dialect)
        .log_number(number)
        .verify_checksums(false);
    Ok(!matches!(
        rules.parse(probe, walcodec::BLOCK_SIZE),
        walcodec::fragment::Parsed::Fragment(fragment) if fragment.log_number().is_some()
    ))
}

/// The status of a read of the whole directory that ended without an error at
/// `end` (just past the last record), judged as `dump FILE` judges a file's end:
/// bytes after it in the last segment that are not all zeros (preallocated space)
/// are a torn tail, or a writer mid-write (exit 3).
fn end_status(path: &Path, end: LogPosition) -> Result<Status, Failure> {
    let listed = LogDir::list(path).map_err(|e| Failure::log(path, e))?;
    let Some(last) = listed.segments.last() else {
        return Ok(Status::Clean);
    };
    let from = match end.segment.cmp(&last.number) {
        std::cmp::Ordering::Equal => end.offset,
        std::cmp::Ordering::Less => 0,
        std::cmp::Ordering::Greater => return Ok(Status::Clean),
    };
    if last.len <= from {
        return Ok(Status::Clean);
    }
    let mut file = std::fs::File::open(&last.path).map_err(|e| Failure::io(&last.path, e))?;
    file.seek(SeekFrom::Start(from))
        .map_err(|e| Failure::io(&last.path, e))?;
    let mut buf = vec![0; 64 * 1024];
    let mut left = last.len - from;
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = file
            .read(&mut buf[..want])
            .map_err(|e| Failure::io(&last.path, e))?;
        if n == 0 {
            break;
        }
        if buf[..n].iter().any(|&b| b != 0) {
            if left == last.len - from && earlier_use(&last.path, last.number, from, &buf[..n])? {
                // A reused segment's bytes from its earlier use: its end, nothing
                // lost (`verify` says the same).
                return Ok(Status::Clean);
            }
            eprintln!(
                "walcodec: {}: {}: torn tail after offset {from} ({} bytes)",
                path.display(),
                segment_name(last.number),
                last.len - from
            );
            return Ok(Status::TornTail);
        }
        left -= n as u64;
    }
    Ok(Status::Clean)
}

/// Where `--from` starts the read: the start of the log when not given.
fn from(sub: &ArgMatches) -> LogPosition {
    sub.try_get_one::<LogPosition>("from")
        .ok()
        .flatten()
        .copied()
        .unwrap_or(LogPosition::START)
}

async fn open_reader(path: &Path, from: LogPosition) -> Result<DirReader, Failure> {
    DirReader::open(path, from)
        .await
        .map_err(|e| Failure::log(path, e))
}

/// The format of `dump` or `tail`; the batch formats are refused (a directory's
/// records are read as LevelDB's).
fn record_format(sub: &ArgMatches, path: &Path) -> Result<Format, Failure> {
    let format = sub
        .get_one::<Format>("format")
        .copied()
        .unwrap_or(Format::Text);
    if format.is_batch() {
        return Err(Failure::new(format!(
            "{}: the batch formats do not apply to a log directory",
            path.display()
        )));
    }
    Ok(format)
}

/// One record as a line of `dump DIR`: `POSITION LEN PAYLOAD` (text, hex), or
/// `{"position":"000007:1234","end":"000007:1300","len":L,"data":"HEX"}`.
fn format_record(record: &DirRecord, format: Format, max_bytes: Option<usize>, line: &mut Vec<u8>) {
    let len = record.data.len();
    let shown = &record.data[..max_bytes.map_or(len, |max| max.min(len))];
    let omitted = len - shown.len();
    match format {
        Format::Json => json::write_line(
            &json::DirRecordLine {
                position: record.start,
                end: record.end,
                len,
                data: json::Hex(shown),
                omitted: max_bytes.map(|_| omitted),
            },
            line,
        ),
        _ => {
            line.extend_from_slice(format!("{} {len} ", record.start).as_bytes());
            if format == Format::Hex {
                hex_into(shown, line);
            } else {
                escape_into(shown, line);
            }
            if omitted > 0 {
                line.extend_from_slice(format!("…(+{omitted} bytes)").as_bytes());
            }
        }
    }
    line.push(b'\n');
}

/// `dump DIR`: every record, in order.
async fn dump(sub: &ArgMatches, path: &Path) -> Result<Status, Failure> {
    let format = record_format(sub, path)?;
    let max_bytes = sub.get_one::<usize>("max_bytes").copied();
    let mut reader = open_reader(path, from(sub)).await?;
    let mut out = stdout();
    let mut line = Vec::new();
    let mut status = Status::Clean;
    while let Some(record) = reader.next_record().await {
        match record {
            Ok(record) => {
                line.clear();
                format_record(&record, format, max_bytes, &mut line);
                out.write_all(&line)?;
            }
            Err(e) => {
                finish(&mut out)?;
                status = read_error(path, e)?;
            }
        }
    }
    finish(out)?;
    if status == Status::Clean {
        status = end_status(path, reader.position())?;
    }
    Ok(status)
}

/// `cat DIR`: every payload, in order, framed as `cat FILE --to` frames them.
async fn cat(sub: &ArgMatches, path: &Path) -> Result<Status, Failure> {
    // The value as the user spelled it, read as `cat FILE` reads it.
    let to = match sub
        .get_raw("to")
        .and_then(|mut values| values.next())
        .and_then(|value| value.to_str())
    {
        None => To::Raw,
        Some(value) => To::from_str(value, false).map_err(|_| {
            Failure::new(format!(
                "{}: --to {value} does not apply to a log directory",
                path.display()
            ))
        })?,
    };
    let mut reader = open_reader(path, from(sub)).await?;
    let mut out = stdout();
    let mut payloads = PayloadWriter::new(to);
    let mut status = Status::Clean;
    while let Some(record) = reader.next_record().await {
        let record = match record {
            Ok(record) => record,
            Err(e) => {
                finish(&mut out)?;
                status = read_error(path, e)?;
                continue;
            }
        };
        if !payloads.write(&mut out, &record.data)? {
            finish(out)?;
            return Err(Failure::new(format!(
                "{}: the record at {} holds a newline: use --to hex",
                path.display(),
                record.start
            )));
        }
    }
    finish(out)?;
    if status == Status::Clean {
        status = end_status(path, reader.position())?;
    }
    Ok(status)
}

/// `tail DIR`: the last N records; with `-f`, then every record appended, across
/// rotations, until interrupted or an error.
async fn tail(sub: &ArgMatches, path: &Path) -> Result<Status, Failure> {
    let format = record_format(sub, path)?;
    let max_bytes = sub.get_one::<usize>("max_bytes").copied();
    let follow = sub.get_flag("follow");
    let count = sub.get_one::<usize>("records").copied().unwrap_or(10);
    let poll_interval = sub.get_one::<u64>("poll_interval").copied().unwrap_or(50);
    let mut reader = open_reader(path, LogPosition::START).await?;
    let mut last = std::collections::VecDeque::with_capacity(count.min(1 << 16));
    let mut status = Status::Clean;
    while let Some(record) = reader.next_record().await {
        match record {
            Ok(record) => {
                if last.len() == count {
                    last.pop_front();
                }
                if count > 0 {
                    last.push_back(record);
                }
            }
            Err(e) => status = read_error(path, e)?,
        }
    }
    let mut out = stdout();
    let mut line = Vec::new();
    for record in &last {
        line.clear();
        format_record(record, format, max_bytes, &mut line);
        out.write_all(&line)?;
    }
    out.flush()?;
    if !follow || status != Status::Clean {
        finish(out)?;
        if status == Status::Clean {
            return end_status(path, reader.position());
        }
        return Ok(status);
    }
    // From just past the last record read: what a writer appends from here on,
    // across rotations.
    let mut follower = open_reader(path, reader.position())
        .await?
        .follow()
        .with_poll_interval(Duration::from_millis(poll_interval.max(1)));
    drop(reader);
    while let Some(record) = follower.next_record().await {
        match record {
            Ok(record) => {
                line.clear();
                format_record(&record, format, max_bytes, &mut line);
                out.write_all(&line)?;
                // Whoever reads a followed log wants each record now.
                out.flush()?;
            }
            Err(e) => {
                finish(&mut out)?;
                return read_error(path, e);
            }
        }
    }
    finish(out)?;
    Ok(status)
}
