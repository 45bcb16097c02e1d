//! LogDir by behaviour: concurrent appends across dozens of rotations, reading and
//! following across segments, purge and truncation under readers, recovery on open.

use crate::writer_support;

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use walcodec::{
    AsyncLogWriter, DirReader, Error, LogDecoder, LogDir, LogPosition, LogReader, Recovery,
};
use writer_support::{make_record, make_record_sized, verify, verify_sized};

fn segment_path(dir: &Path, segment: u64) -> std::path::PathBuf {
    dir.join(format!("{segment:06}.log"))
}

/// Every record from `from` to the durable end, with a plain reader.
async fn read_all(log: &LogDir, from: LogPosition) -> Vec<walcodec::DirRecord> {
    let mut reader = log.read_from(from).unwrap();
    let mut records = Vec::new();
    while let Some(record) = reader.next_record().await {
        records.push(record.unwrap());
    }
    records
}

/// Reads a sealed segment with `AbsoluteConsistency`: any damage, a torn tail
/// included, is an error.
async fn read_segment_strictly(path: &Path) -> usize {
    let mut builder = LogDecoder::builder();
    builder.recovery(Recovery::AbsoluteConsistency);
    let mut reader = LogReader::open_at(path, 0, &builder).await.unwrap();
    let mut n = 0;
    while let Some(record) = reader.next_record().await {
        record.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        n += 1;
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tasks_append_across_dozens_of_segments() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .max_segment_bytes(32 * 1024)
        .open(dir.path())
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for task in 0..64u32 {
        let log = log.clone();
        tasks.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            for seq in 0..40u32 {
                let record =
                    make_record_sized(task, seq, 8 + (task as usize * 7 + seq as usize * 13) % 900);
                let end = log.append(&record).await.unwrap();
                acked.push(((task, seq), end));
            }
            acked
        }));
    }
    let mut acked = Vec::new();
    for task in tasks {
        acked.extend(task.await.unwrap());
    }
    // Each task saw its own positions grow.
    for pair in acked.windows(2) {
        if pair[0].0 .0 == pair[1].0 .0 {
            assert!(pair[0].1 < pair[1].1);
        }
    }
    let segments = log.segments();
    assert!(segments.len() >= 24, "only {} segments", segments.len());
    for &(_, len) in &segments {
        assert!(len <= 32 * 1024);
    }

    let records = read_all(&log, LogPosition::START).await;
    assert_eq!(records.len(), acked.len());
    let mut by_id = std::collections::HashMap::new();
    for pair in records.windows(2) {
        assert!(pair[0].end <= pair[1].start, "out of order");
    }
    for record in &records {
        let id = verify_sized(&record.data).expect("intact record");
        assert!(by_id.insert(id, record.end).is_none(), "{id:?} twice");
    }
    for (id, end) in &acked {
        assert_eq!(by_id.get(id), Some(end), "{id:?} not where append said");
    }
    let end = log.close().await.unwrap();
    assert_eq!(end, records.last().unwrap().end);

    // Sealed segments are complete logs.
    let mut strict = 0;
    for &(segment, _) in &segments[..segments.len() - 1] {
        strict += read_segment_strictly(&segment_path(dir.path(), segment)).await;
    }
    assert!(strict > 0);
}

#[tokio::test]
async fn reading_from_every_checkpoint_yields_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .max_segment_bytes(2000)
        .open(dir.path())
        .await
        .unwrap();
    let mut ends = vec![LogPosition::START];
    for seq in 0..60 {
        ends.push(log.append(make_record(1, seq)).await.unwrap());
    }
    assert!(log.segments().len() > 5);
    for (i, &from) in ends.iter().enumerate() {
        let records = read_all(&log, from).await;
        assert_eq!(records.len(), 60 - i, "from {from}");
        if let Some(first) = records.first() {
            assert_eq!(verify(&first.data), Some((1, i as u32)));
            assert_eq!(first.end, ends[i + 1]);
        }
    }
    // A position inside a record reads from the next record, as open_at does.
    let inside = LogPosition::new(ends[3].segment, ends[3].offset + 1);
    let records = read_all(&log, inside).await;
    let expected_first = if ends[4].segment == inside.segment {
        4
    } else {
        3
    };
    assert_eq!(verify(&records[0].data), Some((1, expected_first)));
    assert_eq!(records.len(), 60 - expected_first as usize);
    log.close().await.unwrap();
}

