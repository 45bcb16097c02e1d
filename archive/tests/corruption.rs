//! A flipped byte in an archived object, or an object gone: `verify` and
//! `restore` name it, with a typed error.

use std::sync::Arc;
use std::time::Duration;

use walcodec::Dialect;
use walcodec_archive::{
    restore_with, Archive, ArchiveError, Archiver, RestoreOptions, RetryPolicy,
};

use crate::support::{self, fill, open_log, Rng};

fn quick() -> RetryPolicy {
    RetryPolicy::new()
        .attempts(2)
        .backoff(Duration::from_millis(1), Duration::from_millis(1))
}

async fn archived(store_dir: &std::path::Path, dialect: Dialect) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path(), dialect, 16 * 1024).await;
    let mut rng = Rng(23);
    fill(&log, &mut rng, 0, 60, 3000).await;
    log.rotate().await.unwrap();
    Archiver::new(support::local_store(store_dir), "c".into())
        .archive_sealed(&log)
        .await
        .unwrap();
    log.close().await.unwrap();
    dir
}

fn flip(path: &std::path::Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at] ^= 0x40;
    std::fs::write(path, bytes).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_byte_is_named_by_verify_and_restore() {
    for dialect in support::DIALECTS {
        let store_dir = tempfile::tempdir().unwrap();
        let _log = archived(store_dir.path(), dialect).await;
        let store = support::local_store(store_dir.path());
        let archive = Archive::open_with(Arc::clone(&store), "c".into(), quick())
            .await
            .unwrap();
        let report = archive.verify().await.unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        let good = report.good;

        // A byte inside a record's payload of segment 3.
        flip(&store_dir.path().join("c/segments/000003.log"), 100);
        let report = archive.verify().await.unwrap();
        assert_eq!(report.good, good - 1);
        assert_eq!(report.problems.len(), 1);
        match &report.problems[0] {
            ArchiveError::Corrupt {
                object,
                segment: 3,
                reason,
            } => {
                assert_eq!(object, "c/segments/000003.log");
                assert!(reason.contains("CRC-32C"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        let copy = tempfile::tempdir().unwrap();
        let refused = restore_with(
            Arc::clone(&store),
            "c".into(),
            copy.path(),
            RestoreOptions::new().retry(quick()),
        )
        .await;
        match refused {
            Err(ArchiveError::Corrupt {
                object, segment: 3, ..
            }) => assert_eq!(object, "c/segments/000003.log"),
            other => panic!("{other:?}"),
        }
        // A restore that stops before it does not need it.
        let before = archive.segments()[1].end();
        let copy = tempfile::tempdir().unwrap();
        restore_with(
            Arc::clone(&store),
            "c".into(),
            copy.path(),
            RestoreOptions::new().until(Some(before)).retry(quick()),
        )
        .await
        .unwrap();
    }
}

/// The manifest's checksum catches a flip; the fragment CRCs catch damage the
/// manifest would agree with (an object replaced along with its entry).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fragment_that_fails_its_crc_is_named_even_when_the_object_checksum_agrees() {
    let store_dir = tempfile::tempdir().unwrap();
    let _log = archived(store_dir.path(), Dialect::LevelDb).await;
    let object = store_dir.path().join("c/segments/000002.log");
    flip(&object, 200);
    // Rewrite the manifest's checksum to match the damaged bytes.
    let manifest_path = store_dir.path().join("c/manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    let crc = crc32c::crc32c(&std::fs::read(&object).unwrap());
    manifest["segments"][1]["crc32c"] = serde_json::json!(crc);
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let store = support::local_store(store_dir.path());
    let archive = Archive::open_with(Arc::clone(&store), "c".into(), quick())
        .await
        .unwrap();
    let report = archive.verify().await.unwrap();
    assert_eq!(report.problems.len(), 1);
    assert!(
        matches!(&report.problems[0], ArchiveError::Corrupt { segment: 2, reason, .. } if reason.contains("checksum")),
        "{:?}",
        report.problems
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_object_is_a_gap_named_by_verify_and_restore() {
    let store_dir = tempfile::tempdir().unwrap();
    let _log = archived(store_dir.path(), Dialect::RocksDb).await;
    std::fs::remove_file(store_dir.path().join("c/segments/000004.log")).unwrap();
    let store = support::local_store(store_dir.path());
    let archive = Archive::open_with(Arc::clone(&store), "c".into(), quick())
        .await
        .unwrap();
    let report = archive.verify().await.unwrap();
    assert!(
        matches!(
            report.problems.as_slice(),
            [ArchiveError::Gap { segment: 4, .. }]
        ),
        "{:?}",
        report.problems
    );
    let copy = tempfile::tempdir().unwrap();
    let refused = restore_with(
        Arc::clone(&store),
        "c".into(),
        copy.path(),
        RestoreOptions::new().retry(quick()),
    )
    .await;
    assert!(
        matches!(refused, Err(ArchiveError::Gap { segment: 4, .. })),
        "{refused:?}"
    );
}

/// A manifest that skips a segment is refused when opened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_with_a_hole_is_refused() {
    let store_dir = tempfile::tempdir().unwrap();
    let _log = archived(store_dir.path(), Dialect::LevelDb).await;
    let manifest_path = store_dir.path().join("c/manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    manifest["segments"].as_array_mut().unwrap().remove(2);
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).unwrap()).unwrap();
    let opened = Archive::open(support::local_store(store_dir.path()), "c".into()).await;
    assert!(
        matches!(opened, Err(ArchiveError::Gap { segment: 3, .. })),
        "{opened:?}"
    );
}

/// A segment damaged on the log's own disk (a fragment that fails its CRC, past
/// the first part and the first piece checked) is refused on its way up, never
/// listed; the segments before it are archived.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_local_segment_is_refused_not_archived() {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path(), Dialect::LevelDb, 512 * 1024).await;
    fill(&log, &mut Rng(31), 0, 700, 5000).await;
    log.rotate().await.unwrap();
    let segments = log.segments();
    assert!(segments.len() >= 4, "{segments:?}");
    let (first, damaged) = (segments[0].0, segments[1].0);
    // Damaged under the open log (opening it again would refuse the segment).
    flip(
        &dir.path().join(format!("{damaged:06}.log")),
        300_000, // a record's bytes, in the third piece of 128 KiB
    );
    for part_bytes in [64 * 1024, 8 << 20] {
        let store_dir = tempfile::tempdir().unwrap();
        let store = support::local_store(store_dir.path());
        let archiver = Archiver::new(Arc::clone(&store), "c".into())
            .retry(quick())
            .parts(part_bytes, 2);
        match archiver.archive_sealed(&log).await {
            Err(ArchiveError::BadSegment { segment, .. }) => assert_eq!(segment, damaged),
            other => panic!("parts of {part_bytes}: {other:?}"),
        }
        let archive = Archive::open(store, "c".into()).await.unwrap();
        let listed: Vec<u64> = archive.segments().iter().map(|s| s.number).collect();
        assert_eq!(listed, vec![first], "parts of {part_bytes}");
    }
    log.close().await.unwrap();
}
