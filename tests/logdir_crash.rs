//! Real crashes of a LogDir: a child process appends from many tasks while it
//! rotates, purges and truncates, and prints each acknowledged record and each
//! operation; the parent kills it with SIGKILL at a random moment, reopens the
//! directory and checks that every acknowledged record that was not purged or
//! truncated is there where it was acknowledged, that purged records never come
//! back, that a truncation happened whole or not at all, and that reopening always
//! works (no hole, no badly sealed segment).
//!
//! Also: a follower in this process reading a LogDir that a child process writes
//! and rotates.
//!
//! The child is this test binary run again with `WALCODEC_LOGDIR_CHILD` set.
//! `WALCODEC_LOGDIR_CRASH_CYCLES` sets the number of cycles (default 20; see
//! `scripts/logdir-crash-soak.sh`), `WALCODEC_LOGDIR_CRASH_SEED` the seed.

use crate::writer_support;

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use walcodec::{DirReader, LogDir, LogPosition};
use writer_support::{make_record, verify, Rng};

const CHILD_ENV: &str = "WALCODEC_LOGDIR_CHILD";
const MODE_ENV: &str = "WALCODEC_LOGDIR_MODE";
const ROUND_ENV: &str = "WALCODEC_LOGDIR_ROUND";
const CYCLES_ENV: &str = "WALCODEC_LOGDIR_CRASH_CYCLES";
const CHILD_TASKS: u32 = 16;
const SEGMENT_BYTES: u64 = 32 * 1024;

fn say(line: String) {
    std::io::stderr()
        .lock()
        .write_all(format!("{line}\n").as_bytes())
        .unwrap();
}

/// The child: run only by the tests below.
#[test]
#[ignore = "the child process of the LogDir crash and follower tests"]
fn logdir_child() {
    // Run by hand (`--include-ignored`), it has nothing to check: say so by failing.
    let path = std::env::var_os(CHILD_ENV).unwrap_or_else(|| {
        panic!("{CHILD_ENV} is not set: only the LogDir crash and follower tests run this child")
    });
    let round: u32 = std::env::var(ROUND_ENV).unwrap().parse().unwrap();
    let mode = std::env::var(MODE_ENV).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let log = LogDir::builder()
            .max_segment_bytes(SEGMENT_BYTES)
            .open(path)
            .await
            .unwrap();
        match mode.as_str() {
            "crash" => crash_child(log, round).await,
            "write" => {
                for seq in 0..2000 {
                    log.append(make_record(7, seq)).await.unwrap();
                    if seq % 500 == 499 {
                        log.rotate().await.unwrap();
                    }
                }
                log.close().await.unwrap();
            }
            other => panic!("unknown mode {other}"),
        }
    });
}

async fn crash_child(log: LogDir, round: u32) {
    let mut rng = Rng::new(u64::from(round) * 7919 + 1);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut acked: Vec<LogPosition> = Vec::new();
    let mut burst = 0u32;
    while Instant::now() < deadline {
        burst += 1;
        // A burst of appends from many tasks; a purge and a rotation race it.
        let mut tasks = Vec::new();
        for t in 0..CHILD_TASKS {
            let log = log.clone();
            let task = round * 100_000 + burst * 100 + t;
            tasks.push(tokio::spawn(async move {
                let mut ends = Vec::new();
                for seq in 0..8 {
                    let end = log.append(make_record(task, seq)).await.unwrap();
                    say(format!("ack {task} {seq} {end}"));
                    ends.push(end);
                }
                ends
            }));
        }
        if !acked.is_empty() && rng.range(0, 3) == 0 {
            let pos = acked[rng.range(0, acked.len() as u64) as usize];
            say(format!("purge {pos}"));
            let purged = log.purge_before(pos).await.unwrap();
            let list: Vec<String> = purged.iter().map(u64::to_string).collect();
            say(format!("purged {pos} {}", list.join(",")));
        }
        if rng.range(0, 4) == 0 {
            log.rotate().await.unwrap();
        }
        for task in tasks {
            acked.extend(task.await.unwrap());
        }
        // Now and then, with no append in flight, cut the newest records.
        if rng.range(0, 6) == 0 && acked.len() > 20 {
            acked.sort();
            let keep = acked.len() - rng.range(1, 20) as usize;
            let pos = acked[keep - 1];
            say(format!("truncate {pos}"));
            log.truncate_after(pos).await.unwrap();
            say(format!("truncated {pos}"));
            acked.truncate(keep);
        }
    }
}

