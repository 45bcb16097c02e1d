//! The `walcodec` binary on a log directory (`LogDir`): `verify`, `stat`, `dump`,
//! `cat` and `tail` take the directory wherever they take a log.
//!
//! Needs the `cli` feature: `cargo test --release --features cli --test all -- cli_dir::`.

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use walcodec::{DirReader, DirRecord, LogDir, LogPosition};

use crate::cli_support;

use cli_support::{code, path_str, run, stderr, stdout, BIN};

const RECORDS: usize = 400;

fn segment_path(dir: &Path, segment: u64) -> PathBuf {
    dir.join(format!("{segment:06}.log"))
}

fn payload(i: usize) -> String {
    format!("record-{i:04}-{}", "x".repeat(i % 37))
}

/// A closed log directory of small segments (dozens of them) holding `RECORDS`
/// records.
async fn build_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .max_segment_bytes(512)
        .open(dir.path())
        .await
        .unwrap();
    for i in 0..RECORDS {
        log.append(payload(i)).await.unwrap();
    }
    log.close().await.unwrap();
    assert!(segment_count(dir.path()) > 24, "dozens of segments");
    dir
}

fn segment_count(dir: &Path) -> usize {
    LogDir::list(dir).unwrap().segments.len()
}

/// Every record, as the library reads it.
async fn records(dir: &Path) -> Vec<DirRecord> {
    let mut reader = DirReader::open(dir, LogPosition::START).await.unwrap();
    let mut records = Vec::new();
    while let Some(record) = reader.next_record().await {
        records.push(record.unwrap());
    }
    records
}

fn cut(path: &Path, bytes: u64) {
    let len = fs::metadata(path).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len - bytes)
        .unwrap();
}

#[tokio::test]
async fn verify_clean_directory_exits_0_with_a_header_per_segment() {
    let dir = build_dir().await;
    let segments = segment_count(dir.path());
    let verify = run(&["verify", path_str(dir.path())]);
    let out = stdout(&verify);
    assert_eq!(code(&verify), 0, "{out}{}", stderr(&verify));
    let headers = out.lines().filter(|line| line.starts_with("== 0")).count();
    assert_eq!(headers, segments, "{out}");
    assert!(out.starts_with("== 000001.log\n"), "{out}");
    assert_eq!(out.matches("result: clean").count(), segments + 1);
    assert!(
        out.contains(&format!(
            "segments: {segments} (000001.log..{:06}.log)",
            segments
        )),
        "{out}"
    );
    assert!(out.contains("holes: none\nbadly sealed: none\n"), "{out}");
    assert!(out.ends_with("result: clean\n"), "{out}");
}

#[tokio::test]
async fn verify_reports_a_deleted_middle_segment_as_a_hole() {
    let dir = build_dir().await;
    fs::remove_file(segment_path(dir.path(), 5)).unwrap();
    let verify = run(&["verify", path_str(dir.path())]);
    let out = stdout(&verify);
    assert_eq!(code(&verify), 1, "{out}");
    assert!(
        out.contains("== missing 000005.log: a hole in the log\n== 000006.log\n"),
        "{out}"
    );
    assert!(out.contains("holes: 000005.log\n"), "{out}");
    assert!(out.ends_with("result: corrupt\n"), "{out}");
    // Every hole is named, a run of missing numbers as one.
    fs::remove_file(segment_path(dir.path(), 8)).unwrap();
    fs::remove_file(segment_path(dir.path(), 9)).unwrap();
    let verify = run(&["verify", path_str(dir.path())]);
    assert_eq!(code(&verify), 1);
    assert!(
        stdout(&verify).contains("holes: 000005.log, 000008.log..000009.log\n"),
        "{}",
        stdout(&verify)
    );
}

#[tokio::test]
async fn verify_reports_a_sealed_segment_with_a_torn_tail_as_badly_sealed() {
    let dir = build_dir().await;
    cut(&segment_path(dir.path(), 3), 3);
    let verify = run(&["verify", path_str(dir.path())]);
    let out = stdout(&verify);
    assert_eq!(code(&verify), 1, "{out}");
    assert!(
        out.contains("badly sealed: 000003.log is not the last segment"),
        "{out}"
    );
    assert!(out.contains("badly sealed: 000003.log\n"), "{out}");
    assert!(out.ends_with("result: corrupt\n"), "{out}");
}

