//! Local retention never deletes a segment the archive does not hold yet: an
//! archiver holds the log's retention, and lets segments go once archived.

use std::sync::Arc;
use std::time::Duration;

use walcodec::{Dialect, LogDir, WriterOptions};
use walcodec_archive::{Archive, Archiver, RetryPolicy};

use crate::support::faulty::{Fault, FaultyStore};
use crate::support::{self, fill, Rng};

async fn open_purging(dir: &std::path::Path, by_age: bool) -> LogDir {
    let mut builder = LogDir::builder();
    builder
        .dialect(Dialect::LevelDb)
        .max_segment_bytes(8 * 1024)
        .writer(WriterOptions::new().preallocate(0));
    if by_age {
        builder.retain_age(Duration::ZERO);
    } else {
        builder.retain_bytes(1);
    }
    builder.open(dir).await.unwrap()
}

/// The sealed segments on disk now.
fn on_disk(dir: &std::path::Path) -> Vec<u64> {
    let mut numbers: Vec<u64> = LogDir::list(dir)
        .unwrap()
        .segments
        .iter()
        .map(|s| s.number)
        .collect();
    numbers.pop();
    numbers
}

async fn held_until_archived(by_age: bool) {
    let store_dir = tempfile::tempdir().unwrap();
    let healthy = support::local_store(store_dir.path());
    // Every request fails: nothing can be archived.
    let failing = FaultyStore::new(Arc::clone(&healthy), 1, Fault::Fail);
    let dir = tempfile::tempdir().unwrap();
    let log = open_purging(dir.path(), by_age).await;
    let archiver = Arc::new(
        Archiver::new(failing.clone(), "held".into()).retry(
            RetryPolicy::new()
                .attempts(2)
                .backoff(Duration::from_millis(1), Duration::from_millis(1)),
        ),
    );
    archiver.hold(&log);
    let mut rng = Rng(1);
    fill(&log, &mut rng, 0, 60, 2000).await;
    // The archiver ran and failed: the store is down.
    assert!(archiver.run(&log).await.is_err());
    let rotations = log.end().segment - 1;
    assert!(rotations >= 5);
    assert_eq!(
        on_disk(dir.path()),
        (1..=rotations).collect::<Vec<_>>(),
        "nothing purged while unarchived"
    );
    log.enforce_retention().await.unwrap();
    assert_eq!(on_disk(dir.path()).len() as u64, rotations);

    // The store is back: once archived, retention lets them go.
    failing.set_enabled(false);
    let archived = archiver.archive_sealed(&log).await.unwrap();
    assert_eq!(archived.segment, rotations + 1);
    let purged = log.enforce_retention().await.unwrap();
    assert_eq!(purged, (1..=rotations).collect::<Vec<_>>());
    let archive = Archive::open(healthy, "held".into()).await.unwrap();
    let archived: Vec<u64> = archive.segments().iter().map(|s| s.number).collect();
    assert_eq!(archived, (1..=rotations).collect::<Vec<_>>());
    log.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retain_bytes_never_deletes_an_unarchived_segment() {
    held_until_archived(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retain_age_never_deletes_an_unarchived_segment() {
    held_until_archived(true).await;
}

/// Without a hold the same log purges as it rotates (what the tests above would
/// see if the hold did nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_archiver_retention_purges() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_purging(dir.path(), false).await;
    let mut rng = Rng(1);
    fill(&log, &mut rng, 0, 60, 2000).await;
    assert!(on_disk(dir.path()).len() <= 1);
    log.close().await.unwrap();
}

/// Segments go as the archiver archives them while it runs, and a store that
/// fails now and then never gets a segment deleted locally before it is
/// archived: every segment purged is in the manifest, with its bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purged_segments_are_always_archived_first() {
    let store_dir = tempfile::tempdir().unwrap();
    let healthy = support::local_store(store_dir.path());
    let flaky = FaultyStore::new(Arc::clone(&healthy), 3, Fault::Truncate);
    let dir = tempfile::tempdir().unwrap();
    let log = open_purging(dir.path(), false).await;
    let archiver = Arc::new(
        Archiver::new(flaky.clone(), "flaky".into()).retry(
            RetryPolicy::new()
                .attempts(u32::MAX)
                .backoff(Duration::from_millis(1), Duration::from_millis(5)),
        ),
    );
    archiver.hold(&log);
    let mut task = tokio::spawn({
        let (archiver, log) = (Arc::clone(&archiver), log.clone());
        async move { archiver.run(&log).await }
    });
    let mut rng = Rng(9);
    let mut written = Vec::new();
    let first = log.start().segment;
    for round in 0..10 {
        written.extend(fill(&log, &mut rng, round * 10, 10, 2000).await);
        // Segments `first..first_kept` were purged: each must be below the
        // archive's end. (That end is `LogPosition::START` until the archiver's
        // first manifest, which a loaded machine can reach this after.)
        let first_kept = log.start().segment;
        let archived = *archiver.archived_end().borrow();
        assert!(
            first_kept == first || first_kept <= archived.segment,
            "segments {first}..{first_kept} purged, the archive's end is {archived}"
        );
    }
    log.rotate().await.unwrap();
    crate::archiving::archived_to(&archiver, &mut task, log.end()).await;
    task.abort();
    assert!(flaky.injected() > 0);
    // Retention lets archived segments go. While the archiver keeps up, the
    // rotations above purged them as it went; if it fell behind (a loaded
    // machine), this pass does.
    log.enforce_retention().await.unwrap();
    assert!(
        log.start().segment > first,
        "retention purged archived segments"
    );
    // Every record acknowledged is in the archive: none was purged unarchived.
    let copy = tempfile::tempdir().unwrap();
    walcodec_archive::restore(healthy, "flaky".into(), copy.path(), None)
        .await
        .unwrap();
    let restored = support::read_all(copy.path()).await;
    assert_eq!(restored, written);
    log.close().await.unwrap();
}
