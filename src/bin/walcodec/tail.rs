//! `tail FILE`: the last records of a log, in `dump`'s formats; with `-f`, then every
//! record appended to it, each printed as soon as it is complete.
//!
//! The records to print first are found by reading the whole log (as the other
//! reading commands do: a regular file up to its length at open, `-` and pipes until
//! they close). With `-f` that read is the follower's own, from the log's first
//! byte to what it holds now, and following goes on from there: a record being
//! written at that moment is neither lost nor printed twice, and what a write in
//! progress leaves is not reported as damage. Only a regular file can be followed.

use std::collections::VecDeque;
use std::io::{SeekFrom, Write};
use std::path::PathBuf;
use std::time::Duration;

use tokio::io::AsyncSeekExt;
use walcodec::{LogReader, LogTailer};

use crate::common::{
    finish, finish_reader, open_reader, read_status, stdout, Failure, Limits, RecoveryArg, Status,
};
use crate::dialect::DialectArgs;
use crate::dump::{batch_dialect, format_record, report_batch_error, Format};
use crate::input::{input_name, BlockingReader};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The log file; `-` reads stdin (without --follow).
    file: PathBuf,
    /// Then follow the log as it grows, until interrupted.
    #[arg(short, long)]
    follow: bool,
    /// How many of the last records to print first.
    #[arg(short = 'n', long, value_name = "N", default_value_t = 10)]
    records: usize,
    /// How each record is printed (as `dump`).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Print at most N bytes of each payload (as `dump`).
    #[arg(long, value_name = "N")]
    max_bytes: Option<usize>,
    /// How long to wait before looking again when the log has not grown, in ms.
    #[arg(long, value_name = "MS", default_value_t = 50)]
    poll_interval: u64,
    /// What to do with damage [default: skip-corrupted; for a RocksDB WAL
    /// tolerate-tail, as `ldb dump_wal`: a recycled WAL ends at its first old bytes].
    #[arg(long, value_enum, value_name = "MODE")]
    recovery: Option<RecoveryArg>,
    #[command(flatten)]
    dialect: DialectArgs,
}

/// How the records to print first were read.
enum Read {
    /// To the input's end, by a plain reader.
    ToEnd(LogReader<BlockingReader>),
    /// By the follower, up to what the log holds now.
    Following(LogTailer<tokio::fs::File>),
}

pub(crate) async fn run(args: Args, limits: Limits) -> Result<Status, Failure> {
    let path = &args.file;
    let regular_file =
        path.as_os_str() != "-" && std::fs::metadata(path).is_ok_and(|m| m.is_file());
    if args.follow && !regular_file {
        return Err(Failure::new(format!(
            "{}: only a regular file can be followed",
            input_name(path)
        )));
    }
    args.format.check(args.max_bytes)?;
    let name = input_name(path);
    let mut not_batches = false;
    let (mut reader, log) = open_reader(path, &args.dialect, args.recovery, 0, limits)?;
    let batch_dialect = batch_dialect(&args.dialect, log.dialect);
    let mut last = VecDeque::with_capacity(args.records.min(1 << 16));
    let mut keep = |record| {
        if last.len() == args.records {
            last.pop_front();
        }
        if args.records > 0 {
            last.push_back(record);
        }
    };
    let mut error = None;
    let read = if args.follow {
        // Followed from its first byte: a writer may be writing while the records
        // to print first are read, and a read racing it (a page not yet written read
        // as zeros, later pages already written) is neither damage nor a reason to
        // skip a record.
        let (_, decoder) = reader.into_parts();
        let mut file = tokio::fs::File::open(path)
            .await
            .map_err(|e| Failure::io(path, e))?;
        file.seek(SeekFrom::Start(decoder.offset()))
            .await
            .map_err(|e| Failure::io(path, e))?;
        // Watched by path: a log cut, replaced or rewritten under the follower ends
        // the follow with an error instead of joining old and new bytes into one
        // record.
        let mut following = LogTailer::follow_file(file, path, decoder)
            .await
            .map_err(|e| Failure::log(path, e))?
            .with_poll_interval(Duration::from_millis(args.poll_interval.max(1)));
        loop {
            match following.caught_up().await {
                Ok(true) => break,
                Ok(false) => match following.next_record().await {
                    Some(Ok(record)) => keep(record),
                    Some(Err(e)) => {
                        error = Some(e);
                        break;
                    }
                    None => break,
                },
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        Read::Following(following)
    } else {
        while let Some(record) = reader.next_record().await {
            match record {
                Ok(record) => keep(record),
                Err(e) => error = Some(e),
            }
        }
        Read::ToEnd(reader)
    };
    let mut out = stdout();
    let mut line = Vec::new();
    for record in &last {
        line.clear();
        let formatted = format_record(
            record,
            args.format,
            args.max_bytes,
            batch_dialect,
            &mut line,
        );
        out.write_all(&line)?;
        if let Err(e) = formatted {
            out.flush()?;
            report_batch_error(&name, record, e);
            not_batches = true;
        }
    }
    out.flush()?;
    let mut tailer = match read {
        Read::Following(tailer) => tailer,
        Read::ToEnd(reader) => {
            finish(out)?;
            let (name, decoder) = finish_reader(reader);
            let status = read_status(&name, &decoder, error)?;
            return Ok(if not_batches {
                status.max(Status::Corrupt)
            } else {
                status
            });
        }
    };
    if error.is_some() {
        finish(out)?;
        return read_status(&path.display().to_string(), tailer.decoder(), error);
    }
    while let Some(record) = tailer.next_record().await {
        match record {
            Ok(record) => {
                line.clear();
                let formatted = format_record(
                    &record,
                    args.format,
                    args.max_bytes,
                    batch_dialect,
                    &mut line,
                );
                out.write_all(&line)?;
                if let Err(e) = formatted {
                    out.flush()?;
                    report_batch_error(&name, &record, e);
                }
                // Whoever reads a followed log wants each record now.
                out.flush()?;
            }
            Err(e) => {
                error = Some(e);
                break;
            }
        }
    }
    finish(out)?;
    read_status(&path.display().to_string(), tailer.decoder(), error)
}
