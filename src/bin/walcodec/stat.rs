//! `stat FILE`: what a log is made of.
//!
//! ```text
//! file: PATH
//! bytes: N
//! blocks: N (last block B bytes)           "(full)" when the file ends on a block boundary
//! records: N (B payload bytes)
//! fragments: N (FULL a, FIRST b, MIDDLE c, LAST d, other e)
//! header bytes: N
//! trailer bytes: N
//! zero fill bytes: N
//! damaged bytes: N (bad checksum a, bad length b, skipped c)
//! torn tail bytes: N
//! corruptions: N (B bytes dropped)
//! tail: clean | zeros ... | torn ... | earlier use ... | recycled end ...   as `verify`
//! note: ...                                how the read ended, when worth saying
//! result: clean | corrupt | torn tail      as `verify`
//! record sizes:
//!   LOW..=HIGH COUNT BAR                     power-of-two buckets, empty ones inside the range kept
//! ```
//!
//! A log read as RocksDB's (`--dialect`) gets the lines of `wal` at the end (header
//! kinds, compression, metadata records, old fragments); its recyclable fragments
//! count as the FULL, FIRST, MIDDLE and LAST they are, with 11 header bytes each.
//!
//! With `--format json`, the same as one JSON object (see `AFTER_HELP`).

use std::io::Write;
use std::path::PathBuf;

use walcodec::inspect::{ItemKind, Layout};
use walcodec::BLOCK_SIZE;

use crate::common::{finish, input_notes, stdout, Failure, Limits, Status};
use crate::dialect::{DialectArgs, LogChoice};
use crate::input::Input;
use crate::json::JsonObject;
use crate::scan::{scan, JobsArgs, ScanEnd};
use crate::verdict::{json_end, result_text, tail_of, SummaryFormat, TailText};
use walcodec::inspect::Tail;

/// The JSON fields and the exit status, for `stat --help`.
pub(crate) const AFTER_HELP: &str = concat!(
    "\
With --format json, one object on stdout:
  file, bytes, blocks, last_block_bytes (0 when the last block is full),
  records, record_bytes,
  fragments {total, full, first, middle, last, other},
  header_bytes, trailer_bytes, zero_fill_bytes,
  damaged_bytes {total, bad_checksum, bad_length, skipped},
  torn_tail_bytes, corruptions, dropped_bytes (the reports of LevelDB's reader,
    a torn tail's included: verify counts damage only),
  tail, valid_len, tail_bytes, complete, live, notes, result, exit_code (as verify),
  record_sizes [{min, max, count}]   the non-empty span of power-of-two buckets,
  wal {...}   a log read as RocksDB's only: as verify's (see verify --help)",
    "\n\n",
    exit_status!()
);

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The log file; `-` reads stdin.
    file: PathBuf,
    /// How the counts are printed.
    #[arg(long, value_enum, default_value_t = SummaryFormat::Text)]
    format: SummaryFormat,
    #[command(flatten)]
    jobs: JobsArgs,
    #[command(flatten)]
    dialect: DialectArgs,
}

/// The layout of the log, and its records by size bucket: 0 for empty, else
/// 1 + floor(log2(size)).
#[derive(Debug)]
struct Counts {
    layout: Layout,
    histogram: [u64; 65],
}

impl Counts {
    fn damaged_bytes(&self) -> u64 {
        self.layout.bad_checksum_bytes + self.layout.bad_length_bytes + self.layout.skipped_bytes
    }
}

fn bucket(size: u64) -> usize {
    if size == 0 {
        0
    } else {
        64 - size.leading_zeros() as usize
    }
}

/// The smallest and largest sizes a bucket holds.
fn bucket_bounds(bucket: usize) -> (u64, u64) {
    match bucket {
        0 => (0, 0),
        _ => {
            let low = 1u64 << (bucket - 1);
            (low, low | (low - 1))
        }
    }
}

/// The sizes a bucket holds, as `LOW..=HIGH` (or `0`, `1`).
fn bucket_label(bucket: usize) -> String {
    match bucket_bounds(bucket) {
        (low, high) if low == high => low.to_string(),
        (low, high) => format!("{low}..={high}"),
    }
}

/// The indices of the first and last non-empty buckets.
fn non_empty_span(histogram: &[u64; 65]) -> Option<(usize, usize)> {
    let low = histogram.iter().position(|&n| n > 0)?;
    let high = histogram.iter().rposition(|&n| n > 0)?;
    Some((low, high))
}

