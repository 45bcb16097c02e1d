//! Real crashes of a replica: a child process syncs a `Replica` over localhost TCP
//! from a primary in this process that keeps appending, printing each durable end
//! it reports; it is killed with SIGKILL at a random moment mid-sync. After each
//! kill the replica directory reopens as a valid log directory holding a prefix of
//! the primary's segments, at a record boundary, and at least up to the last
//! durable end reported; at the end, a sync resumes and completes byte-identical.
//!
//! The child is this test binary run again with `WALCODEC_REPLICA_CHILD` set;
//! `WALCODEC_REPLICA_CRASH_ROUNDS` sets the number of kills (default 6).

use crate::writer_support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use walcodec::{LogDir, LogPosition, Replica};
use writer_support::Rng;

const CHILD_ENV: &str = "WALCODEC_REPLICA_CHILD";
const ADDR_ENV: &str = "WALCODEC_REPLICA_ADDR";
const ROUNDS_ENV: &str = "WALCODEC_REPLICA_CRASH_ROUNDS";

/// Records of many sizes, some across blocks; each names its index.
fn record(i: usize) -> Vec<u8> {
    let len = match i % 6 {
        0 => 40_000,
        1 => 32 * 1024 - 11,
        _ => 8 + (i * 197) % 5000,
    };
    let mut data: Vec<u8> = (0..len).map(|j| (i * 13 + j) as u8).collect();
    data[..8].copy_from_slice(&(i as u64).to_le_bytes());
    data
}

/// The child: syncs the replica at `CHILD_ENV` from `ADDR_ENV` until killed,
/// printing every durable end it reports.
#[test]
#[ignore = "the child process of the replica crash test"]
fn replica_child() {
    // Run by hand (`--include-ignored`), it has nothing to check: say so by failing.
    let path = std::env::var_os(CHILD_ENV).unwrap_or_else(|| {
        panic!("{CHILD_ENV} is not set: only the replica crash test runs this child")
    });
    let addr = std::env::var(ADDR_ENV).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let mut replica = Replica::open(path).await.unwrap();
        let mut durable = replica.durable_end();
        eprintln!("durable {}", *durable.borrow_and_update());
        tokio::spawn(async move {
            while durable.changed().await.is_ok() {
                eprintln!("durable {}", *durable.borrow_and_update());
            }
        });
        let conn = TcpStream::connect(addr).await.unwrap();
        let end = replica.sync_from(conn).await;
        eprintln!("ended {end:?}");
    });
}

/// Runs the child until it reported `reports` durable ends (and a few
/// milliseconds more), kills it; returns the last durable end it reported.
fn run_child_and_kill(replica: &Path, addr: &str, reports: usize, extra_ms: u64) -> LogPosition {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &child_test_name!("replica_child"),
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_ENV, replica)
        .env(ADDR_ENV, addr)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut last = LogPosition::START;
    let mut seen = 0;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(position) = line.strip_prefix("durable ") {
            last = position.parse().unwrap();
            seen += 1;
            if seen > reports {
                break;
            }
        } else if line.starts_with("ended") || line.contains("panicked") {
            panic!("the child ended before it was killed: {line}");
        }
    }
    std::thread::sleep(Duration::from_millis(extra_ms));
    child.kill().unwrap();
    child.wait().unwrap();
    // Reports printed before the kill landed count too; the kill can cut the last
    // one mid-line, and a cut report says nothing.
    for line in lines {
        let Ok(line) = line else { break };
        if let Some(Ok(position)) = line.strip_prefix("durable ").map(str::parse) {
            last = position;
        }
    }
    last
}

