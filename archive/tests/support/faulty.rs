//! A store that fails on purpose: one request in N (at random, seeded) errs, hangs (for a timeout to
//! end), or moves a truncated body (a GET's body cut short, a PUT's payload or a
//! part cut short on its way in, as a broken proxy would).

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result, UploadPart,
};

/// What the Nth request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Returns an error.
    Fail,
    /// Never answers.
    Hang,
    /// A GET's body or a PUT's payload loses its second half.
    Truncate,
}

#[derive(Debug)]
pub struct Faults {
    every: u64,
    fault: Fault,
    requests: AtomicU64,
    /// Faults injected so far.
    pub injected: AtomicU64,
    /// While false, no fault.
    pub enabled: AtomicBool,
    /// When set, only PUTs of objects whose path contains it get faults.
    only_puts_to: std::sync::Mutex<Option<String>>,
}

impl Faults {
    /// Whether this request gets the fault: one in `every`, at random (seeded,
    /// so a run repeats). Not every Nth exactly: a step of N requests retried
    /// would then fail at the same request forever.
    fn hit(&self, put_to: Option<&Path>) -> Option<Fault> {
        let only = self.only_puts_to.lock().unwrap().clone();
        if let Some(only) = only {
            if !put_to.is_some_and(|path| path.as_ref().contains(only.as_str())) {
                return None;
            }
        }
        let n = self.requests.fetch_add(1, Ordering::SeqCst) + 1;
        let mut x = n.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (self.every << 32);
        x ^= x >> 29;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^= x >> 32;
        if self.enabled.load(Ordering::SeqCst) && x.is_multiple_of(self.every) {
            self.injected.fetch_add(1, Ordering::SeqCst);
            Some(self.fault)
        } else {
            None
        }
    }

    async fn before(&self) -> Result<Option<Fault>> {
        self.before_put(None).await
    }

    async fn before_put(&self, put_to: Option<&Path>) -> Result<Option<Fault>> {
        match self.hit(put_to) {
            Some(Fault::Fail) => Err(injected()),
            Some(Fault::Hang) => std::future::pending().await,
            other => Ok(other),
        }
    }
}

fn injected() -> object_store::Error {
    object_store::Error::Generic {
        store: "faulty",
        source: "injected failure".into(),
    }
}

#[derive(Debug)]
pub struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    pub faults: Arc<Faults>,
}

impl fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultyStore({})", self.inner)
    }
}

impl FaultyStore {
    pub fn new(inner: Arc<dyn ObjectStore>, every: u64, fault: Fault) -> Arc<FaultyStore> {
        Arc::new(FaultyStore {
            inner,
            faults: Arc::new(Faults {
                every,
                fault,
                requests: AtomicU64::new(0),
                injected: AtomicU64::new(0),
                enabled: AtomicBool::new(true),
                only_puts_to: std::sync::Mutex::new(None),
            }),
        })
    }

    pub fn injected(&self) -> u64 {
        self.faults.injected.load(Ordering::SeqCst)
    }

    /// From now on, only PUTs of objects whose path contains `part` get faults.
    pub fn only_paths(&self, part: &str) {
        *self.faults.only_puts_to.lock().unwrap() = Some(part.to_string());
    }

    pub fn set_enabled(&self, enabled: bool) {
        self.faults.enabled.store(enabled, Ordering::SeqCst);
    }
}

fn cut(payload: PutPayload) -> PutPayload {
    let bytes: Vec<u8> = payload.iter().flat_map(|b| b.iter().copied()).collect();
    let half = bytes.len() / 2;
    PutPayload::from(bytes[..half].to_vec())
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let payload = match self.faults.before_put(Some(location)).await? {
            Some(Fault::Truncate) => cut(payload),
            _ => payload,
        };
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.faults.before().await?;
        let upload = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(FaultyUpload {
            inner: upload,
            faults: Arc::clone(&self.faults),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let fault = self.faults.before().await?;
        let head = options.head;
        let result = self.inner.get_opts(location, options).await?;
        let len = result.range.end - result.range.start;
        if fault != Some(Fault::Truncate) || head || len < 2 {
            return Ok(result);
        }
        let (meta, range, attributes) = (
            result.meta.clone(),
            result.range.clone(),
            result.attributes.clone(),
        );
        let bytes = result.bytes().await?;
        let body = bytes.slice(..(len / 2) as usize);
        Ok(GetResult {
            payload: GetResultPayload::Stream(
                futures::stream::once(async move { Ok(body) }).boxed(),
            ),
            meta,
            range,
            attributes,
        })
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.faults.before().await?;
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        match self.faults.hit(None) {
            Some(Fault::Fail) => futures::stream::once(async { Err(injected()) }).boxed(),
            Some(Fault::Hang) => futures::stream::pending().boxed(),
            _ => self.inner.delete_stream(locations),
        }
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.faults.before().await?;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.faults.before().await?;
        self.inner.copy_opts(from, to, options).await
    }
}

#[derive(Debug)]
struct FaultyUpload {
    inner: Box<dyn MultipartUpload>,
    faults: Arc<Faults>,
}

#[async_trait]
impl MultipartUpload for FaultyUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        let fault = self.faults.hit(None);
        let data = match fault {
            Some(Fault::Truncate) => cut(data),
            _ => data,
        };
        let part = self.inner.put_part(data);
        match fault {
            Some(Fault::Fail) => Box::pin(async move {
                let _ = part.await;
                Err(injected())
            }),
            Some(Fault::Hang) => Box::pin(std::future::pending()),
            _ => part,
        }
    }

    async fn complete(&mut self) -> Result<PutResult> {
        self.faults.before().await?;
        self.inner.complete().await
    }

    async fn abort(&mut self) -> Result<()> {
        self.inner.abort().await
    }
}