pub(crate) fn run(args: Args, limits: Limits) -> Result<Status, Failure> {
    let mut input = Input::open(&args.file, limits)?;
    let log = LogChoice::resolve(&mut input, &args.file, &args.dialect)?;
    let mut histogram = [0u64; 65];
    let end = scan(&mut input, &args.jobs, limits, &log, &mut |item| {
        if let ItemKind::Record { len, .. } = item.kind {
            histogram[bucket(len)] += 1;
        }
        Ok(())
    })?;
    let counts = Counts {
        layout: end.layout.clone(),
        histogram,
    };
    // Pebble: a zero header over other bytes is an invalid chunk, which Pebble's rule
    // (the strict reader's) judges.
    let hidden = match log.dialect {
        walcodec::Dialect::Pebble => 0,
        _ => counts.layout.hidden_zero_fills,
    };
    let damaged = u64::from(end.strict.damage.is_some()) + hidden;
    let status = Status::judge(damaged, end.strict.incomplete_tail);
    let notes = input_notes(&end.input);
    let mut out = stdout();
    match args.format {
        SummaryFormat::Text => {
            write_text(input.name(), &counts, &end, &notes, status, &mut out)?;
            if log.dialect == walcodec::Dialect::RocksDb {
                crate::wal::write_text(&end.wal, &log, &mut out)?;
            }
        }
        SummaryFormat::Json => {
            let mut object = json(input.name(), &counts, &end, &notes, status);
            if log.dialect == walcodec::Dialect::RocksDb {
                object.object("wal", crate::wal::json(&end.wal, &log));
            }
            writeln!(out, "{}", object.finish())?
        }
    }
    finish(out)?;
    Ok(status)
}

/// The tail `stat` reports and its `torn tail bytes`, which never disagree: the
/// strict reader's tail (as `verify`'s), unless it stopped at damage before the end
/// while the layout walk, which goes on to the end, found a torn tail there: then
/// that torn tail. A torn tail's bytes are the tail's; other tails keep the layout
/// walk's count.
fn stat_tail(end: &ScanEnd, counts: &Counts) -> (Tail, u64) {
    let torn = counts.layout.torn_bytes;
    match tail_of(end, counts.layout.hidden_zero_fills > 0) {
        Tail::Clean if torn > 0 => (
            Tail::Torn {
                after: end.file_len.saturating_sub(torn),
                bytes: torn,
            },
            torn,
        ),
        Tail::Clean => (Tail::Clean, 0),
        tail @ Tail::Torn { bytes, .. } => (tail, bytes),
        tail => (tail, torn),
    }
}

/// The blocks the log spans, and the bytes of its last block when that is not full.
fn blocks(file_len: u64) -> (u64, u64) {
    let block = BLOCK_SIZE as u64;
    (file_len.div_ceil(block), file_len % block)
}

fn write_text(
    name: &str,
    counts: &Counts,
    end: &ScanEnd,
    notes: &[String],
    status: Status,
    out: &mut impl Write,
) -> std::io::Result<()> {
    let stats = end.stats;
    let (blocks, last_block_bytes) = blocks(end.file_len);
    let last_block = match last_block_bytes {
        0 if end.file_len > 0 => "full".to_string(),
        0 => "none".to_string(),
        partial => format!("last block {partial} bytes"),
    };
    let fragments: u64 = counts.layout.by_type.iter().sum::<u64>() + counts.layout.other_types;
    let [zero, full, first, middle, last] = counts.layout.by_type;

    writeln!(out, "file: {name}")?;
    writeln!(out, "bytes: {}", end.file_len)?;
    writeln!(out, "blocks: {blocks} ({last_block})")?;
    writeln!(
        out,
        "records: {} ({} payload bytes)",
        stats.records, stats.record_bytes
    )?;
    writeln!(
        out,
        "fragments: {fragments} (FULL {full}, FIRST {first}, MIDDLE {middle}, LAST {last}, other {})",
        zero + counts.layout.other_types
    )?;
    writeln!(out, "header bytes: {}", counts.layout.header_bytes)?;
    writeln!(out, "trailer bytes: {}", counts.layout.trailer_bytes)?;
    writeln!(out, "zero fill bytes: {}", counts.layout.zero_fill_bytes)?;
    writeln!(
        out,
        "damaged bytes: {} (bad checksum {}, bad length {}, skipped {})",
        counts.damaged_bytes(),
        counts.layout.bad_checksum_bytes,
        counts.layout.bad_length_bytes,
        counts.layout.skipped_bytes
    )?;
    let (tail, torn_bytes) = stat_tail(end, counts);
    writeln!(out, "torn tail bytes: {torn_bytes}")?;
    writeln!(
        out,
        "corruptions: {} ({} bytes dropped)",
        stats.corruptions, stats.dropped_bytes
    )?;
    writeln!(out, "tail: {}", tail.describe())?;
    for note in notes {
        writeln!(out, "note: {note}")?;
    }
    writeln!(out, "result: {}", result_text(status))?;
    writeln!(out, "record sizes:")?;
    write_histogram(&counts.histogram, out)
}

