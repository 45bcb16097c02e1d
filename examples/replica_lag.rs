//! Paired measurement of log shipping under load: 64 tasks append 256-byte
//! records to a primary `LogDir` for a few seconds with 0, 1 and 4 replicas
//! connected over localhost TCP (in this process), in alternating order each
//! round. Prints the primary's appends/s of each run, the ratios with one and
//! four replicas against none, and the replication lag: from an append being
//! durable on the primary (its `append` returned) to the replica's durable end
//! covering it, p50 and p99.
//!
//! ```text
//! cargo run --release --example replica_lag -- 3 3   # seconds per run, rounds
//! REPLICA_DIR=/dev/shm cargo run --release --example replica_lag -- 3 3
//! ```
//!
//! `REPLICA_DIR` puts the replicas' directories there (say a tmpfs, or another
//! disk), standing in for replicas on other machines: by default they share the
//! primary's disk and its syncs.

use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use walcodec::{LogDir, LogPosition, Replica};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const TASKS: usize = 64;
const RECORD: [u8; 256] = [0x5a; 256];
/// Every this many appends of a task, one is timed for the lag.
const SAMPLE_EVERY: u64 = 4;

struct Run {
    appends_per_sec: f64,
    lags: Vec<Duration>,
}

/// When each durable end was first seen on a replica.
type Seen = Vec<(LogPosition, Instant)>;

async fn run(replicas: usize, seconds: f64) -> Result<Run, BoxError> {
    let dir = tempfile::tempdir()?;
    let log = LogDir::open(dir.path()).await?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn({
        let log = log.clone();
        async move {
            let mut serving = Vec::new();
            for _ in 0..replicas {
                let (conn, _) = listener.accept().await?;
                let log = log.clone();
                serving.push(tokio::spawn(async move { log.serve_replica(conn).await }));
            }
            for s in serving {
                s.await??;
            }
            Ok::<_, BoxError>(())
        }
    });
    let mut copies = Vec::new();
    for _ in 0..replicas {
        let rdir = match std::env::var_os("REPLICA_DIR") {
            Some(base) => tempfile::tempdir_in(base)?,
            None => tempfile::tempdir()?,
        };
        let mut replica = Replica::open(rdir.path()).await?;
        let mut end = replica.durable_end();
        let watcher = tokio::spawn(async move {
            let mut seen: Seen = Vec::new();
            while end.changed().await.is_ok() {
                seen.push((*end.borrow_and_update(), Instant::now()));
            }
            seen
        });
        let conn = TcpStream::connect(addr).await?;
        let sync = tokio::spawn(async move { replica.sync_from(conn).await });
        copies.push((rdir, watcher, sync));
    }
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(seconds);
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let log = log.clone();
            tokio::spawn(async move {
                let mut n = 0u64;
                let mut samples = Vec::new();
                while Instant::now() < deadline {
                    let end = log.append(RECORD).await?;
                    n += 1;
                    if n % SAMPLE_EVERY == 0 {
                        samples.push((end, Instant::now()));
                    }
                }
                Ok::<_, BoxError>((n, samples))
            })
        })
        .collect();
    let mut appends = 0;
    let mut samples = Vec::new();
    for task in tasks {
        let (n, s) = task.await??;
        appends += n;
        samples.extend(s);
    }
    let elapsed = started.elapsed().as_secs_f64();
    let end = log.close().await?;
    server.await??;
    let mut lags = Vec::new();
    for (_dir, watcher, sync) in copies {
        assert_eq!(sync.await??, end);
        // The replica is dropped with its task: the watcher sees the end.
        let seen = watcher.await?;
        for &(position, at) in &samples {
            let i = seen.partition_point(|&(p, _)| p < position);
            let (_, copied) = seen.get(i).ok_or("a sample never reached the replica")?;
            lags.push(copied.saturating_duration_since(at));
        }
    }
    Ok(Run {
        appends_per_sec: appends as f64 / elapsed,
        lags,
    })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1);
    let seconds: f64 = args.next().map_or(Ok(3.0), |a| a.parse())?;
    let rounds: usize = args.next().map_or(Ok(3), |a| a.parse())?;
    let (mut one, mut four) = (Vec::new(), Vec::new());
    let mut lags = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        let order = if round % 2 == 0 { [0, 1, 4] } else { [4, 1, 0] };
        let mut rate = [0.0; 5];
        for replicas in order {
            let r = run(replicas, seconds).await?;
            println!(
                "round {round}: {replicas} replicas: {:>8.0} appends/s",
                r.appends_per_sec
            );
            rate[replicas] = r.appends_per_sec;
            match replicas {
                1 => lags[0].extend(r.lags),
                4 => lags[1].extend(r.lags),
                _ => {}
            }
        }
        one.push(rate[1] / rate[0]);
        four.push(rate[4] / rate[0]);
    }
    println!(
        "appends/s against none (median of {rounds} rounds): 1 replica {:.2}x, 4 replicas {:.2}x",
        median(one),
        median(four)
    );
    for (name, mut lag) in ["1 replica", "4 replicas"].into_iter().zip(lags) {
        lag.sort();
        println!(
            "lag, {name}: p50 {:.2?}, p99 {:.2?} ({} samples)",
            percentile(&lag, 0.5),
            percentile(&lag, 0.99),
            lag.len()
        );
    }
    Ok(())
}