#[tokio::test]
async fn verify_a_torn_tail_of_the_last_segment_exits_3() {
    let dir = build_dir().await;
    let last = segment_count(dir.path()) as u64;
    cut(&segment_path(dir.path(), last), 3);
    let verify = run(&["verify", path_str(dir.path())]);
    let out = stdout(&verify);
    assert_eq!(code(&verify), 3, "{out}");
    assert!(out.contains("badly sealed: none\n"), "{out}");
    assert!(out.ends_with("result: torn tail\n"), "{out}");
}

#[tokio::test]
async fn verify_json_is_one_object_per_segment_then_a_summary() {
    let dir = build_dir().await;
    let segments = segment_count(dir.path());
    fs::remove_file(segment_path(dir.path(), 4)).unwrap();
    let verify = run(&["verify", "--format", "json", path_str(dir.path())]);
    assert_eq!(code(&verify), 1, "{}", stderr(&verify));
    let lines: Vec<serde_json::Value> = stdout(&verify)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), segments - 1 + 1);
    assert!(lines[0]["file"].as_str().unwrap().ends_with("000001.log"));
    assert_eq!(lines[0]["result"], "clean");
    let summary = lines.last().unwrap();
    assert_eq!(summary["segments"], (segments - 1) as u64);
    assert_eq!(summary["first_segment"], 1);
    assert_eq!(summary["last_segment"], segments as u64);
    assert_eq!(summary["holes"], serde_json::json!(["000004.log"]));
    assert_eq!(summary["badly_sealed"], serde_json::json!([]));
    assert_eq!(summary["result"], "corrupt");
    assert_eq!(summary["exit_code"], 1);
}

#[tokio::test]
async fn stat_prints_each_segment_and_a_directory_summary() {
    let dir = build_dir().await;
    let listed = LogDir::list(dir.path()).unwrap();
    let segments = listed.segments.len();
    let stat = run(&["stat", path_str(dir.path())]);
    let out = stdout(&stat);
    assert_eq!(code(&stat), 0, "{out}{}", stderr(&stat));
    assert!(out.starts_with("== 000001.log\n"), "{out}");
    let summary = out.split("== directory ").nth(1).unwrap();
    assert!(
        summary.contains(&format!(
            "segments: {segments} (000001.log..{segments:06}.log)\nbytes: {}\nholes: none\n",
            listed.total_bytes()
        )),
        "{summary}"
    );
    let (id, history) = LogDir::read_history(dir.path()).unwrap().unwrap();
    let epoch = history.epochs[0];
    assert!(
        summary.contains(&format!(
            "log id: {id}\nepochs: 1\n  epoch 1 ({:016x}) from {}\nresult: clean\n",
            epoch.id, epoch.start
        )),
        "{summary}"
    );
    let json = run(&["stat", "--format", "json", path_str(dir.path())]);
    let last: serde_json::Value =
        serde_json::from_str(stdout(&json).lines().last().unwrap()).unwrap();
    assert_eq!(last["log_id"], id.to_string());
    assert_eq!(last["epochs"][0]["number"], 1);
    assert_eq!(last["epochs"][0]["start"], epoch.start.to_string());
    // A directory without a HISTORY file (made by an older version).
    std::fs::remove_file(dir.path().join("HISTORY")).unwrap();
    let stat = run(&["stat", path_str(dir.path())]);
    assert!(stdout(&stat).contains("log id: none (no HISTORY file)\n"));
}

