//! Following a log that another process writes in place: a file preallocated with
//! zeros ([`WriterOptions::preallocate`]), a recycled RocksDB WAL whose file still
//! holds an earlier log (another log number), and both. A writer in a child process
//! appends and reports each record's position; a [`LogTailer`] in this process must
//! yield every record exactly once, in order, at those positions, and nothing else.
//!
//! Also: the writer killed with SIGKILL mid-stream, then reopened (which cuts its
//! torn tail) and appending again: the follower goes on without a gap.
//!
//! The child is this test binary run again with `WALCODEC_IN_PLACE_CHILD` set.
//! `WALCODEC_IN_PLACE_RECORDS` sets the number of records (default 3,000; see
//! `scripts/follow-in-place-soak.sh` for 100,000).

use crate::writer_support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use bytes::BytesMut;
use futures::StreamExt;
use walcodec::{
    AsyncLogWriter, Dialect, DirReader, LogDecoder, LogDecoderBuilder, LogDir, LogEncoder,
    LogPosition, LogTailer, Position, WriterOptions,
};
use writer_support::{make_record, verify};

const CHILD_ENV: &str = "WALCODEC_IN_PLACE_CHILD";
const MODE_ENV: &str = "WALCODEC_IN_PLACE_MODE";
const RECORDS_ENV: &str = "WALCODEC_IN_PLACE_RECORDS";
const FIRST_ENV: &str = "WALCODEC_IN_PLACE_FIRST";
/// The log number of the log written in place; the file's earlier log had 1.
const LOG_NUMBER: u64 = 2;
const TASK: u32 = 9;
/// The segment size of the `dir-small` child's LogDir.
const DIR_SMALL_SEGMENT_BYTES: u64 = 64 * 1024;

fn records() -> u32 {
    std::env::var(RECORDS_ENV)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3_000)
}

fn say(line: String) {
    std::io::stderr()
        .lock()
        .write_all(format!("{line}\n").as_bytes())
        .unwrap();
}

/// The child: run only by the tests below.
#[test]
#[ignore = "the child process of the in-place follower tests"]
fn in_place_child() {
    // Run by hand (`--include-ignored`), it has nothing to check: say so by failing.
    let path = std::env::var_os(CHILD_ENV).unwrap_or_else(|| {
        panic!("{CHILD_ENV} is not set: only the in-place follower tests run this child")
    });
    let mode = std::env::var(MODE_ENV).unwrap();
    let count = records();
    let first: u32 = std::env::var(FIRST_ENV).map_or(0, |n| n.parse().unwrap());
    match mode.as_str() {
        "preallocated" => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let writer = AsyncLogWriter::options()
                    .preallocate(256 * 1024)
                    .open(&path)
                    .await
                    .unwrap();
                say("ready".into());
                for seq in first..count {
                    let at = if seq % 8 == 0 {
                        writer.append(make_record(TASK, seq)).await.unwrap()
                    } else {
                        writer
                            .append_buffered(make_record(TASK, seq))
                            .await
                            .unwrap()
                    };
                    say(format!("ack {seq} {} {}", at.start, at.end));
                }
                writer.close().await.unwrap();
            });
        }
        "in-place" => write_in_place(Path::new(&path), count),
        "dir-preallocated" | "dir-recycled" | "dir-both" | "dir-small" => {
            write_dir(Path::new(&path), &mode, count)
        }
        other => panic!("unknown mode {other}"),
    }
}

/// RocksDB's way with a recycled WAL: records of the new log number written from
/// offset 0 over the file's earlier log, synced now and then; some writes are
/// split in two, so a follower may see a fragment cut short.
fn write_in_place(path: &Path, count: u32) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    let mut encoder = LogEncoder::builder().recyclable(LOG_NUMBER).build();
    let mut buf = BytesMut::new();
    say("ready".into());
    for seq in 0..count {
        let offset = encoder.offset();
        buf.clear();
        let at = encoder.encode_record(&make_record(TASK, seq), &mut buf);
        if seq % 7 == 3 && buf.len() > 20 {
            let split = buf.len() / 2 + seq as usize % 7;
            file.write_all_at(&buf[..split], offset).unwrap();
            std::thread::yield_now();
            file.write_all_at(&buf[split..], offset + split as u64)
                .unwrap();
        } else {
            file.write_all_at(&buf, offset).unwrap();
        }
        if seq % 16 == 0 {
            file.sync_data().unwrap();
        }
        say(format!("ack {seq} {} {}", at.start, at.end));
    }
    file.sync_data().unwrap();
}

