//! Retention in the bucket: the oldest segments go by count, bytes or age, never
//! those holding records still wanted, and the manifest first.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use object_store::ObjectStoreExt;
use walcodec::{Dialect, LogDir, LogPosition};
use walcodec_archive::{restore, Archive, Archiver, BucketRetention};

use crate::support::{self, fill, open_log, read_all, Rng};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_deletes_the_oldest_but_never_what_is_still_wanted() {
    let store_dir = tempfile::tempdir().unwrap();
    let store = support::local_store(store_dir.path());
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path(), Dialect::LevelDb, 16 * 1024).await;
    let mut rng = Rng(4);
    let written = fill(&log, &mut rng, 0, 80, 4000).await;
    log.rotate().await.unwrap();
    Archiver::new(Arc::clone(&store), "r".into())
        .archive_sealed(&log)
        .await
        .unwrap();
    log.close().await.unwrap();
    let mut archive = Archive::open(Arc::clone(&store), "r".into()).await.unwrap();
    let count = archive.segments().len() as u64;
    assert!(count > 8);

    // Nothing asked: nothing deleted.
    assert!(archive
        .apply_retention(BucketRetention::new())
        .await
        .unwrap()
        .is_empty());
    // Keep 6 segments, but records from the end of segment 2 on are still wanted.
    let wanted = archive.segments()[1].end();
    let deleted = archive
        .apply_retention(BucketRetention::new().keep_segments(6).keep_from(wanted))
        .await
        .unwrap();
    assert_eq!(deleted, vec![1, 2]);
    // Then by count alone.
    let deleted = archive
        .apply_retention(BucketRetention::new().keep_segments(6))
        .await
        .unwrap();
    assert_eq!(deleted, (3..=count - 6).collect::<Vec<_>>());
    // By bytes: never the newest segment.
    let deleted = archive
        .apply_retention(BucketRetention::new().keep_bytes(0))
        .await
        .unwrap();
    assert_eq!(deleted, (count - 5..count).collect::<Vec<_>>());
    assert_eq!(archive.segments().len(), 1);
    for number in 1..count {
        let object = format!("r/segments/{number:06}.log");
        assert!(
            store.head(&object.as_str().into()).await.is_err(),
            "{object} deleted"
        );
    }
    // The manifest says so, and a restore gives the records kept.
    let reopened = Archive::open(Arc::clone(&store), "r".into()).await.unwrap();
    assert_eq!(reopened.manifest().deleted_before, count);
    let copy = tempfile::tempdir().unwrap();
    restore(Arc::clone(&store), "r".into(), copy.path(), None)
        .await
        .unwrap();
    let kept: Vec<_> = written
        .iter()
        .filter(|(_, end)| end.segment == count)
        .collect();
    assert_eq!(read_all(copy.path()).await.len(), kept.len());
    let log = LogDir::open(copy.path()).await.unwrap();
    assert_eq!(log.start(), LogPosition::new(count, 0));
    log.close().await.unwrap();
    // A restore to a point the bucket no longer holds is refused.
    let copy = tempfile::tempdir().unwrap();
    assert!(restore(
        Arc::clone(&store),
        "r".into(),
        copy.path(),
        Some(LogPosition::new(2, 0))
    )
    .await
    .is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_by_age_keeps_recent_segments() {
    let store: Arc<dyn object_store::ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path(), Dialect::Pebble, 16 * 1024).await;
    let mut rng = Rng(8);
    fill(&log, &mut rng, 0, 40, 4000).await;
    log.rotate().await.unwrap();
    Archiver::new(Arc::clone(&store), "age".into())
        .archive_sealed(&log)
        .await
        .unwrap();
    log.close().await.unwrap();
    let mut archive = Archive::open(Arc::clone(&store), "age".into())
        .await
        .unwrap();
    let count = archive.segments().len() as u64;
    // Archived a moment ago: an hour's retention keeps them all.
    assert!(archive
        .apply_retention(BucketRetention::new().keep_age(Duration::from_secs(3600)))
        .await
        .unwrap()
        .is_empty());
    // Ages as of explicit moments, from the times the manifest recorded: a
    // segment goes once it was archived strictly longer than the age before.
    let hour = Duration::from_secs(3600);
    let archived: Vec<u64> = archive
        .segments()
        .iter()
        .map(|s| s.archived_at_ms)
        .collect();
    let at = |ms: u64| UNIX_EPOCH + Duration::from_millis(ms);
    let newest_of_the_old = *archived[..archived.len() - 1].iter().max().unwrap();
    // Exactly an hour after the oldest was archived: it is not older yet, and
    // retention goes oldest first.
    assert!(archive
        .apply_retention(
            BucketRetention::new()
                .keep_age(hour)
                .as_of(at(archived[0] + 3_600_000))
        )
        .await
        .unwrap()
        .is_empty());
    // A millisecond past an hour after the last of them: they all are (but the
    // newest is kept).
    let deleted = archive
        .apply_retention(
            BucketRetention::new()
                .keep_age(hour)
                .as_of(at(newest_of_the_old + 3_600_001)),
        )
        .await
        .unwrap();
    assert_eq!(deleted, (1..count).collect::<Vec<_>>());
}