#[derive(Debug)]
enum Event {
    Ack((u32, u32), LogPosition),
    /// A purge called: it deletes sealed segments that end at or before this.
    Purge(LogPosition),
    Purged(Vec<u64>),
    Truncate(LogPosition),
    Truncated(LogPosition),
}

fn parse(line: &str) -> Option<Event> {
    let fields: Vec<&str> = line.split(' ').collect();
    let pos = |s: &str| s.parse::<LogPosition>().unwrap();
    Some(match fields.as_slice() {
        ["ack", task, seq, end] => {
            Event::Ack((task.parse().unwrap(), seq.parse().unwrap()), pos(end))
        }
        ["purge", p] => Event::Purge(pos(p)),
        ["purged", _, list] => Event::Purged(
            list.split(',')
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().unwrap())
                .collect(),
        ),
        ["truncate", p] => Event::Truncate(pos(p)),
        ["truncated", p] => Event::Truncated(pos(p)),
        _ => return None,
    })
}

fn spawn_child(dir: &Path, mode: &str, round: u32) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &child_test_name!("logdir_child"),
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir)
        .env(MODE_ENV, mode)
        .env(ROUND_ENV, round.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Runs a crash child and kills it at a random moment after its first
/// acknowledgement; returns every event it printed in full.
fn run_child_and_kill(dir: &Path, round: u32, rng: &mut Rng) -> Vec<Event> {
    let mut child = spawn_child(dir, "crash", round);
    let stderr = child.stderr.take().unwrap();
    let (first_tx, first_rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut events = Vec::new();
        let mut other = String::new();
        let mut stderr = BufReader::new(stderr);
        let mut line = String::new();
        loop {
            line.clear();
            if stderr.read_line(&mut line).unwrap() == 0 {
                break;
            }
            // A line cut by the kill has no newline: it does not count.
            match line.strip_suffix('\n').and_then(parse) {
                Some(event) => {
                    if events.is_empty() {
                        let _ = first_tx.send(());
                    }
                    events.push(event);
                }
                None => other.push_str(&line),
            }
        }
        (events, other)
    });
    let started = Instant::now();
    let first = first_rx.recv_timeout(Duration::from_secs(30));
    if first.is_ok() {
        let wait = rng
            .range(20, 300)
            .saturating_sub(started.elapsed().as_millis() as u64);
        std::thread::sleep(Duration::from_millis(wait.max(1)));
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    let (events, other) = reader.join().unwrap();
    assert!(
        first.is_ok() && !status.success(),
        "the child failed before the kill ({status}): {other}"
    );
    events
}

#[derive(Debug, Default)]
struct State {
    /// Records that must be in the log, where they were acknowledged.
    expected: HashMap<(u32, u32), LogPosition>,
    /// Segments a completed purge deleted: never again.
    purged: HashSet<u64>,
    /// The log's first segment when it was last opened (or purged since): nothing
    /// below it is read, nothing from it on may be missing.
    first: u64,
}

async fn check_round(dir: &Path, events: Vec<Event>, state: &mut State) -> (usize, bool) {
    let mut pending_truncate = None;
    let mut pending_purge = None;
    let mut acks = 0;
    for event in events {
        match event {
            Event::Ack(id, end) => {
                acks += 1;
                assert!(
                    state.expected.insert(id, end).is_none(),
                    "{id:?} acked twice"
                );
            }
            Event::Purge(pos) => pending_purge = Some(pos),
            Event::Purged(segments) => {
                if let Some(&last) = segments.last() {
                    state.first = state.first.max(last + 1);
                }
                state.purged.extend(segments);
                pending_purge = None;
            }
            Event::Truncate(pos) => pending_truncate = Some(pos),
            Event::Truncated(pos) => {
                state.expected.retain(|_, end| *end <= pos);
                pending_truncate = None;
            }
        }
    }
    let log = LogDir::builder()
        .max_segment_bytes(SEGMENT_BYTES)
        .open(dir)
        .await
        .expect("reopen after a crash always works");
    // The first segment is exactly where the acknowledged purges left it, or (a
    // purge cut short by the kill, which `open` may have finished) anywhere up to
    // the segment its position is in: an `open` that dropped any other leading
    // segment would lose acknowledged records, not purged ones.
    let first = log.start().segment;
    let most = pending_purge.map_or(state.first, |pos: LogPosition| {
        state.first.max(pos.segment + 1)
    });
    assert!(
        (state.first..=most).contains(&first),
        "the log starts at segment {first}: the purges acknowledged leave it at {}, \
         one under way at most at {most}",
        state.first
    );
    assert!(
        state.purged.iter().all(|&s| s < first),
        "a purged segment came back"
    );
    let mut reader = log.read_from(LogPosition::START).unwrap();
    let mut seen: HashMap<(u32, u32), LogPosition> = HashMap::new();
    let mut last = LogPosition::START;
    while let Some(record) = reader.next_record().await {
        let record = record.unwrap();
        assert!(record.end > last);
        last = record.end;
        let id = verify(&record.data).unwrap_or_else(|| panic!("damaged record at {}", record.end));
        assert!(seen.insert(id, record.end).is_none(), "{id:?} twice");
    }
    drop(reader);
    // A truncation cut short by the kill: all of it or none of it.
    let mut truncated = false;
    if let Some(pos) = pending_truncate {
        let after: Vec<_> = state
            .expected
            .iter()
            .filter(|(_, end)| **end > pos)
            .collect();
        let present = after.iter().filter(|(id, _)| seen.contains_key(id)).count();
        assert!(
            present == 0 || present == after.len(),
            "half a truncation: {present} of {} records after {pos}",
            after.len()
        );
        if present == 0 {
            state.expected.retain(|_, end| *end <= pos);
            truncated = true;
        }
    }
    // Every record from the first segment on is there; below it, only purged ones
    // are missing (the first segment itself was checked above).
    for (id, end) in &state.expected {
        if end.segment < first {
            assert_eq!(
                seen.get(id),
                None,
                "{id:?} read from purged segment {}",
                end.segment
            );
            continue;
        }
        assert_eq!(seen.get(id), Some(end), "acknowledged {id:?} lost or moved");
    }
    state.purged.extend(state.first..first);
    state.first = first;
    state.expected = seen;
    log.close().await.unwrap();
    (acks, truncated)
}

#[test]
fn logdir_crash_keeps_every_acknowledged_record() {
    let cycles: u32 = std::env::var(CYCLES_ENV)
        .ok()
        .map(|v| v.parse().expect("a cycle count"))
        .unwrap_or(20);
    let seed = std::env::var("WALCODEC_LOGDIR_CRASH_SEED")
        .ok()
        .map(|v| v.parse().expect("a seed"))
        .unwrap_or_else(|| Rng::from_time().next());
    eprintln!("logdir crash test seed {seed}");
    let mut rng = Rng::new(seed);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The new log's first segment, as the first child will find it.
    let first = runtime.block_on(async {
        let log = LogDir::builder()
            .max_segment_bytes(SEGMENT_BYTES)
            .open(dir.path())
            .await
            .unwrap();
        let first = log.start().segment;
        log.close().await.unwrap();
        first
    });
    let mut state = State {
        first,
        ..State::default()
    };
    let (mut acks, mut cut_truncations) = (0, 0);
    for round in 0..cycles {
        let events = run_child_and_kill(dir.path(), round, &mut rng);
        let (a, truncated) = runtime.block_on(check_round(dir.path(), events, &mut state));
        acks += a;
        cut_truncations += usize::from(truncated);
    }
    eprintln!(
        "logdir crash soak: {cycles} cycles, {acks} acknowledged records, {} purged segments, \
         {cut_truncations} truncations finished by reopen",
        state.purged.len()
    );
    assert!(acks > 0);
}

#[test]
fn follower_in_another_process_crosses_rotations() {
    let dir = tempfile::tempdir().unwrap();
    // The writer's first segment, so the follower has a directory to open.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        LogDir::open(dir.path())
            .await
            .unwrap()
            .close()
            .await
            .unwrap();
    });
    let mut child = spawn_child(dir.path(), "write", 0);
    runtime.block_on(async {
        let mut follower = DirReader::open(dir.path(), LogPosition::START)
            .await
            .unwrap()
            .follow()
            .with_poll_interval(Duration::from_millis(2));
        let mut last = LogPosition::START;
        for seq in 0..2000 {
            let record = tokio::time::timeout(Duration::from_secs(20), follower.next_record())
                .await
                .expect("the follower keeps up")
                .unwrap()
                .unwrap();
            assert_eq!(verify(&record.data), Some((7, seq)));
            assert!(record.start >= last);
            last = record.end;
        }
        assert!(last.segment >= 4, "ended in segment {}", last.segment);
    });
    assert!(child.wait().unwrap().success());
}
