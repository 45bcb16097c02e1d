//! The durable-append workload shared by `benches/group_commit.rs` and the okaywal
//! comparison in `benches/peers` (which includes this file by path): the same records,
//! the same per-record `write` + `fdatasync` baseline, the same `AsyncLogWriter` run.
#![allow(dead_code)] // each bench uses its own subset

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use walcodec::{LogEncoder, WriterOptions};

pub const RECORD_BYTES: usize = 100;
pub const TASKS: [usize; 4] = [1, 16, 64, 256];

/// What one run (or several) of a configuration did.
#[derive(Default, Clone)]
pub struct Tally {
    pub appends: u64,
    pub elapsed: Duration,
    pub syncs: u64,
    pub latencies: Vec<Duration>,
}

impl Tally {
    pub fn add(&mut self, other: Tally) {
        self.appends += other.appends;
        self.elapsed += other.elapsed;
        self.syncs += other.syncs;
        self.latencies.extend(other.latencies);
    }

    pub fn appends_per_second(&self) -> f64 {
        self.appends as f64 / self.elapsed.as_secs_f64()
    }

    pub fn percentile(&mut self, p: f64) -> Duration {
        self.latencies.sort_unstable();
        let i = ((self.latencies.len() as f64 - 1.0) * p).round() as usize;
        self.latencies[i]
    }
}

static FILE_NUMBER: AtomicU64 = AtomicU64::new(0);

pub fn bench_dir() -> PathBuf {
    std::env::var_os("WALCODEC_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

pub fn fresh_path(dir: &Path) -> PathBuf {
    let n = FILE_NUMBER.fetch_add(1, Ordering::Relaxed);
    dir.join(format!("{n:06}.log"))
}

pub fn record(task: usize, seq: u64) -> Vec<u8> {
    let mut record = vec![b'.'; RECORD_BYTES];
    record[..8].copy_from_slice(&(task as u64).to_le_bytes());
    record[8..16].copy_from_slice(&seq.to_le_bytes());
    record
}

/// One `write` + `fdatasync` per record on a std file: what group commit is measured
/// against. Records are framed by `LogEncoder`, so both write the same bytes.
pub fn baseline(dir: &Path, iters: u64) -> Tally {
    let path = fresh_path(dir);
    let mut file = std::fs::File::create(&path).unwrap();
    let tally = sync_each(&mut file, iters);
    std::fs::remove_file(&path).unwrap();
    tally
}

/// The loop of [`baseline`], from `file`'s position on: `iters` framed records, each
/// written and synced on its own.
pub fn sync_each(file: &mut std::fs::File, iters: u64) -> Tally {
    let mut encoder = LogEncoder::new();
    let mut buf = BytesMut::new();
    let mut latencies = Vec::with_capacity(iters as usize);
    let start = Instant::now();
    for seq in 0..iters {
        let began = Instant::now();
        buf.clear();
        encoder.encode_record(&record(0, seq), &mut buf);
        file.write_all(&buf).unwrap();
        file.sync_data().unwrap();
        latencies.push(began.elapsed());
    }
    Tally {
        appends: iters,
        elapsed: start.elapsed(),
        syncs: iters,
        latencies,
    }
}

/// `iters` appends spread over `tasks` tasks, each awaiting its append before the next.
pub async fn group_commit(dir: &Path, tasks: usize, iters: u64) -> Tally {
    group_commit_with(dir, tasks, iters, &WriterOptions::new()).await
}

/// [`group_commit`] with a writer built from `options`.
pub async fn group_commit_with(
    dir: &Path,
    tasks: usize,
    iters: u64,
    options: &WriterOptions,
) -> Tally {
    let path = fresh_path(dir);
    let log = options.create(&path).await.unwrap();
    let appender = log.clone();
    let (elapsed, latencies) = spread_appends(tasks, iters, move |record| {
        let log = appender.clone();
        async move {
            log.append(&record).await.unwrap();
        }
    })
    .await;
    let stats = log.stats();
    assert_eq!(stats.records, iters);
    log.close().await.unwrap();
    std::fs::remove_file(&path).unwrap();
    Tally {
        appends: iters,
        elapsed,
        syncs: stats.syncs,
        latencies,
    }
}

/// `iters` appends of [`record`]s spread over `tasks` tasks, each awaiting its
/// append (`append`) before the next: how long they took, and each one's latency.
pub async fn spread_appends<F, Fut>(
    tasks: usize,
    iters: u64,
    append: F,
) -> (Duration, Vec<Duration>)
where
    F: Fn(Vec<u8>) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let start = Instant::now();
    let mut handles = Vec::with_capacity(tasks);
    for task in 0..tasks {
        let appends = iters / tasks as u64 + u64::from((task as u64) < iters % tasks as u64);
        let append = append.clone();
        handles.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(appends as usize);
            for seq in 0..appends {
                let record = record(task, seq);
                let began = Instant::now();
                append(record).await;
                latencies.push(began.elapsed());
            }
            latencies
        }));
    }
    let mut latencies = Vec::with_capacity(iters as usize);
    for handle in handles {
        latencies.extend(handle.await.unwrap());
    }
    (start.elapsed(), latencies)
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Rounds of the paired comparison, and the time each side of a round runs.
pub const ROUNDS: usize = 5;
pub const ROUND_TIME: Duration = Duration::from_millis(300);

pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