/// A LogDir of 256 KiB segments, preallocated and/or recycling its segments; every
/// 400 appends it purges what the follower (in the parent) has read, as its
/// `follower.pos` file beside the directory says. `dir-small`: 64 KiB segments,
/// preallocated, no recycling.
fn write_dir(dir: &Path, mode: &str, count: u32) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let mut options = LogDir::builder();
        options.max_segment_bytes(DIR_SMALL_SEGMENT_BYTES);
        if mode != "dir-small" {
            options.max_segment_bytes(256 * 1024);
        }
        let mut writer = WriterOptions::new();
        // More than a segment: the LogDir preallocates a segment at a time.
        writer.preallocate(if mode == "dir-recycled" { 0 } else { 1 << 20 });
        options.writer(writer);
        if mode == "dir-recycled" || mode == "dir-both" {
            options.recycle_segments(4);
        }
        let log = options.open(dir).await.unwrap();
        say("ready".into());
        let progress = dir.with_extension("pos");
        for seq in 0..count {
            let end = log.append(make_record(TASK, seq)).await.unwrap();
            say(format!("ack {seq} {} {}", end.segment, end.offset));
            if seq % 400 == 399 {
                if let Some(read) = std::fs::read_to_string(&progress)
                    .ok()
                    .and_then(|s| s.trim().parse::<LogPosition>().ok())
                {
                    log.purge_before(read).await.unwrap();
                }
            }
        }
        log.close().await.unwrap();
    });
}

fn spawn_child(path: &Path, mode: &str, first: u32) -> std::process::Child {
    spawn_child_of(path, mode, first, records())
}

fn spawn_child_of(path: &Path, mode: &str, first: u32, count: u32) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &child_test_name!("in_place_child"),
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, path)
        .env(MODE_ENV, mode)
        .env(FIRST_ENV, first.to_string())
        .env(RECORDS_ENV, count.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The child's acknowledgements, (seq, position), as they come; "ready" first.
fn acks(child: &mut std::process::Child) -> mpsc::Receiver<Option<(u32, Position)>> {
    acks_as(child, |start, end| Position {
        start: start.parse().unwrap(),
        end: end.parse().unwrap(),
    })
}

/// A LogDir child's acknowledgements: (seq, end).
fn dir_acks(child: &mut std::process::Child) -> mpsc::Receiver<Option<(u32, LogPosition)>> {
    acks_as(child, |segment, offset| {
        LogPosition::new(segment.parse().unwrap(), offset.parse().unwrap())
    })
}

fn acks_as<P: Send + 'static>(
    child: &mut std::process::Child,
    position: fn(&str, &str) -> P,
) -> mpsc::Receiver<Option<(u32, P)>> {
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let fields: Vec<&str> = line.split(' ').collect();
            let sent = match fields.as_slice() {
                ["ready"] => tx.send(None),
                ["ack", seq, a, b] => tx.send(Some((seq.parse().unwrap(), position(a, b)))),
                _ => Ok(()),
            };
            if sent.is_err() {
                break;
            }
        }
    });
    rx
}

/// A file holding an earlier log (number 1, recyclable headers) of about `bytes`
/// bytes, then zeros up to `len` (preallocated space) when `len` is longer.
fn earlier_log(path: &Path, bytes: u64, len: u64) {
    let mut encoder = LogEncoder::builder().recyclable(1).build();
    let mut log = BytesMut::new();
    let mut seq = 0;
    while (log.len() as u64) < bytes {
        encoder.encode_record(&make_record(1, seq), &mut log);
        seq += 1;
    }
    std::fs::write(path, &log).unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.set_len(len.max(log.len() as u64)).unwrap();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Follows the log at `path` that `child` writes: every record once, in order, at
/// the positions the child acknowledged, and then nothing more.
fn follow_child(
    path: &Path,
    mut child: std::process::Child,
    builder: LogDecoderBuilder,
    count: u32,
) {
    let acks = acks(&mut child);
    assert_eq!(acks.recv().unwrap(), None, "the child is ready");
    let runtime = runtime();
    let got = runtime.block_on(async {
        let mut tail = LogTailer::open_at(path, 0, &builder)
            .await
            .unwrap()
            .with_poll_interval(Duration::from_millis(1));
        let mut got = Vec::new();
        for _ in 0..count {
            let record = tokio::time::timeout(Duration::from_secs(60), tail.next_record())
                .await
                .expect("the follower keeps up")
                .unwrap()
                .unwrap();
            let seq = verify(&record.data).map(|(task, seq)| {
                assert_eq!(task, TASK, "a record of the file's earlier log");
                seq
            });
            got.push((seq.expect("an intact record"), record.position));
        }
        assert!(child.wait().unwrap().success());
        // The writer is gone: nothing more is there to read.
        assert!(tail.caught_up().await.unwrap());
        got
    });
    let acked: Vec<(u32, Position)> = acks.iter().flatten().collect();
    assert_eq!(acked.len(), count as usize);
    for (i, (got, acked)) in got.iter().zip(&acked).enumerate() {
        assert_eq!(got, acked, "record {i}");
    }
}

#[test]
fn follows_a_preallocated_file_written_by_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000002.log");
    let child = spawn_child(&path, "preallocated", 0);
    follow_child(&path, child, LogDecoder::builder(), records());
}

