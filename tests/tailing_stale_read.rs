//! A read that races the writer of a file written in place (preallocated with
//! zeros): the kernel copies a write into the page cache one page at a time, and a
//! read copies pages out one at a time, so a read can see a page the writer had not
//! reached yet (still zeros) and, after it, pages the writer has since filled. The
//! zeros look like damage with data after it: zero fill in the middle of a record
//! (LevelDB's "error in middle of record") or in the middle of a block.
//!
//! A follower in a mode that skips damage (`SkipCorrupted`, `PointInTime`) must
//! neither report that damage nor skip past it to a later record: it holds it,
//! goes back to its last record's end and reads again after a wait. Damage it
//! reads the same after the wait, with a complete record after it, is believed:
//! reported exactly once, and the record returned. Damage with nothing complete
//! after it may be a write in progress for as long as the log is live: never
//! reported.
//!
//! Each order is forced on a paused clock (one current-thread runtime), as in
//! `tailing_torn_tail.rs`: the follower meets the stale bytes at once, then parks
//! on its poll; the test's shorter sleep ends only when every task is idle, so its
//! write lands exactly between the follower's two reads. Nothing is timed.

use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use walcodec::{
    Corruption, CorruptionKind, Error, LogDecoder, LogDecoderBuilder, LogEncoder, LogRecord,
    LogTailer, Position, Recovery,
};

const POLL: Duration = Duration::from_secs(1);
const BEFORE_THE_POLL: Duration = Duration::from_millis(500);
const PAGE: usize = 4096;
const BLOCK: u64 = 32_768;

/// What a decoder reported: (offset, kind) of each piece of damage, in order.
type Reports = Arc<Mutex<Vec<(u64, CorruptionKind)>>>;

fn reporting(recovery: Recovery) -> (LogDecoderBuilder, Reports) {
    let reports = Reports::default();
    let mut builder = LogDecoder::builder();
    let sink = reports.clone();
    builder
        .recovery(recovery)
        .on_corruption(move |c: &Corruption| sink.lock().unwrap().push((c.offset(), c.kind())));
    (builder, reports)
}

/// A log of records with `sizes`, and their positions.
fn log_of(sizes: &[usize]) -> (BytesMut, Vec<Position>) {
    let mut encoder = LogEncoder::new();
    let mut log = BytesMut::new();
    let positions = sizes
        .iter()
        .enumerate()
        .map(|(i, &size)| encoder.encode_record(&vec![i as u8; size], &mut log))
        .collect();
    (log, positions)
}

/// The log as a read racing its writer sees it: `zeros` not written yet, every byte
/// after them written; the file is preallocated to a whole block past the end.
fn write_stale(path: &Path, log: &[u8], zeros: Range<usize>) {
    let mut bytes = log.to_vec();
    bytes[zeros].fill(0);
    let preallocated = (log.len() as u64).next_multiple_of(BLOCK) + BLOCK;
    bytes.resize(preallocated as usize, 0);
    std::fs::write(path, bytes).unwrap();
}

/// The writer's bytes land where `zeros` were.
fn fill(path: &Path, log: &[u8], zeros: Range<usize>) {
    let out = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    out.write_all_at(&log[zeros.clone()], zeros.start as u64)
        .unwrap();
}

type Tailer = LogTailer<tokio::fs::File>;

/// The tailer's next record, read while `write` lands between its first look and
/// its next poll.
async fn next_while(
    mut tail: Tailer,
    write: impl FnOnce(),
) -> (Tailer, Option<Result<LogRecord, Error>>) {
    let reading = tokio::spawn(async move {
        let record = tail.next_record().await;
        (tail, record)
    });
    tokio::time::sleep(BEFORE_THE_POLL).await;
    write();
    reading.await.unwrap()
}

async fn tailer(path: &Path, builder: &LogDecoderBuilder) -> Tailer {
    LogTailer::open_at(path, 0, builder)
        .await
        .unwrap()
        .with_poll_interval(POLL)
}

