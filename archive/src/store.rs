//! Talking to the object store: every request under a timeout, failed steps
//! retried with backoff ([`RetryPolicy`]), objects named under the prefix.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

use crate::error::ArchiveError;

/// How store requests are bounded and retried.
///
/// Each request (a PUT, one part of a multipart upload, a GET, a listing) must
/// finish within [`timeout`](Self::timeout); a step that fails (a request that
/// errs or times out, an object that reads back with the wrong size or checksum)
/// is tried again, whole, after a backoff that doubles from
/// [`backoff`](Self::backoff) up to its maximum, up to
/// [`attempts`](Self::attempts) times in all. Nothing is recorded as archived
/// until its step succeeded.
///
/// The default: 10 attempts, 60 s per request, backoff from 100 ms to 10 s. An
/// [`Archiver`](crate::Archiver) that runs for months may want
/// `attempts(u32::MAX)`: it then waits out any outage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    attempts: u32,
    timeout: Duration,
    backoff: Duration,
    max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 10,
            timeout: Duration::from_secs(60),
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// The defaults (see the type's docs).
    pub fn new() -> RetryPolicy {
        RetryPolicy::default()
    }

    /// Tries of a step in all, the first included (at least 1).
    pub fn attempts(mut self, attempts: u32) -> RetryPolicy {
        self.attempts = attempts.max(1);
        self
    }

    /// The longest one request may take.
    pub fn timeout(mut self, timeout: Duration) -> RetryPolicy {
        self.timeout = timeout;
        self
    }

    /// The first wait between tries, and the longest.
    pub fn backoff(mut self, first: Duration, max: Duration) -> RetryPolicy {
        self.backoff = first;
        self.max_backoff = max.max(first);
        self
    }
}

/// Tries of a step whose bytes read back with the wrong checksum.
const CORRUPT_ATTEMPTS: u32 = 3;

/// The store, the prefix, the policy: what every part of the crate talks through.
#[derive(Clone)]
pub(crate) struct Bucket {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) prefix: Path,
    pub(crate) retry: RetryPolicy,
}

impl Bucket {
    pub(crate) fn new(store: Arc<dyn ObjectStore>, prefix: Path) -> Bucket {
        Bucket {
            store,
            prefix,
            retry: RetryPolicy::default(),
        }
    }

    /// `prefix/name`.
    pub(crate) fn path(&self, name: &str) -> Path {
        let mut parts: Vec<object_store::path::PathPart<'_>> = self.prefix.parts().collect();
        for part in name.split('/') {
            parts.push(part.into());
        }
        Path::from_iter(parts)
    }

    /// The longest one request may take.
    pub(crate) fn retry_timeout(&self) -> std::time::Duration {
        self.retry.timeout
    }

    /// Runs one request under the timeout.
    pub(crate) async fn request<T, F>(&self, what: &str, request: F) -> Result<T, ArchiveError>
    where
        F: Future<Output = Result<T, object_store::Error>>,
    {
        match tokio::time::timeout(self.retry.timeout, request).await {
            Ok(result) => Ok(result?),
            Err(_) => Err(ArchiveError::Timeout {
                what: what.to_string(),
            }),
        }
    }

    /// Runs `step` until it succeeds, fails for good, or has been tried
    /// `attempts` times; `on_retry` hears of each failure retried.
    pub(crate) async fn retry<T, F, Fut>(&self, mut step: F) -> Result<T, ArchiveError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, ArchiveError>>,
    {
        let mut wait = self.retry.backoff;
        let mut tried = 0u32;
        let mut corrupt = 0u32;
        loop {
            tried += 1;
            match step().await {
                Ok(value) => return Ok(value),
                Err(e) => {
                    // Bytes that read back wrong are most likely wrong in the store:
                    // a few tries tell a body cut on the way from damage at rest.
                    if matches!(e, ArchiveError::Corrupt { .. }) {
                        corrupt += 1;
                    }
                    if !e.is_transient()
                        || tried >= self.retry.attempts
                        || corrupt >= CORRUPT_ATTEMPTS
                    {
                        return Err(e);
                    }
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(self.retry.max_backoff);
                }
            }
        }
    }

    /// The whole object at `path`, under the timeout (the body's bytes too),
    /// checked against the size the store reports for it.
    pub(crate) async fn get_all(&self, path: &Path) -> Result<bytes::Bytes, ArchiveError> {
        Ok(self.get_with_meta(path).await?.0)
    }

    /// [`get_all`](Self::get_all), with what the store says of the object.
    pub(crate) async fn get_with_meta(
        &self,
        path: &Path,
    ) -> Result<(bytes::Bytes, object_store::ObjectMeta), ArchiveError> {
        let what = format!("GET {path}");
        let (bytes, meta) = self
            .request(&what, async {
                let result = self.store.get(path).await?;
                let meta = result.meta.clone();
                Ok((result.bytes().await?, meta))
            })
            .await?;
        check_len(path, meta.size, bytes.len())?;
        Ok((bytes, meta))
    }

    /// Bytes `range` of the object at `path`, checked to be that long.
    pub(crate) async fn get_range(
        &self,
        path: &Path,
        range: std::ops::Range<u64>,
    ) -> Result<bytes::Bytes, ArchiveError> {
        let bytes = self
            .request(
                &format!("GET {path} {range:?}"),
                self.store.get_range(path, range.clone()),
            )
            .await?;
        check_len(path, range.end - range.start, bytes.len())?;
        Ok(bytes)
    }
}

fn check_len(path: &Path, expected: u64, got: usize) -> Result<(), ArchiveError> {
    if got as u64 != expected {
        return Err(ArchiveError::ShortRead {
            object: path.to_string(),
            expected,
            got: got as u64,
        });
    }
    Ok(())
}
