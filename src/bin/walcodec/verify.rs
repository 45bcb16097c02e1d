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

struct Checker<W> {
    out: W,
    /// Pieces of zero fill that hide data (damage the decoder does not report).
    hidden: u64,
    hidden_bytes: u64,
}

impl<W: Write> Visitor for Checker<W> {
    fn chunk(&mut self, chunk: &Chunk<'_>) -> Result<(), Failure> {
        if let Chunk::ZeroFill { offset, bytes } = *chunk {
            if bytes.iter().any(|&b| b != 0) {
                self.hidden += 1;
                self.hidden_bytes += bytes.len() as u64;
                writeln!(
                    self.out,
                    "offset {offset}: dropping {} bytes; zero header skips non-zero bytes",
                    bytes.len()
                )?;
            }
        }
        Ok(())
    }

    fn corruption(&mut self, corruption: &Corruption) -> Result<(), Failure> {
        writeln!(self.out, "{corruption}")?;
        Ok(())
    }
}

pub(crate) fn run(args: Args, limits: Limits) -> Result<Status, Failure> {
    let mut checker = Checker {
        out: stdout(),
        hidden: 0,
        hidden_bytes: 0,
    };
    let end = scan(&args.file, 0, true, limits, &mut checker)?;
    let stats = end.stats;
    let corruptions = stats.corruptions + checker.hidden;
    let status = Status::judge(corruptions, end.incomplete_tail);
    let out = &mut checker.out;
    writeln!(
        out,
        "records: {} ({} bytes)",
        stats.records, stats.record_bytes
    )?;
    writeln!(
        out,
        "dropped: {} bytes in {corruptions} corruptions",
        stats.dropped_bytes + checker.hidden_bytes
    )?;
    writeln!(out, "zero fill: {} bytes", stats.zero_fill_bytes)?;
    if end.incomplete_tail {
        writeln!(
            out,
            "tail: torn after offset {} ({} bytes)",
            end.valid_prefix_len,
            end.file_len - end.valid_prefix_len
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
    finish(checker.out)?;
    Ok(status)
}