#[test]
fn follows_a_recycled_wal_written_by_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000002.log");
    let count = records();
    earlier_log(&path, u64::from(count) * 1_400, 0);
    let child = spawn_child(&path, "in-place", 0);
    let mut builder = LogDecoder::builder();
    builder.dialect(Dialect::RocksDb).log_number(LOG_NUMBER);
    follow_child(&path, child, builder, count);
}

#[test]
fn follows_a_recycled_and_preallocated_wal_written_by_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000002.log");
    let count = records();
    // The earlier log covers half of what the new one writes; zeros the rest.
    earlier_log(&path, u64::from(count) * 500, u64::from(count) * 1_400);
    let child = spawn_child(&path, "in-place", 0);
    let mut builder = LogDecoder::builder();
    builder.dialect(Dialect::RocksDb).log_number(LOG_NUMBER);
    follow_child(&path, child, builder, count);
}

/// Follows the LogDir at `dir` that a child writes in `mode` from another process:
/// every record once, in order, ending where the child acknowledged it; the
/// follower's progress goes to the file the child purges by.
fn follow_dir_child(mode: &str) {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("log");
    let count = records();
    let mut child = spawn_child(&dir, mode, 0);
    let acks = dir_acks(&mut child);
    assert_eq!(acks.recv().unwrap(), None, "the child is ready");
    let progress = dir.with_extension("pos");
    let runtime = runtime();
    let got = runtime.block_on(async {
        let mut follower = DirReader::open(&dir, LogPosition::START)
            .await
            .unwrap()
            .follow()
            .with_poll_interval(Duration::from_millis(1));
        let mut got: Vec<(u32, LogPosition)> = Vec::new();
        for i in 0..count {
            // Through `Stream`, as a consumer of the log would take it.
            let record = tokio::time::timeout(Duration::from_secs(60), follower.next())
                .await
                .unwrap_or_else(|_| {
                    let files: Vec<_> = std::fs::read_dir(&dir)
                        .unwrap()
                        .map(|e| {
                            let e = e.unwrap();
                            (e.file_name(), e.metadata().unwrap().len())
                        })
                        .collect();
                    // Which records it skipped, if it skipped any, and where.
                    let gaps: Vec<String> = got
                        .windows(2)
                        .filter(|w| w[1].0 != w[0].0 + 1)
                        .map(|w| format!("{} at {} then {} at {}", w[0].0, w[0].1, w[1].0, w[1].1))
                        .collect();
                    panic!(
                        "{mode}: the follower is stuck after {i} records: {follower:?} {files:?}; \
                         gaps in what it returned: {gaps:?}"
                    )
                })
                .unwrap()
                .unwrap_or_else(|e| panic!("{mode}: after {i} records: {e}"));
            let (task, seq) = verify(&record.data).expect("an intact record");
            assert_eq!(task, TASK, "a record of a recycled file's earlier use");
            got.push((seq, record.end));
            if i % 100 == 99 {
                std::fs::write(&progress, record.end.to_string()).unwrap();
            }
        }
        assert!(child.wait().unwrap().success());
        // The writer closed the log: nothing more is there to read.
        assert!(follower.caught_up().await.unwrap());
        got
    });
    let acked: Vec<(u32, LogPosition)> = acks.iter().flatten().collect();
    assert_eq!(acked.len(), count as usize);
    for (i, (got, acked)) in got.iter().zip(&acked).enumerate() {
        assert_eq!(got, acked, "{mode}: record {i}");
    }
}

