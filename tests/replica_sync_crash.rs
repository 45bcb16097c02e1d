//! A primary with a synchronous replica (`sync_replicas(1)`), in a child process,
//! appends from several tasks and prints each record it acknowledged; it is killed
//! with SIGKILL mid-load. Every record it acknowledged is on the replica (in this
//! process, over localhost TCP), exactly once, and the replica is a byte prefix of
//! what the primary left on disk.
//!
//! The child is this test binary run again with `WALCODEC_SYNC_PRIMARY_CHILD` set.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use walcodec::{LogDir, LogPosition, Replica};

const CHILD_ENV: &str = "WALCODEC_SYNC_PRIMARY_CHILD";

/// Records of many sizes, some across blocks; each starts with its index.
fn record(i: u64) -> Vec<u8> {
    let len = 8 + (i as usize * 7919) % 40_000;
    let mut data: Vec<u8> = (0..len).map(|j| (i as usize * 13 + j) as u8).collect();
    data[..8].copy_from_slice(&i.to_le_bytes());
    data
}

/// The child: a primary that serves one replica and appends from four tasks until
/// killed, printing each acknowledged record's index.
#[test]
#[ignore = "the child process of the synchronous replica crash test"]
fn sync_primary_child() {
    // Run by hand (`--include-ignored`), it has nothing to check: say so by failing.
    let path = std::env::var_os(CHILD_ENV).unwrap_or_else(|| {
        panic!("{CHILD_ENV} is not set: only the synchronous replica crash test runs this child")
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let log = LogDir::builder()
            .max_segment_bytes(512 * 1024)
            .sync_replicas(1)
            .replica_timeout(Duration::from_secs(30))
            .open(path)
            .await
            .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        eprintln!("listening {}", listener.local_addr().unwrap());
        let (conn, _) = listener.accept().await.unwrap();
        tokio::spawn({
            let log = log.clone();
            async move { log.serve_replica(conn).await }
        });
        let mut tasks = Vec::new();
        for t in 0..4u64 {
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                for k in 0.. {
                    let i = t + 4 * k;
                    match log.append(record(i)).await {
                        Ok(_) => eprintln!("acked {i}"),
                        Err(e) => eprintln!("failed {i}: {e}"),
                    }
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_records_are_on_the_replica_after_the_primary_is_killed() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &child_test_name!("sync_primary_child"),
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_ENV, p.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let addr = loop {
        let line = whole_line(&mut stderr).expect("the child ended");
        if let Some(addr) = line.strip_prefix("listening ") {
            break addr.to_string();
        }
    };
    let mut replica = Replica::open(r.path()).await.unwrap();
    let conn = TcpStream::connect(addr).await.unwrap();
    let syncing = tokio::spawn(async move {
        let _ = replica.sync_from(conn).await;
        replica
    });
    let acked = tokio::task::spawn_blocking(move || {
        let mut acked = BTreeSet::new();
        while let Some(line) = whole_line(&mut stderr) {
            if let Some(i) = line.strip_prefix("acked ") {
                acked.insert(i.parse::<u64>().unwrap());
                if acked.len() >= 300 {
                    break;
                }
            } else if line.starts_with("failed") || line.contains("panicked") {
                panic!("the child failed: {line}");
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
        // Acknowledgements printed before the kill landed count too.
        while let Some(line) = whole_line(&mut stderr) {
            if let Some(i) = line.strip_prefix("acked ") {
                acked.insert(i.parse::<u64>().unwrap());
            }
        }
        acked
    })
    .await
    .unwrap();
    let replica = tokio::time::timeout(Duration::from_secs(60), syncing)
        .await
        .expect("the replica sees the primary gone")
        .unwrap();

    let mut held = BTreeSet::new();
    let mut reader = replica.read_from(LogPosition::START).await.unwrap();
    while let Some(got) = reader.next_record().await {
        let data = got.unwrap().data;
        let i = u64::from_le_bytes(data[..8].try_into().unwrap());
        assert_eq!(data, record(i), "record {i}");
        assert!(held.insert(i), "record {i} twice");
    }
    let lost: Vec<u64> = acked.difference(&held).copied().collect();
    assert!(lost.is_empty(), "acknowledged but not replicated: {lost:?}");
    // The replica holds a prefix of what the primary wrote.
    for segment in LogDir::list(r.path()).unwrap().segments {
        let copy = std::fs::read(&segment.path).unwrap();
        let ours = std::fs::read(p.path().join(segment.path.file_name().unwrap())).unwrap();
        assert!(ours.starts_with(&copy), "segment {}", segment.number);
    }
}

/// The child's next line, without its newline; `None` at the end of its output,
/// or for a last line the kill cut short (`eprintln!` writes a line in pieces, so
/// a line without its newline may hold half a number: it never counts).
fn whole_line(stderr: &mut impl BufRead) -> Option<String> {
    let mut line = String::new();
    match stderr.read_line(&mut line) {
        Ok(n) if n > 0 && line.ends_with('\n') => {
            line.pop();
            Some(line)
        }
        _ => None,
    }
}
