//! `push` of a log directory no writer has open: its last segment is complete
//! and archived too, as the active prefix, so a restore has every record; a log
//! opened again appends to that segment, and a later push archives it again,
//! longer, then sealed, never losing the records appended after the first push.

use std::sync::Arc;

use object_store::ObjectStore;
use walcodec::{Dialect, LogPosition};
use walcodec_archive::{restore, ArchiveError, Archiver, RetryPolicy};

use crate::support::faulty::{Fault, FaultyStore};
use crate::support::{self, fill, open_log, read_all, segment_files, Rng, S3Server, DIALECTS};

/// Restores `prefix` into a new directory: its records and segment files.
async fn restored(
    store: &Arc<dyn ObjectStore>,
    prefix: &str,
) -> (Vec<(Vec<u8>, LogPosition)>, Vec<(u64, Vec<u8>)>) {
    let target = tempfile::tempdir().unwrap();
    restore(Arc::clone(store), prefix.into(), target.path(), None)
        .await
        .unwrap();
    (read_all(target.path()).await, segment_files(target.path()))
}

async fn push_closed_then_reopened(store: Arc<dyn ObjectStore>, dialect: Dialect) {
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("closed-{dialect:?}");
    let mut rng = Rng(41);
    let log = open_log(dir.path(), dialect, 16 * 1024).await;
    let mut written = fill(&log, &mut rng, 0, 40, 2000).await;
    log.close().await.unwrap();
    let archiver = Archiver::new(Arc::clone(&store), prefix.as_str().into());

    let pushed = archiver.push_dir(dir.path()).await.unwrap();
    assert_eq!(pushed.archived_end, written.last().unwrap().1);
    let (records, files) = restored(&store, &prefix).await;
    assert_eq!(
        records, written,
        "every record of the closed log, its last segment's too"
    );
    assert_eq!(files, segment_files(dir.path()), "byte for byte");

    // Opened again: appends go on in the last segment, then past it.
    let log = open_log(dir.path(), dialect, 16 * 1024).await;
    written.extend(fill(&log, &mut rng, 40, 3, 500).await);
    log.close().await.unwrap();
    archiver.push_dir(dir.path()).await.unwrap();
    let (records, files) = restored(&store, &prefix).await;
    assert_eq!(
        records, written,
        "the records appended to the last segment since"
    );
    assert_eq!(files, segment_files(dir.path()));

    let log = open_log(dir.path(), dialect, 16 * 1024).await;
    written.extend(fill(&log, &mut rng, 43, 30, 2000).await);
    log.close().await.unwrap();
    archiver.push_dir(dir.path()).await.unwrap();
    let (records, files) = restored(&store, &prefix).await;
    assert_eq!(records, written, "the segment it sealed and those after it");
    assert_eq!(files, segment_files(dir.path()));
    // Nothing new: nothing uploaded.
    let again = archiver.push_dir(dir.path()).await.unwrap();
    assert_eq!((again.segments, again.bytes), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_logs_last_segment_is_archived_and_follows_its_growth_local() {
    let store_dir = tempfile::tempdir().unwrap();
    for dialect in DIALECTS {
        push_closed_then_reopened(support::local_store(store_dir.path()), dialect).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_logs_last_segment_is_archived_and_follows_its_growth_s3() {
    let server = S3Server::start().await;
    push_closed_then_reopened(server.store(), Dialect::Pebble).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_logs_last_segment_is_not_pushed() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = tempfile::tempdir().unwrap();
    let store = support::local_store(store_dir.path());
    let log = open_log(dir.path(), Dialect::LevelDb, 16 * 1024).await;
    let written = fill(&log, &mut Rng(5), 0, 40, 2000).await;
    let active = log.end().segment;
    assert!(active > 1);
    let pushed = Archiver::new(Arc::clone(&store), "open".into())
        .push_dir(dir.path())
        .await
        .unwrap();
    assert_eq!(pushed.archived_end, LogPosition::new(active, 0));
    let (records, _) = restored(&store, "open").await;
    let sealed: Vec<_> = written
        .into_iter()
        .filter(|(_, end)| end.segment < active)
        .collect();
    assert_eq!(records, sealed);
    log.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_writers_torn_last_segment_is_refused_after_the_sealed_ones() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = tempfile::tempdir().unwrap();
    let store = support::local_store(store_dir.path());
    let log = open_log(dir.path(), Dialect::LevelDb, 16 * 1024).await;
    fill(&log, &mut Rng(6), 0, 40, 2000).await;
    let end = log.close().await.unwrap();
    // A record cut short, as a writer killed mid-write leaves it.
    let last = dir.path().join(format!("{:06}.log", end.segment));
    let mut bytes = std::fs::read(&last).unwrap();
    bytes.extend_from_slice(&[1, 2, 3, 4, 200, 0, 1]);
    std::fs::write(&last, bytes).unwrap();
    let archiver = Archiver::new(Arc::clone(&store), "torn".into());
    match archiver.push_dir(dir.path()).await {
        Err(ArchiveError::BadSegment { segment, .. }) => assert_eq!(segment, end.segment),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        *archiver.archived_end().borrow(),
        LogPosition::new(end.segment, 0)
    );
}

/// An active prefix listed stays readable when a longer one is uploaded but the
/// manifest naming it is never written (a crash, an outage between the two).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listed_active_prefix_survives_a_failed_replacement() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = tempfile::tempdir().unwrap();
    let store = support::local_store(store_dir.path());
    let mut rng = Rng(8);
    let log = open_log(dir.path(), Dialect::RocksDb, 64 * 1024).await;
    let first = fill(&log, &mut rng, 0, 10, 2000).await;
    log.close().await.unwrap();
    Archiver::new(Arc::clone(&store), "prefix".into())
        .push_dir(dir.path())
        .await
        .unwrap();

    let log = open_log(dir.path(), Dialect::RocksDb, 64 * 1024).await;
    fill(&log, &mut rng, 10, 10, 2000).await;
    log.close().await.unwrap();
    // Every manifest write fails: the longer prefix is uploaded, never listed.
    let faulty = FaultyStore::new(Arc::clone(&store), 1, Fault::Fail);
    faulty.only_paths("manifest.json");
    let failed = Archiver::new(faulty.clone(), "prefix".into())
        .retry(RetryPolicy::new().attempts(1))
        .push_dir(dir.path())
        .await;
    assert!(failed.is_err(), "{failed:?}");
    assert!(faulty.injected() > 0);

    let (records, _) = restored(&store, "prefix").await;
    assert_eq!(records, first, "the prefix listed, whole");
}
