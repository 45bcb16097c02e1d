//! What each end checks after the hellos, before a byte of the log is shipped:
//! that the replica is a copy of the primary's log (its [`LogId`]), that its
//! history has not forked from the primary's (the end of their longest shared
//! history, as [`common_end`] finds it), and, at the record level, that the
//! replica's last record is the primary's record at the same place (the crc32c
//! of their payloads).
//!
//! | replica                                        | verdict (both ends)                          |
//! |------------------------------------------------|----------------------------------------------|
//! | holds nothing (its resume position 000000:0)   | follows: takes the primary's id and history  |
//! | another log id                                 | [`Error::ReplicaOfAnotherLog`]               |
//! | its end past the end of the shared history     | [`Error::ReplicaDiverged`] `{ common, .. }`  |
//! | histories agree, last record's checksum differs (or no record of the primary ends there) | [`Error::ReplicaDiverged`] at [`LogPosition::START`] |
//! | records but no id (a copy made before logs had ids) | follows if the primary holds its last record; else [`Error::ReplicaOfAnotherLog`] |
//! | else                                           | follows: takes the primary's history, then its records |
//!
//! The primary judges with the replica's identity and refuses it, so both ends
//! fail alike. The replica judges again with the primary's answer (its id, its
//! history and its checksum of the record where the replica's last one ends), so
//! a primary that skips its checks or claims a history that forks from the
//! replica's is refused too, and nothing is written. (A peer that forges the
//! replica's own id and history is kept out by the shared secret, not by these
//! checks.)

use std::path::Path;

use crate::error::Error;
use crate::log_id::LogId;
use crate::logdir::dialect;
use crate::logdir::history::{common_end, History};
use crate::logdir::segment::segment_path;
use crate::position::LogPosition;
use crate::reader::LogReader;

/// The checksum of a record: crc32c of its payload.
fn checksum(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// The checksum of the record that ends exactly at `end` in `dir`'s segment, or
/// `None` when no record ends there (or the segment is not there), reading the
/// segment from its start.
pub(crate) async fn checksum_ending_at(dir: &Path, end: LogPosition) -> Result<Option<u32>, Error> {
    let path = segment_path(dir, end.segment);
    if !tokio::fs::try_exists(&path).await? {
        return Ok(None);
    }
    let mut reader =
        LogReader::open_at(&path, 0, &dialect::segment_decoder(end.segment, false)).await?;
    while let Some(record) = reader.next_record().await {
        let record = record?;
        if record.position.end >= end.offset {
            return Ok((record.position.end == end.offset).then(|| checksum(&record.data)));
        }
    }
    Ok(None)
}

/// Where the last record of a replica whose segments run from `first` to
/// `segment` (`len` bytes of whole records in it) ends, and its checksum: in
/// `segment`, or in the last non-empty one before it. `None` when it holds none.
pub(crate) async fn last_record(
    dir: &Path,
    first: u64,
    segment: u64,
    len: u64,
) -> Result<Option<(LogPosition, u32)>, Error> {
    let (mut segment, mut len) = (segment, len);
    while len == 0 {
        if segment <= first {
            return Ok(None);
        }
        segment -= 1;
        len = tokio::fs::metadata(segment_path(dir, segment)).await?.len();
    }
    let path = segment_path(dir, segment);
    let mut reader =
        LogReader::open_at(&path, 0, &dialect::segment_decoder(segment, false)).await?;
    let mut last = None;
    while let Some(record) = reader.next_record().await {
        let record = record?;
        if record.position.end > len {
            break;
        }
        last = Some((
            LogPosition::new(segment, record.position.end),
            checksum(&record.data),
        ));
    }
    Ok(last)
}

/// One end's copy of the log, as the checks see it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Copy<'a> {
    pub(crate) id: Option<LogId>,
    pub(crate) history: &'a History,
    /// Its end (the replica's: the end of its last record, or
    /// [`LogPosition::START`] when it holds none).
    pub(crate) end: LogPosition,
}

/// What the primary found where the replica's last record ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecordCheck {
    /// The replica named no last record.
    Nothing,
    /// The primary no longer holds that segment: only the histories tell.
    Purged,
    /// No record of the primary's ends there, or its checksum differs.
    Differs,
    /// The same record.
    Same,
}

/// The verdict on a replica (the same on both ends): `Ok` when it may follow
/// the primary. `record` is what the primary found at the replica's last
/// record.
pub(crate) fn verdict(
    primary: Copy<'_>,
    replica: Copy<'_>,
    record: RecordCheck,
) -> Result<(), Error> {
    let primary_id = primary.id.unwrap_or(LogId::from_u128(0));
    let diverged = |common| Error::ReplicaDiverged {
        common,
        replica: replica.end,
        primary: primary.end,
    };
    let another = |replica: Option<LogId>| Error::ReplicaOfAnotherLog {
        primary: primary_id,
        replica: replica.unwrap_or(LogId::from_u128(0)),
    };
    if replica.end == LogPosition::START {
        // It holds nothing to keep: it takes the primary's id and history.
        return Ok(());
    }
    let Some(id) = replica.id else {
        // A copy made before logs had ids is this log's only if the primary
        // holds its last record.
        return match record {
            RecordCheck::Same | RecordCheck::Nothing => Ok(()),
            _ => Err(another(None)),
        };
    };
    if Some(id) != primary.id {
        return Err(another(Some(id)));
    }
    let common = common_end(primary.history, primary.end, replica.history, replica.end);
    if replica.end > common {
        return Err(diverged(common));
    }
    match record {
        RecordCheck::Differs => Err(diverged(LogPosition::START)),
        _ => Ok(()),
    }
}

/// The replica's own check of a history the primary sends while connected
/// (a truncation past what was shipped starts an epoch): it must not fork from
/// the replica's up to the replica's end.
pub(crate) fn follows(new: &History, own: &History, end: LogPosition) -> bool {
    new.current().is_some()
        && (own.epochs.is_empty()
            || common_end(new, LogPosition::new(u64::MAX, u64::MAX), own, end) >= end)
}