#[tokio::test]
async fn positions_parse_and_order() {
    let p: LogPosition = "000007:1234".parse().unwrap();
    assert_eq!(p, LogPosition::new(7, 1234));
    assert_eq!(p.to_string(), "000007:1234");
    assert!("7:".parse::<LogPosition>().is_err());
    assert!(LogPosition::new(7, u64::MAX) < LogPosition::new(8, 0));
}

#[tokio::test]
async fn reopen_continues_after_the_last_record() {
    let dir = tempfile::tempdir().unwrap();
    let options = {
        let mut options = LogDir::builder();
        options.max_segment_bytes(4096);
        options
    };
    let log = options.open(dir.path()).await.unwrap();
    for seq in 0..30 {
        log.append(make_record(2, seq)).await.unwrap();
    }
    let end = log.close().await.unwrap();
    let log = options.open(dir.path()).await.unwrap();
    assert_eq!(log.end(), end);
    let next = log.append(make_record(2, 30)).await.unwrap();
    assert!(next > end);
    let records = read_all(&log, LogPosition::START).await;
    let ids: Vec<_> = records.iter().map(|r| verify(&r.data).unwrap().1).collect();
    assert_eq!(ids, (0..31).collect::<Vec<_>>());
    log.close().await.unwrap();
}

#[tokio::test]
async fn torn_tail_of_last_segment_is_cut_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::open(dir.path()).await.unwrap();
    log.append(b"one").await.unwrap();
    log.rotate().await.unwrap();
    let end = log.append(b"two").await.unwrap();
    log.close().await.unwrap();
    // A torn record after the last one.
    let path = segment_path(dir.path(), end.segment);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&[1, 2, 3, 4, 200, 0]);
    std::fs::write(&path, &bytes).unwrap();
    let log = LogDir::open(dir.path()).await.unwrap();
    assert_eq!(log.end(), end);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), end.offset);
    log.close().await.unwrap();
}

#[tokio::test]
async fn badly_sealed_segment_fails_open_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::open(dir.path()).await.unwrap();
    log.append(b"one").await.unwrap();
    log.append(b"two").await.unwrap();
    log.rotate().await.unwrap();
    log.append(b"three").await.unwrap();
    log.close().await.unwrap();
    let path = segment_path(dir.path(), 1);
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len - 2)
        .unwrap();
    let err = LogDir::open(dir.path()).await.unwrap_err();
    assert!(matches!(err, Error::BadSegment { segment: 1, .. }), "{err}");
    assert!(err.to_string().contains("000001.log"), "{err}");
}

/// A follower opened by path (as one in another process is) waiting at the end of
/// the last segment lists the directory for a later one at most once a second (a
/// hole only a lost segment makes), but it does see one.
#[tokio::test]
async fn a_follower_opened_by_path_sees_a_hole_appear_after_its_segment() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::open(dir.path()).await.unwrap();
    log.append(b"record").await.unwrap();
    log.close().await.unwrap();
    let mut follower = DirReader::open(dir.path(), LogPosition::START)
        .await
        .unwrap()
        .follow()
        .with_poll_interval(Duration::from_millis(5));
    assert_eq!(
        follower.next_record().await.unwrap().unwrap().data,
        "record"
    );
    let waiting = tokio::time::timeout(Duration::from_millis(300), follower.next_record()).await;
    assert!(waiting.is_err(), "nothing to read yet");
    std::fs::copy(segment_path(dir.path(), 1), segment_path(dir.path(), 3)).unwrap();
    let err = tokio::time::timeout(Duration::from_secs(10), follower.next_record())
        .await
        .expect("the hole is seen")
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, Error::MissingSegment { segment: 2 }), "{err}");
}

#[tokio::test]
async fn deleted_middle_segment_fails_open_with_missing_segment() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::open(dir.path()).await.unwrap();
    for _ in 0..4 {
        log.append(b"record").await.unwrap();
        log.rotate().await.unwrap();
    }
    log.close().await.unwrap();
    std::fs::remove_file(segment_path(dir.path(), 3)).unwrap();
    let err = LogDir::open(dir.path()).await.unwrap_err();
    assert!(matches!(err, Error::MissingSegment { segment: 3 }), "{err}");
    assert!(err.to_string().contains("000003.log"), "{err}");
    // A reader in another process sees the hole too.
    let mut reader = DirReader::open(dir.path(), LogPosition::START)
        .await
        .unwrap();
    let mut got = 0;
    let err = loop {
        match reader.next_record().await {
            Some(Ok(_)) => got += 1,
            Some(Err(e)) => break e,
            None => panic!("read past a hole"),
        }
    };
    assert_eq!(got, 2);
    assert!(matches!(err, Error::MissingSegment { segment: 3 }), "{err}");
}

