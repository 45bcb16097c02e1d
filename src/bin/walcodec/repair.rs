//! `repair FILE`: makes a log safe to append to again.
//!
//! Without options it truncates a torn tail (what a writer that died mid-write
//! leaves) back to the end of the last complete record, and syncs. It refuses a log
//! damaged before its tail: truncating would not fix it. `--salvage OUT` copies
//! every readable record of any log, damaged or not, into a new clean log.
//!
//! Output, one line on stdout:
//!
//! ```text
//! FILE: clean (L bytes), nothing to truncate
//! FILE: truncated T bytes after offset V, the end of its last complete record
//! FILE: would truncate T bytes after offset V, ...           (--dry-run)
//! OUT: salvaged N records (B bytes); dropped D bytes in K corruptions
//! ```

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use bytes::BytesMut;
use walcodec::LogEncoder;

use crate::common::{open_reader, progress_bar, Failure, Limits, RecoveryArg, Status};
use crate::scan::{scan, Visitor};
use crate::write::sync_parent;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The log file. Nothing may be writing to it.
    file: PathBuf,
    /// Copy every readable record into OUT, a new log, instead of truncating FILE.
    #[arg(long, value_name = "OUT")]
    salvage: Option<PathBuf>,
    /// Say what would be truncated, and change nothing.
    #[arg(long, conflicts_with = "salvage")]
    dry_run: bool,
}

pub(crate) async fn run(args: Args, limits: Limits) -> Result<Status, Failure> {
    match &args.salvage {
        Some(out) => salvage(&args.file, out, limits).await,
        None => truncate(&args.file, args.dry_run, limits),
    }
}

/// What the end of a log looks like.
#[derive(Debug)]
struct Tail {
    /// The end of the last complete record: where the log may be cut.
    valid_len: u64,
    file_len: u64,
    /// Damage before the tail (a log that truncation cannot fix).
    damage: Option<String>,
}

/// Reads the whole log to find where its last complete record ends.
///
/// Built on a `TolerateTail` decoder's own account of the tail (`valid_prefix_len`),
/// so it agrees with what any reader of this crate returns: everything past
/// `valid_len` is bytes that produced no record (a torn fragment, an unfinished
/// fragmented record, zeros).
fn scan_tail(path: &Path, limits: Limits) -> Result<Tail, Failure> {
    struct Nothing;
    impl Visitor for Nothing {}
    let end = scan(path, 0, true, limits, &mut Nothing)?;
    Ok(Tail {
        valid_len: end.strict.valid_prefix_len,
        file_len: end.file_len,
        damage: end.strict.damage,
    })
}

fn truncate(path: &Path, dry_run: bool, limits: Limits) -> Result<Status, Failure> {
    let tail = scan_tail(path, limits)?;
    let name = path.display();
    if let Some(damage) = &tail.damage {
        eprintln!(
            "walcodec: {name}: damaged before its tail ({damage}); truncating would not fix it (see `walcodec verify`; --salvage OUT copies what is readable)"
        );
        return Ok(Status::Corrupt);
    }
    if tail.valid_len == tail.file_len {
        println!(
            "{name}: clean ({} bytes), nothing to truncate",
            tail.file_len
        );
        return Ok(Status::Clean);
    }
    let cut = tail.file_len - tail.valid_len;
    if dry_run {
        println!(
            "{name}: would truncate {cut} bytes after offset {}, the end of its last complete record",
            tail.valid_len
        );
        return Ok(Status::TornTail);
    }
    truncate_durably(path, tail.valid_len).map_err(|e| Failure::io(path, e))?;
    println!(
        "{name}: truncated {cut} bytes after offset {}, the end of its last complete record",
        tail.valid_len
    );
    Ok(Status::Clean)
}

/// Cuts the file at `len` and syncs, so the cut survives a crash.
fn truncate_durably(path: &Path, len: u64) -> io::Result<()> {
    let file = OpenOptions::new().write(true).open(path)?;
    file.set_len(len)?;
    file.sync_all()
}

/// Bytes of encoded log gathered before a write to OUT.
const WRITE_CHUNK_BYTES: usize = 1 << 20;

async fn salvage(path: &Path, out_path: &Path, limits: Limits) -> Result<Status, Failure> {
    let (mut reader, len) = open_reader(path, RecoveryArg::SkipCorrupted, 0, limits).await?;
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
    let copied = copy_records(&mut reader, path, &mut out, out_path, len).await;
    if let Err(failure) = copied {
        drop(out);
        let _ = std::fs::remove_file(out_path);
        return Err(failure);
    }
    out.sync_all().map_err(|e| Failure::io(out_path, e))?;
    sync_parent(out_path).map_err(|e| Failure::io(out_path, e))?;
    let stats = reader.decoder().stats();
    println!(
        "{}: salvaged {} records ({} bytes); dropped {} bytes in {} corruptions",
        out_path.display(),
        stats.records,
        stats.record_bytes,
        stats.dropped_bytes,
        stats.corruptions
    );
    Ok(Status::Clean)
}

async fn copy_records(
    reader: &mut walcodec::LogReader<tokio::fs::File>,
    path: &Path,
    out: &mut File,
    out_path: &Path,
    len: u64,
) -> Result<(), Failure> {
    let progress = progress_bar(len);
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
        if let Some(bar) = &progress {
            bar.set_position(record.position.end);
        }
    }
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    out.write_all(&pending)
        .map_err(|e| Failure::io(out_path, e))
}
