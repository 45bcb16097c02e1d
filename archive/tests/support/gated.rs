//! A store that holds each write of an archive's manifest until the upload of
//! the next segment has begun (or, with no such upload, until a timeout on
//! Tokio's clock: pause it and the wait costs no real time), and counts which
//! of the two ended the wait: whether an archiver uploads a segment while it
//! lists the one before.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use tokio::sync::watch;

#[derive(Debug)]
pub struct GatedStore {
    inner: Arc<dyn ObjectStore>,
    /// Segment uploads begun (a PUT or a multipart upload under `segments/`).
    uploads: watch::Sender<u64>,
    /// The segments the archiver is to upload: a manifest write after the last
    /// one's upload has no next upload to wait for.
    segments: u64,
    /// Manifest writes whose wait the next segment's upload ended.
    pub overlapped: AtomicU64,
    /// Manifest writes whose wait the timeout ended.
    pub timed_out: AtomicU64,
}

impl fmt::Display for GatedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GatedStore({})", self.inner)
    }
}

impl GatedStore {
    pub fn new(inner: Arc<dyn ObjectStore>, segments: u64) -> Arc<GatedStore> {
        Arc::new(GatedStore {
            inner,
            uploads: watch::channel(0).0,
            segments,
            overlapped: AtomicU64::new(0),
            timed_out: AtomicU64::new(0),
        })
    }

    fn began_upload(&self, location: &Path) {
        if location.as_ref().contains("/segments/") {
            self.uploads.send_modify(|n| *n += 1);
        }
    }
}

#[async_trait]
impl ObjectStore for GatedStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.began_upload(location);
        let begun = *self.uploads.borrow();
        if location.as_ref().ends_with("manifest.json") && begun > 0 && begun < self.segments {
            let mut uploads = self.uploads.subscribe();
            let next = uploads.wait_for(|n| *n > begun);
            match tokio::time::timeout(Duration::from_secs(60), next).await {
                Ok(_) => self.overlapped.fetch_add(1, Ordering::SeqCst),
                Err(_) => self.timed_out.fetch_add(1, Ordering::SeqCst),
            };
        }
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.began_upload(location);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}
