//! A store that fails every Nth request, hangs, or moves truncated bodies: the
//! archiver retries, records only what reached the store whole, and restores and
//! reads come back right.

use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use walcodec::{Dialect, LogPosition};
use walcodec_archive::{restore_with, Archive, Archiver, RestoreOptions, RetryPolicy};

use crate::archiving::check_archive;
use crate::support::faulty::{Fault, FaultyStore};
use crate::support::{
    self, archived_records, assert_same_records, fill, open_log, read_all, Rng, S3Server,
};

fn patient() -> RetryPolicy {
    RetryPolicy::new()
        .attempts(u32::MAX)
        .timeout(Duration::from_millis(300))
        .backoff(Duration::from_millis(1), Duration::from_millis(10))
}

async fn through_faults(
    healthy: Arc<dyn ObjectStore>,
    every: u64,
    fault: Fault,
    part_bytes: usize,
) {
    let faulty = FaultyStore::new(Arc::clone(&healthy), every, fault);
    let store: Arc<dyn ObjectStore> = faulty.clone();
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path(), Dialect::LevelDb, 64 * 1024).await;
    let mut rng = Rng(every * 31 + fault as u64);
    let written = fill(&log, &mut rng, 0, 60, 20_000).await;
    log.rotate().await.unwrap();
    // Parts of 16 KiB on local files: segments go up in several parts, each a
    // request that may fail.
    let archiver = Archiver::new(Arc::clone(&store), "f".into())
        .parts(part_bytes, 2)
        .retry(patient());
    let end = archiver.archive_sealed(&log).await.unwrap();
    assert_eq!(end, log.end());
    log.close().await.unwrap();
    assert!(faulty.injected() > 0, "faults were injected");
    // What the manifest lists is exactly what the log holds, byte for byte.
    check_archive(&healthy, "f", dir.path(), end.segment).await;

    // Reading back through the same faults.
    let copy = tempfile::tempdir().unwrap();
    let restored = restore_with(
        Arc::clone(&store),
        "f".into(),
        copy.path(),
        RestoreOptions::new().retry(patient()),
    )
    .await
    .unwrap();
    assert_eq!(restored.records, written.len() as u64);
    assert_eq!(read_all(copy.path()).await.len(), written.len());
    let archive = Archive::open_with(Arc::clone(&store), "f".into(), patient())
        .await
        .unwrap();
    assert!(archive.verify().await.unwrap().problems.is_empty());
    let records = archived_records(&archive.clone().read_bytes(10_000), LogPosition::START).await;
    assert_same_records(&records, &written);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_request_in_three_fails_against_s3() {
    let server = S3Server::start().await;
    through_faults(server.store(), 3, Fault::Fail, 5 << 20).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_request_in_five_hangs_until_its_timeout() {
    let store_dir = tempfile::tempdir().unwrap();
    through_faults(
        support::local_store(store_dir.path()),
        5,
        Fault::Hang,
        16 * 1024,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_body_in_four_is_truncated_against_s3() {
    let server = S3Server::start().await;
    through_faults(server.store(), 4, Fault::Truncate, 5 << 20).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_body_in_four_is_truncated_against_local_files() {
    let store_dir = tempfile::tempdir().unwrap();
    through_faults(
        support::local_store(store_dir.path()),
        4,
        Fault::Truncate,
        16 * 1024,
    )
    .await;
}

/// When the retries run out, nothing is recorded as archived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_stays_down_archives_nothing() {
    let store_dir = tempfile::tempdir().unwrap();
    let healthy = support::local_store(store_dir.path());
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path(), Dialect::LevelDb, 16 * 1024).await;
    let mut rng = Rng(2);
    fill(&log, &mut rng, 0, 20, 3000).await;
    log.rotate().await.unwrap();
    // The first segments are archived; then every body loses half its bytes.
    Archiver::new(Arc::clone(&healthy), "down".into())
        .archive_sealed(&log)
        .await
        .unwrap();
    let archived = Archive::open(Arc::clone(&healthy), "down".into())
        .await
        .unwrap()
        .segments()
        .len();
    fill(&log, &mut rng, 20, 20, 3000).await;
    log.rotate().await.unwrap();
    let truncating = FaultyStore::new(Arc::clone(&healthy), 1, Fault::Truncate);
    let archiver = Archiver::new(truncating, "down".into()).retry(
        RetryPolicy::new()
            .attempts(3)
            .backoff(Duration::from_millis(1), Duration::from_millis(1)),
    );
    let failed = archiver.archive_sealed(&log).await;
    assert!(failed.is_err(), "{failed:?}");
    let after = Archive::open(Arc::clone(&healthy), "down".into())
        .await
        .unwrap();
    assert_eq!(
        after.segments().len(),
        archived,
        "nothing recorded as archived"
    );
    log.close().await.unwrap();
}
