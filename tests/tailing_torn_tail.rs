//! Damage past a follower's last record in a log still being written: a fragment
//! whose header is written and whose payload is only partly there (the rest of its
//! space still holds an earlier use's bytes), with complete data after it, so that
//! it fails its checksum. For a follower of a live log that may be a write in
//! progress: it doubts it once, goes back to the end of its last record, waits one
//! poll and reads again; it returns the record if the writer finished it meanwhile,
//! and reports the damage if it reads the same. In a sealed segment no write goes
//! on, and the damage is reported at once.
//!
//! Each order is forced on a paused clock (one current-thread runtime): the
//! follower meets the damage at once (its first read took the whole block), then
//! parks on its poll; the test's shorter sleep ends only when every task is idle,
//! so its write lands exactly between the follower's two reads. Nothing is timed.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use walcodec::{
    CorruptionKind, DirReader, Error, LogDecoder, LogEncoder, LogPosition, LogTailer, Position,
    Recovery,
};

/// The follower's poll interval, and the test's sleep, shorter, that lands a write
/// while the follower waits.
const POLL: Duration = Duration::from_secs(1);
const BEFORE_THE_POLL: Duration = Duration::from_millis(500);

/// A log as the writer means it (three records: the third crosses into block 1, so
/// the damage's block is whole and the decoder decides on it), the same log with the
/// second record's payload half written, and the three positions.
fn torn_second_record() -> (BytesMut, BytesMut, [Position; 3]) {
    let mut encoder = LogEncoder::new();
    let mut whole = BytesMut::new();
    let first = encoder.encode_record(b"first", &mut whole);
    let second = encoder.encode_record(&[b's'; 100], &mut whole);
    let third = encoder.encode_record(&[b't'; 40_000], &mut whole);
    assert!(third.end > 32_768, "the third record crosses into block 1");
    let mut torn = whole.clone();
    // Header and half the payload written; the rest still an earlier use's bytes.
    torn[(second.start + 7 + 50) as usize..second.end as usize].fill(0xee);
    (whole, torn, [first, second, third])
}

/// Writes the second record's missing bytes, as the writer finishing its write.
fn finish_second_record(path: &Path, whole: &[u8], second: Position) {
    let out = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    out.write_all_at(
        &whole[second.start as usize..second.end as usize],
        second.start,
    )
    .unwrap();
}

fn tolerate_tail() -> walcodec::LogDecoderBuilder {
    let mut builder = LogDecoder::builder();
    builder.recovery(Recovery::TolerateTail);
    builder
}

/// The tailer meets the torn record, doubts it, and the writer finishes it while
/// the tailer waits: the record comes out whole, where it was written, and the
/// next one after it.
#[tokio::test(start_paused = true)]
async fn a_tailer_reads_a_torn_record_again_and_returns_it_once_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let (whole, torn, [first, second, third]) = torn_second_record();
    std::fs::write(&path, &torn).unwrap();

    let mut tail = LogTailer::open_at(&path, 0, &tolerate_tail())
        .await
        .unwrap()
        .with_poll_interval(POLL);
    assert_eq!(tail.next_record().await.unwrap().unwrap().position, first);
    let reading = tokio::spawn(async move {
        let record = tail.next_record().await;
        (tail, record)
    });
    tokio::time::sleep(BEFORE_THE_POLL).await;
    finish_second_record(&path, &whole, second);

    let (mut tail, record) = reading.await.unwrap();
    let record = record.unwrap().unwrap();
    assert_eq!(
        (record.position, record.data),
        (second, Bytes::from(vec![b's'; 100]))
    );
    // Read twice: the damage once, then the record the writer finished.
    assert_eq!(tail.decoder().stats().corruptions, 1);
    assert_eq!(tail.next_record().await.unwrap().unwrap().position, third);
    assert!(tail.caught_up().await.unwrap());
}

/// Damage that reads the same after the wait is reported, in the modes that report
/// damage, after exactly one more read; the modes that skip damage never report
/// what may be a write in progress in a live log, and wait.
#[tokio::test(start_paused = true)]
async fn a_tailer_reports_a_torn_record_that_reads_the_same_after_a_wait() {
    for recovery in [Recovery::TolerateTail, Recovery::AbsoluteConsistency] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.log");
        let (_, torn, [first, second, _]) = torn_second_record();
        std::fs::write(&path, &torn).unwrap();
        let mut builder = LogDecoder::builder();
        builder.recovery(recovery);
        let mut tail = LogTailer::open_at(&path, 0, &builder)
            .await
            .unwrap()
            .with_poll_interval(POLL);
        assert_eq!(tail.next_record().await.unwrap().unwrap().position, first);
        // Bounded so that a follower waiting for ever fails here (an hour of polls
        // on the paused clock takes no time).
        let read = tokio::time::timeout(Duration::from_secs(3600), tail.next_record())
            .await
            .unwrap_or_else(|_| panic!("{recovery:?}: still waiting at the damage"))
            .unwrap();
        match read {
            Err(Error::Corruption { offset, kind, .. }) => {
                assert_eq!(
                    (offset, kind),
                    (second.start, CorruptionKind::ChecksumMismatch)
                )
            }
            other => panic!("{recovery:?}: {other:?}"),
        }
        // Met twice: once doubted, once believed.
        assert_eq!(tail.decoder().stats().corruptions, 2, "{recovery:?}");
        assert!(tail.next_record().await.is_none());
    }

    for recovery in [Recovery::SkipCorrupted, Recovery::PointInTime] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.log");
        let (whole, torn, [first, second, third]) = torn_second_record();
        std::fs::write(&path, &torn).unwrap();
        let mut builder = LogDecoder::builder();
        builder.recovery(recovery);
        let mut tail = LogTailer::open_at(&path, 0, &builder)
            .await
            .unwrap()
            .with_poll_interval(POLL);
        assert_eq!(tail.next_record().await.unwrap().unwrap().position, first);
        let waiting = tokio::time::timeout(Duration::from_secs(3600), tail.next_record()).await;
        assert!(waiting.is_err(), "{recovery:?}: {waiting:?}");
        assert!(tail.caught_up().await.unwrap(), "{recovery:?}");
        finish_second_record(&path, &whole, second);
        for expected in [second, third] {
            let record = tail.next_record().await.unwrap().unwrap();
            assert_eq!(record.position, expected, "{recovery:?}");
        }
    }
}