#[test]
fn follows_a_preallocated_log_dir_written_by_another_process() {
    follow_dir_child("dir-preallocated");
}

#[test]
fn follows_a_recycling_log_dir_written_by_another_process() {
    follow_dir_child("dir-recycled");
}

#[test]
fn follows_a_preallocated_and_recycling_log_dir_written_by_another_process() {
    follow_dir_child("dir-both");
}

/// A record half written into preallocated zeros, followed in `SkipCorrupted`: no
/// damage is reported for it, and it comes out whole once the writer finishes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_written_record_is_not_reported_as_damage() {
    use std::sync::{Arc, Mutex};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let mut encoder = LogEncoder::new();
    let mut log = BytesMut::new();
    let first = encoder.encode_record(b"first", &mut log);
    let mut big = BytesMut::new();
    let second = encoder.encode_record(&[b'x'; 50_000], &mut big);
    // The first block of the big record is there; the rest is still zeros.
    let written = 32_768 - log.len();
    let mut file = log.clone();
    file.extend_from_slice(&big[..written]);
    file.resize(256 * 1024, 0);
    std::fs::write(&path, &file).unwrap();

    let reports = Arc::new(Mutex::new(Vec::new()));
    let mut builder = LogDecoder::builder();
    builder.recovery(walcodec::Recovery::SkipCorrupted);
    {
        let reports = Arc::clone(&reports);
        builder.on_corruption(move |c| reports.lock().unwrap().push(c.to_string()));
    }
    let mut tail = LogTailer::open_at(&path, 0, &builder)
        .await
        .unwrap()
        .with_poll_interval(Duration::from_millis(1));
    assert_eq!(tail.next_record().await.unwrap().unwrap().position, first);
    for _ in 0..3 {
        assert!(tail.caught_up().await.unwrap());
    }
    assert_eq!(*reports.lock().unwrap(), Vec::<String>::new());

    use std::os::unix::fs::FileExt;
    let out = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    out.write_all_at(&big[written..], (log.len() + written) as u64)
        .unwrap();
    let record = tail.next_record().await.unwrap().unwrap();
    assert_eq!((record.position, record.data.len()), (second, 50_000));
    assert!(tail.caught_up().await.unwrap());
    assert_eq!(*reports.lock().unwrap(), Vec::<String>::new());
}

/// The writer killed with SIGKILL mid-stream: the follower has yielded only records
/// that reopening the log keeps (every acknowledged one among them), and once the
/// reopened writer (which cuts the torn tail) appends, it goes on without a gap.
#[test]
fn a_killed_writer_reopened_is_followed_without_a_gap() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let mut child = spawn_child_of(&path, "preallocated", 0, 10_000_000);
    let acks = acks(&mut child);
    assert_eq!(acks.recv().unwrap(), None, "the child is ready");
    let runtime = runtime();
    runtime.block_on(async {
        let mut tail = LogTailer::open(&path)
            .await
            .unwrap()
            .with_poll_interval(Duration::from_millis(1));
        let mut got = Vec::new();
        let kill_after = 300 + std::process::id() % 700;
        while got.len() < kill_after as usize {
            let record = tokio::time::timeout(Duration::from_secs(60), tail.next_record())
                .await
                .expect("the follower keeps up")
                .unwrap()
                .unwrap();
            got.push(record);
        }
        child.kill().unwrap();
        child.wait().unwrap();
        while !tail.caught_up().await.unwrap() {
            got.push(tail.next_record().await.unwrap().unwrap());
        }
        // Durable: up to the last `append` (every eighth; the others are
        // `append_buffered`, which a crash may lose).
        let mut acked: Vec<(u32, Position)> = acks.iter().flatten().collect();
        let durable = acked
            .iter()
            .rposition(|(seq, _)| seq % 8 == 0)
            .map_or(0, |i| i + 1);
        acked.truncate(durable);
        assert!(
            acked.len() <= got.len(),
            "an acknowledged record was not yielded"
        );
        for ((seq, at), record) in acked.iter().zip(&got) {
            assert_eq!(
                (Some((TASK, *seq)), *at),
                (verify(&record.data), record.position)
            );
        }

        // Reopening cuts the torn tail: nothing the follower yielded goes.
        let writer = AsyncLogWriter::options()
            .preallocate(256 * 1024)
            .open(&path)
            .await
            .unwrap();
        let mut ats = Vec::new();
        for seq in 0..200 {
            ats.push(writer.append(make_record(TASK + 1, seq)).await.unwrap());
        }
        writer.close().await.unwrap();
        let mut log = walcodec::LogReader::open(&path).await.unwrap();
        let mut kept = Vec::new();
        while let Some(record) = log.next_record().await {
            kept.push(record.unwrap());
        }
        assert_eq!(
            kept.len(),
            got.len() + 200,
            "reopening kept what was yielded"
        );
        assert_eq!(&kept[..got.len()], &got[..]);
        for (seq, at) in ats.iter().enumerate() {
            let record = tokio::time::timeout(Duration::from_secs(20), tail.next_record())
                .await
                .expect("the follower goes on")
                .unwrap()
                .unwrap();
            assert_eq!(verify(&record.data), Some((TASK + 1, seq as u32)));
            assert_eq!(record.position, *at);
        }
        assert!(tail.caught_up().await.unwrap());
    });
}

