//! The archiver uploads each segment while it lists the one before in the
//! manifest, and reads it while the one before finishes its upload (its last
//! part, completion and check), yet lists them in order, each only once its
//! object is checked.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use object_store::memory::InMemory;
use object_store::{ObjectStore, ObjectStoreExt};
use walcodec::{Dialect, LogPosition};
use walcodec_archive::{Archiver, RetryPolicy};

use crate::archiving::check_archive;
use crate::support::faulty::{Fault, FaultyStore};
use crate::support::gated::GatedStore;
use crate::support::{fill, open_log, Rng};

/// Archives at least four sealed segments through the store `gate` builds (on an
/// in-memory store, given the number of sealed segments), in whole and in small
/// parts, and checks that every gated step but the last met the next segment's
/// upload begun, and that the archive is whole.
async fn archive_overlapping(
    seed: u64,
    gate: impl Fn(Arc<dyn ObjectStore>, u64) -> Arc<GatedStore>,
) {
    for part_bytes in [usize::MAX, 16 * 1024] {
        let dir = tempfile::tempdir().unwrap();
        let log = open_log(dir.path(), Dialect::LevelDb, 64 * 1024).await;
        fill(&log, &mut Rng(seed), 0, 150, 3000).await;
        log.rotate().await.unwrap();
        let sealed = log.segments().len() as u64 - 1;
        assert!(sealed >= 4, "{sealed} sealed segments");
        let memory: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let gated = gate(Arc::clone(&memory), sealed);
        let archiver = Archiver::new(gated.clone(), "logs".into()).parts(part_bytes, 2);
        archiver.archive_sealed(&log).await.unwrap();
        assert_eq!(
            gated.timed_out.load(Ordering::SeqCst),
            0,
            "parts {part_bytes}"
        );
        assert_eq!(gated.overlapped.load(Ordering::SeqCst), sealed - 1);
        check_archive(&memory, "logs", dir.path(), log.end().segment).await;
        log.close().await.unwrap();
    }
}

/// Every listing but the last one's meets the next segment's upload begun.
#[tokio::test(start_paused = true)]
async fn each_segment_uploads_while_the_one_before_is_listed() {
    archive_overlapping(7, GatedStore::new).await;
}

/// Each segment's check (its HEAD, after its last part and completion) is held
/// until the next segment's upload has begun.
#[tokio::test(start_paused = true)]
async fn each_segment_reads_while_the_one_before_finishes_its_upload() {
    archive_overlapping(8, GatedStore::holding_checks).await;
}

/// Segment 3 fails for good while segment 4, begun behind it, uploads: the
/// manifest lists segments 1 and 2 only, and the next run goes on from 3.
#[tokio::test]
async fn a_failed_upload_lists_none_begun_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path(), Dialect::LevelDb, 64 * 1024).await;
    fill(&log, &mut Rng(9), 0, 150, 3000).await;
    log.rotate().await.unwrap();
    // Segments 1 to 4 sealed at least.
    assert!(
        log.segments().len() >= 5,
        "{} segments",
        log.segments().len()
    );
    let memory: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let faulty = FaultyStore::new(Arc::clone(&memory), 1, Fault::Fail);
    faulty.only_paths("segments/000003");
    let quick = RetryPolicy::new()
        .attempts(3)
        .backoff(Duration::from_millis(20), Duration::from_millis(20));
    let archiver = Archiver::new(faulty.clone(), "logs".into()).retry(quick);
    let failed = archiver.archive_sealed(&log).await;
    assert!(failed.is_err(), "{failed:?}");
    assert_eq!(faulty.injected(), 3);
    // Segment 4 went up meanwhile (its upload began behind segment 3's), but is
    // not listed: nothing after a segment that failed is.
    let four = object_store::path::Path::from("logs/segments/000004.log");
    assert!(memory.head(&four).await.is_ok(), "segment 4 was uploaded");
    check_archive(&memory, "logs", dir.path(), 3).await;
    assert_eq!(*archiver.archived_end().borrow(), LogPosition::new(3, 0));

    faulty.set_enabled(false);
    let end = archiver.archive_sealed(&log).await.unwrap();
    assert_eq!(end, log.end());
    check_archive(&memory, "logs", dir.path(), end.segment).await;
    log.close().await.unwrap();
}
