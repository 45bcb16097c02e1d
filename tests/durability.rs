//! Real crashes: a child process appends from many tasks and prints each acknowledged
//! record; the parent kills it with SIGKILL at a random moment, reopens the log and
//! checks that every acknowledged record is there, intact and where it was
//! acknowledged, that the log reads cleanly once its torn tail is cut, and that new
//! appends read back.
//!
//! The child is this test binary run again with `WALCODEC_CRASH_CHILD` set.
//! `WALCODEC_CRASH_CYCLES` sets the number of cycles (default 20; see
//! `scripts/crash-soak.sh`), `WALCODEC_CRASH_SEED` the seed of the kill timings.

use crate::writer_support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use walcodec::{scan_log, AsyncLogWriter, Position, WriterOptions};
use writer_support::{make_record, read_log, verify, Rng};

const CHILD_ENV: &str = "WALCODEC_CRASH_CHILD";
const ROUND_ENV: &str = "WALCODEC_CRASH_ROUND";
const CYCLES_ENV: &str = "WALCODEC_CRASH_CYCLES";
const CHILD_TASKS: u32 = 32;
/// Start a new log file once the current one is this long, so reading it back stays
/// cheap however many cycles run.
const ROTATE_BYTES: u64 = 4 << 20;

/// The appender, run only as a child of `crash_recovery_keeps_every_acknowledged_record`.
#[test]
#[ignore = "the child process of crash_recovery_keeps_every_acknowledged_record"]
fn crash_child() {
    // Run by hand (`--include-ignored`), it has nothing to check: say so by failing.
    let path = std::env::var_os(CHILD_ENV).unwrap_or_else(|| {
        panic!("{CHILD_ENV} is not set: only crash_recovery_keeps_every_acknowledged_record runs this child")
    });
    let round: u32 = std::env::var(ROUND_ENV).unwrap().parse().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    runtime.block_on(async move {
        // Odd rounds cut batches small, so a crash falls inside records more often;
        // half the rounds preallocate, so a crash leaves zeros after the log.
        let mut options = WriterOptions::new();
        if round % 2 == 1 {
            options.max_batch_bytes(16 * 1024);
        }
        if round % 4 >= 2 {
            options.preallocate(256 * 1024);
        }
        let log = options.open(PathBuf::from(path)).await.unwrap();
        let mut tasks = Vec::new();
        for t in 0..CHILD_TASKS {
            let log = log.clone();
            let task = round * 1000 + t;
            tasks.push(tokio::spawn(async move {
                let mut seq = 0;
                // Bounded, in case the parent is gone; the parent kills long before.
                let deadline = Instant::now() + Duration::from_secs(20);
                while Instant::now() < deadline {
                    if seq % 16 == 5 {
                        let records: Vec<_> =
                            (seq..seq + 3).map(|s| make_record(task, s)).collect();
                        let positions = log.append_batch(&records).await.unwrap();
                        for (i, position) in positions.iter().enumerate() {
                            ack(task, seq + i as u32, *position);
                        }
                        seq += 3;
                    } else {
                        let position = log.append(make_record(task, seq)).await.unwrap();
                        ack(task, seq, position);
                        seq += 1;
                    }
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
}

/// Reports a durable record to the parent: one line, one write, so a kill never
/// interleaves two lines (a cut line is ignored by the parent).
fn ack(task: u32, seq: u32, position: Position) {
    let line = format!("ack {task} {seq} {} {}\n", position.start, position.end);
    std::io::stderr().lock().write_all(line.as_bytes()).unwrap();
}

#[derive(Debug, Default)]
struct Totals {
    cycles: u32,
    acked: usize,
    lost: usize,
    unacked_survivors: usize,
    torn_tails: usize,
    tail_bytes_cut: u64,
}

#[test]
fn crash_recovery_keeps_every_acknowledged_record() {
    let cycles: u32 = std::env::var(CYCLES_ENV)
        .ok()
        .map(|v| v.parse().expect("a cycle count"))
        .unwrap_or(20);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    // Shown when the test fails; set WALCODEC_CRASH_SEED to replay the kill timings.
    let seed = std::env::var("WALCODEC_CRASH_SEED")
        .ok()
        .map(|v| v.parse().expect("a seed"))
        .unwrap_or_else(|| Rng::from_time().next());
    eprintln!("crash test seed {seed}");
    let mut rng = Rng::new(seed);
    let mut totals = Totals::default();
    let mut file_number = 1;
    let mut path = dir.path().join(format!("{file_number:06}.log"));
    // Every record that must be in the current file, by (task, seq).
    let mut expected: HashMap<(u32, u32), Position> = HashMap::new();

    for round in 0..cycles {
        if std::fs::metadata(&path).map_or(0, |m| m.len()) > ROTATE_BYTES {
            file_number += 1;
            path = dir.path().join(format!("{file_number:06}.log"));
            expected.clear();
        }
        let acks = run_child_and_kill(&path, round, &mut rng);
        totals.acked += acks.len();
        for (id, position) in acks {
            assert!(
                expected.insert(id, position).is_none(),
                "{id:?} acked twice"
            );
        }
        runtime.block_on(check_after_crash(&path, round, &mut expected, &mut totals));
        totals.cycles += 1;
    }
    eprintln!(
        "crash soak: {} cycles, {} acknowledged records, {} lost, {} unacknowledged records \
         survived, {} torn tails cut ({} bytes)",
        totals.cycles,
        totals.acked,
        totals.lost,
        totals.unacked_survivors,
        totals.torn_tails,
        totals.tail_bytes_cut
    );
    assert_eq!(totals.lost, 0);
    assert!(totals.acked > 0);
}

/// Runs the child on `path`, kills it at a random moment after its first
/// acknowledgement, and returns every acknowledgement it printed in full.
fn run_child_and_kill(path: &Path, round: u32, rng: &mut Rng) -> Vec<((u32, u32), Position)> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &child_test_name!("crash_child"),
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, path)
        .env(ROUND_ENV, round.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (first_tx, first_rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut acks = Vec::new();
        let mut other = String::new();
        let mut stderr = BufReader::new(stderr);
        let mut line = String::new();
        loop {
            line.clear();
            if stderr.read_line(&mut line).unwrap() == 0 {
                break;
            }
            // A line cut by the kill has no newline: the record may or may not be
            // durable, and the parent does not count it as acknowledged.
            let Some(ack) = line.strip_suffix('\n').and_then(|l| l.strip_prefix("ack ")) else {
                other.push_str(&line);
                continue;
            };
            let fields: Vec<u64> = ack.split(' ').map(|f| f.parse().unwrap()).collect();
            let id = (fields[0] as u32, fields[1] as u32);
            acks.push((
                id,
                Position {
                    start: fields[2],
                    end: fields[3],
                },
            ));
            if acks.len() == 1 {
                let _ = first_tx.send(());
            }
        }
        (acks, other)
    });

    let started = Instant::now();
    let first = first_rx.recv_timeout(Duration::from_secs(30));
    // Between about 20 and 200 ms after the child started appending.
    if first.is_ok() {
        let wait = rng
            .range(20, 200)
            .saturating_sub(started.elapsed().as_millis() as u64);
        std::thread::sleep(Duration::from_millis(wait.max(1)));
    }
    child.kill().unwrap(); // SIGKILL on unix
    let status = child.wait().unwrap();
    let (acks, other) = reader.join().unwrap();
    assert!(
        first.is_ok() && !status.success(),
        "the child failed to append before the kill ({status}): {other}"
    );
    acks
}

/// Reopens the crashed log and checks it against every acknowledged record.
async fn check_after_crash(
    path: &Path,
    round: u32,
    expected: &mut HashMap<(u32, u32), Position>,
    totals: &mut Totals,
) {
    // Before repair: damage only at the tail (a mid-log corruption is an error here).
    let scan = scan_log(path)
        .await
        .expect("a crash leaves at most a torn tail");
    let last_acked = expected.values().map(|p| p.end).max().unwrap_or(0);
    assert!(
        scan.valid_len >= last_acked,
        "{scan:?} cuts acknowledged records"
    );
    if scan.needs_repair() {
        totals.torn_tails += 1;
        totals.tail_bytes_cut += scan.tail_bytes();
    }

    let log = AsyncLogWriter::open(path).await.unwrap();
    assert_eq!(log.stats().len, scan.valid_len);
    let records = read_log(path, true).await;
    let mut seen: HashMap<(u32, u32), Position> = HashMap::new();
    for (position, record) in &records {
        let id = verify(record).unwrap_or_else(|| panic!("damaged record at {position:?}"));
        assert!(seen.insert(id, *position).is_none(), "{id:?} twice");
    }
    for (id, position) in expected.iter() {
        match seen.get(id) {
            Some(found) => assert_eq!(found, position, "{id:?} moved"),
            None => {
                totals.lost += 1;
                eprintln!("lost acknowledged record {id:?} at {position:?}");
            }
        }
    }
    totals.unacked_survivors += seen.keys().filter(|id| !expected.contains_key(id)).count();
    // What survived without an acknowledgement is in the log now, for good.
    expected.extend(seen);

    // Appends after the crash read back, after everything that survived.
    let task = 2_000_000_000 + round;
    let mut appended = Vec::new();
    for seq in 0..5 {
        let position = log.append(make_record(task, seq)).await.unwrap();
        appended.push(((task, seq), position));
    }
    log.close().await.unwrap();
    let after = read_log(path, true).await;
    assert_eq!(after.len(), records.len() + 5);
    for (i, (id, position)) in appended.into_iter().enumerate() {
        let (read_position, record) = &after[records.len() + i];
        assert_eq!((verify(record), *read_position), (Some(id), position));
        expected.insert(id, position);
    }
}
