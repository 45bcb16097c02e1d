//! A `LogDir` of Pebble's WAL-sync segments (`LogDirOptions::dialect(Dialect::Pebble)`):
//! segment N is log N, each sealed segment ends with the EOF trailer and reads in
//! the independent reference reader of `pebble_support` exactly as appended;
//! reopening cuts the active segment's trailer; the directory's dialect is kept
//! in its `DIALECT` file and a directory of the other kind is refused; recovery
//! applies Pebble's rule; recycled segments, purges, truncation, followers (in
//! this process and another) and a SIGKILL of a child writing all keep every
//! acknowledged record and never read a stale one.

use crate::pebble_support;
use crate::writer_support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use pebble_support::{reference_read_pebble, PebbleEnd};
use walcodec::{
    Dialect, DirReader, Error, LogDir, LogDirOptions, LogFormat, LogPosition, WriterOptions,
};
use writer_support::{make_record, verify};

const SEGMENT_BYTES: u64 = 16 * 1024;

fn pebble() -> LogDirOptions {
    let mut options = LogDir::builder();
    options
        .dialect(Dialect::Pebble)
        .max_segment_bytes(SEGMENT_BYTES);
    options
}

/// Records of 10 B to 40 KB: some span blocks, some get a segment of their own.
fn record(i: u32) -> Vec<u8> {
    let len = [10usize, 700, 3000, 40_000, 120][(i % 5) as usize];
    let mut record = format!("record {i} ").into_bytes();
    record.resize(len, b'a' + (i % 26) as u8);
    record
}

async fn append(log: &LogDir, from: u32, to: u32) -> Vec<(LogPosition, Vec<u8>)> {
    let mut appended = Vec::new();
    for i in from..to {
        let data = record(i);
        appended.push((log.append(&data).await.unwrap(), data));
    }
    appended
}

async fn read_all(mut reader: DirReader) -> Vec<(LogPosition, Vec<u8>)> {
    let mut records = Vec::new();
    while let Some(record) = reader.next_record().await {
        let record = record.unwrap();
        records.push((record.end, record.data.to_vec()));
    }
    records
}

fn segment_path(dir: &Path, number: u64) -> std::path::PathBuf {
    dir.join(format!("{number:06}.log"))
}

/// Each segment of `dir` read by the reference reader as log N: its records, in
/// order, with how each ended.
fn reference_segments(dir: &Path) -> Vec<(u64, Vec<Vec<u8>>, PebbleEnd)> {
    LogDir::list(dir)
        .unwrap()
        .segments
        .iter()
        .map(|segment| {
            let bytes = std::fs::read(&segment.path).unwrap();
            let read = reference_read_pebble(&bytes, segment.number);
            (segment.number, read.records, read.end)
        })
        .collect()
}

