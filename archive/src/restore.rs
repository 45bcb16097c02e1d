//! [`restore`]: a log directory rebuilt from the archive, byte for byte, up to a
//! point in time; and the check every archived object gets on its way down.

use std::io::Write;
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;

use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use walcodec::{Dialect, LogPosition};

use crate::error::ArchiveError;
use crate::manifest::{self, Manifest, SegmentEntry};
use crate::scan::{Output, ScanWorker, Scanned, SegmentScan};
use crate::store::{Bucket, RetryPolicy};

type Progress = Arc<dyn Fn(u64) + Send + Sync>;

/// What a restore wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RestoreSummary {
    /// Segment files written.
    pub segments: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Records in them.
    pub records: u64,
    /// The end of the last record restored: the restored log's end
    /// ([`LogPosition::START`] when nothing was restored).
    pub end: LogPosition,
}

/// Options of [`restore_with`]: the point in time, retries, progress.
#[derive(Clone, Default)]
pub struct RestoreOptions {
    until: Option<LogPosition>,
    retry: RetryPolicy,
    progress: Option<Progress>,
}

impl std::fmt::Debug for RestoreOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestoreOptions")
            .field("until", &self.until)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl RestoreOptions {
    /// Restore everything, with the default [`RetryPolicy`].
    pub fn new() -> RestoreOptions {
        RestoreOptions::default()
    }

    /// Restore up to the last record boundary at or before `position` (`None`:
    /// everything the archive holds).
    pub fn until(mut self, position: Option<LogPosition>) -> RestoreOptions {
        self.until = position;
        self
    }

    /// How requests are bounded and retried.
    pub fn retry(mut self, policy: RetryPolicy) -> RestoreOptions {
        self.retry = policy;
        self
    }

    /// Calls `progress` with each chunk of bytes downloaded (for progress bars).
    pub fn on_progress(mut self, progress: impl Fn(u64) + Send + Sync + 'static) -> RestoreOptions {
        self.progress = Some(Arc::new(progress));
        self
    }
}

/// Rebuilds, in the empty or new directory `dir`, the log archived under
/// `prefix`: its segment files byte for byte as the primary wrote them (and the
/// `DIALECT` file of a Pebble log), up to `until`: with `Some(position)`, every
/// record that ends at or before `position` and nothing after (the segment it
/// falls in is cut at that record boundary). The directory then opens with
/// [`LogDir::open`](walcodec::LogDir::open) (in the archive's dialect) and goes
/// on from there.
///
/// Every object is read whole and checked: its size and CRC-32C against the
/// manifest, every fragment's CRC and the records' framing through walcodec's
/// decoder. A mismatch is retried (a truncated body is one), then refused.
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use object_store::local::LocalFileSystem;
/// use walcodec::LogPosition;
///
/// let store = Arc::new(LocalFileSystem::new_with_prefix("/mnt/backup")?);
/// // Everything up to the last record ending at or before 000042:1000.
/// let until = Some(LogPosition::new(42, 1000));
/// let restored = walcodec_archive::restore(store, "app/log".into(), "/tmp/log", until).await?;
/// println!("restored up to {}", restored.end);
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// [`ArchiveError::NoArchive`] without a manifest; [`ArchiveError::NotEmpty`]
/// when `dir` already holds segments; [`ArchiveError::Corrupt`] naming an object
/// whose bytes are not what the manifest says; [`ArchiveError::Gap`] naming a
/// segment listed but missing from the store; [`ArchiveError::Position`] when
/// `until` lies before what the archive holds.
pub async fn restore(
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    dir: impl AsRef<FsPath>,
    until: Option<LogPosition>,
) -> Result<RestoreSummary, ArchiveError> {
    restore_with(store, prefix, dir, RestoreOptions::new().until(until)).await
}

