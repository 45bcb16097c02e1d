//! `walcodec`: inspect, verify, repair and convert LevelDB / RocksDB log files (the
//! write-ahead log and MANIFEST framing).
//!
//! One module per subcommand; `common` holds the exit status, errors and output
//! formatting, `input` where a command's bytes come from (a file up to its length at
//! open, stdin, a pipe, a device) and the progress bar, `scan` how `verify`, `stat`
//! and `dump` drive the library's pass over a log (`walcodec::inspect`, which reads
//! a file in ranges at once for `--jobs` and merges them), `dir` the same
//! commands on a log directory (`LogDir`), segment by segment, `verdict` the words `verify`
//! and `stat` share about a log's tail and result, `json` their JSON output,
//! `dialect` the format a log is read in (`--dialect`, `--log-number`), `wal` what
//! the pass learns of a RocksDB WAL, `batch` records as WriteBatches.

use std::process::ExitCode;

use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};

/// The exit status table, as a literal so that subcommands can append it to their
/// own help with `concat!`.
macro_rules! exit_status {
    () => {
        "\
Exit status:
  0  success; the log is clean
  1  the log is corrupt: records or bytes were dropped
  2  usage or I/O error, or the input is not a log (nothing was judged)
  3  the log is intact but its tail is torn: its last record was cut short,
     as a writer that died mid-write leaves it (`walcodec repair` truncates it)"
    };
}

mod batch;
mod cat;
mod common;
mod dialect;
mod dir;
mod dump;
mod failure;
mod input;
mod json;
mod limits;
mod physical;
mod repair;
mod scan;
mod stat;
mod tail;
mod verdict;
mod verify;
mod wal;
mod write;

use common::{Failure, Limits, Status};

const EXIT_STATUS: &str = exit_status!();

/// Inspect, verify, repair and convert LevelDB / RocksDB log files.
#[derive(Debug, Parser)]
#[command(name = "walcodec", version, after_help = EXIT_STATUS)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    limits: Limits,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print every record (offset, length, payload), or with --physical every fragment.
    #[command(after_help = EXIT_STATUS)]
    Dump(dump::Args),
    /// Read the whole log, print each corruption LevelDB-style and a summary.
    #[command(after_help = verify::AFTER_HELP)]
    Verify(verify::Args),
    /// Count records, blocks, fragments, trailers and damage; record-size histogram.
    #[command(after_help = stat::AFTER_HELP)]
    Stat(stat::Args),
    /// Truncate a torn tail (durably), or with --salvage copy every readable record
    /// into a new, clean log.
    #[command(after_help = EXIT_STATUS)]
    Repair(repair::Args),
    /// Write the record payloads to stdout: raw, one per line, hex lines or RecordIO.
    #[command(after_help = EXIT_STATUS)]
    Cat(cat::Args),
    /// Write a new log (or append to one) from records on stdin.
    #[command(after_help = EXIT_STATUS)]
    Write(write::Args),
    /// Print the last records of a log; with -f, follow it as it grows.
    #[command(after_help = EXIT_STATUS)]
    Tail(tail::Args),
}

async fn run(command: Command, limits: Limits, matches: &ArgMatches) -> Result<Status, Failure> {
    // A log directory given where a log is taken: its segments, in order.
    if let Some(status) = dir::run(matches, limits).await? {
        return Ok(status);
    }
    match command {
        Command::Dump(args) => dump::run(args, limits).await,
        Command::Verify(args) => verify::run(args, limits),
        Command::Stat(args) => stat::run(args, limits),
        Command::Repair(args) => repair::run(args, limits).await,
        Command::Cat(args) => cat::run(args, limits).await,
        Command::Write(args) => write::run(args, limits),
        Command::Tail(args) => tail::run(args, limits).await,
    }
}

fn main() -> ExitCode {
    // clap prints usage errors itself and exits with 2.
    // The matches too, for `dir` to see the options as given.
    let matches = dir::augment(Cli::command()).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.format(&mut dir::augment(Cli::command())).exit(),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("walcodec: cannot start the async runtime: {e}");
            return ExitCode::from(Status::ERROR_CODE);
        }
    };
    match runtime.block_on(run(cli.command, cli.limits, &matches)) {
        Ok(status) => ExitCode::from(status.code()),
        // A reader that stopped early (`walcodec dump LOG | head`) is not an error.
        Err(failure) if failure.is_broken_pipe() => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("walcodec: {failure}");
            ExitCode::from(Status::ERROR_CODE)
        }
    }
}