#[tokio::test]
async fn other_files_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["notes.txt", "7.log", "0000009.log", "000003.log.bak"] {
        std::fs::write(dir.path().join(name), b"not a segment").unwrap();
    }
    let log = LogDir::open(dir.path()).await.unwrap();
    log.append(b"x").await.unwrap();
    assert_eq!(log.segments().len(), 1);
    log.close().await.unwrap();
    for name in ["notes.txt", "7.log", "0000009.log", "000003.log.bak"] {
        assert_eq!(
            std::fs::read(dir.path().join(name)).unwrap(),
            b"not a segment"
        );
    }
}

#[tokio::test]
async fn a_second_open_fails_while_the_first_holds_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::open(dir.path()).await.unwrap();
    let err = LogDir::open(dir.path()).await.unwrap_err();
    assert!(matches!(err, Error::Locked { .. }), "{err}");
    assert!(err.to_string().contains("locked"), "{err}");
    log.close().await.unwrap();
    let again = LogDir::open(dir.path()).await.unwrap();
    again.close().await.unwrap();
}

/// A lock let go within a moment is taken: a child process forked while the log was
/// closed holds the old lock until it execs (raft's model test met this beside its
/// crash test, which spawns processes).
///
/// The lock is held here as such a child holds it (the file's `flock`), and let go
/// by closing the file, which takes no time: what the test leaves to the clock is
/// only the 20 ms pause that makes the open meet the lock busy, far inside its
/// patience (500 ms), not a close that syncs to a loaded disk. An open that ran late
/// would find the lock free and pass without waiting; one that gave up at once
/// fails.
#[tokio::test]
async fn an_open_waits_a_moment_for_a_lock_that_is_let_go() {
    let dir = tempfile::tempdir().unwrap();
    LogDir::open(dir.path())
        .await
        .unwrap()
        .close()
        .await
        .unwrap();
    let held = std::fs::File::options()
        .read(true)
        .write(true)
        .open(dir.path().join("LOCK"))
        .unwrap();
    rustix::fs::flock(&held, rustix::fs::FlockOperation::LockExclusive).unwrap();
    // Held: refused once the patience runs out.
    assert!(matches!(
        LogDir::open(dir.path()).await,
        Err(Error::Locked { .. })
    ));
    let release = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        drop(held);
    });
    let again = LogDir::open(dir.path()).await.unwrap();
    release.await.unwrap();
    again.close().await.unwrap();
}

#[tokio::test]
async fn purge_removes_whole_segments_before_a_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::open(dir.path()).await.unwrap();
    let mut ends = Vec::new();
    for seq in 0..6 {
        ends.push(log.append(make_record(3, seq)).await.unwrap());
        log.rotate().await.unwrap();
    }
    // Segment 3 ends exactly at ends[2]: segments 1..=3 go.
    assert_eq!(log.purge_before(ends[2]).await.unwrap(), vec![1, 2, 3]);
    assert!(!segment_path(dir.path(), 3).exists());
    assert!(segment_path(dir.path(), 4).exists());
    assert_eq!(log.start(), LogPosition::new(4, 0));
    assert!(matches!(
        log.read_from(ends[0]),
        Err(Error::Purged { segment: 1 })
    ));
    let records = read_all(&log, ends[2]).await;
    assert_eq!(records.len(), 3);
    // Never the active segment.
    let active = log.end().segment;
    let purged = log
        .purge_before(LogPosition::new(u64::MAX, 0))
        .await
        .unwrap();
    assert_eq!(purged, vec![4, 5, 6]);
    assert!(segment_path(dir.path(), active).exists());
    log.close().await.unwrap();
    let log = LogDir::open(dir.path()).await.unwrap();
    assert_eq!(log.start(), LogPosition::new(active, 0));
    log.close().await.unwrap();
}

