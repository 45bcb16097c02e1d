//! `verify FILE`: reads the whole log as LevelDB's reader does (skipping damage),
//! prints each piece of damage as LevelDB logs it, then a summary:
//!
//! ```text
//! offset N: dropping B bytes; REASON          one per piece of damage, in log order
//! records: N (B bytes)
//! dropped: B bytes in N corruptions
//! zero fill: B bytes
//! tail: clean | torn after offset V (T bytes)
//! result: clean | corrupt | torn tail
//! ```
//!
//! Whether the log is damaged or only torn is a strict (`TolerateTail`) reader's
//! verdict: zeros after a FIRST fragment up to EOF, which LevelDB reports as "error
//! in middle of record", is the torn tail a power cut leaves in a preallocated file.
//!
//! Beyond LevelDB's reports it flags preallocated (zero-header) space that is not all
//! zeros: a reader skips it without a word, so whatever was written there is lost
//! (google/leveldb#203).

use std::io::Write;
use std::path::PathBuf;

use walcodec::physical::Chunk;
use walcodec::Corruption;

use crate::common::{finish, stdout, Failure, Limits, Status};
use crate::scan::{scan, Visitor};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The log file.
    file: PathBuf,
}

/// What the pass found, in log order.
#[derive(Default)]
struct Checker {
    /// Lines to print: LevelDB-style reports, and zero fill hiding data.
    lines: Vec<Finding>,
    /// Pieces of zero fill that hide data (damage the decoder does not report).
    hidden: u64,
    hidden_bytes: u64,
}

enum Finding {
    /// A report of LevelDB's reader (`SkipCorrupted`).
    Report(Corruption),
    /// Zero fill that is not all zeros.
    Hidden(String),
}

impl Visitor for Checker {
    fn chunk(&mut self, chunk: &Chunk<'_>) -> Result<(), Failure> {
        if let Chunk::ZeroFill { offset, bytes } = *chunk {
            if bytes.iter().any(|&b| b != 0) {
                self.hidden += 1;
                self.hidden_bytes += bytes.len() as u64;
                self.lines.push(Finding::Hidden(format!(
                    "offset {offset}: dropping {} bytes; zero header skips non-zero bytes",
                    bytes.len()
                )));
            }
        }
        Ok(())
    }

    fn corruption(&mut self, corruption: &Corruption) -> Result<(), Failure> {
        self.lines.push(Finding::Report(corruption.clone()));
        Ok(())
    }
}

pub(crate) fn run(args: Args, limits: Limits) -> Result<Status, Failure> {
    let mut checker = Checker::default();
    let end = scan(&args.file, 0, true, limits, &mut checker)?;
    let stats = end.stats;
    let strict = &end.strict;
    // When a strict reader finds no damage, LevelDB's reports are all about the torn
    // tail (zeros cutting a record): the tail line says it, not a corruption.
    let damaged = strict.damage.is_some();
    let (mut corruptions, mut dropped) = (checker.hidden, checker.hidden_bytes);
    if damaged {
        corruptions += stats.corruptions;
        dropped += stats.dropped_bytes;
    }
    let status = Status::judge(corruptions, strict.incomplete_tail);

    let mut out = stdout();
    for finding in &checker.lines {
        match finding {
            Finding::Report(report) if damaged => writeln!(out, "{report}")?,
            Finding::Report(_) => {}
            Finding::Hidden(line) => writeln!(out, "{line}")?,
        }
    }
    writeln!(
        out,
        "records: {} ({} bytes)",
        stats.records, stats.record_bytes
    )?;
    writeln!(out, "dropped: {dropped} bytes in {corruptions} corruptions")?;
    writeln!(out, "zero fill: {} bytes", stats.zero_fill_bytes)?;
    if strict.incomplete_tail {
        writeln!(
            out,
            "tail: torn after offset {} ({} bytes)",
            strict.valid_prefix_len,
            end.file_len - strict.valid_prefix_len
        )?;
    } else {
        writeln!(out, "tail: clean")?;
    }
    let result = match status {
        Status::Clean => "clean",
        Status::Corrupt => "corrupt",
        Status::TornTail => "torn tail",
    };
    writeln!(out, "result: {result}")?;
    finish(out)?;
    Ok(status)
}