#[tokio::test]
async fn dump_and_cat_give_every_record_in_order_with_positions() {
    let dir = build_dir().await;
    let expected = records(dir.path()).await;
    assert_eq!(expected.len(), RECORDS);
    let dump = run(&["dump", path_str(dir.path())]);
    assert_eq!(code(&dump), 0, "{}", stderr(&dump));
    let lines: Vec<String> = stdout(&dump).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), RECORDS);
    for (i, (line, record)) in lines.iter().zip(&expected).enumerate() {
        let want = format!("{} {} {}", record.start, record.data.len(), payload(i));
        assert_eq!(line, &want);
    }
    assert!(lines
        .last()
        .unwrap()
        .starts_with(&format!("{:06}:", segment_count(dir.path()))));

    let json = run(&["dump", "--format", "json", path_str(dir.path())]);
    assert_eq!(code(&json), 0);
    let first: serde_json::Value =
        serde_json::from_str(stdout(&json).lines().next().unwrap()).unwrap();
    assert_eq!(first["position"], "000001:0");
    assert_eq!(first["end"], expected[0].end.to_string());

    let cat = run(&["cat", "--to", "lines", path_str(dir.path())]);
    assert_eq!(code(&cat), 0, "{}", stderr(&cat));
    let want: String = (0..RECORDS).map(|i| payload(i) + "\n").collect();
    assert_eq!(stdout(&cat), want);
}

#[tokio::test]
async fn dump_stops_at_a_hole_and_exits_1() {
    let dir = build_dir().await;
    fs::remove_file(segment_path(dir.path(), 5)).unwrap();
    let dump = run(&["dump", path_str(dir.path())]);
    assert_eq!(code(&dump), 1);
    assert!(stderr(&dump).contains("000005.log"), "{}", stderr(&dump));
    assert!(stdout(&dump).lines().last().unwrap().starts_with("000004:"));
}

#[tokio::test]
async fn options_about_one_file_are_refused_on_a_directory() {
    let dir = build_dir().await;
    for args in [
        &["dump", "--start", "5"][..],
        &["dump", "--physical"],
        &["cat", "--record", "1"],
        &["verify", "--dialect", "rocksdb"],
        &["dump", "--format", "batch"],
    ] {
        let mut all = args.to_vec();
        all.push(path_str(dir.path()));
        let output = run(&all);
        assert_eq!(code(&output), 2, "{args:?}");
        assert!(
            stderr(&output).contains("log directory"),
            "{args:?}: {}",
            stderr(&output)
        );
    }
    // A directory with no segment is not a log directory.
    let empty = tempfile::tempdir().unwrap();
    let verify = run(&["verify", path_str(empty.path())]);
    assert_eq!(code(&verify), 2);
    assert!(stderr(&verify).contains("not a log directory"));
}

#[tokio::test]
async fn tail_prints_the_last_records_of_the_directory() {
    let dir = build_dir().await;
    let expected = records(dir.path()).await;
    let tail = run(&["tail", "-n", "3", path_str(dir.path())]);
    assert_eq!(code(&tail), 0, "{}", stderr(&tail));
    let want: String = expected[RECORDS - 3..]
        .iter()
        .map(|r| {
            format!(
                "{} {} {}\n",
                r.start,
                r.data.len(),
                String::from_utf8_lossy(&r.data)
            )
        })
        .collect();
    assert_eq!(stdout(&tail), want);
}