/// The LogDir writer (small preallocated segments) killed with SIGKILL mid-stream
/// while a follower in this process reads it: the follower has yielded every
/// acknowledged record and only records that reopening the directory keeps; once
/// the reopened log (which cuts the last segment's zeros) appends, it goes on
/// without a gap, at the positions the appends returned.
#[test]
fn a_killed_log_dir_writer_reopened_is_followed_without_a_gap() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("log");
    let mut child = spawn_child_of(&dir, "dir-small", 0, 10_000_000);
    let acks = dir_acks(&mut child);
    assert_eq!(acks.recv().unwrap(), None, "the child is ready");
    let runtime = runtime();
    runtime.block_on(async {
        let mut follower = DirReader::open(&dir, LogPosition::START)
            .await
            .unwrap()
            .follow()
            .with_poll_interval(Duration::from_millis(1));
        let mut got = Vec::new();
        // Past a few segments (tens of records each), then anywhere in one.
        let kill_after = 1_000 + std::process::id() % 1_000;
        while got.len() < kill_after as usize {
            let record = tokio::time::timeout(Duration::from_secs(60), follower.next())
                .await
                .expect("the follower keeps up")
                .unwrap()
                .unwrap();
            got.push(record);
        }
        child.kill().unwrap();
        child.wait().unwrap();
        while !follower.caught_up().await.unwrap() {
            got.push(follower.next().await.unwrap().unwrap());
        }
        // Every append is durable once acknowledged: all of them were yielded, and
        // what was yielded is the child's records in order.
        let acked: Vec<(u32, LogPosition)> = acks.iter().flatten().collect();
        assert!(
            acked.len() <= got.len(),
            "an acknowledged record was not yielded: {} acknowledged, {} yielded",
            acked.len(),
            got.len()
        );
        for (i, record) in got.iter().enumerate() {
            assert_eq!(verify(&record.data), Some((TASK, i as u32)), "record {i}");
        }
        for ((seq, end), record) in acked.iter().zip(&got) {
            assert_eq!(*end, record.end, "record {seq} where it was acknowledged");
        }
        assert!(
            got.last().unwrap().end.segment > 3,
            "several segments were followed"
        );

        // Reopening cuts the last segment's zeros and torn tail: nothing the
        // follower yielded goes.
        let log = LogDir::builder()
            .max_segment_bytes(DIR_SMALL_SEGMENT_BYTES)
            .open(&dir)
            .await
            .unwrap();
        let mut kept = log.read_from(LogPosition::START).unwrap();
        let mut all = Vec::new();
        while let Some(record) = kept.next_record().await {
            all.push(record.unwrap());
        }
        assert_eq!(all, got, "reopening kept exactly what was yielded");
        let mut ends = Vec::new();
        for seq in 0..600 {
            ends.push(log.append(make_record(TASK + 1, seq)).await.unwrap());
        }
        for (seq, end) in ends.iter().enumerate() {
            let record = tokio::time::timeout(Duration::from_secs(20), follower.next())
                .await
                .expect("the follower goes on")
                .unwrap()
                .unwrap_or_else(|e| panic!("after the reopen, record {seq}: {e}"));
            assert_eq!(verify(&record.data), Some((TASK + 1, seq as u32)));
            assert_eq!(record.end, *end);
        }
        assert!(follower.caught_up().await.unwrap());
        log.close().await.unwrap();
        assert!(follower.caught_up().await.unwrap());
    });
}

