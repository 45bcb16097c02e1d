//! [`Archive`]: an archive opened for reading: its segments, its records
//! streamed straight from the store, a check of every object, and retention.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::stream::{self, Stream};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use tokio_util::codec::Decoder;
use walcodec::{block_start, Dialect, LogDecoder, LogPosition};

use crate::error::ArchiveError;
use crate::manifest::{self, Manifest, SegmentEntry, Stored};
use crate::restore::fetch_checked;
use crate::scan::segment_decoder;
use crate::scan::Output;
use crate::store::{Bucket, RetryPolicy};

/// Default bytes of one ranged read of [`Archive::records`]: 1 MiB.
pub const DEFAULT_READ_BYTES: u64 = 1 << 20;

/// An archive opened for reading.
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use futures::TryStreamExt;
/// use object_store::local::LocalFileSystem;
/// use walcodec::LogPosition;
/// use walcodec_archive::Archive;
///
/// let store = Arc::new(LocalFileSystem::new_with_prefix("/mnt/backup")?);
/// let archive = Archive::open(store, "app/log".into()).await?;
/// for segment in archive.segments() {
///     println!("{:06}.log {} bytes, {} records", segment.number, segment.size, segment.records);
/// }
/// let mut records = std::pin::pin!(archive.records(LogPosition::START));
/// while let Some(record) = records.try_next().await? {
///     println!("{} {} bytes", record.end, record.data.len());
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Archive {
    bucket: Bucket,
    /// The manifest as read, with its version: what retention's write is
    /// conditional on.
    stored: Stored,
    read_bytes: u64,
}

impl std::fmt::Debug for Archive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Archive")
            .field("store", &self.bucket.store)
            .field("prefix", &self.bucket.prefix)
            .field("manifest", &self.stored.manifest)
            .finish()
    }
}

/// A record read from the archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchivedRecord {
    /// Where the record starts in the log (its first header).
    pub start: LogPosition,
    /// Just past its last byte: the checkpoint to resume after it, as
    /// [`LogDir::append`](walcodec::LogDir::append) returned it.
    pub end: LogPosition,
    /// The record.
    pub data: Bytes,
}

/// What [`Archive::verify`] found.
#[derive(Debug)]
#[non_exhaustive]
pub struct VerifyReport {
    /// Objects read and found as the manifest lists them.
    pub good: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Each object found wrong ([`ArchiveError::Corrupt`]) or missing
    /// ([`ArchiveError::Gap`]), naming it.
    pub problems: Vec<ArchiveError>,
}

/// What [`Archive::apply_retention`] keeps in the bucket. Segments are deleted
/// oldest first while any limit is exceeded, but never one that holds records at
/// or after [`keep_from`](Self::keep_from) (records still wanted: the archive is
/// their only copy once the log has purged them), nor the newest segment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BucketRetention {
    keep_bytes: Option<u64>,
    keep_age: Option<std::time::Duration>,
    keep_segments: Option<u64>,
    keep_from: Option<LogPosition>,
    as_of: Option<std::time::SystemTime>,
}

impl BucketRetention {
    /// No limit: nothing is deleted.
    pub fn new() -> BucketRetention {
        BucketRetention::default()
    }

    /// Delete the oldest segments while all together hold more than `bytes`.
    pub fn keep_bytes(mut self, bytes: u64) -> BucketRetention {
        self.keep_bytes = Some(bytes);
        self
    }

    /// Delete segments archived longer than `age` ago.
    pub fn keep_age(mut self, age: std::time::Duration) -> BucketRetention {
        self.keep_age = Some(age);
        self
    }

    /// Judge [`keep_age`](Self::keep_age) as of `now` rather than the system
    /// clock: a segment is too old when it was archived more than the age before
    /// `now`. For retention applied as of a moment of your choosing (the time a
    /// policy was decided, a clock you inject).
    pub fn as_of(mut self, now: std::time::SystemTime) -> BucketRetention {
        self.as_of = Some(now);
        self
    }

