//! Real crashes of a `SharedLog` with many groups: a child process runs random
//! storage calls on several groups at once (each group a task) and prints each
//! call as it begins and once it returned, naming its group; the parent kills it
//! with SIGKILL at a random moment, reopens the log and checks that each group
//! holds exactly what its finished calls left, plus all or nothing of its call in
//! flight, and only its own entries.
//!
//! `WALCODEC_RAFT_CRASH_CYCLES` sets the number of rounds (default 8 here),
//! `WALCODEC_RAFT_CRASH_SEED` the seed.

use crate::support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use support::ops::{Model, Op, Workload};
use support::{Rng, TypeConfig};
use walcodec::LogDirOptions;
use walcodec_raft::SharedLog;

const CHILD_ENV: &str = "WALCODEC_RAFT_SHARED_CHILD";
const SEED_ENV: &str = "WALCODEC_RAFT_SHARED_CHILD_SEED";
const GROUPS: u64 = 5;

async fn open(dir: &Path) -> SharedLog {
    SharedLog::builder()
        .log_dir(LogDirOptions::new().max_segment_bytes(4096))
        .open(dir)
        .await
        .expect("a shared log opens after any crash")
}

fn say(line: String) {
    std::io::stderr()
        .lock()
        .write_all(format!("{line}\n").as_bytes())
        .unwrap();
}

/// The child: run only by the test below.
#[test]
#[ignore = "the child process of the shared log's crash test"]
fn shared_crash_child() {
    // Run by hand (`--include-ignored`), it has nothing to check: say so by failing.
    let path = std::env::var_os(CHILD_ENV).unwrap_or_else(|| {
        panic!("{CHILD_ENV} is not set: only the shared log's crash test runs this child")
    });
    let seed: u64 = std::env::var(SEED_ENV).unwrap().parse().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let shared = open(Path::new(&path)).await;
        let mut tasks = Vec::new();
        for group in 0..GROUPS {
            let mut store = shared.store::<TypeConfig>(group).await.unwrap();
            tasks.push(tokio::spawn(async move {
                let mut model = Model::read(&mut store).await;
                let mut workload = Workload::new(seed ^ group, &model);
                loop {
                    let op = workload.next(&model);
                    say(format!("{group} begin {}", op.line()));
                    op.execute(&mut store, &model).await;
                    model.apply(&op);
                    say(format!("{group} done"));
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
}

/// Per group: the calls it finished and the one in flight.
type Outcome = BTreeMap<u64, (Vec<Op>, Option<Op>)>;

fn run_child_and_kill(dir: &Path, rng: &mut Rng) -> Outcome {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &child_test_name!("shared_crash_child"),
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
        let mut outcome = Outcome::new();
        let mut other = String::new();
        let mut stderr = BufReader::new(stderr);
        let mut line = String::new();
        let mut first = Some(first_tx);
        loop {
            line.clear();
            if stderr.read_line(&mut line).unwrap() == 0 {
                break;
            }
            // A line cut by the kill has no newline: it does not count.
            let words: Vec<&str> = match line.strip_suffix('\n') {
                Some(l) => l.split(' ').collect(),
                None => continue,
            };
            let group = words.first().and_then(|g| g.parse::<u64>().ok());
            match (group, words.get(1).copied()) {
                (Some(group), Some("begin")) => {
                    let op = Op::parse(&words[2..]).expect("an operation");
                    outcome.entry(group).or_default().1 = Some(op);
                }
                (Some(group), Some("done")) => {
                    let (done, begun) = outcome.entry(group).or_default();
                    done.push(begun.take().expect("done without begin"));
                    if let Some(first) = first.take() {
                        let _ = first.send(());
                    }
                }
                _ => other.push_str(&line),
            }
        }
        (outcome, other)
    });
    let started = Instant::now();
    let first = first_rx.recv_timeout(Duration::from_secs(60));
    if first.is_ok() {
        let wait = (20 + rng.below(280)).saturating_sub(started.elapsed().as_millis() as u64);
        std::thread::sleep(Duration::from_millis(wait.max(1)));
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    let (outcome, other) = reader.join().unwrap();
    assert!(
        first.is_ok() && !status.success(),
        "the child failed before the kill ({status}): {other}"
    );
    outcome
}

#[test]
fn crashes_keep_every_groups_acknowledged_operations() {
    let cycles: u32 = std::env::var("WALCODEC_RAFT_CRASH_CYCLES")
        .ok()
        .map(|v| v.parse().expect("a cycle count"))
        .unwrap_or(8);
    let seed = std::env::var("WALCODEC_RAFT_CRASH_SEED")
        .ok()
        .map(|v| v.parse().expect("a seed"))
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("shared log crash test seed {seed}");
    let mut rng = Rng::new(seed);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut models: BTreeMap<u64, Model> = (0..GROUPS).map(|g| (g, Model::default())).collect();
    let mut acked = 0;
    for round in 0..cycles {
        let outcome = run_child_and_kill(dir.path(), &mut rng);
        let found = runtime.block_on(async {
            let shared = open(dir.path()).await;
            let mut found = BTreeMap::new();
            for group in 0..GROUPS {
                let mut store = shared.store::<TypeConfig>(group).await.unwrap();
                found.insert(group, Model::read(&mut store).await);
                store.close().await.unwrap();
            }
            shared.close().await.unwrap();
            found
        });
        for group in 0..GROUPS {
            let model = models.get_mut(&group).unwrap();
            let (done, in_flight) = outcome.get(&group).cloned().unwrap_or_default();
            acked += done.len();
            for op in &done {
                model.apply(op);
            }
            let states = model.allowed(in_flight);
            assert!(
                states.contains(&found[&group]),
                "round {round} (seed {seed}), group {group}: after {} acknowledged calls and \
                 {in_flight:?} in flight, it holds\n{:?}\nexpected one of\n{states:?}",
                done.len(),
                found[&group]
            );
            *model = found[&group].clone();
        }
    }
    eprintln!(
        "shared log crash test: {cycles} rounds of {GROUPS} groups, {acked} acknowledged calls"
    );
    assert!(acked > 0);
}
