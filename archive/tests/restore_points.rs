//! Restores rebuild the primary's segments byte for byte, up to any point: at
//! every segment boundary and inside segments, exactly the records that end at or
//! before it. In every dialect.

use std::sync::Arc;

use futures::StreamExt;
use object_store::ObjectStore;
use walcodec::{Dialect, LogDir, LogPosition};
use walcodec_archive::{restore, ArchiveError, Archiver};

use crate::support::{self, fill, open_log, read_all, segment_files, Rng, S3Server};

/// A closed log archived whole; returns its records and its segment files.
async fn archived_log(
    store: &Arc<dyn ObjectStore>,
    prefix: &str,
    dialect: Dialect,
    count: u64,
) -> (tempfile::TempDir, Vec<(Vec<u8>, LogPosition)>) {
    let dir = tempfile::tempdir().unwrap();
    let log = open_log(dir.path(), dialect, 16 * 1024).await;
    let mut rng = Rng(17);
    let written = fill(&log, &mut rng, 0, count, 5000).await;
    log.rotate().await.unwrap();
    Archiver::new(Arc::clone(store), prefix.into())
        .archive_sealed(&log)
        .await
        .unwrap();
    log.close().await.unwrap();
    (dir, written)
}

/// Restores up to `until` and checks the records and the bytes.
async fn check_restore_at(
    store: &Arc<dyn ObjectStore>,
    prefix: &str,
    primary: &[(u64, Vec<u8>)],
    written: &[(Vec<u8>, LogPosition)],
    until: Option<LogPosition>,
) {
    let copy = tempfile::tempdir().unwrap();
    let restored = restore(Arc::clone(store), prefix.into(), copy.path(), until)
        .await
        .unwrap();
    let expected: Vec<&(Vec<u8>, LogPosition)> = written
        .iter()
        .filter(|(_, end)| until.is_none_or(|until| *end <= until))
        .collect();
    let records = read_all(copy.path()).await;
    assert_eq!(
        records.len(),
        expected.len(),
        "records restored up to {until:?}"
    );
    for ((data, end), (got, got_end)) in expected.iter().map(|r| (&r.0, &r.1)).zip(&records) {
        assert_eq!(data, got);
        assert_eq!(end, got_end);
    }
    assert_eq!(
        restored.end,
        expected.last().map_or(LogPosition::START, |r| r.1)
    );
    // Every file restored is the primary's, or a prefix of it cut at a record end.
    for (number, bytes) in segment_files(copy.path()) {
        let original = &primary.iter().find(|(n, _)| *n == number).unwrap().1;
        assert!(
            original.starts_with(&bytes),
            "segment {number} restored as the primary wrote it"
        );
        if until.is_none_or(|u| u.segment > number) {
            assert_eq!(
                bytes.len(),
                original.len(),
                "segment {number} restored whole"
            );
        }
    }
}

async fn every_point(store: Arc<dyn ObjectStore>, dialect: Dialect) {
    let (dir, written) = archived_log(&store, "pitr", dialect, 80).await;
    let primary = segment_files(dir.path());
    assert!(primary.len() > 10);
    // Everything.
    check_restore_at(&store, "pitr", &primary, &written, None).await;
    let mut points = Vec::new();
    for (number, bytes) in &primary {
        // Segment boundaries: its start, and the end of its records (the end of
        // its file but for a Pebble segment's EOF trailer).
        points.push(LogPosition::new(*number, 0));
        points.push(LogPosition::new(*number, bytes.len() as u64));
    }
    for (i, (_, end)) in written.iter().enumerate() {
        // Inside segments: at a record's end, and one byte either side of it.
        if i % 13 == 0 {
            points.push(*end);
            points.push(LogPosition::new(end.segment, end.offset - 1));
            points.push(LogPosition::new(end.segment, end.offset + 1));
        }
    }
    points.push(LogPosition::new(u64::MAX, 0));
    // Eight restores at a time: each syncs its copy, and the syncs overlap.
    futures::stream::iter(points)
        .for_each_concurrent(8, |point| {
            check_restore_at(&store, "pitr", &primary, &written, Some(point))
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_point_in_time_gives_exactly_the_prefix_in_every_dialect() {
    futures::future::join_all(support::DIALECTS.map(|dialect| async move {
        let store_dir = tempfile::tempdir().unwrap();
        every_point(support::local_store(store_dir.path()), dialect).await;
    }))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restores_from_s3_byte_for_byte() {
    let server = S3Server::start().await;
    let store = server.store();
    let (dir, written) = archived_log(&store, "s3/pitr", Dialect::RocksDb, 60).await;
    let primary = segment_files(dir.path());
    check_restore_at(&store, "s3/pitr", &primary, &written, None).await;
    let middle = written[written.len() / 2].1;
    check_restore_at(&store, "s3/pitr", &primary, &written, Some(middle)).await;
    // A restored log opens and goes on.
    let copy = tempfile::tempdir().unwrap();
    restore(
        Arc::clone(&store),
        "s3/pitr".into(),
        copy.path(),
        Some(middle),
    )
    .await
    .unwrap();
    let log = LogDir::builder()
        .dialect(Dialect::RocksDb)
        .open(copy.path())
        .await
        .unwrap();
    assert_eq!(log.end(), middle);
    log.append(b"after the restore").await.unwrap();
    log.close().await.unwrap();
}

#[tokio::test]
async fn a_restore_refuses_a_directory_with_segments_and_a_missing_archive() {
    let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    let dir = tempfile::tempdir().unwrap();
    let missing = restore(Arc::clone(&store), "none".into(), dir.path(), None).await;
    assert!(
        matches!(missing, Err(ArchiveError::NoArchive { .. })),
        "{missing:?}"
    );
    let (_log_dir, _) = archived_log(&store, "some", Dialect::LevelDb, 10).await;
    std::fs::write(dir.path().join("000001.log"), b"").unwrap();
    let refused = restore(Arc::clone(&store), "some".into(), dir.path(), None).await;
    assert!(
        matches!(refused, Err(ArchiveError::NotEmpty { .. })),
        "{refused:?}"
    );
}