/// In the writer's process a follower never reads past the durable end, so
/// preallocated and recycled segments read as any others: every record once, in
/// order, while the writer purges behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_a_preallocated_recycling_log_dir_in_the_writers_process() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = WriterOptions::new();
    writer.preallocate(64 * 1024);
    let log = LogDir::builder()
        .max_segment_bytes(16 * 1024)
        .writer(writer)
        .recycle_segments(3)
        .open(dir.path())
        .await
        .unwrap();
    let mut follower = log.read_from(LogPosition::START).unwrap().follow();
    let count = 2_000u32;
    let appender = {
        let log = log.clone();
        tokio::spawn(async move {
            let mut ends = Vec::new();
            for seq in 0..count {
                ends.push(log.append(make_record(TASK, seq)).await.unwrap());
                if seq % 200 == 199 {
                    // What the follower has not read is pinned, so kept.
                    log.purge_before(ends[ends.len() - 150]).await.unwrap();
                }
            }
            ends
        })
    };
    let mut got = Vec::new();
    for _ in 0..count {
        let record = tokio::time::timeout(Duration::from_secs(30), follower.next())
            .await
            .expect("the follower keeps up")
            .unwrap()
            .unwrap();
        got.push((verify(&record.data).unwrap().1, record.end));
    }
    let ends = appender.await.unwrap();
    assert!(follower.caught_up().await.unwrap());
    let want: Vec<(u32, LogPosition)> = (0..count).zip(ends).collect();
    assert_eq!(got, want);
    assert!(want.last().unwrap().1.segment > 10);
    log.close().await.unwrap();
}

/// A log whose second record (which fills the rest of block 0) reads as zeros,
/// with the third record in block 1 already there: what a follower sees when its
/// read of one write takes the page holding the second record before the writer
/// copied into it and the next page after. Returns the log and the three records'
/// positions.
fn zeros_before_data() -> (BytesMut, [Position; 3]) {
    let mut encoder = LogEncoder::new();
    let mut log = BytesMut::new();
    let first = encoder.encode_record(b"first", &mut log);
    let fill = 32_768 - log.len() - 7;
    let second = encoder.encode_record(&vec![b's'; fill], &mut log);
    assert_eq!(second.end, 32_768, "the second record ends block 0");
    let third = encoder.encode_record(b"third", &mut log);
    log[second.start as usize..second.end as usize].fill(0);
    log.resize(128 * 1024, 0);
    (log, [first, second, third])
}

/// Zeros in the middle of a block with a record after them: a follower never
/// skips to that record, as a reader of a finished log (and LevelDB) would. While
/// the log is live they are bytes the writer has not finished copying, however
/// long they stay: it waits there, and goes on in order when they land.
// On a paused clock: "however long" is an hour of polls, in no time.
#[tokio::test(start_paused = true)]
async fn a_tailer_never_skips_zeros_a_later_record_follows() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let (log, [first, second, third]) = zeros_before_data();
    std::fs::write(&path, &log).unwrap();

    let mut tail = LogTailer::open(&path)
        .await
        .unwrap()
        .with_poll_interval(Duration::from_secs(1));
    assert_eq!(tail.next_record().await.unwrap().unwrap().position, first);
    let waiting = tokio::time::timeout(Duration::from_secs(3600), tail.next_record()).await;
    assert!(waiting.is_err(), "the record after the zeros: {waiting:?}");
    assert!(tail.caught_up().await.unwrap());

    let mut whole = BytesMut::new();
    let mut encoder = LogEncoder::new();
    encoder.encode_record(b"first", &mut whole);
    encoder.encode_record(
        &vec![b's'; (second.end - second.start - 7) as usize],
        &mut whole,
    );
    let out = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    out.write_all_at(&whole[second.start as usize..], second.start)
        .unwrap();
    for expected in [second, third] {
        assert_eq!(
            tail.next_record().await.unwrap().unwrap().position,
            expected
        );
    }
    assert!(tail.caught_up().await.unwrap());
}