/// [`restore`] with options (retries, progress).
///
/// # Errors
/// As [`restore`].
pub async fn restore_with(
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    dir: impl AsRef<FsPath>,
    options: RestoreOptions,
) -> Result<RestoreSummary, ArchiveError> {
    let mut bucket = Bucket::new(store, prefix);
    bucket.retry = options.retry;
    let dir = dir.as_ref().to_path_buf();
    let manifest = Manifest::load(&bucket)
        .await?
        .ok_or_else(|| ArchiveError::NoArchive {
            prefix: bucket.prefix.to_string(),
        })?;
    prepare_dir(&dir).await?;
    let plan = plan(&manifest, options.until)?;
    if manifest.dialect() == Dialect::Pebble {
        // Before any segment, as the log itself writes it.
        write_synced(&dir.join("DIALECT"), b"pebble\n").await?;
    }
    let mut summary = RestoreSummary {
        segments: 0,
        bytes: 0,
        records: 0,
        end: LogPosition::START,
    };
    for step in plan {
        let name = manifest::walcodec_segment_name(step.entry.number);
        let target = dir.join(&name);
        let partial = dir.join(format!("{name}.partial"));
        let scanned = bucket
            .retry(|| {
                restore_object(
                    &bucket,
                    manifest.dialect(),
                    &step,
                    &partial,
                    &target,
                    options.progress.as_ref(),
                )
            })
            .await?;
        let Some(written) = scanned else {
            continue;
        };
        summary.segments += 1;
        summary.bytes += written.len;
        summary.records += written.records;
        summary.end = LogPosition::new(step.entry.number, written.records_end);
    }
    sync_dir(&dir).await?;
    Ok(summary)
}

/// One object to restore, and where to cut it.
struct Step {
    entry: SegmentEntry,
    object: String,
    sealed: bool,
    /// Keep the records that end at or before this offset (`None`: all of it).
    cut: Option<u64>,
}

fn plan(manifest: &Manifest, until: Option<LogPosition>) -> Result<Vec<Step>, ArchiveError> {
    let mut entries: Vec<(SegmentEntry, String, bool)> = manifest
        .segments
        .iter()
        .map(|entry| (*entry, manifest::segment_object(entry.number), true))
        .collect();
    if let Some(active) = manifest.active {
        if active.number == manifest.next_segment() {
            entries.push((
                active,
                manifest::active_object(active.number, active.size),
                false,
            ));
        }
    }
    if let Some(until) = until {
        if until.segment < manifest.deleted_before {
            return Err(ArchiveError::Position {
                position: until,
                reason: format!(
                    "the archive holds segments from {} on",
                    manifest.deleted_before
                ),
            });
        }
    }
    let mut steps = Vec::new();
    for (entry, object, sealed) in entries {
        let cut = match until {
            None => None,
            Some(until) if entry.number < until.segment => None,
            Some(until) if entry.number > until.segment => break,
            Some(until) if until.offset >= entry.records_end => None,
            Some(until) => Some(until.offset),
        };
        steps.push(Step {
            entry,
            object,
            sealed,
            cut,
        });
    }
    Ok(steps)
}

/// Restores one object into `target` (through `partial`); `None` when the cut
/// leaves nothing of it.
async fn restore_object(
    bucket: &Bucket,
    dialect: Dialect,
    step: &Step,
    partial: &FsPath,
    target: &FsPath,
    progress: Option<&Progress>,
) -> Result<Option<Scanned>, ArchiveError> {
    let file = std::fs::File::create(partial).map_err(|e| ArchiveError::io(partial, e))?;
    let output = Output {
        file: Some(file.try_clone().map_err(|e| ArchiveError::io(partial, e))?),
        keep: step.cut.unwrap_or(u64::MAX),
    };
    let result = fetch_checked(
        bucket,
        &step.entry,
        &step.object,
        dialect,
        step.sealed,
        step.cut,
        output,
        |bytes| {
            if let Some(progress) = progress {
                progress(bytes);
            }
        },
    )
    .await;
    let scanned = match result {
        Ok((scanned, _)) => scanned,
        Err(e) => {
            drop(file);
            let _ = std::fs::remove_file(partial);
            return Err(e);
        }
    };
    let len = match step.cut {
        None => scanned.len,
        Some(_) => scanned.cut,
    };
    if len == 0 && step.cut.is_some() {
        drop(file);
        let _ = std::fs::remove_file(partial);
        return Ok(None);
    }
    file.set_len(len)
        .map_err(|e| ArchiveError::io(partial, e))?;
    file.sync_all().map_err(|e| ArchiveError::io(partial, e))?;
    drop(file);
    std::fs::rename(partial, target).map_err(|e| ArchiveError::io(target, e))?;
    Ok(Some(Scanned {
        len,
        records_end: match step.cut {
            None => scanned.records_end,
            Some(_) => len,
        },
        records: if step.cut.is_some() {
            scanned.cut_records
        } else {
            scanned.records
        },
        ..scanned
    }))
}

/// Bytes of one ranged GET of a restore or a verify.
const RANGE_BYTES: u64 = 8 << 20;
/// Ranged GETs of one object in flight at once.
const RANGES_IN_FLIGHT: usize = 4;