#[tokio::test]
async fn purge_keeps_segments_a_reader_still_needs() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .max_segment_bytes(1024)
        .open(dir.path())
        .await
        .unwrap();
    for seq in 0..50 {
        log.append(make_record_sized(4, seq, 200)).await.unwrap();
    }
    let mut reader = log.read_from(LogPosition::START).unwrap();
    let first = reader.next_record().await.unwrap().unwrap();
    let end = log.end();
    // The reader is in segment 1: nothing can go.
    assert_eq!(log.purge_before(end).await.unwrap(), Vec::<u64>::new());
    let mut n = 1;
    let mut last = first;
    while let Some(record) = reader.next_record().await {
        let record = record.unwrap();
        n += 1;
        if n == 25 {
            // Halfway: segments before the reader's go, the rest stay.
            let purged = log.purge_before(end).await.unwrap();
            assert!(!purged.is_empty());
            assert!(purged.iter().all(|&s| s < record.end.segment));
        }
        last = record;
    }
    assert_eq!(n, 50);
    assert_eq!(last.end, end);
    drop(reader);
    let purged = log.purge_before(end).await.unwrap();
    assert!(!purged.is_empty());
    assert_eq!(log.segments().len(), 1);
    log.close().await.unwrap();
}

#[tokio::test]
async fn truncate_after_removes_later_records_and_appends_continue() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .max_segment_bytes(1000)
        .open(dir.path())
        .await
        .unwrap();
    let mut ends = Vec::new();
    for seq in 0..40 {
        ends.push(log.append(make_record_sized(5, seq, 100)).await.unwrap());
    }
    let cut = ends[9];
    assert!(log.end().segment > cut.segment);
    let mut behind = log.read_from(ends[30]).unwrap();
    behind.next_record().await.unwrap().unwrap();
    log.truncate_after(cut).await.unwrap();
    assert_eq!(log.end(), cut);
    // A reader past the cut fails rather than yield records that are gone.
    let err = behind.next_record().await.unwrap().unwrap_err();
    assert!(matches!(err, Error::TruncatedUnderReader { .. }), "{err}");
    let next = log.append(make_record_sized(6, 0, 100)).await.unwrap();
    assert_eq!(next.segment, cut.segment);
    let records = read_all(&log, LogPosition::START).await;
    assert_eq!(records.len(), 11);
    assert_eq!(verify_sized(&records[10].data), Some((6, 0)));
    // Inside a record or past the end: refused.
    let inside = LogPosition::new(cut.segment, cut.offset - 1);
    assert!(matches!(
        log.truncate_after(inside).await,
        Err(Error::InvalidPosition { .. })
    ));
    let past = LogPosition::new(next.segment + 1, 0);
    assert!(matches!(
        log.truncate_after(past).await,
        Err(Error::InvalidPosition { .. })
    ));
    log.close().await.unwrap();
    let log = LogDir::open(dir.path()).await.unwrap();
    assert_eq!(log.end(), next);
    log.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_in_process_crosses_rotations() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .max_segment_bytes(8 * 1024)
        .open(dir.path())
        .await
        .unwrap();
    let mut follower = log.read_from(LogPosition::START).unwrap().follow();
    let mut durable = log.durable_end();
    let writer = {
        let log = log.clone();
        tokio::spawn(async move {
            let mut ends = Vec::new();
            for seq in 0..300 {
                ends.push(log.append(make_record(7, seq)).await.unwrap());
                if seq % 97 == 0 {
                    log.rotate().await.unwrap();
                }
            }
            ends
        })
    };
    let mut got = Vec::new();
    for _ in 0..300 {
        let record = tokio::time::timeout(Duration::from_secs(10), follower.next_record())
            .await
            .expect("the follower was woken")
            .unwrap()
            .unwrap();
        // Never ahead of what the writer made durable.
        assert!(record.end <= *durable.borrow_and_update());
        got.push(record);
    }
    let ends = writer.await.unwrap();
    let got_ends: Vec<_> = got.iter().map(|r| r.end).collect();
    assert_eq!(got_ends, ends);
    assert!(log.segments().len() > 10);
    // Nothing more: the follower waits.
    assert!(
        tokio::time::timeout(Duration::from_millis(50), follower.next_record())
            .await
            .is_err()
    );
    log.close().await.unwrap();
}

#[tokio::test]
async fn reader_opened_by_path_reads_sealed_segments_then_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .max_segment_bytes(2048)
        .open(dir.path())
        .await
        .unwrap();
    for seq in 0..40 {
        log.append(make_record_sized(8, seq, 100)).await.unwrap();
    }
    let mut reader = DirReader::open(dir.path(), LogPosition::START)
        .await
        .unwrap()
        .follow()
        .with_poll_interval(Duration::from_millis(5));
    for seq in 0..40 {
        let record = reader.next_record().await.unwrap().unwrap();
        assert_eq!(verify_sized(&record.data), Some((8, seq)));
    }
    for seq in 40..80 {
        log.append(make_record_sized(8, seq, 100)).await.unwrap();
        let record = reader.next_record().await.unwrap().unwrap();
        assert_eq!(verify_sized(&record.data), Some((8, seq)));
    }
    log.close().await.unwrap();
}

