//! [`ArchiveError`]: what archiving, restoring and reading an archive report.

use std::path::PathBuf;

use walcodec::LogPosition;

/// Why archiving, restoring, verifying or reading an archive failed. Each names
/// the segment or object at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArchiveError {
    /// The object store failed (after the retries the operation allows).
    #[error("object store: {0}")]
    Store(#[from] object_store::Error),
    /// A request took longer than its timeout (after the retries allowed).
    #[error("object store request timed out: {what}")]
    Timeout {
        /// The request.
        what: String,
    },
    /// A read returned fewer or more bytes than the object (or range) holds, or
    /// an upload left an object of another size than was sent: a body cut short
    /// on the way. Retried.
    #[error("reading {object}: {got} bytes, not {expected}")]
    ShortRead {
        /// The object's path in the store.
        object: String,
        /// The bytes it should have returned.
        expected: u64,
        /// The bytes it returned.
        got: u64,
    },
    /// The log directory failed.
    #[error("log directory: {0}")]
    Log(#[from] walcodec::Error),
    /// A local file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// An archived object's bytes are not the bytes the manifest recorded: its
    /// size or checksum differs, or its records do not read back (a fragment's
    /// CRC, a torn record).
    #[error("corrupt archived object {object} (segment {segment}): {reason}")]
    Corrupt {
        /// The object's path in the store.
        object: String,
        /// The segment it holds.
        segment: u64,
        /// What differs.
        reason: String,
    },
    /// A segment of the log directory does not read as a sealed segment must (a
    /// fragment's CRC, a torn end): it is not archived.
    #[error("segment {segment} of the log directory does not read back: {reason}")]
    BadSegment {
        /// The segment.
        segment: u64,
        /// What is wrong.
        reason: String,
    },
    /// The archive is missing a segment between two it holds, or the log directory
    /// no longer holds the next segment to archive (purged before it was archived).
    #[error("segment {segment} is missing: {reason}")]
    Gap {
        /// The first segment missing.
        segment: u64,
        /// Where it is missing.
        reason: String,
    },
    /// The manifest object does not parse, or describes another log than the one
    /// being archived.
    #[error("manifest {object}: {reason}")]
    Manifest {
        /// The manifest's path in the store.
        object: String,
        /// What is wrong.
        reason: String,
    },
    /// Another writer changed the manifest since this one read it: a second
    /// [`Archiver`](crate::Archiver) of the same prefix (or of another log), or
    /// bucket retention that could not be merged. Nothing was overwritten; stop
    /// one of the two.
    #[error("manifest {object}: {reason}")]
    Conflict {
        /// The manifest's path in the store.
        object: String,
        /// What happened.
        reason: String,
    },
    /// The prefix holds no archive (no manifest).
    #[error("no archive at {prefix} (no manifest object)")]
    NoArchive {
        /// The prefix.
        prefix: String,
    },
    /// A restore's target directory already holds segment files.
    #[error("{path} already holds log segments: restore into an empty or new directory")]
    NotEmpty {
        /// The directory.
        path: PathBuf,
    },
    /// A position outside what the archive holds.
    #[error("position {position}: {reason}")]
    Position {
        /// The position asked for.
        position: LogPosition,
        /// Why it cannot be served.
        reason: String,
    },
    /// The log was truncated behind what is already archived
    /// ([`LogDir::truncate_after`](walcodec::LogDir::truncate_after)): the archive
    /// holds records the log no longer has.
    #[error("the log was truncated at {log_end}, behind the archive's end {archived_end}")]
    TruncatedBehindArchive {
        /// The log's end after the truncation.
        log_end: LogPosition,
        /// What the archive holds.
        archived_end: LogPosition,
    },
    /// An object store URL that does not parse.
    #[error("object store URL {url}: {reason}")]
    Url {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
}

impl ArchiveError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> ArchiveError {
        ArchiveError::Io {
            path: path.into(),
            source,
        }
    }

    /// Whether trying again may succeed: store failures and timeouts, and an
    /// object that read back wrong (a truncated body is one of those).
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            ArchiveError::Store(object_store::Error::NotFound { .. }) => false,
            ArchiveError::Store(object_store::Error::NotImplemented { .. }) => false,
            ArchiveError::Store(_) | ArchiveError::Timeout { .. } => true,
            ArchiveError::Corrupt { .. } | ArchiveError::ShortRead { .. } => true,
            _ => false,
        }
    }
}
