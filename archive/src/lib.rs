//! Continuous archiving of a walcodec [`LogDir`](walcodec::LogDir) to object
//! storage (S3 and S3-compatible servers, GCS, Azure, local files, memory: any
//! [`object_store::ObjectStore`]), retention there, and point-in-time restore.
//!
//! - [`Archiver`] uploads each sealed segment once, in order (in parts when
//!   large), checks the upload, then lists it in the archive's manifest; it holds
//!   the log's retention so no segment is purged before it is archived, and
//!   publishes how far it got ([`Archiver::archived_end`]). Optionally it uploads
//!   the active segment's durable prefix on an interval
//!   ([`Archiver::active_every`]).
//! - [`restore`] rebuilds a log directory byte for byte, up to any record
//!   boundary, checking every object's CRC-32C and every fragment's CRC.
//! - [`Archive`] lists the archive, streams its records with ranged reads
//!   ([`Archive::records`]), checks every object ([`Archive::verify`]) and applies
//!   retention in the bucket ([`Archive::apply_retention`]).
//!
//! Every dialect a `LogDir` writes (LevelDB's, RocksDB's, Pebble's) archives and
//! restores as it is; the manifest records it.
//!
//! ```
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use object_store::memory::InMemory;
//! use walcodec::{LogDir, LogPosition};
//! use walcodec_archive::{restore, Archiver};
//!
//! let store = Arc::new(InMemory::new());
//! let dir = tempfile::tempdir()?;
//! let log = LogDir::builder().max_segment_bytes(4096).open(dir.path()).await?;
//! let archiver = Archiver::new(store.clone(), "my-log".into());
//! archiver.hold(&log); // nothing is purged before it is archived
//! for i in 0..1000 {
//!     log.append(format!("event {i}")).await?;
//! }
//! let archived = archiver.archive_sealed(&log).await?; // `run` does this as segments seal
//! assert_eq!(archived, LogPosition::new(log.end().segment, 0));
//!
//! let copy = tempfile::tempdir()?;
//! let restored = restore(store, "my-log".into(), copy.path(), None).await?;
//! assert_eq!(restored.end.segment, log.end().segment - 1);
//! # log.close().await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Layout in the bucket
//!
//! ```text
//! PREFIX/manifest.json          what the archive holds (rewritten whole by each update)
//! PREFIX/segments/000007.log    sealed segment 7, byte for byte
//! PREFIX/active/000009-4096.log the active segment's durable prefix (4096 bytes), if uploaded
//! ```

#![deny(missing_docs)]

mod archive;
mod archiver;
mod error;
mod manifest;
mod part_reader;
mod restore;
mod scan;
mod store;

pub use archive::{Archive, ArchivedRecord, BucketRetention, VerifyReport, DEFAULT_READ_BYTES};
pub use archiver::{Archiver, PushSummary, DEFAULT_PARTS_IN_FLIGHT, DEFAULT_PART_BYTES};
pub use error::ArchiveError;
pub use manifest::{Manifest, SegmentEntry};
pub use restore::{restore, restore_with, RestoreOptions, RestoreSummary};
pub use store::RetryPolicy;

/// Opens the object store a URL names (`s3://bucket/prefix`, `file:///path`,
/// `memory:///`, `gs://`, `az://`; see [`object_store::parse_url_opts`]) with
/// `options` (for S3: `aws_endpoint`, `aws_region`, `aws_access_key_id`,
/// `aws_secret_access_key`, `aws_allow_http`, ...), returning the store and the
/// prefix the URL's path names.
///
/// # Errors
/// [`ArchiveError::Url`] when the URL does not parse or names no store known.
pub fn store_from_url<I, K, V>(
    url: &str,
    options: I,
) -> Result<
    (
        std::sync::Arc<dyn object_store::ObjectStore>,
        object_store::path::Path,
    ),
    ArchiveError,
>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: Into<String>,
{
    let bad = |reason: String| ArchiveError::Url {
        url: url.to_string(),
        reason,
    };
    let parsed = url::Url::parse(url).map_err(|e| bad(e.to_string()))?;
    let (store, prefix) =
        object_store::parse_url_opts(&parsed, options).map_err(|e| bad(e.to_string()))?;
    Ok((std::sync::Arc::from(store), prefix))
}
