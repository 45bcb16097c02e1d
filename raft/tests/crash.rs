//! Real crashes of a `LogStore`: a child process applies random storage
//! operations one after another (append, save_vote, save_committed, truncate,
//! purge) and prints each as it begins and once it returned (for an append: once
//! its flush callback fired); the parent kills it with SIGKILL at a random moment,
//! reopens the store and checks that it holds exactly what the finished calls
//! left, plus all or nothing of the one in flight (a prefix of an append's
//! entries): no acknowledged entry lost unless a later call truncated or purged
//! it, the vote never back, reopening always works.
//!
//! The child is this test binary run again with `WALCODEC_RAFT_CHILD` set.
//! `WALCODEC_RAFT_CRASH_CYCLES` sets the number of rounds (default 20; see
//! `scripts/raft-crash-soak.sh`), `WALCODEC_RAFT_CRASH_SEED` the seed.

use crate::support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use support::ops::{Model, Op, Workload};
use support::{Rng, TypeConfig};
use walcodec::LogDirOptions;
use walcodec_raft::LogStore;

const CHILD_ENV: &str = "WALCODEC_RAFT_CHILD";
const SEED_ENV: &str = "WALCODEC_RAFT_CHILD_SEED";
const CYCLES_ENV: &str = "WALCODEC_RAFT_CRASH_CYCLES";
/// Small segments, so that purges delete whole segments often.
const SEGMENT_BYTES: u64 = 4096;

async fn open(dir: &Path) -> LogStore<TypeConfig> {
    LogStore::<TypeConfig>::builder()
        .log_dir(
            LogDirOptions::new()
                .max_segment_bytes(SEGMENT_BYTES)
                .clone(),
        )
        .open(dir)
        .await
        .expect("a store opens after any crash")
}

fn say(line: String) {
    std::io::stderr()
        .lock()
        .write_all(format!("{line}\n").as_bytes())
        .unwrap();
}

/// The child: run only by the test below.
#[test]
#[ignore = "the child process of the crash test"]
fn raft_crash_child() {
    // Run by hand (`--include-ignored`), it has nothing to check: say so by failing.
    let path = std::env::var_os(CHILD_ENV)
        .unwrap_or_else(|| panic!("{CHILD_ENV} is not set: only the crash test runs this child"));
    let seed: u64 = std::env::var(SEED_ENV).unwrap().parse().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let mut store = open(Path::new(&path)).await;
        let mut model = Model::read(&mut store).await;
        let mut workload = Workload::new(seed, &model);
        loop {
            let op = workload.next(&model);
            say(format!("begin {}", op.line()));
            op.execute(&mut store, &model).await;
            model.apply(&op);
            say("done".to_string());
        }
    });
}

/// One line of the child: an operation begun, or the last one returned.
enum Event {
    Begin(Op),
    Done,
}

fn parse(line: &str) -> Option<Event> {
    let words: Vec<&str> = line.split(' ').collect();
    match words.as_slice() {
        ["done"] => Some(Event::Done),
        ["begin", rest @ ..] => Op::parse(rest).map(Event::Begin),
        _ => None,
    }
}

/// Runs a child and kills it at a random moment after its first finished
/// operation; returns the operations it finished and the one in flight.
fn run_child_and_kill(dir: &Path, rng: &mut Rng) -> (Vec<Op>, Option<Op>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &child_test_name!("raft_crash_child"),
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir)
        .env(SEED_ENV, rng.next().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (first_tx, first_rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let (mut done, mut begun) = (Vec::new(), None);
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
                Some(Event::Begin(op)) => begun = Some(op),
                Some(Event::Done) => {
                    done.push(begun.take().expect("done without begin"));
                    if done.len() == 1 {
                        let _ = first_tx.send(());
                    }
                }
                None => other.push_str(&line),
            }
        }
        (done, begun, other)
    });
    let started = Instant::now();
    let first = first_rx.recv_timeout(Duration::from_secs(60));
    if first.is_ok() {
        let wait = (20 + rng.below(280)).saturating_sub(started.elapsed().as_millis() as u64);
        std::thread::sleep(Duration::from_millis(wait.max(1)));
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    let (done, begun, other) = reader.join().unwrap();
    assert!(
        first.is_ok() && !status.success(),
        "the child failed before the kill ({status}): {other}"
    );
    (done, begun)
}

#[test]
fn crashes_keep_every_acknowledged_operation() {
    let cycles: u32 = std::env::var(CYCLES_ENV)
        .ok()
        .map(|v| v.parse().expect("a cycle count"))
        .unwrap_or(20);
    let seed = std::env::var("WALCODEC_RAFT_CRASH_SEED")
        .ok()
        .map(|v| v.parse().expect("a seed"))
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("raft crash test seed {seed}");
    let mut rng = Rng::new(seed);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::default();
    let (mut acked, mut in_flight_landed) = (0usize, 0usize);
    for round in 0..cycles {
        let (done, in_flight) = run_child_and_kill(dir.path(), &mut rng);
        acked += done.len();
        for op in &done {
            model.apply(op);
        }
        let found = runtime.block_on(async {
            let mut store = open(dir.path()).await;
            let found = Model::read(&mut store).await;
            store.close().await.unwrap();
            found
        });
        let states = model.allowed(in_flight);
        assert!(
            states.contains(&found),
            "round {round} (seed {seed}): after {} acknowledged operations and {in_flight:?} in \
             flight, the store holds\n{found:?}\nexpected one of\n{states:?}",
            done.len()
        );
        if found != model {
            in_flight_landed += 1;
        }
        model = found;
    }
    eprintln!(
        "raft crash soak: {cycles} rounds, {acked} acknowledged operations, {in_flight_landed} \
         operations in flight found done after the kill"
    );
    assert!(acked > 0);
}
