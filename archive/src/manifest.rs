//! The manifest: one JSON object, `PREFIX/manifest.json`, that says what the
//! archive holds. An object is part of the archive only once the manifest lists
//! it: a segment uploaded but not yet listed (a crash between the two) is
//! uploaded again, to the same name, and listed once.
//!
//! ```text
//! PREFIX/manifest.json          the manifest (rewritten whole, atomically, by each PUT)
//! PREFIX/segments/000007.log    sealed segment 7, byte for byte
//! PREFIX/active/000009.log      the active segment's durable prefix (Archiver::active_every)
//! ```

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};
use walcodec::{Dialect, LogPosition};

use crate::error::ArchiveError;
use crate::store::Bucket;

/// The manifest's name under the prefix.
pub(crate) const MANIFEST: &str = "manifest.json";
/// The manifest format this crate writes and reads.
const FORMAT_VERSION: u32 = 1;

/// What an archive holds: the log's dialect and start, and each segment object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The manifest format (1).
    pub version: u32,
    /// The dialect of the log's segments: `leveldb`, `rocksdb` or `pebble`.
    pub dialect: String,
    /// The first segment the archive was started with: the log's oldest segment
    /// kept when archiving began. Segments before it were never archived.
    pub start: u64,
    /// Segments before this were deleted from the bucket by retention
    /// ([`Archive::apply_retention`](crate::Archive::apply_retention)); `start`
    /// until then.
    pub deleted_before: u64,
    /// The sealed segments archived, oldest first, consecutive.
    pub segments: Vec<SegmentEntry>,
    /// The active segment's durable prefix, last uploaded
    /// ([`Archiver::active_every`](crate::Archiver::active_every)); it goes on
    /// past the last sealed segment.
    pub active: Option<SegmentEntry>,
}

/// One archived segment (or the active segment's prefix).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentEntry {
    /// The segment's number (its file is `NNNNNN.log`).
    pub number: u64,
    /// The object's size in bytes: the segment's length.
    pub size: u64,
    /// The CRC-32C (Castagnoli) of the object's bytes.
    pub crc32c: u32,
    /// Where its records end (before a sealed Pebble segment's EOF trailer; its
    /// size otherwise).
    pub records_end: u64,
    /// How many records it holds.
    pub records: u64,
    /// When it was archived, in milliseconds since the Unix epoch.
    pub archived_at_ms: u64,
}

impl SegmentEntry {
    /// The position just past its last record.
    pub fn end(&self) -> LogPosition {
        LogPosition::new(self.number, self.records_end)
    }
}

/// The manifest's spelling of a dialect.
pub(crate) fn dialect_name(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Pebble => "pebble",
        Dialect::RocksDb => "rocksdb",
        _ => "leveldb",
    }
}

impl Manifest {
    pub(crate) fn new(dialect: Dialect, start: u64) -> Manifest {
        Manifest {
            version: FORMAT_VERSION,
            dialect: dialect_name(dialect).to_string(),
            start,
            deleted_before: start,
            segments: Vec::new(),
            active: None,
        }
    }

    /// The dialect its segments are read in.
    pub fn dialect(&self) -> Dialect {
        match self.dialect.as_str() {
            "pebble" => Dialect::Pebble,
            "rocksdb" => Dialect::RocksDb,
            _ => Dialect::LevelDb,
        }
    }

    /// The next segment to archive: the one after the last archived.
    pub fn next_segment(&self) -> u64 {
        self.segments.last().map_or(self.start, |s| s.number + 1)
    }

    /// The end of what the sealed segments archived hold, as a
    /// [`LogDir`](walcodec::LogDir)'s durable end reads after a rotation: the
    /// start of the next segment.
    pub fn archived_end(&self) -> LogPosition {
        LogPosition::new(self.next_segment(), 0)
    }

    /// Checks what a reader relies on: a known version and dialect, segments
    /// consecutive from `deleted_before`.
    fn check(&self, object: &str) -> Result<(), ArchiveError> {
        let bad = |reason: String| ArchiveError::Manifest {
            object: object.to_string(),
            reason,
        };
        if self.version != FORMAT_VERSION {
            return Err(bad(format!("unknown format version {}", self.version)));
        }
        if !matches!(self.dialect.as_str(), "leveldb" | "rocksdb" | "pebble") {
            return Err(bad(format!("unknown dialect {:?}", self.dialect)));
        }
        for (expected, segment) in (self.deleted_before..).zip(&self.segments) {
            if segment.number != expected {
                return Err(ArchiveError::Gap {
                    segment: expected,
                    reason: format!("the manifest {object} lists {} next", segment.number),
                });
            }
            if segment.records_end > segment.size {
                return Err(bad(format!(
                    "segment {}: records end at {} past its size {}",
                    segment.number, segment.records_end, segment.size
                )));
            }
        }
        Ok(())
    }

    /// Reads the manifest of the archive at the bucket's prefix: `None` when there
    /// is none yet.
    pub(crate) async fn load(bucket: &Bucket) -> Result<Option<Manifest>, ArchiveError> {
        let path = &bucket.path(MANIFEST);
        let bytes = bucket
            .retry(|| async move {
                match bucket.get_all(path).await {
                    Ok(bytes) => Ok(Some(bytes)),
                    Err(ArchiveError::Store(object_store::Error::NotFound { .. })) => Ok(None),
                    Err(e) => Err(e),
                }
            })
            .await?;
        let Some(bytes) = bytes else {
            return Ok(None);
        };
        let manifest: Manifest =
            serde_json::from_slice(&bytes).map_err(|e| ArchiveError::Manifest {
                object: path.to_string(),
                reason: e.to_string(),
            })?;
        manifest.check(path.as_ref())?;
        Ok(Some(manifest))
    }

    /// Writes the manifest, replacing the last one whole.
    pub(crate) async fn store(&self, bucket: &Bucket) -> Result<(), ArchiveError> {
        let path = &bucket.path(MANIFEST);
        let bytes = &Bytes::from(serde_json::to_vec_pretty(self).expect("a manifest serializes"));
        bucket
            .retry(|| async move {
                let payload = PutPayload::from_bytes(bytes.clone());
                let options = PutOptions {
                    mode: PutMode::Overwrite,
                    ..PutOptions::default()
                };
                bucket
                    .request(
                        &format!("PUT {path}"),
                        bucket.store.put_opts(path, payload, options),
                    )
                    .await?;
                // The manifest decides what is archived: check it arrived whole.
                let meta = bucket
                    .request(&format!("HEAD {path}"), bucket.store.head(path))
                    .await?;
                if meta.size != bytes.len() as u64 {
                    return Err(ArchiveError::ShortRead {
                        object: path.to_string(),
                        expected: bytes.len() as u64,
                        got: meta.size,
                    });
                }
                Ok(())
            })
            .await
    }
}

/// The object name of sealed segment `number`.
pub(crate) fn segment_object(number: u64) -> String {
    format!("segments/{}", walcodec_segment_name(number))
}

/// The object name of the active segment `number`'s prefix.
pub(crate) fn active_object(number: u64) -> String {
    format!("active/{}", walcodec_segment_name(number))
}

/// `NNNNNN.log`, as a log directory names its segments.
pub(crate) fn walcodec_segment_name(number: u64) -> String {
    format!("{number:06}.log")
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
