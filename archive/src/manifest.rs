//! The manifest: one JSON object, `PREFIX/manifest.json`, that says what the
//! archive holds. An object is part of the archive only once the manifest lists
//! it: a segment uploaded but not yet listed (a crash between the two) is
//! uploaded again, to the same name, and listed once.
//!
//! ```text
//! PREFIX/manifest.json          the manifest (rewritten whole, atomically, by each PUT)
//! PREFIX/segments/000007.log    sealed segment 7, byte for byte
//! PREFIX/active/000009-4096.log the active segment's durable prefix (Archiver::active_every), by size
//! ```

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
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
        Ok(Stored::load(bucket).await?.map(|stored| stored.manifest))
    }

    fn parse(bytes: &[u8], object: &str) -> Result<Manifest, ArchiveError> {
        let manifest: Manifest =
            serde_json::from_slice(bytes).map_err(|e| ArchiveError::Manifest {
                object: object.to_string(),
                reason: e.to_string(),
            })?;
        manifest.check(object)?;
        Ok(manifest)
    }
}

/// A manifest as this process last read or wrote it, with the object's version:
/// the precondition of the next write. Each write replaces the manifest only if
/// it is still the one read ([`PutMode::Update`] with its e-tag; [`PutMode::Create`]
/// for the first), so two writers of one prefix (two archivers, or an archiver and
/// bucket retention) never overwrite each other's: the second gets
/// [`ArchiveError::Conflict`].
///
/// A store that cannot write conditionally (`LocalFileSystem` has no
/// `PutMode::Update`; an S3 client with conditional puts disabled) is checked
/// with a `HEAD` just before the write instead: that catches a second writer at
/// its next write, unless the two writes land within one round trip of each
/// other.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    /// The manifest, as changed since.
    pub(crate) manifest: Manifest,
    /// The manifest the store holds, as far as this process knows (`None`: none
    /// yet).
    pub(crate) base: Option<Manifest>,
    pub(crate) version: Option<UpdateVersion>,
}

impl Stored {
    /// A manifest not written yet.
    pub(crate) fn new(manifest: Manifest) -> Stored {
        Stored {
            manifest,
            base: None,
            version: None,
        }
    }

    /// Reads the manifest of the archive at the bucket's prefix, with its version:
    /// `None` when there is none yet.
    pub(crate) async fn load(bucket: &Bucket) -> Result<Option<Stored>, ArchiveError> {
        let path = &bucket.path(MANIFEST);
        let got = bucket
            .retry(|| async move {
                match bucket.get_with_meta(path).await {
                    Ok(got) => Ok(Some(got)),
                    Err(ArchiveError::Store(object_store::Error::NotFound { .. })) => Ok(None),
                    Err(e) => Err(e),
                }
            })
            .await?;
        let Some((bytes, meta)) = got else {
            return Ok(None);
        };
        let manifest = Manifest::parse(&bytes, path.as_ref())?;
        Ok(Some(Stored {
            base: Some(manifest.clone()),
            manifest,
            version: Some(UpdateVersion {
                e_tag: meta.e_tag,
                version: meta.version,
            }),
        }))
    }

    /// Writes the manifest, replacing the last one whole if it is still the one
    /// this process read or wrote.
    ///
    /// # Errors
    /// [`ArchiveError::Conflict`] when another writer changed it meanwhile.
    pub(crate) async fn save(&mut self, bucket: &Bucket) -> Result<(), ArchiveError> {
        let path = &bucket.path(MANIFEST);
        let bytes =
            &Bytes::from(serde_json::to_vec_pretty(&self.manifest).expect("a manifest serializes"));
        // The version the store holds, as the tries go: a try whose PUT landed but
        // whose check failed (a body cut short) leaves its own write behind.
        let known = &std::sync::Mutex::new((self.version.clone(), self.base.is_some()));
        let conflict = |reason: String| ArchiveError::Conflict {
            object: path.to_string(),
            reason,
        };
        let version = bucket
            .retry(|| async move {
                let (version, exists) = known
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone();
                let mode = match (&version, exists) {
                    (Some(version), true) => PutMode::Update(version.clone()),
                    _ => PutMode::Create,
                };
                let put = bucket
                    .request(
                        &format!("PUT {path}"),
                        bucket.store.put_opts(
                            path,
                            PutPayload::from_bytes(bytes.clone()),
                            PutOptions {
                                mode: mode.clone(),
                                ..PutOptions::default()
                            },
                        ),
                    )
                    .await;
                let put = match put {
                    Ok(put) => put,
                    Err(ArchiveError::Store(object_store::Error::NotImplemented { .. })) => {
                        // No conditional writes: check, then overwrite.
                        let current = match bucket
                            .request(&format!("HEAD {path}"), bucket.store.head(path))
                            .await
                        {
                            Ok(meta) => Some(meta),
                            Err(ArchiveError::Store(object_store::Error::NotFound { .. })) => None,
                            Err(e) => return Err(e),
                        };
                        match (&current, &mode) {
                            (None, PutMode::Create) => {}
                            (Some(meta), PutMode::Update(version))
                                if meta.e_tag.is_some() && meta.e_tag == version.e_tag => {}
                            _ => {
                                return Err(conflict(
                                    "it changed since this process read it".into(),
                                ))
                            }
                        }
                        bucket
                            .request(
                                &format!("PUT {path}"),
                                bucket.store.put_opts(
                                    path,
                                    PutPayload::from_bytes(bytes.clone()),
                                    PutOptions {
                                        mode: PutMode::Overwrite,
                                        ..PutOptions::default()
                                    },
                                ),
                            )
                            .await?
                    }
                    Err(ArchiveError::Store(
                        object_store::Error::AlreadyExists { .. }
                        | object_store::Error::Precondition { .. },
                    )) => {
                        // Our own write may have landed with its answer lost: then
                        // the manifest holds our bytes.
                        return match bucket.get_with_meta(path).await {
                            Ok((current, meta)) if current == *bytes => Ok(UpdateVersion {
                                e_tag: meta.e_tag,
                                version: meta.version,
                            }),
                            Ok(_)
                            | Err(ArchiveError::Store(object_store::Error::NotFound { .. })) => {
                                Err(conflict(
                                    "another writer changed it since this process read it \
                                     (a second archiver of this prefix?)"
                                        .into(),
                                ))
                            }
                            Err(e) => Err(e),
                        };
                    }
                    Err(e) => return Err(e),
                };
                let written = UpdateVersion::from(put);
                *known
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) =
                    (Some(written.clone()), true);
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
                Ok(written)
            })
            .await?;
        self.version = Some(version);
        self.base = Some(self.manifest.clone());
        Ok(())
    }
}

/// The object name of sealed segment `number`.
pub(crate) fn segment_object(number: u64) -> String {
    format!("segments/{}", walcodec_segment_name(number))
}

/// The object name of an active segment's prefix: its number and size, so that
/// each upload of a longer prefix goes to an object of its own.
pub(crate) fn active_object(number: u64, size: u64) -> String {
    format!("active/{number:06}-{size}.log")
}

/// `NNNNNN.log`, as a log directory names its segments.
pub(crate) fn walcodec_segment_name(number: u64) -> String {
    format!("{number:06}.log")
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    epoch_ms(SystemTime::now())
}

/// `time` in milliseconds since the Unix epoch (0 before it).
pub(crate) fn epoch_ms(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
