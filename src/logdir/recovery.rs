//! What `LogDir::open` does before the first append: finish an interrupted
//! truncation or purge, check that the segments form one log, and cut the last
//! one's torn tail.
//!
//! | segment          | may end in a torn tail | damage             |
//! |------------------|------------------------|--------------------|
//! | sealed (not last)| no: [`Error::BadSegment`] | [`Error::BadSegment`] |
//! | last (active)    | yes: cut, as `AsyncLogWriter::open` does | [`Error::BadSegment`] |
//! | missing number   | [`Error::MissingSegment`] |                 |
//!
//! Segments are read in their directory's dialect (see [`super::dialect`]): a
//! sealed Pebble segment must end with the EOF trailer its seal wrote, the
//! active one's trailer (a clean close) is cut with its torn tail, and a directory
//! of the other dialect than asked for is refused ([`Error::WrongDialect`]).

use std::collections::BTreeMap;
use std::io::{self, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::io::AsyncSeekExt;

use super::dialect;
use super::fs::{blocking, DirStorage};
use super::history::{self, HistoryFile};
use super::recycle::{self, Written};
use super::segment::{list_segments, segment_path};
use crate::codec::encoder::LogFormat;
use crate::decoder::LogDecoder;
use crate::error::Error;
use crate::position::LogPosition;
use crate::reader::repair::{recover_file, scan_file_as};

/// The marker of a truncation in progress, as older versions wrote it: holds the
/// position to truncate after; `open` finishes it. (Truncations are now decided
/// by the `HISTORY` file.)
pub(crate) const TRUNCATE_FILE: &str = "TRUNCATE";
const TRUNCATE_TMP: &str = "TRUNCATE.tmp";
/// The end of the last segment purged, so a checkpoint at that end still reads from
/// the first segment kept after a restart.
pub(crate) const PURGED_FILE: &str = "PURGED";

/// A directory checked and ready for appends.
#[derive(Debug)]
pub(crate) struct Recovered {
    /// Sealed segments and their lengths, oldest first.
    pub(crate) sealed: BTreeMap<u64, u64>,
    /// Where the records of sealed Pebble segments end, before their trailers.
    pub(crate) ends: BTreeMap<u64, u64>,
    /// The last segment: appends go on there.
    pub(crate) active: u64,
    /// Its length after the torn tail was cut.
    pub(crate) active_len: u64,
    /// It, open for writing, positioned at `active_len`.
    pub(crate) active_file: std::fs::File,
    /// The end of the last segment purged ([`LogPosition::START`] if none).
    pub(crate) purged_through: LogPosition,
    /// The format appends to the active segment go on in, when its start tells
    /// (`None`: empty or torn at its start; the format new segments get).
    pub(crate) active_format: Option<LogFormat>,
    /// Purged files kept for reuse, by their old numbers, oldest first.
    pub(crate) pool: Vec<u64>,
    /// Its `HISTORY` (`None` for a directory without one), any truncation it
    /// decided done.
    pub(crate) history: Option<HistoryFile>,
}

/// Recovers the log directory `dir` (whose lock the caller holds).
///
/// The last segment's tail is cut as `AsyncLogWriter::open` cuts it, with the same
/// `unsynced_window`: the damage a power cut leaves in the bytes written after the
/// last sync (a page lost while a later one reached the disk) is cut too.
///
/// With `recycle` above 0, new segments are recyclable (see [`recycle`]) and up to
/// `recycle` pooled files are kept; the others are deleted. With `pebble`, the
/// directory is (or becomes) one of Pebble's segments.
pub(crate) async fn recover(
    dir: &Path,
    fs: &Arc<dyn DirStorage>,
    unsynced_window: u64,
    recycle: usize,
    pebble: bool,
) -> Result<Recovered, Error> {
    recover_named("", dir, fs, unsynced_window, recycle, pebble).await
}

/// [`recover`] for the directory named `log` (the `log` label of what it reports).
pub(crate) async fn recover_named(
    log: &str,
    dir: &Path,
    fs: &Arc<dyn DirStorage>,
    unsynced_window: u64,
    recycle: usize,
    pebble: bool,
) -> Result<Recovered, Error> {
    finish_truncation(dir, fs).await?;
    let history = finish_history(dir, fs).await?;
    let purged_through = read_purged(dir).await?;
    let segments = finish_purge(dir, purged_through, fs).await?;
    let pool = trim_pool(dir, fs, recycle).await?;
    check_dialect(dir, fs, &segments, purged_through, pebble).await?;
    let recycling = recycle > 0;
    let (first, last) = match (segments.first(), segments.last()) {
        (Some(&first), Some(&last)) => (first, last),
        _ => {
            // Numbers go on after the segments purged, never back to one the
            // `PURGED` file covers.
            let number = purged_through.segment + 1;
            let file = create_segment(dir, number, fs).await?;
            return Ok(Recovered {
                sealed: BTreeMap::new(),
                ends: BTreeMap::new(),
                active: number,
                active_len: 0,
                active_file: file,
                purged_through,
                active_format: None,
                pool,
                history,
            });
        }
    };
    if let Some(hole) = first_hole(&segments) {
        return Err(Error::MissingSegment { segment: hole });
    }
    let mut sealed = BTreeMap::new();
    let mut ends = BTreeMap::new();
    for segment in first..last {
        let len = if pebble {
            let (len, records_end) = check_sealed_pebble(dir, segment).await?;
            ends.insert(segment, records_end);
            len
        } else {
            check_sealed(dir, segment).await?
        };
        sealed.insert(segment, len);
    }
    let path = segment_path(dir, last);
    let (written, compressed) = {
        let path = path.clone();
        blocking(move || recycle::written_start(&path, last)).await?
    };
    let own = |number| {
        if pebble {
            LogFormat::pebble(number)
        } else {
            recycle::recyclable_format(number, compressed)
        }
    };
    let active_format = match written {
        Written::Legacy | Written::Recyclable if pebble => {
            return Err(dialect::wrong_dialect(dir, false))
        }
        Written::WalSync if !pebble => return Err(dialect::wrong_dialect(dir, true)),
        Written::Legacy => Some(LogFormat::leveldb()),
        Written::Recyclable | Written::WalSync => Some(own(last)),
        // Nothing of the reused file's new use: a new segment, in the options'
        // format (what the sniffed start says is of its earlier use).
        Written::Stale | Written::Unknown => None,
    };
    // A torn start is scanned as new segments are written: a recyclable (or
    // Pebble) one cut short reads as the end of a recycled log.
    let scan_format = active_format.unwrap_or(if pebble {
        LogFormat::pebble(last)
    } else {
        recycle::segment_format(last, recycling)
    });
    let mut file = tokio::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .await?;
    let active_len = if written == Written::Stale {
        // A reused file that nothing of its new use reached: all of it is from
        // its earlier use (another number in every header), so the segment is
        // empty. (`recover_file` refuses such a file, not knowing it was reused.)
        file.set_len(0).await?;
        file.sync_all().await?;
        0
    } else {
        let scan = recover_file(
            &mut file,
            LogDecoder::DEFAULT_MAX_RECORD_BYTES,
            unsynced_window,
            scan_format,
        )
        .await
        .map_err(|e| bad_segment(last, e))?;
        crate::reader::repair::report_tail_cut(log, &path, &scan);
        scan.valid_len
    };
    file.seek(SeekFrom::Start(active_len)).await?;
    Ok(Recovered {
        sealed,
        ends,
        active: last,
        active_len,
        active_file: file.into_std().await,
        purged_through,
        active_format,
        pool,
        history,
    })
}

/// Refuses a directory of the other dialect than `pebble` says (see
/// [`super::dialect`]), and marks a new Pebble directory (one that holds no record
/// and no `DIALECT` file) before its first segment is written.
async fn check_dialect(
    dir: &Path,
    fs: &Arc<dyn DirStorage>,
    segments: &[u64],
    purged_through: LogPosition,
    pebble: bool,
) -> Result<(), Error> {
    let dir_path = dir.to_path_buf();
    let fs = Arc::clone(fs);
    let segments = segments.to_vec();
    let verdict = blocking(move || {
        let dir = dir_path;
        let marked = dialect::is_marked_pebble(&dir)?;
        if marked && !pebble {
            return Ok(Some(true));
        }
        // A segment's own headers tell when the file does not (lost, or a copy of
        // the segments alone).
        for &segment in &segments {
            match recycle::written_as(&segment_path(&dir, segment), segment)? {
                Written::WalSync if !pebble => return Ok(Some(true)),
                Written::Legacy | Written::Recyclable if pebble => return Ok(Some(false)),
                _ => {}
            }
        }
        if pebble && !marked {
            let holds_records = purged_through != LogPosition::START
                || segments.iter().any(|&segment| {
                    std::fs::metadata(segment_path(&dir, segment)).is_ok_and(|m| m.len() > 0)
                });
            if holds_records {
                return Ok(Some(false));
            }
            dialect::mark_pebble(&dir, &fs)?;
        }
        Ok(None)
    })
    .await?;
    match verdict {
        Some(pebble_found) => Err(dialect::wrong_dialect(dir, pebble_found)),
        None => Ok(()),
    }
}

/// The pooled files of `dir`, all but the `keep` newest deleted.
async fn trim_pool(dir: &Path, fs: &Arc<dyn DirStorage>, keep: usize) -> Result<Vec<u64>, Error> {
    let dir = dir.to_path_buf();
    let fs = Arc::clone(fs);
    let pool = blocking(move || {
        let mut pool = recycle::list_pool(&dir)?;
        let extra = pool.len().saturating_sub(keep);
        if extra > 0 {
            for number in pool.drain(..extra) {
                match fs.remove(&recycle::pooled_path(&dir, number)) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
            fs.sync_dir(&dir)?;
        }
        Ok(pool)
    })
    .await?;
    Ok(pool)
}

/// Deletes the segments a purge decided (up to `purged_through`, as its durable
/// `PURGED` file says) that a crash kept: the purge deletes them only after that
/// file is durable, and a crash may keep any of its deletions and not others.
/// Returns the segments left, in order.
async fn finish_purge(
    dir: &Path,
    purged_through: LogPosition,
    fs: &Arc<dyn DirStorage>,
) -> Result<Vec<u64>, Error> {
    let dir = dir.to_path_buf();
    let fs = Arc::clone(fs);
    let segments = blocking(move || {
        let segments = list_segments(&dir)?;
        let (purged, kept): (Vec<u64>, Vec<u64>) = segments
            .into_iter()
            .partition(|&segment| segment <= purged_through.segment);
        if !purged.is_empty() {
            for segment in purged {
                match fs.remove(&segment_path(&dir, segment)) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
            fs.sync_dir(&dir)?;
        }
        Ok(kept)
    })
    .await?;
    Ok(segments)
}

/// The end of the last segment purged from `dir`, from its `PURGED` file.
pub(crate) async fn read_purged(dir: &Path) -> Result<LogPosition, Error> {
    match tokio::fs::read_to_string(dir.join(PURGED_FILE)).await {
        Ok(text) => parse_purged(&text),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(LogPosition::START),
        Err(e) => Err(e.into()),
    }
}

/// The position a `PURGED` file's `text` holds.
pub(crate) fn parse_purged(text: &str) -> Result<LogPosition, Error> {
    text.trim().parse().map_err(|e| {
        Error::Io(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("unreadable {PURGED_FILE} file in the log directory: {e}"),
        ))
    })
}

/// The first number missing between the first and the last of `segments` (sorted).
fn first_hole(segments: &[u64]) -> Option<u64> {
    segments
        .windows(2)
        .find(|pair| pair[1] != pair[0] + 1)
        .map(|pair| pair[0] + 1)
}

/// Reads a sealed segment whole: it must hold only complete, intact records.
/// Returns its length. Read in RocksDB's dialect with the segment's number, which
/// reads a legacy segment as LevelDB's reader does and a recyclable one too.
async fn check_sealed(dir: &Path, segment: u64) -> Result<u64, Error> {
    let mut file = tokio::fs::File::open(segment_path(dir, segment)).await?;
    let format = recycle::segment_format(segment, true);
    let scan = scan_file_as(&mut file, LogDecoder::DEFAULT_MAX_RECORD_BYTES, format)
        .await
        .map_err(|e| bad_segment(segment, e))?;
    if scan.needs_repair() {
        let cut = Error::Corruption {
            offset: scan.valid_len,
            bytes: scan.tail_bytes(),
            kind: crate::decoder::error::CorruptionKind::TruncatedTail,
        };
        return Err(bad_segment(segment, cut));
    }
    Ok(scan.file_len)
}

/// Reads a sealed Pebble segment whole: it must hold only complete, intact
/// records (by Pebble's rule: damage a later synced offset proves is corruption,
/// any other ends the log) and end with the EOF trailer its seal wrote. Returns its
/// length, the trailer included, and where its records end.
async fn check_sealed_pebble(dir: &Path, segment: u64) -> Result<(u64, u64), Error> {
    use futures::TryStreamExt;
    let file = tokio::fs::File::open(segment_path(dir, segment)).await?;
    let file_len = file.metadata().await?.len();
    let mut records = tokio_util::codec::FramedRead::with_capacity(
        file,
        dialect::segment_decoder(segment, true).build(),
        64 * 1024,
    );
    loop {
        match records.try_next().await {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(e) => return Err(bad_segment(segment, e.into())),
        }
    }
    let decoder = records.decoder();
    let trailer_at = file_len.checked_sub(dialect::EOF_TRAILER_BYTES);
    let valid = decoder.valid_prefix_len();
    if decoder.has_eof_trailer() && decoder.recycled_end() == trailer_at {
        return Ok((file_len, valid));
    }
    let cut = Error::Corruption {
        offset: valid,
        bytes: file_len.saturating_sub(valid),
        kind: crate::decoder::error::CorruptionKind::TruncatedTail,
    };
    Err(bad_segment(segment, cut))
}

fn bad_segment(segment: u64, error: Error) -> Error {
    match error {
        Error::Io(e) => Error::Io(e),
        other => Error::BadSegment {
            segment,
            source: Box::new(other),
        },
    }
}

/// Creates segment `number`, empty, and makes it and its directory entry durable.
pub(crate) async fn create_segment(
    dir: &Path,
    number: u64,
    fs: &Arc<dyn DirStorage>,
) -> Result<std::fs::File, Error> {
    let dir = dir.to_path_buf();
    let fs = Arc::clone(fs);
    let file = blocking(move || {
        let file = fs.create(&segment_path(&dir, number))?;
        fs.sync_file(&file)?;
        fs.sync_dir(&dir)?;
        Ok(file)
    })
    .await?;
    Ok(file)
}

/// Replaces `dir/name` with a file holding `position`, atomically (a synced
/// temporary file renamed over it). The rename is durable after the next sync of
/// `dir`.
pub(crate) fn write_position_file(
    dir: &Path,
    name: &str,
    position: LogPosition,
    fs: &dyn DirStorage,
) -> io::Result<()> {
    use std::io::Write;
    let tmp = dir.join(format!("{name}.tmp"));
    // A temporary file left by a crash before its rename: stale, not part of the log.
    let _ = std::fs::remove_file(&tmp);
    let mut file = fs.create(&tmp)?;
    file.write_all(format!("{position}\n").as_bytes())?;
    fs.sync_file(&file)?;
    drop(file);
    fs.rename(&tmp, &dir.join(name))
}

/// Cuts the log after `position`: deletes the later segments (newest first) and cuts
/// `position.segment` to `position.offset`, then removes the marker. Idempotent, so
/// `open` can run it again after a crash in the middle.
pub(crate) fn apply_truncation(
    dir: &Path,
    position: LogPosition,
    fs: &dyn DirStorage,
) -> io::Result<()> {
    let mut later: Vec<u64> = list_segments(dir)?
        .into_iter()
        .filter(|&s| s > position.segment)
        .collect();
    later.reverse();
    for segment in later {
        match fs.remove(&segment_path(dir, segment)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    let path = segment_path(dir, position.segment);
    // Readable too: a storage seam's sync may read what it syncs (the power-cut
    // simulator records the file's bytes then).
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
    {
        Ok(file) => {
            if file.metadata()?.len() > position.offset {
                file.set_len(position.offset)?;
            }
            fs.sync_file(&file)?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    fs.sync_dir(dir)?;
    match fs.remove(&dir.join(TRUNCATE_FILE)) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    fs.sync_dir(dir)
}

/// Reads `dir`'s `HISTORY`, and finishes the truncation it decided when a crash
/// interrupted it: the cut, then the file without its `truncate` line.
async fn finish_history(
    dir: &Path,
    fs: &Arc<dyn DirStorage>,
) -> Result<Option<HistoryFile>, Error> {
    let dir: PathBuf = dir.to_path_buf();
    let fs = Arc::clone(fs);
    let file = blocking(move || {
        let Some(mut file) = history::read(&dir)? else {
            return Ok(None);
        };
        if let Some(cut) = file.truncate.take() {
            apply_truncation(&dir, cut, &*fs)?;
            history::write(&dir, &file, &*fs)?;
        }
        Ok(Some(file))
    })
    .await?;
    Ok(file)
}

/// Finishes a truncation a crash interrupted; drops a marker that never became one.
async fn finish_truncation(dir: &Path, fs: &Arc<dyn DirStorage>) -> Result<(), Error> {
    let dir: PathBuf = dir.to_path_buf();
    let fs = Arc::clone(fs);
    blocking(move || {
        let _ = std::fs::remove_file(dir.join(TRUNCATE_TMP));
        let text = match std::fs::read_to_string(dir.join(TRUNCATE_FILE)) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let position: LogPosition = text.trim().parse().map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unreadable {TRUNCATE_FILE} marker in the log directory: {e}"),
            )
        })?;
        apply_truncation(&dir, position, &*fs)
    })
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holes_are_found() {
        assert_eq!(first_hole(&[]), None);
        assert_eq!(first_hole(&[3]), None);
        assert_eq!(first_hole(&[3, 4, 5]), None);
        assert_eq!(first_hole(&[3, 4, 6, 9]), Some(5));
    }
}
