//! Paired measurement of log shipping under load: 64 tasks append 256-byte
//! records to a primary `LogDir` for a few seconds with 0, 1 and 4 replicas
//! connected over localhost TCP, in alternating order each round. Each replica is a
//! process of its own (this program run again), as it would be on another machine.
//! Prints the primary's appends/s of each run, the ratios with one and four
//! replicas against none, and the replication lag: from an append being durable on
//! the primary (its `append` returned) to the replica's durable end covering it,
//! p50 and p99 (both processes read the system's wall clock).
//!
//! ```text
//! cargo run --release --example replica_lag -- 3 3   # seconds per run, rounds
//! REPLICA_DIR=/dev/shm REPLICA_NICE=19 cargo run --release --example replica_lag -- 3 3
//! ```
//!
//! `REPLICA_DIR` puts the replicas' directories there (say a tmpfs, or another
//! disk): by default they share the primary's disk and its syncs. `REPLICA_NICE`
//! runs the replica processes at that `nice` level: on a machine with few cores,
//! 19 keeps their CPU from the primary's, standing in for machines of their own.
//! `REPLICA_WAKE_US` sets the primary's `replica_wake_interval` (default 1,000 µs).
//!
//! With `SYNC_REPLICAS=1`, it compares synchronous replication
//! (`LogDirOptions::sync_replicas`) with asynchronous instead: no replica, then 1
//! and 2 replicas each asynchronous and with `sync_replicas` equal to their number,
//! in alternating order each round; it prints appends/s and the append latency
//! (p50, p99: from calling `append` to its `Ok`) of each, and the ratios of
//! synchronous to asynchronous with as many replicas (medians over the rounds).
//!
//! ```text
//! SYNC_REPLICAS=1 cargo run --release --example replica_lag -- 3 3
//! ```

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::net::{TcpListener, TcpStream};
use walcodec::{LogDir, LogDirOptions, LogPosition, Replica};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const TASKS: usize = 64;
const RECORD: [u8; 256] = [0x5a; 256];
/// Every this many appends of a task, one is timed for the lag.
const SAMPLE_EVERY: u64 = 4;
/// Set in a replica process: `ADDRESS DIRECTORY`.
const CHILD_ENV: &str = "REPLICA_LAG_CHILD";

struct Run {
    appends_per_sec: f64,
    lags: Vec<Duration>,
    /// Every append's latency, sorted.
    latencies: Vec<Duration>,
}

/// The wall clock in nanoseconds, comparable between processes.
fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the clock is past 1970")
        .as_nanos() as u64
}

/// A replica process: syncs from the primary until it closes, then prints each
/// durable end it reported and when (`segment offset ns`), after the run.
fn replica_child(spec: &str) -> Result<(), BoxError> {
    let (addr, dir) = spec.split_once(' ').ok_or("ADDRESS DIRECTORY")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let seen = runtime.block_on(async {
        let mut replica = Replica::open(dir).await?;
        let mut end = replica.durable_end();
        let watcher = tokio::spawn(async move {
            let mut seen = Vec::new();
            while end.changed().await.is_ok() {
                seen.push((*end.borrow_and_update(), now_ns()));
            }
            seen
        });
        replica.sync_from(TcpStream::connect(addr).await?).await?;
        drop(replica);
        Ok::<_, BoxError>(watcher.await?)
    })?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for (position, at) in seen {
        writeln!(out, "{} {} {at}", position.segment, position.offset)?;
    }
    Ok(())
}

fn spawn_replica(addr: &str, dir: &tempfile::TempDir) -> Result<Child, BoxError> {
    let exe = std::env::current_exe()?;
    let mut command = match std::env::var("REPLICA_NICE") {
        Ok(level) => {
            let mut nice = Command::new("nice");
            nice.args(["-n", &level]).arg(exe);
            nice
        }
        Err(_) => Command::new(exe),
    };
    let spec = format!("{addr} {}", dir.path().display());
    Ok(command
        .env(CHILD_ENV, spec)
        .stdout(Stdio::piped())
        .spawn()?)
}

/// When each durable end was first seen on a replica.
fn read_seen(child: Child) -> Result<Vec<(LogPosition, u64)>, BoxError> {
    let output = child.wait_with_output()?;
    if !output.status.success() {
        return Err(format!("a replica failed: {}", output.status).into());
    }
    BufReader::new(&output.stdout[..])
        .lines()
        .map(|line| {
            let line = line?;
            let f: Vec<u64> = line.split(' ').map(str::parse).collect::<Result<_, _>>()?;
            Ok((LogPosition::new(f[0], f[1]), f[2]))
        })
        .collect()
}