/// A follower of a directory by its path, on its live segment: the same doubt,
/// the record returned once the writer finished it.
#[tokio::test(start_paused = true)]
async fn a_directory_follower_reads_a_torn_record_again_and_returns_it_once_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let (whole, torn, [first, second, third]) = torn_second_record();
    std::fs::write(&path, &torn).unwrap();

    let mut follower = DirReader::open(dir.path(), LogPosition::START)
        .await
        .unwrap()
        .follow()
        .with_poll_interval(POLL);
    let record = follower.next_record().await.unwrap().unwrap();
    assert_eq!(record.end, LogPosition::new(1, first.end));
    let reading = tokio::spawn(async move {
        let record = follower.next_record().await;
        (follower, record)
    });
    tokio::time::sleep(BEFORE_THE_POLL).await;
    finish_second_record(&path, &whole, second);

    let (mut follower, record) = reading.await.unwrap();
    let record = record.unwrap().unwrap();
    assert_eq!(
        (record.start, record.end, record.data),
        (
            LogPosition::new(1, second.start),
            LogPosition::new(1, second.end),
            Bytes::from(vec![b's'; 100])
        )
    );
    let record = follower.next_record().await.unwrap().unwrap();
    assert_eq!(record.end, LogPosition::new(1, third.end));
    assert!(follower.caught_up().await.unwrap());
}

/// The same damage on the live segment, never finished: reported after the one
/// doubt, as `BadSegment`.
#[tokio::test(start_paused = true)]
async fn a_directory_follower_reports_a_torn_record_that_reads_the_same_after_a_wait() {
    let dir = tempfile::tempdir().unwrap();
    let (_, torn, [first, second, _]) = torn_second_record();
    std::fs::write(dir.path().join("000001.log"), &torn).unwrap();
    let mut follower = DirReader::open(dir.path(), LogPosition::START)
        .await
        .unwrap()
        .follow()
        .with_poll_interval(POLL);
    let record = follower.next_record().await.unwrap().unwrap();
    assert_eq!(record.end, LogPosition::new(1, first.end));
    let read = tokio::time::timeout(Duration::from_secs(3600), follower.next_record())
        .await
        .expect("still waiting at the damage")
        .unwrap();
    assert_bad_segment(read, second.start);
}

/// In a sealed segment (a later one exists) the damage is believed at once: the
/// bytes the writer "finishes" during what would be the follower's wait are never
/// read, and the follower reports the damage rather than waiting on it.
#[tokio::test(start_paused = true)]
async fn a_directory_follower_reports_damage_in_a_sealed_segment_without_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let (whole, torn, [first, second, _]) = torn_second_record();
    std::fs::write(&path, &torn).unwrap();
    let mut next = BytesMut::new();
    LogEncoder::new().encode_record(b"next", &mut next);
    std::fs::write(dir.path().join("000002.log"), &next).unwrap();

    let mut follower = DirReader::open(dir.path(), LogPosition::START)
        .await
        .unwrap()
        .follow()
        .with_poll_interval(POLL);
    let record = follower.next_record().await.unwrap().unwrap();
    assert_eq!(record.end, LogPosition::new(1, first.end));
    let reading = tokio::spawn(async move { follower.next_record().await });
    tokio::time::sleep(BEFORE_THE_POLL).await;
    finish_second_record(&path, &whole, second);
    assert_bad_segment(reading.await.unwrap().unwrap(), second.start);
}

/// `read` is segment 1's checksum mismatch at `offset`.
fn assert_bad_segment(read: Result<walcodec::DirRecord, Error>, offset: u64) {
    let error = read.unwrap_err();
    let Error::BadSegment { segment: 1, source } = &error else {
        panic!("{error}");
    };
    match **source {
        Error::Corruption {
            offset: at, kind, ..
        } => assert_eq!((at, kind), (offset, CorruptionKind::ChecksumMismatch)),
        ref other => panic!("{other}"),
    }
}