fn line_reader(out: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_follow_picks_up_records_appended_after_rotation() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .max_segment_bytes(512)
        .open(dir.path())
        .await
        .unwrap();
    for i in 0..5 {
        log.append(payload(i)).await.unwrap();
    }
    let mut child = Command::new(BIN)
        .args(["tail", "-f", "-n", "2", "--poll-interval", "5"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = line_reader(child.stdout.take().unwrap());
    let deadline = Duration::from_secs(20);
    let data = |line: String| line.rsplit(' ').next().unwrap().to_string();
    assert_eq!(data(lines.recv_timeout(deadline).unwrap()), payload(3));
    assert_eq!(data(lines.recv_timeout(deadline).unwrap()), payload(4));

    // Dozens of rotations while it follows.
    let mut ends = Vec::new();
    for i in 5..200 {
        ends.push(log.append(payload(i)).await.unwrap());
    }
    assert!(ends.last().unwrap().segment > 10);
    for i in 5..200 {
        let line = lines.recv_timeout(deadline).unwrap();
        assert_eq!(data(line), payload(i));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    log.close().await.unwrap();
}

/// `tail -f` on a directory written in place, from its own process: segments
/// preallocated with zeros and recycled files holding their earlier use, purged
/// as the follower goes; every record once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_follow_reads_preallocated_and_recycled_segments() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .max_segment_bytes(4096)
        .writer(
            walcodec::WriterOptions::new()
                .preallocate(64 * 1024)
                .clone(),
        )
        .recycle_segments(3)
        .open(dir.path())
        .await
        .unwrap();
    let mut child = Command::new(BIN)
        // All the last records, so that each is printed once whether it was
        // written before the tool's first read or after.
        .args(["tail", "-f", "-n", "1000", "--poll-interval", "1"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = line_reader(child.stdout.take().unwrap());
    let deadline = Duration::from_secs(20);
    let data = |line: String| line.rsplit(' ').next().unwrap().to_string();
    for i in 0..400 {
        let end = log.append(payload(i)).await.unwrap();
        if i % 50 == 49 {
            // Everything up to here printed, then purged (and pooled for reuse).
            for j in i - 49..=i {
                assert_eq!(data(lines.recv_timeout(deadline).unwrap()), payload(j));
            }
            log.purge_before(end).await.unwrap();
        }
    }
    assert!(lines.recv_timeout(Duration::from_millis(100)).is_err());
    child.kill().unwrap();
    child.wait().unwrap();
    log.close().await.unwrap();
}

#[tokio::test]
async fn dump_and_tail_leave_out_a_torn_last_record_and_exit_3() {
    let dir = build_dir().await;
    let last = segment_count(dir.path()) as u64;
    cut(&segment_path(dir.path(), last), 3);
    let dump = run(&["dump", path_str(dir.path())]);
    assert_eq!(code(&dump), 3, "{}", stderr(&dump));
    assert_eq!(stdout(&dump).lines().count(), RECORDS - 1);
    assert!(
        stderr(&dump).contains(&format!("{last:06}.log: torn tail after offset")),
        "{}",
        stderr(&dump)
    );
    let tail = run(&["tail", "-n", "1", path_str(dir.path())]);
    assert_eq!(code(&tail), 3);
    assert!(stdout(&tail).ends_with(&format!("{}\n", payload(RECORDS - 2))));
    let cat = run(&["cat", "--to", "lines", path_str(dir.path())]);
    assert_eq!(code(&cat), 3);
}

#[tokio::test]
async fn dump_and_cat_from_a_position_start_at_that_record() {
    let dir = build_dir().await;
    let expected = records(dir.path()).await;
    let at = &expected[123];
    let from = at.start.to_string();
    let dump = run(&["dump", "--from", &from, path_str(dir.path())]);
    assert_eq!(code(&dump), 0, "{}", stderr(&dump));
    assert_eq!(stdout(&dump).lines().count(), RECORDS - 123);
    assert!(stdout(&dump).starts_with(&format!("{from} ")));
    // A checkpoint (a record's end) resumes after that record.
    let end = at.end.to_string();
    let cat = run(&["cat", "--to", "lines", "--from", &end, path_str(dir.path())]);
    assert_eq!(code(&cat), 0);
    assert!(stdout(&cat).starts_with(&format!("{}\n", payload(124))));
    // Not a position, or on a file: usage errors.
    let bad = run(&["dump", "--from", "7", path_str(dir.path())]);
    assert_eq!(code(&bad), 2);
    let file = segment_path(dir.path(), 1);
    let on_file = run(&["dump", "--from", "000001:0", path_str(&file)]);
    assert_eq!(code(&on_file), 2);
    assert!(stderr(&on_file).contains("--start"), "{}", stderr(&on_file));
}

/// A recycling `LogDir` (`recycle_segments`): its segments are recyclable RocksDB
/// WALs numbered as their names say, some in reused files. The tool reads them so:
/// clean when closed; after a crash, the bytes a reused active segment keeps from
/// its earlier use are its torn tail (what reopening cuts), never records.
#[tokio::test]
async fn a_recycling_directory_reads_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let crashed = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .max_segment_bytes(2048)
        .recycle_segments(2)
        .open(dir.path())
        .await
        .unwrap();
    for i in 0..60 {
        log.append(payload(i).repeat(4)).await.unwrap();
    }
    let end = log.end();
    log.purge_before(LogPosition::new(end.segment - 1, 0))
        .await
        .unwrap();
    log.rotate().await.unwrap();
    log.append("after the reuse").await.unwrap();
    for entry in fs::read_dir(dir.path()).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != "LOCK" {
            fs::copy(entry.path(), crashed.path().join(entry.file_name())).unwrap();
        }
    }
    log.close().await.unwrap();

    let expected: Vec<u8> = records(dir.path())
        .await
        .iter()
        .flat_map(|r| r.data.to_vec())
        .collect();
    assert!(expected.ends_with(b"after the reuse"));
    let verified = run(&["verify", path_str(dir.path())]);
    assert_eq!(code(&verified), 0, "{}", stdout(&verified));
    assert!(stdout(&verified).contains("(recyclable)"));
    let cat = run(&["cat", path_str(dir.path())]);
    assert_eq!(code(&cat), 0, "{}", stderr(&cat));
    assert_eq!(cat.stdout, expected);

    // The crashed copy: the same records, then the reused file's old bytes, which
    // are named for what they are: no torn tail, nothing lost.
    let verified = run(&["verify", path_str(crashed.path())]);
    assert_eq!(code(&verified), 0, "{}", stdout(&verified));
    assert!(
        stdout(&verified).contains("tail: earlier use after offset"),
        "{}",
        stdout(&verified)
    );
    assert!(stdout(&verified).contains("result: clean"));
    let cat = run(&["cat", path_str(crashed.path())]);
    assert_eq!(code(&cat), 0, "{}", stderr(&cat));
    assert_eq!(cat.stdout, expected);
}

/// Syncs `replica` from `log` over an in-memory stream until it holds `target`.
async fn replicate_to(log: &LogDir, replica: &mut walcodec::Replica, target: LogPosition) {
    let (a, b) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn({
        let log = log.clone();
        async move { log.serve_replica(a).await }
    });
    let mut end = replica.durable_end();
    tokio::select! {
        synced = replica.sync_from(b) => assert_eq!(synced.unwrap().end, target),
        reached = end.wait_for(|&end| end >= target) => { reached.unwrap(); }
    }
    serving.await.unwrap().unwrap();
}

#[tokio::test]
async fn verify_finds_a_replica_directory_clean_mid_segment_and_whole() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = LogDir::builder()
        .max_segment_bytes(512)
        .open(p.path())
        .await
        .unwrap();
    let mut middle = LogPosition::START;
    for i in 0..RECORDS {
        let end = log.append(payload(i)).await.unwrap();
        if i == RECORDS / 2 {
            middle = end;
        }
    }
    let mut replica = walcodec::Replica::open(r.path()).await.unwrap();
    // Stopped inside a segment: its last segment ends at a record, not sealed.
    replicate_to(&log, &mut replica, middle).await;
    assert!(replica.end().offset > 0);
    replica.close().await.unwrap();
    let verify = run(&["verify", path_str(r.path())]);
    let out = stdout(&verify);
    assert_eq!(code(&verify), 0, "{out}{}", stderr(&verify));
    assert!(out.ends_with("result: clean\n"), "{out}");
    // Whole: the same segments as the primary's, all clean.
    let mut replica = walcodec::Replica::open(r.path()).await.unwrap();
    let end = log.close().await.unwrap();
    replicate_to(&log, &mut replica, end).await;
    replica.close().await.unwrap();
    let verify = run(&["verify", path_str(r.path())]);
    let out = stdout(&verify);
    assert_eq!(code(&verify), 0, "{out}{}", stderr(&verify));
    let segments = segment_count(p.path());
    assert_eq!(segment_count(r.path()), segments);
    assert_eq!(out.matches("result: clean").count(), segments + 1, "{out}");
    assert!(out.contains("holes: none\nbadly sealed: none\n"), "{out}");
    assert_eq!(records(r.path()).await.len(), RECORDS);
}
