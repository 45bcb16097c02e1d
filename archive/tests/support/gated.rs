//! A store that holds each write of an archive's manifest (or, with
//! [`GatedStore::holding_checks`], each `HEAD` that checks a segment's upload)
//! until the upload of the next segment has begun (or, with no such upload,
//! until a timeout on Tokio's clock: pause it and the wait costs no real time),
//! and counts which of the two ended the wait: whether an archiver uploads a
//! segment while it lists the one before (or while the one before finishes).

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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
    /// Their objects, in the order they began.
    began: Mutex<Vec<Path>>,
    /// Whether the `HEAD`s of segments are held, rather than manifest writes.
    checks: bool,
    /// Manifest writes that list a segment, so far.
    listings: AtomicU64,
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
        Self::gating(inner, segments, false)
    }

    /// Holds the `HEAD` of each segment's object, rather than manifest writes,
    /// until the upload of a segment begun after it has begun.
    pub fn holding_checks(inner: Arc<dyn ObjectStore>, segments: u64) -> Arc<GatedStore> {
        Self::gating(inner, segments, true)
    }

    fn gating(inner: Arc<dyn ObjectStore>, segments: u64, checks: bool) -> Arc<GatedStore> {
        Arc::new(GatedStore {
            inner,
            uploads: watch::channel(0).0,
            began: Mutex::new(Vec::new()),
            checks,
            listings: AtomicU64::new(0),
            segments,
            overlapped: AtomicU64::new(0),
            timed_out: AtomicU64::new(0),
        })
    }

    fn began_upload(&self, location: &Path) {
        if location.as_ref().contains("/segments/") {
            self.began.lock().unwrap().push(location.clone());
            self.uploads.send_modify(|n| *n += 1);
        }
    }

    /// Waits until more than `begun` uploads have begun (the next segment's
    /// upload, after the `begun`th), or the timeout; counts which.
    async fn hold(&self, begun: u64) {
        let mut uploads = self.uploads.subscribe();
        let next = uploads.wait_for(|n| *n > begun);
        // Shorter than the archiver's own request timeout (60 s by default).
        match tokio::time::timeout(Duration::from_secs(10), next).await {
            Ok(_) => self.overlapped.fetch_add(1, Ordering::SeqCst),
            Err(_) => self.timed_out.fetch_add(1, Ordering::SeqCst),
        };
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
        if !self.checks && location.as_ref().ends_with("manifest.json") && begun > 0 {
            // The manifest's first write (no upload begun yet) creates it; each
            // after it lists the next segment: the `listing`th.
            let listing = self.listings.fetch_add(1, Ordering::SeqCst) + 1;
            if listing < self.segments {
                self.hold(listing).await;
            }
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
        if self.checks && options.head {
            // How many uploads had begun when this segment's began.
            let began = self
                .began
                .lock()
                .unwrap()
                .iter()
                .rposition(|p| p == location);
            if let Some(index) = began.map(|i| i as u64 + 1) {
                if index < self.segments {
                    self.hold(index).await;
                }
            }
        }
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
