//! Preallocation: durable appends of 100-byte records (107 bytes framed) into space
//! written with zeros and synced beforehand, against the same appends on a file that
//! grows with each write, in the same run. This is the measurement behind
//! `WriterOptions::preallocate`'s default.
//!
//! Three pairs, each side taking turns at going first over 21 rounds of about 100 ms
//! (a shared disk's sync latency drifts over seconds), ratios the median of per-round
//! ratios (preallocated / growing):
//!
//! - the bound: one `write` + `fdatasync` per record on a std file, growing, and on a
//!   file filled with zeros and synced first;
//! - `AsyncLogWriter` with `preallocate(0)` and with the default step, from 1 and 64
//!   tasks each awaiting its append;
//! - `LogDir` (default 64 MiB segments and 4 MiB ones, which rotate) the same way.
//!
//! ```text
//! cargo bench -p walcodec-benches --bench preallocate -- zzz_nomatch   # the table only
//! ```
//!
//! Files go to `WALCODEC_BENCH_DIR`, else the system temp dir: it must be on a real
//! disk (not tmpfs), or syncs cost nothing and the comparison means nothing.

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use criterion::{Criterion, Throughput};
use walcodec::{LogDir, WriterOptions};

#[path = "common/durable.rs"]
mod durable;

use durable::{
    baseline, bench_dir, fresh_path, group_commit_with, median, runtime, spread_appends, Tally,
    ROUNDS, ROUND_TIME,
};

const TASKS: [usize; 2] = [1, 64];

/// The bound's preallocated side: `durable::baseline` on a file of zeros written and
/// synced (untimed) before the first record.
fn baseline_preallocated(dir: &Path, iters: u64) -> Tally {
    let path = fresh_path(dir);
    let mut file = std::fs::File::create(&path).unwrap();
    let framed = 7 + durable::RECORD_BYTES as u64;
    let room = (iters * framed).div_ceil(1 << 20).max(1) << 20;
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..room >> 20 {
        file.write_all(&zeros).unwrap();
    }
    file.sync_data().unwrap();
    file.seek(SeekFrom::Start(0)).unwrap();
    let tally = durable::sync_each(&mut file, iters);
    std::fs::remove_file(&path).unwrap();
    tally
}

fn writer_options(preallocate: u64) -> WriterOptions {
    let mut options = WriterOptions::new();
    options.preallocate(preallocate);
    options
}

/// `iters` appends from `tasks` tasks into a fresh `LogDir` with `max_segment_bytes`
/// segments and the given preallocation step; opening and closing are untimed.
async fn logdir_appends(
    dir: &Path,
    max_segment_bytes: u64,
    preallocate: u64,
    tasks: usize,
    iters: u64,
) -> Tally {
    let path = fresh_path(dir).with_extension("dir");
    let log = LogDir::builder()
        .max_segment_bytes(max_segment_bytes)
        .writer(writer_options(preallocate))
        .open(&path)
        .await
        .unwrap();
    let appender = log.clone();
    let (elapsed, latencies) = spread_appends(tasks, iters, move |record| {
        let log = appender.clone();
        async move {
            log.append(&record).await.unwrap();
        }
    })
    .await;
    log.close().await.unwrap();
    std::fs::remove_dir_all(&path).unwrap();
    Tally {
        appends: iters,
        elapsed,
        syncs: 0,
        latencies,
    }
}

fn benches(c: &mut Criterion, dir: &Path) {
    let runtime = runtime();
    let mut group = c.benchmark_group("preallocate");
    group.throughput(Throughput::Elements(1));
    group.sample_size(10);
    for (name, step) in [
        ("growing", 0),
        ("preallocated", WriterOptions::DEFAULT_PREALLOCATE_BYTES),
    ] {
        let options = writer_options(step);
        group.bench_function(format!("writer_1_task_{name}"), |b| {
            b.iter_custom(|iters| {
                runtime
                    .block_on(group_commit_with(dir, 1, iters, &options))
                    .elapsed
            })
        });
    }
    group.finish();
}

