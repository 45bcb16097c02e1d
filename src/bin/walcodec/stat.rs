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
//! record sizes:
//!   LOW..=HIGH COUNT BAR                     power-of-two buckets, empty ones inside the range kept
//! ```

use std::io::Write;
use std::path::PathBuf;

use bytes::Bytes;
use walcodec::physical::Chunk;
use walcodec::{Position, BLOCK_SIZE, HEADER_SIZE};

use crate::common::{finish, stdout, Failure, Limits, Status};
use crate::scan::{scan, Visitor};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The log file.
    file: PathBuf,
}

#[derive(Debug)]
struct Counts {
    /// Fragments by type byte 0..=4, and the rest.
    by_type: [u64; 5],
    other_types: u64,
    header_bytes: u64,
    trailer_bytes: u64,
    zero_fill_bytes: u64,
    bad_checksum_bytes: u64,
    bad_length_bytes: u64,
    skipped_bytes: u64,
    torn_bytes: u64,
    /// Records by size bucket: 0 for empty, else 1 + floor(log2(size)).
    histogram: [u64; 65],
}

impl Default for Counts {
    fn default() -> Counts {
        Counts {
            by_type: [0; 5],
            other_types: 0,
            header_bytes: 0,
            trailer_bytes: 0,
            zero_fill_bytes: 0,
            bad_checksum_bytes: 0,
            bad_length_bytes: 0,
            skipped_bytes: 0,
            torn_bytes: 0,
            histogram: [0; 65],
        }
    }
}

impl Visitor for Counts {
    fn chunk(&mut self, chunk: &Chunk<'_>) -> Result<(), Failure> {
        match *chunk {
            Chunk::Fragment {
                header,
                checksum_ok,
                ..
            } => {
                if checksum_ok {
                    match self.by_type.get_mut(header.type_byte as usize) {
                        Some(count) => *count += 1,
                        None => self.other_types += 1,
                    }
                    self.header_bytes += HEADER_SIZE as u64;
                } else {
                    self.bad_checksum_bytes += chunk.len();
                }
            }
            Chunk::Trailer { .. } => self.trailer_bytes += chunk.len(),
            Chunk::ZeroFill { .. } => self.zero_fill_bytes += chunk.len(),
            Chunk::BadLength { .. } => self.bad_length_bytes += chunk.len(),
            Chunk::Skipped { .. } => self.skipped_bytes += chunk.len(),
            Chunk::Torn { .. } => self.torn_bytes += chunk.len(),
        }
        Ok(())
    }

    fn record(&mut self, _position: Position, data: &Bytes) -> Result<(), Failure> {
        self.histogram[bucket(data.len() as u64)] += 1;
        Ok(())
    }
}

fn bucket(size: u64) -> usize {
    if size == 0 {
        0
    } else {
        64 - size.leading_zeros() as usize
    }
}

/// The sizes a bucket holds, as `LOW..=HIGH` (or `0`).
fn bucket_label(bucket: usize) -> String {
    match bucket {
        0 => "0".to_string(),
        1 => "1".to_string(),
        _ => {
            let low = 1u64 << (bucket - 1);
            let high = low | (low - 1);
            format!("{low}..={high}")
        }
    }
}

pub(crate) fn run(args: Args, limits: Limits) -> Result<Status, Failure> {
    let mut counts = Counts::default();
    let end = scan(&args.file, 0, true, limits, &mut counts)?;
    let stats = end.stats;
    let mut out = stdout();

    let block = BLOCK_SIZE as u64;
    let blocks = end.file_len.div_ceil(block);
    let last_block = match end.file_len % block {
        0 if end.file_len > 0 => "full".to_string(),
        0 => "none".to_string(),
        partial => format!("last block {partial} bytes"),
    };
    let fragments: u64 = counts.by_type.iter().sum::<u64>() + counts.other_types;
    let [zero, full, first, middle, last] = counts.by_type;

    writeln!(out, "file: {}", args.file.display())?;
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
        zero + counts.other_types
    )?;
    writeln!(out, "header bytes: {}", counts.header_bytes)?;
    writeln!(out, "trailer bytes: {}", counts.trailer_bytes)?;
    writeln!(out, "zero fill bytes: {}", counts.zero_fill_bytes)?;
    writeln!(
        out,
        "damaged bytes: {} (bad checksum {}, bad length {}, skipped {})",
        counts.bad_checksum_bytes + counts.bad_length_bytes + counts.skipped_bytes,
        counts.bad_checksum_bytes,
        counts.bad_length_bytes,
        counts.skipped_bytes
    )?;
    writeln!(out, "torn tail bytes: {}", counts.torn_bytes)?;
    writeln!(
        out,
        "corruptions: {} ({} bytes dropped)",
        stats.corruptions, stats.dropped_bytes
    )?;
    writeln!(out, "record sizes:")?;
    write_histogram(&counts.histogram, &mut out)?;
    finish(out)?;
    let damaged = u64::from(end.strict.damage.is_some());
    Ok(Status::judge(damaged, end.strict.incomplete_tail))
}

/// The non-empty span of the histogram, one bucket a line, with a bar scaled to the
/// largest count.
fn write_histogram(histogram: &[u64; 65], out: &mut impl Write) -> std::io::Result<()> {
    const BAR_WIDTH: u64 = 40;
    let Some(low) = histogram.iter().position(|&n| n > 0) else {
        return Ok(());
    };
    let high = histogram
        .iter()
        .rposition(|&n| n > 0)
        .expect("one is non-zero");
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
