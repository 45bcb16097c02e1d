//! LogDir durable appends: appends per second from 1, 16, 64 and 256 tasks with
//! 4 MiB and 64 MiB segments, beside `AsyncLogWriter` on one file in the same run.
//! The difference is what segmenting costs: the reservation check on each append,
//! the shared lock, and the rotations (seal, create, file and directory sync), which
//! stall appends while they run.
//!
//! Each LogDir lives across all the rounds of its configuration, so segments fill
//! and rotate at their natural rate; sealed segments are purged between rounds
//! (untimed), as a service's retention would.
//!
//! ```text
//! cargo bench --bench logdir -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Files go to `WALCODEC_BENCH_DIR`, else the system temp dir: it must be on a real
//! disk (not tmpfs), or syncs cost nothing and the comparison means nothing.

use std::path::Path;
use std::time::Instant;

use criterion::{BenchmarkId, Criterion, Throughput};
use walcodec::{LogDir, LogPosition};

#[path = "common/durable.rs"]
mod durable;

use durable::{bench_dir, group_commit, median, record, runtime, Tally, ROUNDS, ROUND_TIME, TASKS};

const SEGMENTS: [(&str, u64); 2] = [("4MiB", 4 << 20), ("64MiB", 64 << 20)];

async fn open(dir: &Path, name: &str, max_segment_bytes: u64) -> LogDir {
    LogDir::builder()
        .max_segment_bytes(max_segment_bytes)
        .open(dir.join(name))
        .await
        .unwrap()
}

/// `iters` appends to `log` spread over `tasks` tasks, each awaiting its append
/// before the next.
async fn appends(log: &LogDir, tasks: usize, iters: u64) -> Tally {
    let start = Instant::now();
    let mut handles = Vec::with_capacity(tasks);
    for task in 0..tasks {
        let n = iters / tasks as u64 + u64::from((task as u64) < iters % tasks as u64);
        let log = log.clone();
        handles.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(n as usize);
            for seq in 0..n {
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
    Tally {
        appends: iters,
        elapsed: start.elapsed(),
        syncs: 0,
        latencies,
    }
}

/// Drops the sealed segments, untimed, so a long run does not fill the disk.
async fn trim(log: &LogDir) {
    log.purge_before(LogPosition::new(u64::MAX, 0))
        .await
        .unwrap();
}

fn benches(c: &mut Criterion, dir: &Path) {
    let runtime = runtime();
    let mut group = c.benchmark_group("logdir");
    group.throughput(Throughput::Elements(1));
    group.sample_size(10);
    for tasks in TASKS {
        group.bench_with_input(BenchmarkId::new("one_file", tasks), &tasks, |b, &tasks| {
            b.iter_custom(|iters| runtime.block_on(group_commit(dir, tasks, iters)).elapsed)
        });
        for (name, bytes) in SEGMENTS {
            let log = runtime.block_on(open(dir, &format!("{name}-{tasks}"), bytes));
            group.bench_with_input(
                BenchmarkId::new(format!("logdir_{name}"), tasks),
                &tasks,
                |b, &tasks| {
                    b.iter_custom(|iters| {
                        let tally = runtime.block_on(appends(&log, tasks, iters));
                        runtime.block_on(trim(&log));
                        tally.elapsed
                    })
                },
            );
            runtime.block_on(log.close()).unwrap();
        }
    }
    group.finish();
}

/// The table: the one-file writer and both segment sizes in alternating rounds, so
/// all see the same disk, with the median of the per-round ratios.
fn paired_table(dir: &Path) {
    let runtime = runtime();
    println!();
    println!(
        "paired: {ROUNDS} rounds of {} ms per configuration; ratios are medians of \
         per-round ratios to AsyncLogWriter on one file",
        ROUND_TIME.as_millis()
    );
    println!();
    println!(
        "| tasks | one file appends/s | 4 MiB appends/s | vs one file | 64 MiB appends/s | \
         vs one file | rotations (4 MiB / 64 MiB) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for tasks in TASKS {
        let probe = runtime.block_on(group_commit(dir, tasks, 50 * tasks as u64));
        let iters =
            (probe.appends_per_second() * ROUND_TIME.as_secs_f64()).max(tasks as f64) as u64;
        let logs: Vec<LogDir> = SEGMENTS
            .iter()
            .map(|&(name, bytes)| {
                runtime.block_on(open(dir, &format!("table-{name}-{tasks}"), bytes))
            })
            .collect();
        let mut base_all = Tally::default();
        let mut all = [Tally::default(), Tally::default()];
        let mut ratios = [Vec::new(), Vec::new()];
        let firsts: Vec<u64> = logs.iter().map(|log| log.end().segment).collect();
        for _ in 0..ROUNDS {
            let base = runtime.block_on(group_commit(dir, tasks, iters));
            for (i, log) in logs.iter().enumerate() {
                let ours = runtime.block_on(appends(log, tasks, iters));
                runtime.block_on(trim(log));
                ratios[i].push(ours.appends_per_second() / base.appends_per_second());
                all[i].add(ours);
            }
            base_all.add(base);
        }
        let rotations: Vec<u64> = logs
            .iter()
            .zip(&firsts)
            .map(|(log, first)| log.end().segment - first)
            .collect();
        println!(
            "| {tasks} | {:.0} | {:.0} | {:.2}x | {:.0} | {:.2}x | {} / {} |",
            base_all.appends_per_second(),
            all[0].appends_per_second(),
            median(ratios[0].clone()),
            all[1].appends_per_second(),
            median(ratios[1].clone()),
            rotations[0],
            rotations[1],
        );
        for log in logs {
            runtime.block_on(log.close()).unwrap();
        }
    }
}

fn main() {
    let dir = tempfile::tempdir_in(bench_dir()).unwrap();
    let mut criterion = Criterion::default().configure_from_args();
    benches(&mut criterion, dir.path());
    criterion.final_summary();
    // Not in `cargo bench --no-run`, nor when criterion only lists or tests.
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--list" || a == "--test") {
        paired_table(dir.path());
    }
}
