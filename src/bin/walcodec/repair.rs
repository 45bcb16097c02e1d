//! `repair FILE`: makes a log safe to append to again.
//!
//! Without options it truncates a torn tail (what a writer that died mid-write
//! leaves) back to the end of the last complete record, and syncs. It refuses a log
//! damaged before its tail: truncating would not fix it. The cut is the library's
//! `walcodec::repair_log`, the one `AsyncLogWriter` makes when it reopens a log, so
//! the tool and the writer agree on where a log ends. `--salvage OUT` copies
//! every readable record of any log, damaged or not, into a new clean log.
//!
//! Output, one line on stdout:
//!
//! ```text
//! FILE: clean (L bytes), nothing to truncate
//! FILE: truncated T bytes after offset V, the end of its last complete record
//! FILE: would truncate T bytes after offset V, ...           (--dry-run)
//! FILE: trimmed T bytes of zeros after offset V, ...          (would trim, with --dry-run)
//! OUT: salvaged N records (B bytes); dropped D bytes in K corruptions
//! ```
//!
//! Zeros after the last complete record (preallocated space, block padding; a file
//! of zeros only is an empty log) are trimmed too, so appends continue the log, but
//! they are not a torn tail: no record is lost, and `--dry-run` exits 0, as
//! `verify` does. A torn tail gives 3 with `--dry-run`, 0 once cut. `--salvage`
//! exits 1 when it dropped bytes (LevelDB's reader reported damage, a record cut by
//! zero fill included), 3 when it left out only a record cut by the file's end, 0
//! when it copied everything.
//!
//! Only a regular file can be repaired: a pipe or a device has no length to cut (and
//! a character device no end to find).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use bytes::BytesMut;
use walcodec::{LogEncoder, RepairOptions, TailScan};

use crate::common::{finish_reader, open_reader, Failure, Limits, RecoveryArg, Status};
use crate::dialect::{DialectArg, DialectArgs, LogChoice};
use crate::input::{BlockingReader, Input};
use crate::write::sync_parent;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The log file, a regular file (with --salvage, also `-` for stdin). Nothing may
    /// be writing to it.
    file: PathBuf,
    /// Copy every readable record into OUT, a new log, instead of truncating FILE.
    #[arg(long, value_name = "OUT")]
    salvage: Option<PathBuf>,
    /// Say what would be truncated, and change nothing.
    #[arg(long, conflicts_with = "salvage")]
    dry_run: bool,
    /// How FILE is read (see `dump --help`). Truncating takes LevelDB's format only;
    /// --salvage reads either and writes LevelDB's (records decompressed).
    #[command(flatten)]
    dialect: DialectArgs,
}

pub(crate) async fn run(args: Args, limits: Limits) -> Result<Status, Failure> {
    match &args.salvage {
        Some(out) => salvage(&args.file, &args.dialect, out, limits).await,
        None => {
            refuse_rocksdb(&args.file, &args.dialect, limits)?;
            truncate(&args.file, args.dry_run, limits).await
        }
    }
}

/// The scan of `scan_log` / `repair_log`, or the status of a log they refused
/// (damage before the tail), explained on stderr; an I/O error is a failure.
fn judge_scan(
    path: &Path,
    scan: Result<TailScan, walcodec::Error>,
) -> Result<Result<TailScan, Status>, Failure> {
    match scan {
        Ok(scan) => Ok(Ok(scan)),
        Err(walcodec::Error::Io(e)) => Err(Failure::io(path, e)),
        Err(damage) => {
            eprintln!(
                "walcodec: {}: damaged before its tail ({damage}); truncating would not fix it (see `walcodec verify`; --salvage OUT copies what is readable)",
                path.display()
            );
            Ok(Err(Status::Corrupt))
        }
    }
}