/// Reads the object of `entry` whole and checks it: its size and CRC-32C against
/// the manifest, its fragments and records through the decoder; writes its bytes
/// to `output` on the way, as they are checked. `cut`: also find the last record
/// end at or before it. `progress` hears of each chunk as it arrives.
///
/// A `HEAD` first (a missing object is a gap; one of another size than listed
/// is corrupt), then ranged GETs of [`RANGE_BYTES`], [`RANGES_IN_FLIGHT`] at
/// once, taken in order by a [`ScanWorker`] that checks and writes them on a
/// blocking thread: at most `RANGES_IN_FLIGHT + SCAN_QUEUE + 3` ranges' bytes
/// held at once (fetching, queued, under the check and the decoder's copy of
/// that one, in hand), 72 MiB. The whole object's
/// CRC-32C is what ties the ranges together: ranges of two versions of an
/// object replaced between them fail it.
// One private helper with two callers (restore, verify); a struct of its
// arguments would only move the list.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn fetch_checked(
    bucket: &Bucket,
    entry: &SegmentEntry,
    object: &str,
    dialect: Dialect,
    sealed: bool,
    cut: Option<u64>,
    output: Output,
    mut progress: impl FnMut(u64),
) -> Result<(Scanned, Output), ArchiveError> {
    let location = bucket.path(object);
    let corrupt = |reason: String| ArchiveError::Corrupt {
        object: location.to_string(),
        segment: entry.number,
        reason,
    };
    let head = bucket
        .request(&format!("HEAD {location}"), bucket.store.head(&location))
        .await;
    let stored_size = match head {
        Err(ArchiveError::Store(object_store::Error::NotFound { .. })) => {
            return Err(ArchiveError::Gap {
                segment: entry.number,
                reason: format!("the manifest lists {location}, which the store does not hold"),
            })
        }
        other => other?.size,
    };
    if stored_size != entry.size {
        return Err(corrupt(format!(
            "{stored_size} bytes, not the {} listed",
            entry.size
        )));
    }
    let mut scan = SegmentScan::new(entry.number, dialect);
    if let Some(cut) = cut {
        scan = scan.cut_at(cut);
    }
    let mut worker = ScanWorker::spawn(scan, output);
    let ranges = (0..entry.size)
        .step_by(RANGE_BYTES as usize)
        .map(|start| start..(start + RANGE_BYTES).min(entry.size));
    let mut fetched = futures::stream::iter(ranges)
        .map(|range| bucket.get_range(&location, range))
        .buffered(RANGES_IN_FLIGHT);
    while let Some(chunk) = fetched.next().await {
        let chunk = chunk?;
        progress(chunk.len() as u64);
        worker.feed(chunk).await;
    }
    drop(fetched);
    let (scan, output) = worker
        .finish()
        .await
        .map_err(|e| ArchiveError::io(PathBuf::from(object), e))?;
    let len = scan.len();
    if len != entry.size {
        return Err(corrupt(format!(
            "{len} bytes, not the {} listed",
            entry.size
        )));
    }
    let crc = scan.crc();
    if crc != entry.crc32c {
        return Err(corrupt(format!(
            "CRC-32C {crc:08x}, not the {:08x} listed",
            entry.crc32c
        )));
    }
    let scanned = scan.finish(sealed).map_err(corrupt)?;
    if scanned.records_end != entry.records_end || scanned.records != entry.records {
        return Err(corrupt(format!(
            "{} records ending at {}, not the {} ending at {} listed",
            scanned.records, scanned.records_end, entry.records, entry.records_end
        )));
    }
    Ok((scanned, output))
}

/// Creates `dir` if needed; refuses one that holds segments already.
async fn prepare_dir(dir: &FsPath) -> Result<(), ArchiveError> {
    tokio::fs::create_dir_all(dir)
        .await
        .map_err(|e| ArchiveError::io(dir, e))?;
    let listed = walcodec::LogDir::list(dir)?;
    if !listed.segments.is_empty() {
        return Err(ArchiveError::NotEmpty {
            path: dir.to_path_buf(),
        });
    }
    Ok(())
}

async fn write_synced(path: &FsPath, bytes: &[u8]) -> Result<(), ArchiveError> {
    let mut file = std::fs::File::create(path).map_err(|e| ArchiveError::io(path, e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| ArchiveError::io(path, e))
}

async fn sync_dir(dir: &FsPath) -> Result<(), ArchiveError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| ArchiveError::io(dir, e))
}
