//! Group commit: appends per second, syncs per append and append latency of
//! `AsyncLogWriter` with 1, 16, 64 and 256 tasks appending 100-byte records to a real
//! file, beside a baseline in the same run that writes and `fdatasync`s each record on
//! a std file.
//!
//! Criterion reports time per append (and appends/s as throughput). Syncs per append
//! and latency percentiles are printed as a table at the end, with each
//! configuration's appends/s as a ratio to the baseline's.
//!
//! ```text
//! cargo bench --bench group_commit -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Files go to `WALCODEC_BENCH_DIR`, else the system temp dir: it must be on a real
//! disk (not tmpfs), or syncs cost nothing and the comparison means nothing.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use criterion::{BenchmarkId, Criterion, Throughput};
use walcodec::{AsyncLogWriter, LogEncoder};

const RECORD_BYTES: usize = 100;
const TASKS: [usize; 4] = [1, 16, 64, 256];

/// What one configuration did over all of criterion's calls.
#[derive(Default)]
struct Tally {
    appends: u64,
    elapsed: Duration,
    syncs: u64,
    latencies: Vec<Duration>,
}

impl Tally {
    fn appends_per_second(&self) -> f64 {
        self.appends as f64 / self.elapsed.as_secs_f64()
    }

    fn percentile(&mut self, p: f64) -> Duration {
        self.latencies.sort_unstable();
        let i = ((self.latencies.len() as f64 - 1.0) * p).round() as usize;
        self.latencies[i]
    }
}

static BASELINE: Mutex<Option<Tally>> = Mutex::new(None);
static WRITER: Mutex<Vec<(usize, Tally)>> = Mutex::new(Vec::new());
static FILE_NUMBER: AtomicU64 = AtomicU64::new(0);

fn bench_dir() -> PathBuf {
    std::env::var_os("WALCODEC_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

fn fresh_path(dir: &Path) -> PathBuf {
    let n = FILE_NUMBER.fetch_add(1, Ordering::Relaxed);
    dir.join(format!("{n:06}.log"))
}

fn record(task: usize, seq: u64) -> Vec<u8> {
    let mut record = vec![b'.'; RECORD_BYTES];
    record[..8].copy_from_slice(&(task as u64).to_le_bytes());
    record[8..16].copy_from_slice(&seq.to_le_bytes());
    record
}

/// One `write` + `fdatasync` per record on a std file: what group commit is measured
/// against. Records are framed by `LogEncoder`, so both write the same bytes.
fn baseline(dir: &Path, iters: u64) -> Duration {
    let path = fresh_path(dir);
    let mut file = std::fs::File::create(&path).unwrap();
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
    let elapsed = start.elapsed();
    std::fs::remove_file(&path).unwrap();
    let mut tally = BASELINE.lock().unwrap();
    let tally = tally.get_or_insert_with(Tally::default);
    tally.appends += iters;
    tally.elapsed += elapsed;
    tally.syncs += iters;
    tally.latencies.extend(latencies);
    elapsed
}

/// `iters` appends spread over `tasks` tasks, each awaiting its append before the next.
async fn group_commit(dir: &Path, tasks: usize, iters: u64) -> Duration {
    let path = fresh_path(dir);
    let log = AsyncLogWriter::create(&path).await.unwrap();
    let start = Instant::now();
    let mut handles = Vec::with_capacity(tasks);
    for task in 0..tasks {
        let appends = iters / tasks as u64 + u64::from((task as u64) < iters % tasks as u64);
        let log = log.clone();
        handles.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(appends as usize);
            for seq in 0..appends {
                let record = record(task, seq);
                let began = Instant::now();
                log.append(&record).await.unwrap();
                latencies.push(began.elapsed());
            }
            latencies
        }));
    }
    let mut latencies = Vec::with_capacity(iters as usize);
    for handle in handles {
        latencies.extend(handle.await.unwrap());
    }
    let elapsed = start.elapsed();
    let stats = log.stats();
    assert_eq!(stats.records, iters);
    log.close().await.unwrap();
    std::fs::remove_file(&path).unwrap();

    let mut all = WRITER.lock().unwrap();
    let tally = match all.iter_mut().find(|(t, _)| *t == tasks) {
        Some((_, tally)) => tally,
        None => {
            all.push((tasks, Tally::default()));
            &mut all.last_mut().unwrap().1
        }
    };
    tally.appends += iters;
    tally.elapsed += elapsed;
    tally.syncs += stats.syncs;
    tally.latencies.extend(latencies);
    elapsed
}

fn benches(c: &mut Criterion) {
    let dir = tempfile::tempdir_in(bench_dir()).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("group_commit");
    group.throughput(Throughput::Elements(1));
    group.sample_size(10);
    group.bench_function("baseline_write_fdatasync", |b| {
        b.iter_custom(|iters| baseline(dir.path(), iters))
    });
    for tasks in TASKS {
        group.bench_with_input(
            BenchmarkId::new("writer_tasks", tasks),
            &tasks,
            |b, &tasks| {
                b.iter_custom(|iters| runtime.block_on(group_commit(dir.path(), tasks, iters)))
            },
        );
    }
    group.finish();
}

fn print_table() {
    let Some(mut base) = BASELINE.lock().unwrap().take() else {
        return;
    };
    let base_rate = base.appends_per_second();
    println!();
    println!("| appender | appends/s | vs baseline | syncs/append | p50 | p99 |");
    println!("|---|---:|---:|---:|---:|---:|");
    println!(
        "| baseline: write + fdatasync per record | {:.0} | 1.0x | 1 | {:.0} µs | {:.0} µs |",
        base_rate,
        base.percentile(0.5).as_secs_f64() * 1e6,
        base.percentile(0.99).as_secs_f64() * 1e6,
    );
    let base_p50 = base.percentile(0.5);
    for (tasks, mut tally) in WRITER.lock().unwrap().drain(..) {
        let p50 = tally.percentile(0.5);
        println!(
            "| AsyncLogWriter, {tasks} tasks | {:.0} | {:.1}x | {:.4} | {:.0} µs ({:.2}x) | {:.0} µs |",
            tally.appends_per_second(),
            tally.appends_per_second() / base_rate,
            tally.syncs as f64 / tally.appends as f64,
            p50.as_secs_f64() * 1e6,
            p50.as_secs_f64() / base_p50.as_secs_f64(),
            tally.percentile(0.99).as_secs_f64() * 1e6,
        );
    }
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    benches(&mut criterion);
    criterion.final_summary();
    print_table();
}