/// The EOF trailer of segment `number` at the end of `bytes`.
fn ends_with_trailer(bytes: &[u8], number: u64) -> bool {
    bytes.len() >= 11
        && bytes[bytes.len() - 11..bytes.len() - 4] == [0, 0, 0, 0, 0, 0, 5]
        && bytes[bytes.len() - 4..] == ((number + 1) as u32).to_le_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn segments_are_pebble_wals_that_read_back_in_every_reader() {
    let dir = tempfile::tempdir().unwrap();
    let log = pebble().open(dir.path()).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("DIALECT")).unwrap(),
        "pebble\n"
    );
    let mut appended = append(&log, 0, 60).await;
    assert!(log.segments().len() > 4, "{:?}", log.segments());
    // In this process, bounded by the durable end.
    let read = read_all(log.read_from(LogPosition::START).unwrap()).await;
    assert_eq!(read, appended);
    let end = log.close().await.unwrap();

    let segments = LogDir::list(dir.path()).unwrap().segments;
    let mut expected = appended.iter().map(|(_, data)| data.clone());
    for segment in &segments {
        let bytes = std::fs::read(&segment.path).unwrap();
        // Sealed, or closed: each ends with its trailer, within the size limit
        // unless it holds one record larger than the limit.
        assert!(ends_with_trailer(&bytes, segment.number), "{segment:?}");
        let read = reference_read_pebble(&bytes, segment.number);
        assert_eq!(read.end, PebbleEnd::Eof, "{segment:?}");
        assert!(
            bytes.len() as u64 <= SEGMENT_BYTES || read.records.len() == 1,
            "{segment:?}: {} bytes, {} records",
            bytes.len(),
            read.records.len()
        );
        for data in read.records {
            assert_eq!(Some(data), expected.next(), "{segment:?}");
        }
    }
    assert_eq!(expected.next(), None);
    assert_eq!(end.segment, segments.last().unwrap().number);

    // Another process's reader goes by the DIALECT file.
    let read = read_all(
        DirReader::open(dir.path(), LogPosition::START)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(read, appended);

    // Reopened: the active segment's trailer is cut, appends go on after its
    // last record, a checkpoint still reads from there.
    let active = segments.last().unwrap().number;
    let checkpoint = appended.last().unwrap().0;
    let log = pebble().open(dir.path()).await.unwrap();
    assert_eq!(log.end(), checkpoint);
    assert_eq!(
        std::fs::metadata(segment_path(dir.path(), active))
            .unwrap()
            .len(),
        checkpoint.offset
    );
    let more = append(&log, 60, 70).await;
    let read = read_all(log.read_from(checkpoint).unwrap()).await;
    assert_eq!(read, more);
    appended.extend(more);
    log.close().await.unwrap();
    for (number, _, end) in reference_segments(dir.path()) {
        assert_eq!(end, PebbleEnd::Eof, "segment {number}");
    }
    let read = read_all(
        DirReader::open(dir.path(), LogPosition::START)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(read, appended);
}

#[tokio::test]
async fn a_directory_of_the_other_dialect_is_refused() {
    // Pebble's segments, opened without the dialect: refused, nothing changed.
    let dir = tempfile::tempdir().unwrap();
    let log = pebble().open(dir.path()).await.unwrap();
    append(&log, 0, 10).await;
    log.close().await.unwrap();
    let before = reference_segments(dir.path());
    match LogDir::open(dir.path()).await {
        Err(Error::WrongDialect {
            found, expected, ..
        }) => assert_eq!((found, expected), (Dialect::Pebble, Dialect::LevelDb)),
        other => panic!("{other:?}"),
    }
    // Without the DIALECT file, the segments' headers tell.
    std::fs::remove_file(dir.path().join("DIALECT")).unwrap();
    assert!(matches!(
        LogDir::open(dir.path()).await,
        Err(Error::WrongDialect {
            found: Dialect::Pebble,
            ..
        })
    ));
    assert_eq!(reference_segments(dir.path()), before);

    // LevelDB's segments with records, opened as Pebble's: refused.
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::open(dir.path()).await.unwrap();
    log.append(b"legacy").await.unwrap();
    log.close().await.unwrap();
    match pebble().open(dir.path()).await {
        Err(Error::WrongDialect {
            found, expected, ..
        }) => assert_eq!((found, expected), (Dialect::LevelDb, Dialect::Pebble)),
        other => panic!("{other:?}"),
    }
    assert!(!dir.path().join("DIALECT").exists());

    // A directory that holds no record yet takes the dialect asked for.
    let dir = tempfile::tempdir().unwrap();
    LogDir::open(dir.path())
        .await
        .unwrap()
        .close()
        .await
        .unwrap();
    let log = pebble().open(dir.path()).await.unwrap();
    log.append(b"wal-sync").await.unwrap();
    log.close().await.unwrap();
    assert!(dir.path().join("DIALECT").exists());

    // One log number per segment: a writer format with its own is refused.
    let dir = tempfile::tempdir().unwrap();
    let refused = pebble()
        .writer(WriterOptions::new().format(LogFormat::pebble(3)))
        .open(dir.path())
        .await;
    assert!(matches!(refused, Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::InvalidInput));
}

#[tokio::test]
async fn a_sealed_segment_must_end_with_its_trailer_and_damage_is_judged_by_synced_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = pebble();
    options.max_segment_bytes(256 * 1024);
    let log = options.open(dir.path()).await.unwrap();
    append(&log, 0, 40).await;
    log.close().await.unwrap();
    let first = segment_path(dir.path(), 1);
    let sealed = std::fs::read(&first).unwrap();
    assert!(sealed.len() > 4 * 32 * 1024);
    let source_of = |opened: Result<LogDir, Error>| match opened {
        Err(Error::BadSegment { segment: 1, source }) => *source,
        other => panic!("{other:?}"),
    };

    // Its trailer cut: badly sealed.
    std::fs::write(&first, &sealed[..sealed.len() - 11]).unwrap();
    assert!(matches!(
        source_of(options.open(dir.path()).await),
        Error::Corruption {
            kind: walcodec::CorruptionKind::TruncatedTail,
            ..
        }
    ));
    // A flipped byte in its second record, which the synced offsets of the
    // fragments in the blocks after prove was written: corruption.
    let mut damaged = sealed.clone();
    damaged[30] ^= 0x40;
    std::fs::write(&first, &damaged).unwrap();
    assert!(matches!(
        reference_read_pebble(&damaged, 1).end,
        PebbleEnd::Corrupt { .. }
    ));
    assert!(matches!(
        source_of(options.open(dir.path()).await),
        Error::Corruption {
            kind: walcodec::CorruptionKind::ChecksumMismatch,
            ..
        }
    ));
    // In its last block nothing proves it: Pebble's reader ends the log there,
    // short of the trailer, so the sealed segment is still refused.
    let mut late = sealed.clone();
    let at = sealed.len() - 40;
    late[at] ^= 0x40;
    std::fs::write(&first, &late).unwrap();
    assert_eq!(
        reference_read_pebble(&late, 1).end,
        PebbleEnd::UnexpectedEof
    );
    assert!(matches!(
        source_of(options.open(dir.path()).await),
        Error::Corruption {
            kind: walcodec::CorruptionKind::TruncatedTail,
            ..
        }
    ));
    std::fs::write(&first, &sealed).unwrap();
    let log = options.open(dir.path()).await.unwrap();
    log.close().await.unwrap();
}

