//! Group commit: appends per second, syncs per append and append latency of
//! `AsyncLogWriter` with 1, 16, 64 and 256 tasks appending 100-byte records to a real
//! file, beside a baseline in the same run that writes and `fdatasync`s each record on
//! a std file.
//!
//! Criterion reports time per append (and appends/s as throughput). Then a table is
//! printed from a paired run: each configuration alternates with the baseline over a
//! few short rounds (a shared disk's sync latency drifts over seconds, which would
//! skew a ratio between runs made far apart), with appends/s and p50 latency as
//! median per-round ratios to the baseline, syncs per append, and p50/p99 latency.
//!
//! ```text
//! cargo bench --bench group_commit -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! Files go to `WALCODEC_BENCH_DIR`, else the system temp dir: it must be on a real
//! disk (not tmpfs), or syncs cost nothing and the comparison means nothing.

use std::path::Path;

use criterion::{BenchmarkId, Criterion, Throughput};

#[path = "common/durable.rs"]
mod durable;

use durable::{
    baseline, bench_dir, group_commit, group_commit_with, median, runtime, Tally, ROUNDS,
    ROUND_TIME, TASKS,
};
use walcodec::WriterOptions;

fn benches(c: &mut Criterion, dir: &Path) {
    let runtime = runtime();
    let mut group = c.benchmark_group("group_commit");
    group.throughput(Throughput::Elements(1));
    group.sample_size(10);
    group.bench_function("baseline_write_fdatasync", |b| {
        b.iter_custom(|iters| baseline(dir, iters).elapsed)
    });
    for tasks in TASKS {
        group.bench_with_input(
            BenchmarkId::new("writer_tasks", tasks),
            &tasks,
            |b, &tasks| {
                b.iter_custom(|iters| runtime.block_on(group_commit(dir, tasks, iters)).elapsed)
            },
        );
    }
    group.finish();
}

/// The table: each configuration against the baseline in alternating rounds, so that
/// both see the same disk (a shared disk's latency drifts over seconds), with the
/// median of the per-round ratios.
fn paired_table(dir: &Path) {
    let runtime = runtime();
    // Size the rounds from a short first run of each side.
    let base_rate = baseline(dir, 200).appends_per_second();
    let base_iters = (base_rate * ROUND_TIME.as_secs_f64()).max(100.0) as u64;
    println!();
    println!(
        "paired with the baseline, {ROUNDS} rounds of {} ms each side; ratios are medians of \
         per-round ratios",
        ROUND_TIME.as_millis()
    );
    println!();
    println!(
        "| tasks | writer | appends/s | baseline appends/s | vs baseline | syncs/append | \
         p50 | p50 vs baseline | p99 |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut flusher_only = WriterOptions::new();
    flusher_only.leader_writes(false);
    let rows = TASKS
        .iter()
        .map(|&tasks| (tasks, "default", WriterOptions::new()))
        .chain([1, 16].map(|tasks| (tasks, "flusher only", flusher_only.clone())));
    for (tasks, label, options) in rows {
        let probe = runtime.block_on(group_commit_with(dir, tasks, 50 * tasks as u64, &options));
        let iters =
            (probe.appends_per_second() * ROUND_TIME.as_secs_f64()).max(tasks as f64) as u64;
        let (mut base_all, mut all) = (Tally::default(), Tally::default());
        let (mut rate_ratios, mut p50_ratios) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            let mut base = baseline(dir, base_iters);
            let mut ours = runtime.block_on(group_commit_with(dir, tasks, iters, &options));
            rate_ratios.push(ours.appends_per_second() / base.appends_per_second());
            p50_ratios
                .push(ours.percentile(0.5).as_secs_f64() / base.percentile(0.5).as_secs_f64());
            base_all.add(base);
            all.add(ours);
        }
        println!(
            "| {tasks} | {label} | {:.0} | {:.0} | {:.2}x | {:.4} | {:.0} µs | {:.2}x | {:.0} µs |",
            all.appends_per_second(),
            base_all.appends_per_second(),
            median(rate_ratios),
            all.syncs as f64 / all.appends as f64,
            all.percentile(0.5).as_secs_f64() * 1e6,
            median(p50_ratios),
            all.percentile(0.99).as_secs_f64() * 1e6,
        );
    }
    let mut base = baseline(dir, base_iters);
    println!(
        "\nbaseline (write + fdatasync per record): p50 {:.0} µs, p99 {:.0} µs",
        base.percentile(0.5).as_secs_f64() * 1e6,
        base.percentile(0.99).as_secs_f64() * 1e6,
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
    }
}