fn json(
    name: &str,
    counts: &Counts,
    end: &ScanEnd,
    notes: &[String],
    status: Status,
) -> JsonObject {
    let stats = end.stats;
    let (blocks, last_block_bytes) = blocks(end.file_len);
    let [zero, full, first, middle, last] = counts.layout.by_type;
    let mut fragments = JsonObject::new();
    fragments
        .number(
            "total",
            counts.layout.by_type.iter().sum::<u64>() + counts.layout.other_types,
        )
        .number("full", full)
        .number("first", first)
        .number("middle", middle)
        .number("last", last)
        .number("other", zero + counts.layout.other_types);
    let mut damaged = JsonObject::new();
    damaged
        .number("total", counts.damaged_bytes())
        .number("bad_checksum", counts.layout.bad_checksum_bytes)
        .number("bad_length", counts.layout.bad_length_bytes)
        .number("skipped", counts.layout.skipped_bytes);
    let sizes = match non_empty_span(&counts.histogram) {
        None => Vec::new(),
        Some((low, high)) => (low..=high)
            .map(|bucket| {
                let (min, max) = bucket_bounds(bucket);
                let mut row = JsonObject::new();
                row.number("min", min)
                    .number("max", max)
                    .number("count", counts.histogram[bucket]);
                row
            })
            .collect(),
    };
    let mut object = JsonObject::new();
    object
        .string("file", name)
        .number("bytes", end.file_len)
        .number("blocks", blocks)
        .number("last_block_bytes", last_block_bytes)
        .number("records", stats.records)
        .number("record_bytes", stats.record_bytes)
        .object("fragments", fragments)
        .number("header_bytes", counts.layout.header_bytes)
        .number("trailer_bytes", counts.layout.trailer_bytes)
        .number("zero_fill_bytes", counts.layout.zero_fill_bytes)
        .object("damaged_bytes", damaged)
        .number("torn_tail_bytes", stat_tail(end, counts).1)
        .number("corruptions", stats.corruptions)
        .number("dropped_bytes", stats.dropped_bytes);
    stat_tail(end, counts).0.json(&mut object, end);
    json_end(&mut object, end, notes, status);
    object.objects("record_sizes", sizes);
    object
}

/// The non-empty span of the histogram, one bucket a line, with a bar scaled to the
/// largest count.
fn write_histogram(histogram: &[u64; 65], out: &mut impl Write) -> std::io::Result<()> {
    const BAR_WIDTH: u64 = 40;
    let Some((low, high)) = non_empty_span(histogram) else {
        return Ok(());
    };
    let largest = *histogram.iter().max().expect("not empty");
    let labels: Vec<String> = (low..=high).map(bucket_label).collect();
    let width = labels.iter().map(String::len).max().unwrap_or(0);
    let count_width = largest.to_string().len();
    for (label, &count) in labels.iter().zip(&histogram[low..=high]) {
        let bar = (count * BAR_WIDTH).div_ceil(largest) as usize;
        let line = format!(
            "  {label:>width$} {count:>count_width$} {}",
            "#".repeat(bar)
        );
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1), 1);
        assert_eq!(bucket(2), 2);
        assert_eq!(bucket(3), 2);
        assert_eq!(bucket(4), 3);
        assert_eq!(bucket(u64::MAX), 64);
        assert_eq!(bucket_label(0), "0");
        assert_eq!(bucket_label(1), "1");
        assert_eq!(bucket_label(2), "2..=3");
        assert_eq!(bucket_label(11), "1024..=2047");
        assert_eq!(bucket_label(64), format!("{}..={}", 1u64 << 63, u64::MAX));
    }

    #[test]
    fn histogram_spans_the_non_empty_buckets() {
        let mut histogram = [0u64; 65];
        histogram[0] = 2;
        histogram[3] = 4;
        let mut out = Vec::new();
        write_histogram(&histogram, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let bar = "#".repeat(40);
        assert_eq!(
            text,
            format!(
                "      0 2 {}\n      1 0\n  2..=3 0\n  4..=7 4 {bar}\n",
                "#".repeat(20)
            )
        );
    }
}