#[tokio::test]
async fn purge_and_truncate_work_on_records_ends_before_the_trailer() {
    let dir = tempfile::tempdir().unwrap();
    let log = pebble().open(dir.path()).await.unwrap();
    let appended = append(&log, 0, 40).await;
    let segments = log.segments();
    // The last record of the second segment: its end is before the trailer.
    let second = segments[1].0;
    let (checkpoint, _) = appended
        .iter()
        .rev()
        .find(|(end, _)| end.segment == second)
        .unwrap()
        .clone();
    assert_eq!(checkpoint.offset + 11, segments[1].1);
    let purged = log.purge_before(checkpoint).await.unwrap();
    assert_eq!(purged, vec![segments[0].0, second]);
    let after: Vec<_> = appended
        .iter()
        .filter(|(end, _)| *end > checkpoint)
        .cloned()
        .collect();
    assert_eq!(read_all(log.read_from(checkpoint).unwrap()).await, after);

    // Truncating into a sealed segment: it becomes the active one, its trailer
    // gone, and appends go on there.
    let third = segments[2].0;
    let (cut, _) = appended
        .iter()
        .find(|(end, _)| end.segment == third)
        .unwrap()
        .clone();
    log.truncate_after(cut).await.unwrap();
    assert_eq!(log.end(), cut);
    let more = append(&log, 100, 103).await;
    assert_eq!(more[0].0.segment, third);
    log.close().await.unwrap();
    let log = pebble().open(dir.path()).await.unwrap();
    let read = read_all(log.read_from(checkpoint).unwrap()).await;
    let mut expected: Vec<_> = after.into_iter().filter(|(end, _)| *end <= cut).collect();
    expected.extend(more);
    assert_eq!(read, expected);
    // A restart keeps the purge: a checkpoint at the purged segment's last record
    // reads on from the first segment kept.
    assert_eq!(read_all(log.read_from(checkpoint).unwrap()).await, expected);
    log.close().await.unwrap();
    for (number, _, end) in reference_segments(dir.path()) {
        assert_eq!(end, PebbleEnd::Eof, "segment {number}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recycled_segments_hold_stale_wal_sync_chunks_that_are_never_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = pebble();
    options.recycle_segments(2).max_segment_bytes(64 * 1024);
    let log = options.open(dir.path()).await.unwrap();
    let mut follower = log.read_from(LogPosition::START).unwrap().follow();
    let mut kept = Vec::new();
    let mut read = Vec::new();
    for round in 0..6u32 {
        // Small records after the large ones of the round before: a reused file
        // holds its earlier use's chunks past the new records.
        let appended = if round % 2 == 0 {
            append(&log, round * 100, round * 100 + 40).await
        } else {
            let mut appended = Vec::new();
            for i in 0..30 {
                let data = format!("small {round} {i}").into_bytes();
                appended.push((log.append(&data).await.unwrap(), data));
            }
            appended
        };
        for _ in 0..appended.len() {
            let record = follower.next_record().await.unwrap().unwrap();
            read.push((record.end, record.data.to_vec()));
        }
        kept.extend(appended);
        log.rotate().await.unwrap();
        let end = log.end();
        let purged = log
            .purge_before(LogPosition::new(end.segment - 1, 0))
            .await
            .unwrap();
        kept.retain(|(pos, _)| !purged.contains(&pos.segment));
    }
    assert_eq!(
        read.iter()
            .filter(|(pos, _)| pos.segment >= log.start().segment)
            .count(),
        kept.len()
    );
    let pooled = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_str()
                .unwrap()
                .ends_with(".recycle")
        })
        .count();
    assert!(pooled > 0, "nothing pooled");
    let active = log.end().segment;
    // The active segment is a reused file: its earlier use's bytes follow.
    log.append(b"x").await.unwrap();
    kept.push((log.end(), b"x".to_vec()));
    let live = std::fs::read(segment_path(dir.path(), active)).unwrap();
    assert!(live.len() > 64, "the active segment is not a reused file");
    let reference = reference_read_pebble(&live, active);
    assert_eq!(reference.records, vec![b"x".to_vec()]);
    assert_eq!(reference.end, PebbleEnd::UnexpectedEof);
    // Another process's reader reads the records only.
    let mut other = DirReader::open(dir.path(), LogPosition::START)
        .await
        .unwrap();
    let mut seen = Vec::new();
    while let Some(record) = other.next_record().await {
        let record = record.unwrap();
        seen.push((record.end, record.data.to_vec()));
    }
    assert_eq!(seen, kept);
    log.close().await.unwrap();
    // Closed: each reused segment cut after its trailer.
    for (number, _, end) in reference_segments(dir.path()) {
        assert_eq!(end, PebbleEnd::Eof, "segment {number}");
    }
    let log = options.open(dir.path()).await.unwrap();
    assert_eq!(
        read_all(log.read_from(LogPosition::START).unwrap()).await,
        kept
    );
    log.close().await.unwrap();
}