/// One row: `growing` and `preallocated` (each run for `iters` appends) take turns
/// at going first, `ROUNDS` times.
fn row(
    label: &str,
    tasks: usize,
    iters: u64,
    growing: &mut dyn FnMut(u64) -> Tally,
    preallocated: &mut dyn FnMut(u64) -> Tally,
) {
    let (mut grown_all, mut pre_all) = (Tally::default(), Tally::default());
    let (mut rate_ratios, mut p50_ratios) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let (mut grown, mut pre) = if round % 2 == 0 {
            let grown = growing(iters);
            (grown, preallocated(iters))
        } else {
            let pre = preallocated(iters);
            (growing(iters), pre)
        };
        rate_ratios.push(pre.appends_per_second() / grown.appends_per_second());
        p50_ratios.push(pre.percentile(0.5).as_secs_f64() / grown.percentile(0.5).as_secs_f64());
        grown_all.add(grown);
        pre_all.add(pre);
    }
    let mut ratios = rate_ratios.clone();
    ratios.sort_by(f64::total_cmp);
    println!(
        "| {label} | {tasks} | {:.0} | {:.0} | {:.2}x | {:.2}-{:.2}x | {:.2}x | {:.0} / {:.0} µs |",
        grown_all.appends_per_second(),
        pre_all.appends_per_second(),
        median(rate_ratios),
        ratios[ROUNDS / 4],
        ratios[ROUNDS - 1 - ROUNDS / 4],
        median(p50_ratios),
        grown_all.percentile(0.99).as_secs_f64() * 1e6,
        pre_all.percentile(0.99).as_secs_f64() * 1e6,
    );
}

fn paired_table(dir: &Path) {
    let runtime = runtime();
    let step = WriterOptions::DEFAULT_PREALLOCATE_BYTES;
    println!();
    println!(
        "paired: {ROUNDS} rounds, about {} ms each side, each side first in every other \
         round; ratios are medians of per-round ratios (preallocated / growing); \
         preallocation step {} KiB",
        ROUND_TIME.as_millis(),
        step >> 10
    );
    println!();
    println!(
        "| side | tasks | growing appends/s | preallocated appends/s | preallocated / growing | \
         middle half of per-round ratios | p50 ratio | p99 (growing / preallocated) |"
    );
    println!("|---|---:|---:|---:|---:|---|---:|---:|");

    let rate = baseline(dir, 200).appends_per_second();
    let iters = (rate * ROUND_TIME.as_secs_f64()).max(100.0) as u64;
    row(
        "write + fdatasync",
        1,
        iters,
        &mut |n| baseline(dir, n),
        &mut |n| baseline_preallocated(dir, n),
    );

    for tasks in TASKS {
        let probe = runtime.block_on(group_commit_with(
            dir,
            tasks,
            50 * tasks as u64,
            &writer_options(0),
        ));
        let iters =
            (probe.appends_per_second() * ROUND_TIME.as_secs_f64()).max(tasks as f64) as u64;
        let (grown, pre) = (writer_options(0), writer_options(step));
        row(
            "AsyncLogWriter",
            tasks,
            iters,
            &mut |n| runtime.block_on(group_commit_with(dir, tasks, n, &grown)),
            &mut |n| runtime.block_on(group_commit_with(dir, tasks, n, &pre)),
        );
        for (label, segment) in [
            ("LogDir 64 MiB segments", 64 << 20),
            ("LogDir 4 MiB segments", 4 << 20),
        ] {
            row(
                label,
                tasks,
                iters,
                &mut |n| runtime.block_on(logdir_appends(dir, segment, 0, tasks, n)),
                &mut |n| runtime.block_on(logdir_appends(dir, segment, step, tasks, n)),
            );
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
