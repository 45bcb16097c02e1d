//! The archiver ships each sealed segment once, in order, byte for byte, and lists
//! it in the manifest; against an S3 server on 127.0.0.1 and local files.

use std::sync::Arc;
use std::time::Duration;

use object_store::{ObjectStore, ObjectStoreExt};
use walcodec::{Dialect, LogDir, LogPosition};
use walcodec_archive::{restore, Archive, Archiver};

use crate::support::{self, fill, open_log, segment_files, Rng, S3Server};

/// Waits (on the watch, no deadline) until the archive reaches `position`;
/// fails if the archiver's `task` stops first.
pub async fn archived_to(
    archiver: &Archiver,
    task: &mut tokio::task::JoinHandle<Result<(), walcodec_archive::ArchiveError>>,
    position: LogPosition,
) {
    let mut end = archiver.archived_end();
    tokio::select! {
        reached = end.wait_for(|end| *end >= position) => { reached.unwrap(); }
        stopped = task => panic!("the archiver stopped: {stopped:?}"),
    }
}

/// Checks that the archive at `prefix` lists exactly the segments `log_dir`
/// held before `upto`, each once, in order, with their exact bytes.
pub async fn check_archive(
    store: &Arc<dyn ObjectStore>,
    prefix: &str,
    log_dir: &std::path::Path,
    upto: u64,
) {
    let archive = Archive::open(Arc::clone(store), prefix.into())
        .await
        .unwrap();
    let numbers: Vec<u64> = archive.segments().iter().map(|s| s.number).collect();
    let files = segment_files(log_dir);
    let expected: Vec<u64> = files
        .iter()
        .map(|(n, _)| *n)
        .filter(|&n| n < upto)
        .collect();
    assert_eq!(
        numbers, expected,
        "the manifest lists each sealed segment once, in order"
    );
    for entry in archive.segments() {
        let object = format!("{prefix}/segments/{:06}.log", entry.number);
        let bytes = store
            .get(&object.as_str().into())
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let local = &files.iter().find(|(n, _)| *n == entry.number).unwrap().1;
        assert_eq!(
            &bytes[..],
            &local[..],
            "segment {} archived byte for byte",
            entry.number
        );
        assert_eq!(entry.size, local.len() as u64);
        assert_eq!(entry.crc32c, crc32c::crc32c(local));
    }
}

async fn archives_while_appending(
    store: Arc<dyn ObjectStore>,
    dialect: Dialect,
    part_bytes: usize,
) {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path(), dialect, 64 * 1024).await;
    let archiver =
        Arc::new(Archiver::new(Arc::clone(&store), "logs/a".into()).parts(part_bytes, 2));
    archiver.hold(&log);
    let mut task = tokio::spawn({
        let (archiver, log) = (Arc::clone(&archiver), log.clone());
        async move { archiver.run(&log).await }
    });
    let mut rng = Rng(7);
    // Records up to 40 KiB: many span blocks, some segments hold one record.
    fill(&log, &mut rng, 0, 120, 40_000).await;
    log.rotate().await.unwrap();
    let end = log.end();
    archived_to(&archiver, &mut task, end).await;
    assert!(!task.is_finished());
    task.abort();
    log.close().await.unwrap();
    check_archive(&store, "logs/a", dir.path(), end.segment).await;
    let archive = Archive::open(Arc::clone(&store), "logs/a".into())
        .await
        .unwrap();
    assert_eq!(archive.manifest().dialect(), dialect);
    assert_eq!(archive.manifest().start, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archives_each_sealed_segment_once_to_s3() {
    let server = S3Server::start().await;
    // S3 wants parts of 5 MiB but for the last: these segments go up whole.
    archives_while_appending(server.store(), Dialect::LevelDb, 5 << 20).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archives_each_sealed_segment_once_to_local_files_in_every_dialect() {
    for dialect in support::DIALECTS {
        let store_dir = tempfile::tempdir().unwrap();
        // Parts of 16 KiB: most segments go up in several.
        archives_while_appending(support::local_store(store_dir.path()), dialect, 16 * 1024).await;
    }
}

/// Segments larger than a part go up as multipart uploads (S3 wants parts of 5 MiB
/// but for the last).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_segments_go_up_in_parts_to_s3() {
    let server = S3Server::start().await;
    let store = server.store();
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path(), Dialect::LevelDb, 12 << 20).await;
    let archiver = Archiver::new(Arc::clone(&store), "big".into()).parts(5 << 20, 2);
    let mut rng = Rng(3);
    fill(&log, &mut rng, 0, 14, 1 << 20).await;
    log.rotate().await.unwrap();
    let end = archiver.archive_sealed(&log).await.unwrap();
    assert_eq!(end, log.end());
    log.close().await.unwrap();
    check_archive(&store, "big", dir.path(), end.segment).await;
    let archive = Archive::open(Arc::clone(&store), "big".into())
        .await
        .unwrap();
    assert!(archive.segments().iter().any(|s| s.size > 5 << 20));
}