/// The same for a follower of a directory in another process: it waits on the
/// live segment, and once a later segment seals it the zeros are damage, named
/// where they begin, never the record after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_follower_never_skips_zeros_a_later_record_follows() {
    let dir = tempfile::tempdir().unwrap();
    let (log, [first, second, _]) = zeros_before_data();
    std::fs::write(dir.path().join("000001.log"), &log).unwrap();
    let mut follower = DirReader::open(dir.path(), LogPosition::START)
        .await
        .unwrap()
        .follow()
        .with_poll_interval(Duration::from_millis(1));
    let record = follower.next().await.unwrap().unwrap();
    assert_eq!(record.start, LogPosition::new(1, first.start));
    waits_then_fails_once_sealed(
        &mut follower,
        dir.path(),
        second.start,
        walcodec::CorruptionKind::ZeroFillBeforeData,
    )
    .await;
}

/// A directory follower waiting on segment 1's zeros: it yields nothing after them
/// while the segment is live, and once segment 2 appears (sealing it) reports
/// `kind` at `offset`, the zeros' start.
async fn waits_then_fails_once_sealed(
    follower: &mut DirReader,
    dir: &Path,
    offset: u64,
    kind: walcodec::CorruptionKind,
) {
    let waiting = tokio::time::timeout(Duration::from_millis(200), follower.next()).await;
    assert!(waiting.is_err(), "the record after the zeros: {waiting:?}");

    std::fs::write(dir.join("000002.log"), b"").unwrap();
    let error = follower.next().await.unwrap().unwrap_err();
    let walcodec::Error::BadSegment { segment: 1, source } = &error else {
        panic!("{error}");
    };
    match **source {
        walcodec::Error::Corruption {
            offset: at,
            kind: found,
            ..
        } => {
            assert_eq!(at, offset);
            assert_eq!(found, kind);
        }
        ref other => panic!("{other}"),
    }
}

/// A log whose second block reads as zeros (the second record fills it exactly)
/// with the third record in the block after: the race above, at a block's start.
/// Returns the log and the three records' positions.
fn zeroed_block_before_data() -> (BytesMut, [Position; 3], BytesMut) {
    let mut encoder = LogEncoder::new();
    let mut log = BytesMut::new();
    let first = encoder.encode_record(&vec![b'f'; 32_768 - 7], &mut log);
    let second = encoder.encode_record(&vec![b's'; 32_768 - 7], &mut log);
    assert_eq!((first.end, second.end), (32_768, 65_536));
    let third = encoder.encode_record(b"third", &mut log);
    let whole = log.clone();
    log[second.start as usize..second.end as usize].fill(0);
    log.resize(160 * 1024, 0);
    (log, [first, second, third], whole)
}

/// Zeros from a block's start with data after them are waited on too while the
/// log is live, however long they stay, as zeros mid-block are. (Followed from the
/// first record's end, so that the first read takes in the zeros and the data.)
// On a paused clock: "however long" is an hour of polls, in no time.
#[tokio::test(start_paused = true)]
async fn a_tailer_waits_at_a_zeroed_block_a_later_record_follows() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let (log, [first, second, third], whole) = zeroed_block_before_data();
    std::fs::write(&path, &log).unwrap();

    let mut tail = LogTailer::open_at(&path, first.end, &LogDecoder::builder())
        .await
        .unwrap()
        .with_poll_interval(Duration::from_secs(1));
    let waiting = tokio::time::timeout(Duration::from_secs(3600), tail.next_record()).await;
    assert!(waiting.is_err(), "the record after the zeros: {waiting:?}");
    assert!(tail.caught_up().await.unwrap());

    let out = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    out.write_all_at(
        &whole[second.start as usize..second.end as usize],
        second.start,
    )
    .unwrap();
    for expected in [second, third] {
        assert_eq!(
            tail.next_record().await.unwrap().unwrap().position,
            expected
        );
    }
}

/// A directory follower waits there on the live segment, and reports the zeroed
/// block once a later segment seals it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_follower_waits_at_a_zeroed_block_until_sealed() {
    let dir = tempfile::tempdir().unwrap();
    let (log, [first, second, _], _) = zeroed_block_before_data();
    std::fs::write(dir.path().join("000001.log"), &log).unwrap();
    let mut follower = DirReader::open(dir.path(), LogPosition::new(1, first.end))
        .await
        .unwrap()
        .follow()
        .with_poll_interval(Duration::from_millis(1));
    waits_then_fails_once_sealed(
        &mut follower,
        dir.path(),
        second.start,
        walcodec::CorruptionKind::ZeroedBlock,
    )
    .await;
}