#[tokio::test]
async fn retention_by_bytes_purges_the_oldest_segments() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .max_segment_bytes(1024)
        .retain_bytes(4096)
        .open(dir.path())
        .await
        .unwrap();
    for seq in 0..200 {
        log.append(make_record_sized(9, seq, 100)).await.unwrap();
    }
    let total: u64 = log.segments().iter().map(|s| s.1).sum();
    assert!(total <= 4096 + 1024, "{total} bytes kept");
    assert!(log.start().segment > 1);
    let records = read_all(&log, LogPosition::START).await;
    let ids: HashSet<_> = records
        .iter()
        .map(|r| verify_sized(&r.data).unwrap())
        .collect();
    assert!(ids.contains(&(9, 199)));
    log.close().await.unwrap();
}

/// Ages come from the segments' modification times, set here rather than waited
/// for: a sealed segment an hour old goes, one sealed just now stays, whatever the
/// machine's load (a 100 ms limit met by sleeping failed about 1 run in 26 under I/O
/// load).
#[tokio::test]
async fn retention_by_age_purges_old_sealed_segments() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .retain_age(Duration::from_secs(600))
        .open(dir.path())
        .await
        .unwrap();
    log.append(b"old").await.unwrap();
    log.rotate().await.unwrap();
    log.append(b"newer").await.unwrap();
    log.rotate().await.unwrap();
    log.append(b"active").await.unwrap();
    assert!(log.enforce_retention().await.unwrap().is_empty());
    let age = |segment: u64, ago: Duration| {
        std::fs::File::options()
            .write(true)
            .open(dir.path().join(format!("{segment:06}.log")))
            .unwrap()
            .set_modified(std::time::SystemTime::now() - ago)
            .unwrap()
    };
    // Just under the limit: kept.
    age(1, Duration::from_secs(590));
    assert!(log.enforce_retention().await.unwrap().is_empty());
    // Past it: purged, and only it (segment 2 is new, 3 active).
    age(1, Duration::from_secs(3600));
    assert_eq!(log.enforce_retention().await.unwrap(), vec![1]);
    assert_eq!(log.start().segment, 2);
    // The active segment is never purged for its age.
    age(2, Duration::from_secs(3600));
    age(3, Duration::from_secs(3600));
    assert_eq!(log.enforce_retention().await.unwrap(), vec![2]);
    let records = read_all(&log, LogPosition::START).await;
    assert_eq!(records.len(), 1);
    assert_eq!(&records[0].data[..], b"active");
    log.close().await.unwrap();
}

#[tokio::test]
async fn writer_publishes_its_durable_end() {
    let dir = tempfile::tempdir().unwrap();
    let log = AsyncLogWriter::create(dir.path().join("000001.log"))
        .await
        .unwrap();
    let mut durable = log.durable_end();
    assert_eq!(*durable.borrow_and_update(), 0);
    let position = log.append(b"record").await.unwrap();
    assert!(durable.has_changed().unwrap());
    assert_eq!(*durable.borrow_and_update(), position.end);
    log.close().await.unwrap();
}

#[tokio::test]
async fn a_record_larger_than_a_segment_gets_one_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .max_segment_bytes(1000)
        .open(dir.path())
        .await
        .unwrap();
    log.append(b"small").await.unwrap();
    let big = log.append(vec![7u8; 5000]).await.unwrap();
    let after = log.append(b"small again").await.unwrap();
    assert_eq!(big.segment, 2);
    assert_eq!(after.segment, 3);
    let records = read_all(&log, LogPosition::START).await;
    assert_eq!(records.len(), 3);
    assert_eq!(records[1].data.len(), 5000);
    log.close().await.unwrap();
}

/// A log of 20 records of 100 bytes from `task` (their ends), and a follower in
/// another process that has read them all.
async fn caught_up_follower(dir: &Path, task: u32) -> (LogDir, Vec<LogPosition>, DirReader) {
    let log = LogDir::open(dir).await.unwrap();
    let mut ends = Vec::new();
    for seq in 0..20 {
        ends.push(log.append(make_record_sized(task, seq, 100)).await.unwrap());
    }
    let mut follower = DirReader::open(dir, LogPosition::START)
        .await
        .unwrap()
        .follow()
        .with_poll_interval(Duration::from_millis(5));
    for _ in 0..20 {
        follower.next_record().await.unwrap().unwrap();
    }
    (log, ends, follower)
}