/// A restarted archiver goes on from the manifest: nothing is uploaded twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_archiver_goes_on_where_the_manifest_ends() {
    let store_dir = tempfile::tempdir().unwrap();
    let store = support::local_store(store_dir.path());
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path(), Dialect::RocksDb, 16 * 1024).await;
    let mut rng = Rng(11);
    fill(&log, &mut rng, 0, 40, 3000).await;
    let first = Archiver::new(Arc::clone(&store), "p".into());
    let archived = first.archive_sealed(&log).await.unwrap();
    let before = Archive::open(Arc::clone(&store), "p".into()).await.unwrap();
    fill(&log, &mut rng, 40, 40, 3000).await;
    log.rotate().await.unwrap();
    let second = Archiver::new(Arc::clone(&store), "p".into());
    assert_eq!(*second.archived_end().borrow(), LogPosition::START);
    let end = second.archive_sealed(&log).await.unwrap();
    assert!(end > archived);
    let after = Archive::open(Arc::clone(&store), "p".into()).await.unwrap();
    // The entries the first archiver wrote are still there, untouched.
    assert_eq!(
        &after.segments()[..before.segments().len()],
        before.segments()
    );
    log.close().await.unwrap();
    check_archive(&store, "p", dir.path(), end.segment).await;
}

/// With `active_every`, the active segment's durable prefix is archived too: a
/// restore then holds every record acknowledged before the last upload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_active_prefix_is_uploaded_on_an_interval() {
    let server = S3Server::start().await;
    let store = server.store();
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path(), Dialect::Pebble, 32 * 1024).await;
    let archiver = Arc::new(
        Archiver::new(Arc::clone(&store), "live".into()).active_every(Duration::from_millis(20)),
    );
    archiver.hold(&log);
    let mut task = tokio::spawn({
        let (archiver, log) = (Arc::clone(&archiver), log.clone());
        async move { archiver.run(&log).await }
    });
    let mut rng = Rng(5);
    let written = fill(&log, &mut rng, 0, 50, 2000).await;
    let end = log.end();
    assert!(end.offset > 0, "the last records are in the active segment");
    archived_to(&archiver, &mut task, end).await;
    assert_eq!(*archiver.archived_end().borrow(), end);
    task.abort();
    log.close().await.unwrap();
    let copy = tempfile::tempdir().unwrap();
    let restored = restore(Arc::clone(&store), "live".into(), copy.path(), None)
        .await
        .unwrap();
    assert_eq!(restored.end, end);
    support::assert_same_records(&support::read_all(copy.path()).await, &written);
    // The restored directory opens as a log and goes on.
    let reopened = LogDir::builder()
        .dialect(Dialect::Pebble)
        .open(copy.path())
        .await
        .unwrap();
    assert_eq!(reopened.end(), end);
    reopened.append(b"more").await.unwrap();
    reopened.close().await.unwrap();
}

/// An archive of another dialect's log under the same prefix is refused.
#[tokio::test]
async fn another_logs_archive_is_refused() {
    let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let a = tempfile::tempdir().unwrap();
    let log = open_log(a.path(), Dialect::Pebble, 8192).await;
    log.append(b"x").await.unwrap();
    log.rotate().await.unwrap();
    Archiver::new(Arc::clone(&store), "shared".into())
        .archive_sealed(&log)
        .await
        .unwrap();
    log.close().await.unwrap();
    let b = tempfile::tempdir().unwrap();
    let other = open_log(b.path(), Dialect::LevelDb, 8192).await;
    let refused = Archiver::new(Arc::clone(&store), "shared".into())
        .archive_sealed(&other)
        .await;
    assert!(
        matches!(
            refused,
            Err(walcodec_archive::ArchiveError::Manifest { .. })
        ),
        "{refused:?}"
    );
    other.close().await.unwrap();
}