/// Cuts the torn tail with the library's `repair_log` (or only looks, with
/// `scan_log`): the rule the durable writer applies when it reopens a log.
async fn truncate(path: &Path, dry_run: bool, limits: Limits) -> Result<Status, Failure> {
    let name = path.display();
    let metadata = std::fs::metadata(path).map_err(|e| Failure::io(path, e))?;
    if metadata.is_dir() {
        return Err(Failure::new(format!(
            "{name}: a directory, not a log file: repair cuts one log's torn tail (a log directory's last segment is repaired when it is opened)"
        )));
    }
    if !metadata.is_file() {
        return Err(Failure::new(format!(
            "{name}: not a regular file: there is no length to cut (`walcodec verify` reads it; --salvage OUT copies its records)"
        )));
    }
    let scan = if dry_run {
        RepairOptions::new()
            .max_record_bytes(limits.max_record_bytes)
            .scan(path)
            .await
    } else {
        RepairOptions::new()
            .max_record_bytes(limits.max_record_bytes)
            .repair(path)
            .await
    };
    let scan = match judge_scan(path, scan)? {
        Ok(scan) => scan,
        Err(status) => return Ok(status),
    };
    if !scan.needs_repair() {
        println!(
            "{name}: clean ({} bytes), nothing to truncate",
            scan.file_len
        );
        return Ok(Status::Clean);
    }
    if !scan.incomplete_tail {
        let verb = if dry_run { "would trim" } else { "trimmed" };
        println!(
            "{name}: {verb} {} bytes of zeros after offset {}, the end of its last complete record (preallocated space or block padding; no record lost)",
            scan.tail_bytes(),
            scan.valid_len
        );
        return Ok(Status::Clean);
    }
    let (verb, status) = if dry_run {
        ("would truncate", Status::TornTail)
    } else {
        ("truncated", Status::Clean)
    };
    println!(
        "{name}: {verb} {} bytes after offset {}, the end of its last complete record",
        scan.tail_bytes(),
        scan.valid_len
    );
    Ok(status)
}

/// Bytes of encoded log gathered before a write to OUT.
const WRITE_CHUNK_BYTES: usize = 1 << 20;

/// Truncation follows LevelDB's rules (the library's `repair_log`, the writer's
/// recovery): a log in RocksDB's dialect is refused rather than cut by the wrong rules.
fn refuse_rocksdb(path: &Path, dialect: &DialectArgs, limits: Limits) -> Result<(), Failure> {
    if dialect.dialect == DialectArg::Leveldb {
        return Ok(());
    }
    let Ok(mut input) = Input::open(path, limits) else {
        // Not readable: truncate says why.
        return Ok(());
    };
    let log = LogChoice::resolve(&mut input, path, dialect)?;
    if log.dialect != walcodec::Dialect::LevelDb {
        let engine = match log.dialect {
            walcodec::Dialect::Pebble => "a Pebble WAL",
            _ => "a RocksDB WAL",
        };
        return Err(Failure::new(format!(
            "{}: {engine} ({}): repair truncates LevelDB-format logs only; --salvage OUT copies its records into a new log",
            input.name(),
            log.describe()
        )));
    }
    Ok(())
}

async fn salvage(
    path: &Path,
    dialect: &DialectArgs,
    out_path: &Path,
    limits: Limits,
) -> Result<Status, Failure> {
    let (mut reader, _) = open_reader(path, dialect, Some(RecoveryArg::SkipCorrupted), 0, limits)?;
    let mut out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(out_path)
        .map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => Failure::new(format!(
                "{}: already exists; refusing to overwrite it",
                out_path.display()
            )),
            _ => Failure::io(out_path, e),
        })?;
    let copied = copy_records(&mut reader, path, &mut out, out_path).await;
    if let Err(failure) = copied {
        drop(out);
        let _ = std::fs::remove_file(out_path);
        return Err(failure);
    }
    out.sync_all().map_err(|e| Failure::io(out_path, e))?;
    sync_parent(out_path).map_err(|e| Failure::io(out_path, e))?;
    let (_, decoder) = finish_reader(reader);
    let stats = decoder.stats();
    println!(
        "{}: salvaged {} records ({} bytes); dropped {} bytes in {} corruptions",
        out_path.display(),
        stats.records,
        stats.record_bytes,
        stats.dropped_bytes,
        stats.corruptions
    );
    // As the README's exit status says: 1 when bytes were dropped.
    let dropped = stats.corruptions.max(u64::from(stats.dropped_bytes > 0));
    Ok(Status::judge(dropped, decoder.has_incomplete_tail()))
}

async fn copy_records(
    reader: &mut walcodec::LogReader<BlockingReader>,
    path: &Path,
    out: &mut File,
    out_path: &Path,
) -> Result<(), Failure> {
    let mut encoder = LogEncoder::new();
    let mut pending = BytesMut::with_capacity(WRITE_CHUNK_BYTES);
    while let Some(record) = reader.next_record().await {
        // SkipCorrupted reports damage and goes on: an error here is I/O.
        let record = record.map_err(|e| Failure::log(path, e))?;
        encoder.encode_record(&record.data, &mut pending);
        if pending.len() >= WRITE_CHUNK_BYTES {
            out.write_all(&pending)
                .map_err(|e| Failure::io(out_path, e))?;
            pending.clear();
        }
    }
    out.write_all(&pending)
        .map_err(|e| Failure::io(out_path, e))
}