#[tokio::test]
async fn reader_opened_by_path_fails_when_its_segment_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let (log, ends, mut reader) = caught_up_follower(dir.path(), 10).await;
    log.truncate_after(ends[9]).await.unwrap();
    let err = tokio::time::timeout(Duration::from_secs(5), reader.next_record())
        .await
        .expect("the cut is noticed")
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, Error::TruncatedUnderReader { .. }), "{err}");
    log.close().await.unwrap();
}

#[tokio::test]
async fn an_oversized_record_is_refused_without_rotating() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .max_segment_bytes(1000)
        .open(dir.path())
        .await
        .unwrap();
    log.append(b"small").await.unwrap();
    let huge = vec![0u8; walcodec::LogDecoder::DEFAULT_MAX_RECORD_BYTES + 1];
    assert!(matches!(
        log.append(&huge).await,
        Err(Error::RecordTooLarge { .. })
    ));
    assert_eq!(log.segments().len(), 1);
    log.append(b"still fine").await.unwrap();
    log.close().await.unwrap();
}

/// A log directory of `count` records of 100 bytes from `task`, closed; its only
/// segment's bytes.
async fn segment_of(dir: &Path, task: u32, count: u32) -> (Vec<LogPosition>, Vec<u8>) {
    let log = LogDir::open(dir).await.unwrap();
    let mut ends = Vec::new();
    for seq in 0..count {
        ends.push(log.append(make_record_sized(task, seq, 100)).await.unwrap());
    }
    log.close().await.unwrap();
    (ends, std::fs::read(segment_path(dir, 1)).unwrap())
}

/// A reader in another process that read to the end of the active segment.
async fn reader_at_the_end(dir: &Path, count: u32) -> DirReader {
    let mut reader = DirReader::open(dir, LogPosition::START).await.unwrap();
    for _ in 0..count {
        reader.next_record().await.unwrap().unwrap();
    }
    assert!(reader.next_record().await.is_none());
    reader
}

#[tokio::test]
async fn reader_opened_by_path_fails_when_its_segment_is_overwritten_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let (_, original) = segment_of(dir.path(), 12, 20).await;
    // Other records of the same sizes: a segment of the same length, other bytes.
    let (_, replacement) = segment_of(other.path(), 13, 20).await;
    assert_eq!(original.len(), replacement.len());
    let mut reader = reader_at_the_end(dir.path(), 20).await;

    {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .open(segment_path(dir.path(), 1))
            .unwrap();
        file.write_all(&replacement).unwrap();
    }
    // A writer goes on after what is now in the file.
    let log = LogDir::open(dir.path()).await.unwrap();
    log.append(make_record_sized(13, 20, 100)).await.unwrap();
    log.close().await.unwrap();

    let err = reader.next_record().await.unwrap().unwrap_err();
    let Error::TruncatedUnderReader {
        position,
        reader: at,
    } = err
    else {
        panic!("{err}");
    };
    let first_changed = original
        .iter()
        .zip(&replacement)
        .position(|(a, b)| a != b)
        .unwrap() as u64;
    // The guard compares the last block read; the first change in it is reported.
    assert!(position.segment == 1 && position.offset >= first_changed);
    assert!(position.offset < original.len() as u64);
    assert_eq!(at, LogPosition::new(1, original.len() as u64));
    assert!(reader.next_record().await.is_none());
}

#[tokio::test]
async fn reader_opened_by_path_fails_when_its_segment_is_cut_and_grown_again() {
    let dir = tempfile::tempdir().unwrap();
    let (ends, original) = segment_of(dir.path(), 14, 20).await;
    let mut reader = reader_at_the_end(dir.path(), 20).await;

    // Cut after record 9, then more records than were cut: the file is longer
    // than what the reader read, so only its bytes tell.
    let log = LogDir::open(dir.path()).await.unwrap();
    log.truncate_after(ends[9]).await.unwrap();
    for seq in 100..115 {
        log.append(make_record_sized(14, seq, 100)).await.unwrap();
    }
    log.close().await.unwrap();
    let now = std::fs::read(segment_path(dir.path(), 1)).unwrap();
    assert!(now.len() > original.len());

    let err = reader.next_record().await.unwrap().unwrap_err();
    assert!(
        matches!(err, Error::TruncatedUnderReader { position, .. }
            if position.segment == 1 && position.offset >= ends[9].offset),
        "{err}"
    );
}