    /// Delete the oldest segments while there are more than `segments`.
    pub fn keep_segments(mut self, segments: u64) -> BucketRetention {
        self.keep_segments = Some(segments);
        self
    }

    /// Never delete a segment holding a record that ends after `position`: from
    /// there on the records are still wanted (a checkpoint not yet taken, a
    /// restore point promised).
    pub fn keep_from(mut self, position: LogPosition) -> BucketRetention {
        self.keep_from = Some(position);
        self
    }
}

impl Archive {
    /// Opens the archive under `prefix` (reads its manifest).
    ///
    /// # Errors
    /// [`ArchiveError::NoArchive`] when there is no manifest; [`ArchiveError::Manifest`]
    /// when it does not parse.
    pub async fn open(store: Arc<dyn ObjectStore>, prefix: Path) -> Result<Archive, ArchiveError> {
        Archive::open_with(store, prefix, RetryPolicy::default()).await
    }

    /// [`open`](Self::open) with a [`RetryPolicy`] for every request it makes.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub async fn open_with(
        store: Arc<dyn ObjectStore>,
        prefix: Path,
        retry: RetryPolicy,
    ) -> Result<Archive, ArchiveError> {
        let mut bucket = Bucket::new(store, prefix);
        bucket.retry = retry;
        let stored = Stored::load(&bucket)
            .await?
            .ok_or_else(|| ArchiveError::NoArchive {
                prefix: bucket.prefix.to_string(),
            })?;
        Ok(Archive {
            bucket,
            stored,
            read_bytes: DEFAULT_READ_BYTES,
        })
    }

    /// Bytes of each ranged read of [`records`](Self::records) (default
    /// [`DEFAULT_READ_BYTES`]): what reading holds in memory besides one record.
    pub fn read_bytes(mut self, bytes: u64) -> Archive {
        self.read_bytes = bytes.max(1);
        self
    }

    /// The manifest as read by [`open`](Self::open).
    pub fn manifest(&self) -> &Manifest {
        &self.stored.manifest
    }

    /// The sealed segments archived, oldest first.
    pub fn segments(&self) -> &[SegmentEntry] {
        &self.stored.manifest.segments
    }

    /// The end of what the archive holds: the last record of the active
    /// segment's prefix, or else the start of the segment after the last sealed.
    pub fn end(&self) -> LogPosition {
        let sealed = self.stored.manifest.archived_end();
        match self.active() {
            Some(active) => sealed.max(active.0.end()),
            None => sealed,
        }
    }

    fn active(&self) -> Option<(SegmentEntry, String)> {
        self.stored
            .manifest
            .active
            .filter(|active| active.number == self.stored.manifest.next_segment())
            .map(|active| (active, manifest::active_object(active.number, active.size)))
    }

    /// Every object with its name, oldest first (the active prefix last).
    fn objects(&self) -> Vec<(SegmentEntry, String, bool)> {
        let mut objects: Vec<(SegmentEntry, String, bool)> = self
            .stored
            .manifest
            .segments
            .iter()
            .map(|entry| (*entry, manifest::segment_object(entry.number), true))
            .collect();
        if let Some((active, object)) = self.active() {
            objects.push((active, object, false));
        }
        objects
    }

    /// The records of the archive from `from` on (the first record starting at or
    /// after it; [`LogPosition::START`] for all), read with ranged GETs of
    /// [`read_bytes`](Self::read_bytes) each: memory stays at one read and one
    /// record, however large the archive. Each fragment's CRC is checked; the
    /// objects' whole-object checksums are not (that needs every byte: see
    /// [`verify`](Self::verify)).
    ///
    /// # Errors
    /// Items are [`ArchiveError::Corrupt`] for damage, naming the object, and
    /// store errors after retries; the stream ends after an error.
    pub fn records(
        &self,
        from: LogPosition,
    ) -> impl Stream<Item = Result<ArchivedRecord, ArchiveError>> + Send + 'static {
        let objects: Vec<(SegmentEntry, String, bool)> = self
            .objects()
            .into_iter()
            .filter(|(entry, _, _)| entry.number >= from.segment)
            .collect();
        let state = ReadState {
            bucket: self.bucket.clone(),
            dialect: self.stored.manifest.dialect(),
            read_bytes: self.read_bytes,
            objects,
            index: 0,
            from,
            current: None,
            done: false,
        };
        stream::unfold(state, |mut state| async move {
            if state.done {
                return None;
            }
            match state.next().await {
                Ok(Some(record)) => Some((Ok(record), state)),
                Ok(None) => None,
                Err(e) => {
                    state.done = true;
                    Some((Err(e), state))
                }
            }
        })
    }

    /// Reads every object whole and checks it as [`restore`](crate::restore)
    /// does (size, CRC-32C, every fragment's CRC, the records listed); reports
    /// each object found wrong or missing, naming it.
    ///
    /// # Errors
    /// Only for failures to talk to the store that outlast the retries; damage is
    /// in the report.
    pub async fn verify(&self) -> Result<VerifyReport, ArchiveError> {
        self.verify_with_progress(|_| {}).await
    }

    /// [`verify`](Self::verify), calling `progress` with each chunk's bytes.
    ///
    /// # Errors
    /// As [`verify`](Self::verify).
    pub async fn verify_with_progress(
        &self,
        progress: impl Fn(u64),
    ) -> Result<VerifyReport, ArchiveError> {
        let mut report = VerifyReport {
            good: 0,
            bytes: 0,
            problems: Vec::new(),
        };
        let dialect = self.stored.manifest.dialect();
        for (entry, object, sealed) in self.objects() {
            let checked = self
                .bucket
                .retry(|| {
                    fetch_checked(
                        &self.bucket,
                        &entry,
                        &object,
                        dialect,
                        sealed,
                        None,
                        Output::none(),
                        &progress,
                    )
                })
                .await;
            match checked {
                Ok(_) => {
                    report.good += 1;
                    report.bytes += entry.size;
                }
                Err(e @ (ArchiveError::Corrupt { .. } | ArchiveError::Gap { .. })) => {
                    report.problems.push(e);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(report)
    }

    /// Deletes the oldest archived segments that `policy` no longer keeps: first
    /// from the manifest (written before any deletion, so a crash leaves objects
    /// nothing lists, never a listed one missing), then their objects. Returns the
    /// segments deleted.
    ///
    /// The manifest is replaced only if it is still the one this `Archive` read:
    /// an [`Archiver`](crate::Archiver) of the same prefix running meanwhile makes
    /// it fail with [`ArchiveError::Conflict`] (open the archive again and retry),
    /// never lose the archiver's segments; the archiver goes on from the trimmed
    /// manifest.
    ///
    /// # Errors
    /// Store failures after retries; [`ArchiveError::Conflict`].
    pub async fn apply_retention(
        &mut self,
        policy: BucketRetention,
    ) -> Result<Vec<u64>, ArchiveError> {
        let now = policy
            .as_of
            .map_or_else(manifest::now_ms, manifest::epoch_ms);
        let segments = &self.stored.manifest.segments;
        let mut total: u64 = segments.iter().map(|s| s.size).sum();
        let mut count = segments.len() as u64;
        let mut victims = Vec::new();
        // The newest segment stays: it holds the archive's latest records.
        for entry in segments.iter().take(segments.len().saturating_sub(1)) {
            if policy.keep_from.is_some_and(|from| entry.end() > from) {
                break;
            }
            let too_big = policy.keep_bytes.is_some_and(|max| total > max);
            let too_many = policy.keep_segments.is_some_and(|max| count > max);
            let too_old = policy.keep_age.is_some_and(|age| {
                let age_ms = u64::try_from(age.as_millis()).unwrap_or(u64::MAX);
                now.saturating_sub(entry.archived_at_ms) > age_ms
            });
            if !(too_big || too_many || too_old) {
                break;
            }
            total -= entry.size;
            count -= 1;
            victims.push(entry.number);
        }
        let Some(&last) = victims.last() else {
            return Ok(victims);
        };
        let mut stored = self.stored.clone();
        stored.manifest.segments.retain(|s| s.number > last);
        stored.manifest.deleted_before = last + 1;
        // Conditional on the manifest read: an archiver's write since is not
        // overwritten (open the archive again and retry).
        stored.save(&self.bucket).await?;
        self.stored = stored;
        let bucket = &self.bucket;
        for &number in &victims {
            let path = &bucket.path(&manifest::segment_object(number));
            bucket
                .retry(|| async move {
                    match bucket
                        .request(&format!("DELETE {path}"), bucket.store.delete(path))
                        .await
                    {
                        Err(ArchiveError::Store(object_store::Error::NotFound { .. })) => Ok(()),
                        other => other,
                    }
                })
                .await?;
        }
        Ok(victims)
    }
}

/// Where [`Archive::records`] is.
struct ReadState {
    bucket: Bucket,
    dialect: Dialect,
    read_bytes: u64,
    objects: Vec<(SegmentEntry, String, bool)>,
    index: usize,
    from: LogPosition,
    current: Option<Reading>,
    done: bool,
}

/// One object being read.
struct Reading {
    entry: SegmentEntry,
    location: Path,
    decoder: LogDecoder,
    buf: BytesMut,
    /// The next byte to fetch.
    next: u64,
}

impl ReadState {
    async fn next(&mut self) -> Result<Option<ArchivedRecord>, ArchiveError> {
        loop {
            if self.current.is_none() {
                let Some((entry, object, _)) = self.objects.get(self.index).cloned() else {
                    return Ok(None);
                };
                self.index += 1;
                let start = if entry.number == self.from.segment {
                    self.from.offset
                } else {
                    0
                };
                if start >= entry.records_end {
                    continue;
                }
                let first = block_start(start);
                self.current = Some(Reading {
                    entry,
                    location: self.bucket.path(&object),
                    decoder: segment_decoder(entry.number, self.dialect, start),
                    buf: BytesMut::new(),
                    next: first,
                });
            }
            let reading = self.current.as_mut().expect("set above");
            let corrupt = |reason: String| ArchiveError::Corrupt {
                object: reading.location.to_string(),
                segment: reading.entry.number,
                reason,
            };
            // Records end at `records_end`: a Pebble segment's EOF trailer is not read.
            let eof = reading.next >= reading.entry.records_end;
            let decoded = if eof {
                reading.decoder.decode_eof(&mut reading.buf)
            } else {
                reading.decoder.decode(&mut reading.buf)
            };
            match decoded {
                Ok(Some(data)) => {
                    let position = reading
                        .decoder
                        .last_record()
                        .expect("a record was just returned");
                    let number = reading.entry.number;
                    return Ok(Some(ArchivedRecord {
                        start: LogPosition::new(number, position.start),
                        end: LogPosition::new(number, position.end),
                        data,
                    }));
                }
                Ok(None) if eof => {
                    if reading.decoder.has_incomplete_tail() {
                        return Err(corrupt(format!(
                            "a torn record at offset {}",
                            reading.decoder.valid_prefix_len()
                        )));
                    }
                    self.current = None;
                }
                Ok(None) => {
                    let range = reading.next
                        ..(reading.next + self.read_bytes).min(reading.entry.records_end);
                    let location = reading.location.clone();
                    let bytes = self
                        .bucket
                        .retry(|| self.bucket.get_range(&location, range.clone()))
                        .await?;
                    let reading = self.current.as_mut().expect("set above");
                    reading.next = range.end;
                    reading.buf.extend_from_slice(&bytes);
                }
                Err(e) => return Err(corrupt(e.to_string())),
            }
        }
    }
}