/// Each replica segment is the primary's first bytes, ending where a record of the
/// primary ends; returns the replica's records as `LogDir::open` reads them.
async fn check_prefix(primary: &Path, replica: &Path, ends: &[LogPosition]) -> usize {
    for segment in LogDir::list(replica).unwrap().segments {
        let copy = std::fs::read(&segment.path).unwrap();
        let ours = std::fs::read(primary.join(segment.path.file_name().unwrap())).unwrap();
        assert!(
            ours.starts_with(&copy),
            "segment {} is no prefix",
            segment.number
        );
        let at = LogPosition::new(segment.number, copy.len() as u64);
        assert!(
            copy.is_empty() || ends.binary_search(&at).is_ok(),
            "segment {} ends mid-record at {at}",
            segment.number
        );
    }
    let log = LogDir::open(replica).await.unwrap();
    let mut reader = log.read_from(LogPosition::START).unwrap();
    let mut n = 0;
    while let Some(got) = reader.next_record().await {
        assert_eq!(got.unwrap().data, record(n), "record {n}");
        n += 1;
    }
    log.close().await.unwrap();
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_killed_mid_sync_reopens_as_a_durable_prefix_and_resumes_identical() {
    let rounds: usize = std::env::var(ROUNDS_ENV)
        .map(|v| v.parse().unwrap())
        .unwrap_or(6);
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = LogDir::builder()
        .max_segment_bytes(256 * 1024)
        .open(p.path())
        .await
        .unwrap();
    // Where each record ends, in order (one appending task keeps them in order).
    let ends = Arc::new(std::sync::Mutex::new(Vec::new()));
    for i in 0..300 {
        let end = log.append(record(i)).await.unwrap();
        ends.lock().unwrap().push(end);
    }
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let serving = tokio::spawn({
        let log = log.clone();
        async move {
            loop {
                let (conn, _) = listener.accept().await.unwrap();
                let log = log.clone();
                // A killed replica's connection ends in a reset: no error to see.
                tokio::spawn(async move { log.serve_replica(conn).await });
            }
        }
    });
    let stop = Arc::new(AtomicBool::new(false));
    let appending = tokio::spawn({
        let (log, ends, stop) = (log.clone(), Arc::clone(&ends), Arc::clone(&stop));
        async move {
            let mut i = 300;
            while !stop.load(Ordering::Relaxed) {
                let end = log.append(record(i)).await.unwrap();
                ends.lock().unwrap().push(end);
                i += 1;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    });
    let mut rng = Rng::new(29);
    let mut durable = LogPosition::START;
    for round in 0..rounds {
        let reports = rng.range(1, 12) as usize;
        let extra_ms = rng.range(0, 15);
        let (dir, at) = (r.path().to_path_buf(), addr.clone());
        let reported =
            tokio::task::spawn_blocking(move || run_child_and_kill(&dir, &at, reports, extra_ms))
                .await
                .unwrap();
        durable = durable.max(reported);
        let replica = Replica::open(r.path()).await.unwrap();
        let end = replica.end();
        assert!(
            end >= durable,
            "round {round}: reported {durable} durable, reopened at {end}"
        );
        replica.close().await.unwrap();
        let snapshot = ends.lock().unwrap().clone();
        check_prefix(p.path(), r.path(), &snapshot).await;
        durable = end;
    }
    stop.store(true, Ordering::Relaxed);
    appending.await.unwrap();
    let end = log.close().await.unwrap();
    // Resumed in this process, the replica completes byte-identical.
    let mut replica = Replica::open(r.path()).await.unwrap();
    let conn = TcpStream::connect(&addr).await.unwrap();
    assert_eq!(replica.sync_from(conn).await.unwrap().end, end);
    replica.close().await.unwrap();
    serving.abort();
    let segments = log.segments();
    let listed = LogDir::list(r.path()).unwrap().segments;
    assert_eq!(listed.len(), segments.len());
    for (&(number, len), copy) in segments.iter().zip(&listed) {
        assert_eq!(copy.number, number);
        let ours = std::fs::read(p.path().join(copy.path.file_name().unwrap())).unwrap();
        let theirs = std::fs::read(&copy.path).unwrap();
        assert_eq!(theirs.len() as u64, len, "segment {number}");
        assert!(
            ours[..len as usize] == theirs[..],
            "segment {number} differs"
        );
    }
    let all = ends.lock().unwrap().clone();
    assert_eq!(check_prefix(p.path(), r.path(), &all).await, all.len());
}