#[tokio::test]
async fn follower_opened_by_path_fails_when_its_segment_is_cut_and_grown_again() {
    let dir = tempfile::tempdir().unwrap();
    let (log, ends, mut follower) = caught_up_follower(dir.path(), 15).await;
    log.truncate_after(ends[4]).await.unwrap();
    for seq in 100..130 {
        log.append(make_record_sized(15, seq, 100)).await.unwrap();
    }
    let err = tokio::time::timeout(Duration::from_secs(5), follower.next_record())
        .await
        .expect("the rewrite is noticed")
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, Error::TruncatedUnderReader { .. }), "{err}");
    log.close().await.unwrap();
}

/// Zeros ahead of a writer that preallocates are not written yet: a reader in
/// another process stops at its last record, and once the writer fills them in it
/// reads the records written there, where they were written.
#[tokio::test]
async fn reader_opened_by_path_reads_preallocated_zeros_once_filled() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .writer(
            walcodec::WriterOptions::new()
                .preallocate(64 * 1024)
                .clone(),
        )
        .open(dir.path())
        .await
        .unwrap();
    for seq in 0..5 {
        log.append(make_record_sized(16, seq, 100)).await.unwrap();
    }
    let mut reader = DirReader::open(dir.path(), LogPosition::START)
        .await
        .unwrap();
    let mut seen = 0;
    while let Some(record) = reader.next_record().await {
        record.unwrap();
        seen += 1;
    }
    assert_eq!(seen, 5);
    let mut ends = Vec::new();
    for seq in 5..10 {
        ends.push(log.append(make_record_sized(16, seq, 100)).await.unwrap());
    }
    for (seq, end) in (5..10).zip(ends) {
        let record = reader.next_record().await.unwrap().unwrap();
        assert_eq!(verify_sized(&record.data), Some((16, seq)));
        assert_eq!(record.end, end);
    }
    assert!(reader.next_record().await.is_none());
    log.close().await.unwrap();
}

/// `caught_up` tells a reader in another process whether it returned every record
/// the files hold, without waiting; a record it finds is the next one returned,
/// and `DirReader` is a `Stream` of the same records.
#[tokio::test]
async fn reader_opened_by_path_knows_when_it_is_caught_up() {
    use futures::StreamExt;
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .max_segment_bytes(1024)
        .open(dir.path())
        .await
        .unwrap();
    let mut ends = Vec::new();
    for seq in 0..30 {
        ends.push(log.append(make_record_sized(17, seq, 100)).await.unwrap());
    }
    let mut follower = DirReader::open(dir.path(), LogPosition::START)
        .await
        .unwrap()
        .follow()
        .with_poll_interval(Duration::from_millis(1));
    for (seq, end) in (0..30).zip(&ends) {
        assert!(!follower.caught_up().await.unwrap());
        let record = follower.next().await.unwrap().unwrap();
        assert_eq!(verify_sized(&record.data), Some((17, seq)));
        assert_eq!(record.end, *end);
        assert_eq!(follower.position(), *end);
    }
    assert!(follower.caught_up().await.unwrap());
    assert!(follower.caught_up().await.unwrap());
    let end = log.append(make_record_sized(17, 30, 100)).await.unwrap();
    assert!(!follower.caught_up().await.unwrap());
    assert_eq!(follower.next().await.unwrap().unwrap().end, end);
    assert!(follower.caught_up().await.unwrap());
    log.close().await.unwrap();
}

#[tokio::test]
async fn reader_opened_by_path_skips_segments_a_crash_kept_from_a_purge() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .max_segment_bytes(1024)
        .open(dir.path())
        .await
        .unwrap();
    let mut ends = Vec::new();
    for seq in 0..30 {
        ends.push(log.append(make_record_sized(17, seq, 200)).await.unwrap());
    }
    let first = std::fs::read(segment_path(dir.path(), 1)).unwrap();
    let purged = log.purge_before(ends[15]).await.unwrap();
    assert!(purged.len() >= 2, "{purged:?}");
    // What a power cut can leave: the first deletion lost, a later one kept.
    std::fs::write(segment_path(dir.path(), 1), first).unwrap();
    let mut reader = DirReader::open(dir.path(), LogPosition::START)
        .await
        .unwrap();
    let record = reader.next_record().await.unwrap().unwrap();
    assert_eq!(record.start.segment, purged.last().unwrap() + 1);
    log.close().await.unwrap();
}