/// A record whose FIRST fragment ends block 0 and whose next page (block 1's first)
/// was read stale: zeros in the middle of a record, then its MIDDLE and LAST and a
/// record after. Neither reported nor skipped: once the page is in, the record comes
/// out whole, then the one after it.
#[tokio::test(start_paused = true)]
async fn zeros_read_in_the_middle_of_a_record_are_read_again_not_reported() {
    for recovery in [Recovery::SkipCorrupted, Recovery::PointInTime] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.log");
        let (log, positions) = log_of(&[100, 70_000, 10]);
        assert!(positions[1].start < BLOCK && positions[1].end > 2 * BLOCK);
        let page = BLOCK as usize..BLOCK as usize + PAGE;
        write_stale(&path, &log, page.clone());
        let (builder, reports) = reporting(recovery);
        let mut tail = tailer(&path, &builder).await;
        assert_eq!(
            tail.next_record().await.unwrap().unwrap().position,
            positions[0]
        );
        let (mut tail, record) = next_while(tail, || fill(&path, &log, page)).await;
        let record = record.unwrap().unwrap();
        assert_eq!(record.position, positions[1], "{recovery:?}");
        assert_eq!(record.data, vec![1u8; 70_000], "{recovery:?}");
        assert_eq!(
            tail.next_record().await.unwrap().unwrap().position,
            positions[2]
        );
        assert!(tail.caught_up().await.unwrap());
        let reports = reports.lock().unwrap();
        assert_eq!(reports.len(), 0, "{recovery:?}: {:?}", &reports[..4]);
        assert_eq!(tail.decoder().stats().corruptions, 0, "{recovery:?}");
    }
}

/// Damage believed and reported, then zeros before data before the next record:
/// the follower waits on the zeros for as long as they last (a read racing the
/// writer leaves them), going back over the damage at each look, and reports the
/// damage once.
#[tokio::test(start_paused = true)]
async fn damage_believed_is_reported_once_while_zeros_after_it_hold_the_follower() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let mut log = BytesMut::new();
    let first = LogEncoder::new().encode_record(b"first", &mut log);
    // A LAST fragment with no FIRST before it (position-free in LevelDB's format):
    // the last 34 bytes of a record that crosses a block boundary 20 bytes on.
    let mut crossing = BytesMut::new();
    LogEncoder::with_offset(BLOCK - 20).encode_record(&[b'l'; 40], &mut crossing);
    let stray = first.end;
    log.extend_from_slice(&crossing[20..]);
    let mut encoder = LogEncoder::with_offset(log.len() as u64);
    // Then records up to block 0's end, and one in block 1.
    let after: Vec<Position> = [5_000, 27_708, 10]
        .iter()
        .map(|&size| encoder.encode_record(&vec![b'r'; size], &mut log))
        .collect();
    assert_eq!(after[1].end, BLOCK);
    let zeros = after[0].start as usize..PAGE;
    write_stale(&path, &log, zeros.clone());

    let (builder, reports) = reporting(Recovery::SkipCorrupted);
    let mut tail = tailer(&path, &builder).await;
    assert_eq!(tail.next_record().await.unwrap().unwrap().position, first);
    let waiting = tokio::time::timeout(Duration::from_secs(3600), tail.next_record()).await;
    assert!(waiting.is_err(), "{waiting:?}");
    let reported = reports.lock().unwrap().clone();
    assert_eq!(
        reported[..reported.len().min(4)],
        [(stray, CorruptionKind::MissingStart)]
    );
    fill(&path, &log, zeros);
    for expected in &after {
        assert_eq!(
            tail.next_record().await.unwrap().unwrap().position,
            *expected
        );
    }
    assert_eq!(reports.lock().unwrap().len(), 1);
    assert_eq!(tail.decoder().stats().corruptions, 1);
}

