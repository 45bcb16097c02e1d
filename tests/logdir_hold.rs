//! `LogDir::hold_retention`: a holder outside the log keeps segments from every
//! purge until it releases them; dropping the hold releases them.

use std::time::Duration;

use walcodec::{LogDir, LogPosition, WriterOptions};

async fn open(dir: &std::path::Path, retain_bytes: Option<u64>) -> LogDir {
    let mut builder = LogDir::builder();
    builder
        .max_segment_bytes(4096)
        .writer(WriterOptions::new().preallocate(0));
    if let Some(bytes) = retain_bytes {
        builder.retain_bytes(bytes);
    }
    builder.open(dir).await.unwrap()
}

async fn fill(log: &LogDir, count: usize) {
    for i in 0..count {
        log.append(format!("record {i:>100}")).await.unwrap();
    }
}

#[tokio::test]
async fn a_hold_keeps_its_segments_from_purges_until_released() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), None).await;
    let hold = log.hold_retention();
    assert_eq!(hold.held_from(), 1);
    fill(&log, 400).await;
    let active = log.end().segment;
    assert!(active > 4);
    assert!(log.purge_before(log.end()).await.unwrap().is_empty());
    hold.release_before(3);
    assert_eq!(hold.held_from(), 3);
    assert_eq!(log.purge_before(log.end()).await.unwrap(), vec![1, 2]);
    // A hold never moves back.
    hold.release_before(2);
    assert_eq!(hold.held_from(), 3);
    assert!(log.purge_before(log.end()).await.unwrap().is_empty());
    // Dropped: released.
    drop(hold);
    let purged = log.purge_before(log.end()).await.unwrap();
    assert_eq!(purged, (3..active).collect::<Vec<_>>());
    log.close().await.unwrap();
}

#[tokio::test]
async fn automatic_retention_respects_a_hold_and_a_reader_alike() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), Some(1)).await;
    let hold = log.hold_retention();
    fill(&log, 400).await;
    assert_eq!(
        log.start(),
        LogPosition::new(1, 0),
        "retain_bytes kept every held segment"
    );
    // A reader pins from segment 2; the hold lets go of everything before 5.
    let reader = log.read_from(LogPosition::new(2, 0)).unwrap();
    hold.release_before(5);
    log.enforce_retention().await.unwrap();
    assert_eq!(log.start().segment, 2, "the reader still needs segment 2");
    drop(reader);
    log.enforce_retention().await.unwrap();
    assert_eq!(log.start().segment, 5, "the hold still keeps segment 5");
    drop(hold);
    log.enforce_retention().await.unwrap();
    assert_eq!(log.start().segment, log.end().segment);
    log.close().await.unwrap();
}

#[tokio::test]
async fn a_hold_taken_late_holds_from_the_oldest_segment_kept() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .max_segment_bytes(4096)
        .retain_age(Duration::from_secs(3600))
        .open(dir.path())
        .await
        .unwrap();
    fill(&log, 100).await;
    log.purge_before(LogPosition::new(3, 0)).await.unwrap();
    let hold = log.hold_retention();
    assert_eq!(hold.held_from(), log.start().segment);
    drop(hold);
    log.close().await.unwrap();
}