/// A power cut can lose a page written after the last sync while a later one
/// reaches the disk: the last segment then holds a page of zeros with records after
/// it. `open` cuts that as `AsyncLogWriter::open` does (found by
/// tests/logdir_power_cut.rs: before, it refused the directory with `BadSegment`).
#[tokio::test]
async fn a_page_lost_in_the_last_segments_unsynced_end_is_cut_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::open(dir.path()).await.unwrap();
    let mut ends = Vec::new();
    for seq in 0..50 {
        ends.push(log.append(make_record_sized(18, seq, 300)).await.unwrap());
    }
    log.close().await.unwrap();
    let path = segment_path(dir.path(), 1);
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() > 3 * 4096);
    bytes[4096..8192].fill(0);
    std::fs::write(&path, &bytes).unwrap();

    let log = LogDir::open(dir.path()).await.unwrap();
    let kept: Vec<_> = ends.iter().filter(|end| end.offset <= 4096).collect();
    assert_eq!(log.end(), *kept[kept.len() - 1]);
    let records = read_all(&log, LogPosition::START).await;
    assert_eq!(records.len(), kept.len());
    log.close().await.unwrap();
}

#[tokio::test]
async fn list_gives_segments_in_order_with_lengths_and_holes() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::open(dir.path()).await.unwrap();
    for _ in 0..6 {
        log.append(b"record").await.unwrap();
        log.rotate().await.unwrap();
    }
    log.close().await.unwrap();
    std::fs::write(dir.path().join("7.log"), b"not a segment").unwrap();
    let listed = LogDir::list(dir.path()).unwrap();
    let numbers: Vec<u64> = listed.segments.iter().map(|s| s.number).collect();
    assert_eq!(numbers, (1..=7).collect::<Vec<u64>>());
    for segment in &listed.segments {
        assert_eq!(segment.path, segment_path(dir.path(), segment.number));
        assert_eq!(segment.len, std::fs::metadata(&segment.path).unwrap().len());
    }
    assert!(listed.holes().is_empty());
    listed.check().unwrap();

    std::fs::remove_file(segment_path(dir.path(), 3)).unwrap();
    std::fs::remove_file(segment_path(dir.path(), 5)).unwrap();
    std::fs::remove_file(segment_path(dir.path(), 6)).unwrap();
    let listed = LogDir::list(dir.path()).unwrap();
    assert_eq!(listed.holes(), vec![3..=3, 5..=6]);
    assert!(matches!(
        listed.check(),
        Err(Error::MissingSegment { segment: 3 })
    ));
}

#[tokio::test]
async fn list_leaves_out_segments_a_purge_covers() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::open(dir.path()).await.unwrap();
    let mut ends = Vec::new();
    for _ in 0..5 {
        ends.push(log.append(b"record").await.unwrap());
        log.rotate().await.unwrap();
    }
    log.purge_before(ends[1]).await.unwrap();
    // A crash that kept a file the purge decided to delete.
    std::fs::write(segment_path(dir.path(), 1), b"").unwrap();
    let listed = LogDir::list(dir.path()).unwrap();
    let numbers: Vec<u64> = listed.segments.iter().map(|s| s.number).collect();
    assert_eq!(numbers, vec![3, 4, 5, 6]);
    assert_eq!(listed.purged_through, ends[1]);
    listed.check().unwrap();
    log.close().await.unwrap();
}

#[tokio::test]
async fn list_of_a_file_or_nothing_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain.log");
    std::fs::write(&file, b"").unwrap();
    assert!(matches!(LogDir::list(&file), Err(Error::Io(_))));
    assert!(matches!(
        LogDir::list(dir.path().join("absent")),
        Err(Error::Io(_))
    ));
}

/// A LogDir preallocates by default, and never more than a segment at a time: the
/// writer's 1 MiB step is capped at `max_segment_bytes`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn segments_are_preallocated_at_most_a_segment_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .max_segment_bytes(64 * 1024)
        .open(dir.path())
        .await
        .unwrap();
    let end = log.append(b"first").await.unwrap();
    let active = dir.path().join(format!("{:06}.log", end.segment));
    assert_eq!(std::fs::metadata(&active).unwrap().len(), 64 * 1024);
    // A sealed segment is cut to its records.
    let sealed = log.rotate().await.unwrap() - 1;
    let sealed = dir.path().join(format!("{sealed:06}.log"));
    assert_eq!(std::fs::metadata(&sealed).unwrap().len(), end.offset);
    log.close().await.unwrap();
}