#[tokio::test]
async fn replication_refuses_a_pebble_directory() {
    let dir = tempfile::tempdir().unwrap();
    let log = pebble().open(dir.path()).await.unwrap();
    log.append(b"one").await.unwrap();
    let (primary_end, _replica_end) = tokio::io::duplex(1024);
    assert!(matches!(
        log.serve_replica(primary_end).await,
        Err(Error::WrongDialect {
            found: Dialect::Pebble,
            ..
        })
    ));
    log.close().await.unwrap();
}

const CHILD_ENV: &str = "WALCODEC_LOGDIR_PEBBLE_CHILD";
const MODE_ENV: &str = "WALCODEC_LOGDIR_PEBBLE_MODE";

/// The writer of the crash and follower tests, run as a child process.
#[test]
#[ignore = "the child process of the Pebble LogDir crash and follower tests"]
fn pebble_logdir_child() {
    // Run by hand (`--include-ignored`), it has nothing to check: say so by failing.
    let path = std::env::var_os(CHILD_ENV).unwrap_or_else(|| {
        panic!("{CHILD_ENV} is not set: only the Pebble LogDir crash and follower tests run this child")
    });
    let mode = std::env::var(MODE_ENV).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let log = pebble()
            .writer(WriterOptions::new().max_batch_bytes(16 * 1024))
            .open(path)
            .await
            .unwrap();
        if mode == "write" {
            for seq in 0..1500 {
                log.append(make_record(7, seq)).await.unwrap();
            }
            log.close().await.unwrap();
            return;
        }
        let mut tasks = Vec::new();
        for task in 0..8u32 {
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                for seq in 0.. {
                    let end = log.append(make_record(task, seq)).await.unwrap();
                    eprintln!("ack {task} {seq} {end}");
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
}

fn spawn_child(dir: &Path, mode: &str) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &child_test_name!("pebble_logdir_child"),
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_ENV, dir)
        .env(MODE_ENV, mode)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// SIGKILL a child appending to a Pebble LogDir from many tasks while it rotates,
/// then reopen: every acknowledged record is there where it was acknowledged, the
/// sealed segments end with their trailers, no segment reads as corrupt by
/// Pebble's rule, and appends go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_of_the_writer_loses_no_acknowledged_record() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..3u64 {
        let mut child = spawn_child(dir.path(), "crash");
        let stderr = child.stderr.take().unwrap();
        let (count_tx, count_rx) = std::sync::mpsc::channel();
        let acks = std::thread::spawn(move || {
            let mut acked = Vec::new();
            let mut stderr = BufReader::new(stderr);
            let mut line = String::new();
            // A line cut by the kill has no newline: not counted as acknowledged.
            while stderr.read_line(&mut line).unwrap_or(0) > 0 {
                if let Some(ack) = line.strip_suffix('\n').and_then(|l| l.strip_prefix("ack ")) {
                    let mut fields = ack.split(' ');
                    let task: u32 = fields.next().unwrap().parse().unwrap();
                    let seq: u32 = fields.next().unwrap().parse().unwrap();
                    let end: LogPosition = fields.next().unwrap().parse().unwrap();
                    acked.push((task, seq, end));
                    let _ = count_tx.send(acked.len());
                }
                line.clear();
            }
            acked
        });
        // Killed once it has acknowledged some records (more each round), while it
        // goes on appending and rotating: an event, not a sleep, so a loaded machine
        // that runs the child slowly still kills it with something acknowledged.
        let wanted = [1, 50, 200][round as usize];
        let counted = tokio::task::spawn_blocking(move || loop {
            // A generous hang guard, no more.
            match count_rx.recv_timeout(Duration::from_secs(120)) {
                Ok(n) if n >= wanted => return Ok(()),
                Ok(_) => {}
                Err(e) => return Err(e),
            }
        });
        if let Err(e) = counted.await.unwrap() {
            panic!("round {round}: {wanted} acknowledgements never came: {e}");
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let acked = acks.join().unwrap();
        assert!(!acked.is_empty(), "round {round}: nothing acknowledged");

        let segments = reference_segments(dir.path());
        let last = segments.last().unwrap().0;
        for (number, _, end) in &segments {
            assert!(
                !matches!(end, PebbleEnd::Corrupt { .. }),
                "segment {number}"
            );
            if *number != last {
                assert_eq!(*end, PebbleEnd::Eof, "sealed segment {number}");
            }
        }
        let log = pebble().open(dir.path()).await.unwrap();
        let read = read_all(log.read_from(LogPosition::START).unwrap()).await;
        let ends: std::collections::HashMap<(u32, u32), LogPosition> = read
            .iter()
            .filter_map(|(end, data)| Some((verify(data)?, *end)))
            .collect();
        for (task, seq, end) in acked {
            assert_eq!(ends.get(&(task, seq)), Some(&end), "record {task} {seq}");
        }
        log.append(b"after the crash").await.unwrap();
        log.close().await.unwrap();
    }
}

