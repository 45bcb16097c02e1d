//! What the archive tests share: an S3 server in this process on 127.0.0.1
//! (s3s-fs over a temporary directory, object_store's S3 client talking to it),
//! a store that fails on purpose, and logs to archive.

pub mod faulty;
pub mod gated;

use std::path::Path;
use std::sync::Arc;

use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::ObjectStore;
use walcodec::{Dialect, LogDir, LogPosition, WriterOptions};

/// An S3 server on 127.0.0.1 serving the bucket `archive` from a temporary
/// directory, until dropped.
pub struct S3Server {
    pub endpoint: String,
    _root: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
}

pub const BUCKET: &str = "archive";
pub const ACCESS_KEY: &str = "walcodec-test";
pub const SECRET_KEY: &str = "walcodec-test-secret";

impl S3Server {
    pub async fn start() -> S3Server {
        use hyper_util::rt::{TokioExecutor, TokioIo};
        use hyper_util::server::conn::auto::Builder as ConnBuilder;
        use s3s::auth::SimpleAuth;
        use s3s::service::S3ServiceBuilder;

        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join(BUCKET)).unwrap();
        let fs = s3s_fs::FileSystem::new(root.path()).unwrap();
        let mut builder = S3ServiceBuilder::new(fs);
        builder.set_auth(SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
        let service = builder.build();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let http = ConnBuilder::new(TokioExecutor::new());
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                let conn = http.serve_connection(TokioIo::new(socket), service.clone());
                let conn = conn.into_owned();
                tokio::spawn(async move {
                    let _ = conn.await;
                });
            }
        });
        S3Server {
            endpoint,
            _root: root,
            task,
        }
    }

    /// object_store's S3 client for the server's bucket.
    pub fn store(&self) -> Arc<dyn ObjectStore> {
        Arc::new(
            AmazonS3Builder::new()
                .with_endpoint(&self.endpoint)
                .with_allow_http(true)
                .with_bucket_name(BUCKET)
                .with_region("us-east-1")
                .with_access_key_id(ACCESS_KEY)
                .with_secret_access_key(SECRET_KEY)
                .with_virtual_hosted_style_request(false)
                .build()
                .unwrap(),
        )
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A store of files under `dir`.
pub fn local_store(dir: &Path) -> Arc<dyn ObjectStore> {
    Arc::new(LocalFileSystem::new_with_prefix(dir).unwrap())
}

/// A small deterministic generator (xorshift).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Record `i`: its number, then bytes derived from it, `len` long in all.
pub fn record(i: u64, len: usize) -> Vec<u8> {
    let mut data = format!("record {i} ").into_bytes();
    let len = len.max(data.len());
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while data.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data.push(x as u8);
    }
    data.truncate(len);
    data
}

/// Opens a log in `dir` of `dialect` with segments of `segment_bytes`.
pub async fn open_log(dir: &Path, dialect: Dialect, segment_bytes: u64) -> LogDir {
    LogDir::builder()
        .dialect(dialect)
        .max_segment_bytes(segment_bytes)
        .writer(WriterOptions::new().preallocate(0))
        .open(dir)
        .await
        .unwrap()
}

/// Appends `count` records of sizes up to `max_len` (some spanning blocks),
/// returning each record with the end position its append returned.
pub async fn fill(
    log: &LogDir,
    rng: &mut Rng,
    first: u64,
    count: u64,
    max_len: u64,
) -> Vec<(Vec<u8>, LogPosition)> {
    let mut written = Vec::new();
    for i in first..first + count {
        let len = 1 + rng.below(max_len) as usize;
        let data = record(i, len);
        let end = log.append(&data).await.unwrap();
        written.push((data, end));
    }
    written
}

/// The bytes of every segment file of `dir`, by number.
pub fn segment_files(dir: &Path) -> Vec<(u64, Vec<u8>)> {
    let listed = LogDir::list(dir).unwrap();
    listed
        .segments
        .iter()
        .map(|s| (s.number, std::fs::read(&s.path).unwrap()))
        .collect()
}

/// Every record of the log directory at `dir`, read by a fresh `DirReader`.
pub async fn read_all(dir: &Path) -> Vec<(Vec<u8>, LogPosition)> {
    let mut reader = walcodec::DirReader::open(dir, LogPosition::START)
        .await
        .unwrap();
    let mut records = Vec::new();
    while let Some(record) = reader.next_record().await {
        let record = record.unwrap();
        records.push((record.data.to_vec(), record.end));
    }
    records
}

/// Every record of `archive` after `from`, with its end, as [`read_all`] gives them.
pub async fn archived_records(
    archive: &walcodec_archive::Archive,
    from: LogPosition,
) -> Vec<(Vec<u8>, LogPosition)> {
    use futures::TryStreamExt;
    let records: Vec<_> = archive.records(from).try_collect().await.unwrap();
    records
        .into_iter()
        .map(|record| (record.data.to_vec(), record.end))
        .collect()
}

/// Asserts that `got` holds the records `written`, in order, with their ends:
/// record by record, so that a failure names one record, not two whole logs.
pub fn assert_same_records(got: &[(Vec<u8>, LogPosition)], written: &[(Vec<u8>, LogPosition)]) {
    assert_eq!(got.len(), written.len());
    for ((data, end), (got, got_end)) in written.iter().zip(got) {
        assert_eq!(got, data);
        assert_eq!(got_end, end);
    }
}

/// The three dialects a LogDir writes.
pub const DIALECTS: [Dialect; 3] = [Dialect::LevelDb, Dialect::RocksDb, Dialect::Pebble];