async fn run(replicas: usize, sync: usize, seconds: f64) -> Result<Run, BoxError> {
    let dir = tempfile::tempdir()?;
    let wake = std::env::var("REPLICA_WAKE_US")
        .map_or(Ok(LogDirOptions::DEFAULT_WAKE_INTERVAL), |us| {
            us.parse().map(Duration::from_micros)
        })?;
    let log = LogDir::builder()
        .replica_wake_interval(wake)
        .sync_replicas(sync)
        .open(dir.path())
        .await?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?.to_string();
    let mut children = Vec::new();
    for _ in 0..replicas {
        let rdir = match std::env::var_os("REPLICA_DIR") {
            Some(base) => tempfile::tempdir_in(PathBuf::from(base))?,
            None => tempfile::tempdir()?,
        };
        children.push((spawn_replica(&addr, &rdir)?, rdir));
    }
    // Every replica is connected before the load starts.
    let mut serving = Vec::new();
    for _ in 0..replicas {
        let (conn, _) = listener.accept().await?;
        let log = log.clone();
        serving.push(tokio::spawn(async move { log.serve_replica(conn).await }));
    }

    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(seconds);
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let log = log.clone();
            tokio::spawn(async move {
                let mut n = 0u64;
                let mut samples = Vec::new();
                let mut latencies = Vec::new();
                loop {
                    let called = Instant::now();
                    if called >= deadline {
                        break;
                    }
                    let end = log.append(RECORD).await?;
                    latencies.push(called.elapsed());
                    n += 1;
                    if n % SAMPLE_EVERY == 0 {
                        samples.push((end, now_ns()));
                    }
                }
                Ok::<_, BoxError>((n, samples, latencies))
            })
        })
        .collect();
    let mut appends = 0;
    let mut samples = Vec::new();
    let mut latencies = Vec::new();
    for task in tasks {
        let (n, s, l) = task.await??;
        appends += n;
        samples.extend(s);
        latencies.extend(l);
    }
    latencies.sort();
    let elapsed = started.elapsed().as_secs_f64();
    log.close().await?; // each serve_replica returns once all is shipped
    for s in serving {
        s.await??;
    }
    let mut lags = Vec::new();
    for (child, _dir) in children {
        let seen = tokio::task::spawn_blocking(move || read_seen(child)).await??;
        for &(position, at) in &samples {
            let i = seen.partition_point(|&(p, _)| p < position);
            let (_, copied) = seen.get(i).ok_or("a sample never reached the replica")?;
            lags.push(Duration::from_nanos(copied.saturating_sub(at)));
        }
    }
    Ok(Run {
        appends_per_sec: appends as f64 / elapsed,
        lags,
        latencies,
    })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), BoxError> {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        return replica_child(&spec);
    }
    let mut args = std::env::args().skip(1);
    let seconds: f64 = args.next().map_or(Ok(3.0), |a| a.parse())?;
    let rounds: usize = args.next().map_or(Ok(3), |a| a.parse())?;
    let runtime = tokio::runtime::Runtime::new()?;
    if std::env::var_os("SYNC_REPLICAS").is_some() {
        return runtime.block_on(sync_against_async(seconds, rounds));
    }
    runtime.block_on(primary(seconds, rounds))
}

/// Synchronous replication against asynchronous, with 1 and 2 replicas, and no
/// replica as the bound.
async fn sync_against_async(seconds: f64, rounds: usize) -> Result<(), BoxError> {
    // (replicas, sync_replicas)
    const CELLS: [(usize, usize); 5] = [(0, 0), (1, 0), (1, 1), (2, 0), (2, 2)];
    let mut rates = vec![Vec::new(); CELLS.len()];
    let mut p50s = vec![Vec::new(); CELLS.len()];
    let mut p99s = vec![Vec::new(); CELLS.len()];
    for round in 0..rounds {
        let mut order: Vec<usize> = (0..CELLS.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for cell in order {
            let (replicas, sync) = CELLS[cell];
            let r = run(replicas, sync, seconds).await?;
            let (p50, p99) = (
                percentile(&r.latencies, 0.5),
                percentile(&r.latencies, 0.99),
            );
            println!(
                "round {round}: {replicas} replicas, sync_replicas({sync}): {:>8.0} appends/s, \
                 append p50 {p50:.2?} p99 {p99:.2?}",
                r.appends_per_sec
            );
            rates[cell].push(r.appends_per_sec);
            p50s[cell].push(p50.as_secs_f64());
            p99s[cell].push(p99.as_secs_f64());
        }
    }
    println!(
        "medians of {rounds} rounds ({TASKS} tasks appending {} B records):",
        RECORD.len()
    );
    println!("| replicas | sync_replicas | appends/s | p50 | p99 |");
    println!("|---|---|---|---|---|");
    for (cell, &(replicas, sync)) in CELLS.iter().enumerate() {
        println!(
            "| {replicas} | {sync} | {:.0} | {:.2?} | {:.2?} |",
            median(rates[cell].clone()),
            Duration::from_secs_f64(median(p50s[cell].clone())),
            Duration::from_secs_f64(median(p99s[cell].clone())),
        );
    }
    for (sync_cell, async_cell, replicas) in [(2, 1, 1), (4, 3, 2)] {
        let ratio = |v: &[Vec<f64>]| -> f64 {
            median(
                v[sync_cell]
                    .iter()
                    .zip(&v[async_cell])
                    .map(|(s, a)| s / a)
                    .collect(),
            )
        };
        println!(
            "{replicas} synchronous against {replicas} asynchronous: appends/s {:.2}x, \
             p50 {:.2}x, p99 {:.2}x; appends/s against no replica {:.2}x",
            ratio(&rates),
            ratio(&p50s),
            ratio(&p99s),
            median(
                rates[sync_cell]
                    .iter()
                    .zip(&rates[0])
                    .map(|(s, n)| s / n)
                    .collect()
            ),
        );
    }
    Ok(())
}

async fn primary(seconds: f64, rounds: usize) -> Result<(), BoxError> {
    let (mut one, mut four) = (Vec::new(), Vec::new());
    let mut lags = [Vec::new(), Vec::new()];
    for round in 0..rounds {
        let order = if round % 2 == 0 { [0, 1, 4] } else { [4, 1, 0] };
        let mut rate = [0.0; 5];
        for replicas in order {
            let r = run(replicas, 0, seconds).await?;
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
