//! The archiver uploads each segment while it lists the one before in the
//! manifest, and reads it while the one before finishes its upload (its last
//! part, completion and check), yet lists them in order, each only once its
//! object is checked.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use object_store::memory::InMemory;
use object_store::ObjectStore;
use walcodec::Dialect;
use walcodec_archive::Archiver;

use crate::archiving::check_archive;
use crate::support::gated::GatedStore;
use crate::support::{fill, open_log, Rng};

#[tokio::test(start_paused = true)]
async fn each_segment_uploads_while_the_one_before_is_listed() {
    for part_bytes in [usize::MAX, 16 * 1024] {
        let dir = tempfile::tempdir().unwrap();
        let log = open_log(dir.path(), Dialect::LevelDb, 64 * 1024).await;
        fill(&log, &mut Rng(7), 0, 150, 3000).await;
        log.rotate().await.unwrap();
        let sealed = log.segments().len() as u64 - 1;
        assert!(sealed >= 4, "{sealed} sealed segments");
        let memory: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let gated = GatedStore::new(Arc::clone(&memory), sealed);
        let archiver = Archiver::new(gated.clone(), "logs".into()).parts(part_bytes, 2);
        archiver.archive_sealed(&log).await.unwrap();
        // Every listing but the last one's met the next segment's upload begun.
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

#[tokio::test(start_paused = true)]
async fn each_segment_reads_while_the_one_before_finishes_its_upload() {
    for part_bytes in [usize::MAX, 16 * 1024] {
        let dir = tempfile::tempdir().unwrap();
        let log = open_log(dir.path(), Dialect::LevelDb, 64 * 1024).await;
        fill(&log, &mut Rng(8), 0, 150, 3000).await;
        log.rotate().await.unwrap();
        let sealed = log.segments().len() as u64 - 1;
        assert!(sealed >= 4, "{sealed} sealed segments");
        let memory: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        // Each segment's check (its HEAD, after its last part and completion)
        // is held until the next segment's upload has begun.
        let gated = GatedStore::holding_checks(Arc::clone(&memory), sealed);
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
