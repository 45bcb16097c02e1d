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
//! A last table measures what rotating costs with 64 MiB segments: 200 MiB of
//! 4 KiB records a round from 64 tasks, into 64 MiB segments (three rotations a
//! round) and into one segment that never rotates, in alternating rounds.
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

use durable::{
    bench_dir, group_commit, median, runtime, spread_appends, Tally, ROUNDS, ROUND_TIME, TASKS,
};

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
    let log = log.clone();
    let (elapsed, latencies) = spread_appends(tasks, iters, move |record| {
        let log = log.clone();
        async move {
            log.append(&record).await.unwrap();
        }
    })
    .await;
    Tally {
        appends: iters,
        elapsed,
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

/// Record size and total per round of the rotation table: three 64 MiB segments
/// fill and rotate in each round.
const ROTATION_RECORD_BYTES: usize = 4096;
const ROTATION_ROUND_BYTES: u64 = 200 << 20;
const ROTATION_TASKS: usize = 64;
const ROTATION_ROUNDS: usize = 6;

/// `total` bytes of `ROTATION_RECORD_BYTES` records appended to `log` by
/// `ROTATION_TASKS` tasks; appends per second.
async fn fill(log: &LogDir, total: u64) -> f64 {
    let per_task = total / ROTATION_RECORD_BYTES as u64 / ROTATION_TASKS as u64;
    let start = Instant::now();
    let mut handles = Vec::new();
    for task in 0..ROTATION_TASKS {
        let log = log.clone();
        handles.push(tokio::spawn(async move {
            let record = vec![task as u8; ROTATION_RECORD_BYTES];
            for _ in 0..per_task {
                log.append(&record).await.unwrap();
            }
        }));
    }
    for handle in handles {
        handle.await.unwrap();
    }
    (per_task * ROTATION_TASKS as u64) as f64 / start.elapsed().as_secs_f64()
}

/// What rotating costs with 64 MiB segments: the same appends (64 tasks, 4 KiB
/// records, 200 MiB a round) into a `LogDir` with 64 MiB segments, which rotates
/// three times a round, and into one that never rotates, on fresh directories,
/// taking turns at going first. The issue's goal: at most 5% of throughput.
fn rotation_table(dir: &Path) {
    let runtime = runtime();
    let (mut ratios, mut rotations) = (Vec::new(), 0);
    let (mut rotating_rates, mut single_rates) = (Vec::new(), Vec::new());
    for round in 0..ROTATION_ROUNDS {
        let mut rates = [0.0; 2];
        // Each side goes first in every other round: the disk's state after a
        // side's writes (write-back, journal) must not favour the other.
        let mut sides = [(0, 64 << 20), (1, u64::MAX)];
        if round % 2 == 1 {
            sides.reverse();
        }
        for (i, max) in sides {
            let path = dir.join(format!("rotation-{round}-{i}"));
            let log = runtime.block_on(open(dir, &format!("rotation-{round}-{i}"), max));
            let first = log.end().segment;
            rates[i] = runtime.block_on(fill(&log, ROTATION_ROUND_BYTES));
            if i == 0 {
                rotations += log.end().segment - first;
            }
            runtime.block_on(log.close()).unwrap();
            std::fs::remove_dir_all(path).unwrap();
        }
        ratios.push(rates[0] / rates[1]);
        rotating_rates.push(rates[0]);
        single_rates.push(rates[1]);
    }
    println!();
    println!(
        "rotation cost: {ROTATION_TASKS} tasks, {ROTATION_RECORD_BYTES}-byte records, \
         {} MiB a round, {ROTATION_ROUNDS} rounds; {rotations} rotations in all",
        ROTATION_ROUND_BYTES >> 20
    );
    let single_rate = median(single_rates);
    println!(
        "64 MiB segments: median {:.0} appends/s; one segment: median {:.0} appends/s; \
         ratio (median of per-round ratios) {:.3}x",
        median(rotating_rates),
        single_rate,
        median(ratios)
    );

    // The stall itself, less noisy than a throughput ratio: `rotate()` under the same
    // load waits for the appends in flight, seals, and starts the next segment,
    // while every append waits. Its share of the time a 64 MiB segment lasts at the
    // rate above is what rotation costs.
    let stalls = runtime.block_on(async {
        let log = open(dir, "rotation-stall", u64::MAX).await;
        let load = {
            let log = log.clone();
            tokio::spawn(async move { fill(&log, ROTATION_ROUND_BYTES).await })
        };
        let mut stalls = Vec::new();
        while !load.is_finished() {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            let began = Instant::now();
            log.rotate().await.unwrap();
            stalls.push(began.elapsed().as_secs_f64());
            trim(&log).await;
        }
        load.await.unwrap();
        log.close().await.unwrap();
        stalls
    });
    let stall = median(stalls.clone());
    let segment_seconds = (64 << 20) as f64 / ROTATION_RECORD_BYTES as f64 / single_rate;
    println!(
        "rotate() under that load: median {:.2} ms over {} rotations (max {:.2} ms); a \
         64 MiB segment lasts {:.2} s at the one-segment rate: {:.2}% of the time",
        stall * 1e3,
        stalls.len(),
        stalls.iter().copied().fold(0.0, f64::max) * 1e3,
        segment_seconds,
        100.0 * stall / (segment_seconds + stall)
    );
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
        rotation_table(dir.path());
    }
}
