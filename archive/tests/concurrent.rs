//! Two writers of one archive's manifest never overwrite each other's: a second
//! archiver of the prefix stops with `ArchiveError::Conflict`; bucket retention
//! racing an archiver either fails with it (and deletes nothing) or is taken in
//! by the archiver, never resurrecting segments it deleted.

use std::sync::Arc;

use object_store::ObjectStore;
use walcodec::{Dialect, LogDir, LogPosition};
use walcodec_archive::{restore, Archive, ArchiveError, Archiver, BucketRetention};

use crate::archiving::archived_to;
use crate::support::{self, fill, open_log, read_all, Rng, S3Server};

const SEGMENT: u64 = 16 * 1024;

fn spawn_run(
    archiver: &Arc<Archiver>,
    log: &LogDir,
) -> tokio::task::JoinHandle<Result<(), ArchiveError>> {
    archiver.hold(log);
    let (archiver, log) = (Arc::clone(archiver), log.clone());
    tokio::spawn(async move { archiver.run(&log).await })
}

async fn two_archivers_race(store: Arc<dyn ObjectStore>) {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log_a = open_log(dir_a.path(), Dialect::LevelDb, SEGMENT).await;
    let log_b = open_log(dir_b.path(), Dialect::LevelDb, SEGMENT).await;
    let a = Arc::new(Archiver::new(Arc::clone(&store), "race".into()));
    let b = Arc::new(Archiver::new(Arc::clone(&store), "race".into()));
    let mut task_a = spawn_run(&a, &log_a);
    let mut task_b = spawn_run(&b, &log_b);
    let (mut rng_a, mut rng_b) = (Rng(1), Rng(2));
    let mut i = 0;
    let stopped = loop {
        i += 1;
        assert!(i < 500, "two archivers of one prefix went on side by side");
        fill(&log_a, &mut rng_a, i * 10, 10, 3000).await;
        fill(&log_b, &mut rng_b, i * 10, 10, 3000).await;
        if task_a.is_finished() {
            break (&mut task_a).await.unwrap();
        }
        if task_b.is_finished() {
            break (&mut task_b).await.unwrap();
        }
        tokio::task::yield_now().await;
    };
    match stopped {
        Err(ArchiveError::Conflict { object, .. }) => {
            assert!(object.ends_with("race/manifest.json"), "{object}")
        }
        other => panic!("the second archiver: {other:?}"),
    }
    task_a.abort();
    task_b.abort();
    log_a.close().await.unwrap();
    log_b.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_archiver_of_a_prefix_stops_with_a_conflict_s3() {
    let server = S3Server::start().await;
    two_archivers_race(server.store()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_archiver_of_a_prefix_stops_with_a_conflict_local() {
    let store_dir = tempfile::tempdir().unwrap();
    two_archivers_race(support::local_store(store_dir.path())).await;
}

/// Retention run while an archiver runs: the archiver goes on from the trimmed
/// manifest (the deleted segments stay deleted); a retention from a manifest read
/// before the archiver's last write fails and deletes nothing.
async fn retention_beside_an_archiver(store: Arc<dyn ObjectStore>) {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path(), Dialect::RocksDb, SEGMENT).await;
    let archiver = Arc::new(Archiver::new(Arc::clone(&store), "beside".into()));
    let mut task = spawn_run(&archiver, &log);
    let mut rng = Rng(3);
    let mut written = fill(&log, &mut rng, 0, 40, 3000).await;
    let sealed = LogPosition::new(log.end().segment, 0);
    archived_to(&archiver, &mut task, sealed).await;

    // Read now, applied after the archiver wrote again: refused.
    let mut stale = Archive::open(Arc::clone(&store), "beside".into())
        .await
        .unwrap();
    written.extend(fill(&log, &mut rng, 40, 20, 3000).await);
    let sealed = LogPosition::new(log.end().segment, 0);
    archived_to(&archiver, &mut task, sealed).await;
    match stale
        .apply_retention(BucketRetention::new().keep_segments(2))
        .await
    {
        Err(ArchiveError::Conflict { .. }) => {}
        other => panic!("{other:?}"),
    }
    // Read again: applied; the archiver, which read the manifest before, goes on
    // from the trimmed one.
    let mut fresh = Archive::open(Arc::clone(&store), "beside".into())
        .await
        .unwrap();
    let deleted = fresh
        .apply_retention(BucketRetention::new().keep_segments(2))
        .await
        .unwrap();
    assert!(!deleted.is_empty());
    let first_kept = deleted.last().unwrap() + 1;
    written.extend(fill(&log, &mut rng, 60, 20, 3000).await);
    log.rotate().await.unwrap();
    let sealed = LogPosition::new(log.end().segment, 0);
    archived_to(&archiver, &mut task, sealed).await;
    task.abort();
    log.close().await.unwrap();

    let archive = Archive::open(Arc::clone(&store), "beside".into())
        .await
        .unwrap();
    assert_eq!(archive.manifest().deleted_before, first_kept);
    assert_eq!(archive.segments()[0].number, first_kept);
    let report = archive.verify().await.unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let target = tempfile::tempdir().unwrap();
    restore(Arc::clone(&store), "beside".into(), target.path(), None)
        .await
        .unwrap();
    let kept: Vec<_> = written
        .into_iter()
        .filter(|(_, end)| end.segment >= first_kept)
        .collect();
    assert_eq!(read_all(target.path()).await, kept);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_beside_a_running_archiver_s3() {
    let server = S3Server::start().await;
    retention_beside_an_archiver(server.store()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_beside_a_running_archiver_local() {
    let store_dir = tempfile::tempdir().unwrap();
    retention_beside_an_archiver(support::local_store(store_dir.path())).await;
}