/// A page read stale in the middle of a block, holding the header of the record
/// after the one returned: zero fill there, then data. The records after the zeros
/// are not returned before the ones the zeros hide.
#[tokio::test(start_paused = true)]
async fn zeros_read_in_the_middle_of_a_block_hide_no_record() {
    for recovery in [Recovery::SkipCorrupted, Recovery::PointInTime] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.log");
        // 0: 0..5000, ends inside page 1; 1 starts there; 2 and 3 in block 0 too, 3
        // up to its end; 4 at the start of block 1. Nothing but the zeros tells that
        // records were skipped.
        let (log, positions) = log_of(&[4_993, 6_000, 100, 21_647, 10]);
        assert_eq!(positions[0].end, 5_000);
        assert_eq!(positions[3].end, BLOCK);
        // Page 1 (4096..8192) read stale from the end of record 0 on: record 0 was
        // read before, whole.
        write_stale(&path, &log, 5_000..2 * PAGE);
        let (builder, reports) = reporting(recovery);
        let mut tail = tailer(&path, &builder).await;
        assert_eq!(
            tail.next_record().await.unwrap().unwrap().position,
            positions[0]
        );
        let (mut tail, record) = next_while(tail, || fill(&path, &log, PAGE..2 * PAGE)).await;
        assert_eq!(
            record.unwrap().unwrap().position,
            positions[1],
            "{recovery:?}"
        );
        for expected in &positions[2..] {
            assert_eq!(
                tail.next_record().await.unwrap().unwrap().position,
                *expected,
                "{recovery:?}"
            );
        }
        assert!(tail.caught_up().await.unwrap());
        assert_eq!(*reports.lock().unwrap(), [], "{recovery:?}");
    }
}

/// A half-written record with a complete one after it, read the same after the
/// wait: damage, believed and reported once each (the checksum mismatch, then the
/// fragment whose start it took), and the record after it returned; later looks
/// report nothing more.
#[tokio::test(start_paused = true)]
async fn damage_read_the_same_before_a_complete_record_is_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let (log, positions) = log_of(&[5, 100, 40_000, 10]);
    let mut torn = log.to_vec();
    // Record 1's header and half its payload written, the rest an earlier use's bytes.
    torn[(positions[1].start + 7 + 50) as usize..positions[1].end as usize].fill(0xee);
    std::fs::write(&path, &torn).unwrap();
    let (builder, reports) = reporting(Recovery::SkipCorrupted);
    let mut tail = tailer(&path, &builder).await;
    assert_eq!(
        tail.next_record().await.unwrap().unwrap().position,
        positions[0]
    );
    // Doubted, not yet believed: nothing reported while the follower waits.
    let nothing_yet = || assert_eq!(*reports.lock().unwrap(), []);
    let (mut tail, record) = next_while(tail, nothing_yet).await;
    assert_eq!(record.unwrap().unwrap().position, positions[3]);
    assert_eq!(
        *reports.lock().unwrap(),
        [
            (positions[1].start, CorruptionKind::ChecksumMismatch),
            (BLOCK, CorruptionKind::MissingStart),
        ]
    );
    assert_eq!(tail.decoder().stats().corruptions, 2);
    // An hour of polls later: the same, not reported again.
    let more = tokio::time::timeout(Duration::from_secs(3600), tail.next_record()).await;
    assert!(more.is_err(), "{more:?}");
    assert!(tail.caught_up().await.unwrap());
    assert_eq!(reports.lock().unwrap().len(), 2);
    assert_eq!(tail.decoder().stats().corruptions, 2);
}

/// A write in progress at the end of a live log, in the modes that skip damage:
/// an hour of polls reports nothing and counts nothing.
#[tokio::test(start_paused = true)]
async fn a_torn_live_tail_is_never_reported() {
    for recovery in [Recovery::SkipCorrupted, Recovery::PointInTime] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.log");
        let (log, positions) = log_of(&[5, 100, 40_000]);
        let mut torn = log.to_vec();
        torn[(positions[1].start + 7 + 50) as usize..positions[1].end as usize].fill(0xee);
        std::fs::write(&path, &torn).unwrap();
        let (builder, reports) = reporting(recovery);
        let mut tail = tailer(&path, &builder).await;
        assert_eq!(
            tail.next_record().await.unwrap().unwrap().position,
            positions[0]
        );
        let waiting = tokio::time::timeout(Duration::from_secs(3600), tail.next_record()).await;
        assert!(waiting.is_err(), "{recovery:?}: {waiting:?}");
        assert_eq!(*reports.lock().unwrap(), [], "{recovery:?}");
        assert_eq!(tail.decoder().stats().corruptions, 0, "{recovery:?}");
    }
}