/// A follower in this process reads a Pebble LogDir that a child process writes
/// and rotates, from the files alone (the DIALECT file tells their dialect).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_in_another_process_reads_every_record() {
    let dir = tempfile::tempdir().unwrap();
    // Created first, so that the follower opens a marked directory.
    pebble()
        .open(dir.path())
        .await
        .unwrap()
        .close()
        .await
        .unwrap();
    let mut child = spawn_child(dir.path(), "write");
    let mut follower = DirReader::open(dir.path(), LogPosition::START)
        .await
        .unwrap()
        .follow()
        .with_poll_interval(Duration::from_millis(5));
    for seq in 0..1500 {
        let record = tokio::time::timeout(Duration::from_secs(30), follower.next_record())
            .await
            .expect("the follower stalled")
            .unwrap()
            .unwrap();
        assert_eq!(verify(&record.data), Some((7, seq)));
    }
    assert!(child.wait().unwrap().success());
    assert!(LogDir::list(dir.path()).unwrap().segments.len() > 3);
}

/// Checkpoints are records' ends, never past a trailer: the position `close`
/// returns is where appends go on after a reopen, and a record ending fewer bytes
/// than a trailer before its block's end (zeros pad the block, the trailer starts
/// the next) still purges with its segment, before and after a restart.
#[tokio::test]
async fn checkpoints_at_records_ends_survive_trailers_and_their_padding() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = pebble();
    options.max_segment_bytes(1 << 20);
    let log = options.open(dir.path()).await.unwrap();
    // 19-byte header + 32,744 bytes: ends 5 bytes before the block's end.
    let padded = vec![b'p'; 32_744];
    let first_end = log.append(&padded).await.unwrap();
    assert_eq!(first_end, LogPosition::new(1, 32_763));
    log.rotate().await.unwrap();
    assert_eq!(log.segments()[0], (1, 32_768 + 11));
    let second_end = log.append(b"second").await.unwrap();
    let closed = log.close().await.unwrap();
    assert_eq!(closed, second_end);

    for restart in [false, true] {
        let log = options.open(dir.path()).await.unwrap();
        assert_eq!(log.end(), second_end);
        let third = log.append(b"third").await.unwrap();
        // From the position `close` returned: the record appended after it.
        let read = read_all(log.read_from(closed).unwrap()).await;
        assert_eq!(
            read.first().unwrap().1,
            b"third".to_vec(),
            "restart {restart}"
        );
        let read = read_all(log.read_from(first_end).unwrap()).await;
        assert_eq!(read[0], (second_end, b"second".to_vec()));
        if restart {
            assert_eq!(log.purge_before(first_end).await.unwrap(), vec![1]);
            let read = read_all(log.read_from(first_end).unwrap()).await;
            assert_eq!(read[0], (second_end, b"second".to_vec()));
        }
        log.truncate_after(second_end).await.unwrap();
        assert!(third > second_end);
        log.close().await.unwrap();
    }
    let log = options.open(dir.path()).await.unwrap();
    let read = read_all(log.read_from(first_end).unwrap()).await;
    assert_eq!(read, vec![(second_end, b"second".to_vec())]);
    log.close().await.unwrap();
}
