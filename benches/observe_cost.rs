//! One round of group commit for `scripts/observe-cost.sh`: an `AsyncLogWriter`
//! with `tasks` tasks appending 100-byte records for about `millis` ms, printed as
//! appends per wall-clock second and appends per CPU second of the whole process
//! (every thread, the flusher's included; from `/proc/self/stat`). On a machine
//! shared with other work the wall-clock rate swings with the neighbours' load;
//! the CPU rate is what the instrumentation would cost. Then the instrumentation's
//! own cost per batch (`walcodec::testing::batch_report_cost`, the writer's report
//! run in a loop) in ns, and the round's wall time per batch in ns.
//!
//! The script builds this bench twice, walcodec without and with its `tracing` and
//! `metrics` features (this crate's `observe` feature; no subscriber and no recorder
//! installed, the common case of a library inside a service that has not set them
//! up), and runs the two alternately, so both see the same disk, for a median ratio
//! of paired rounds. Not a criterion bench: the two sides are two builds.
//!
//! ```text
//! cargo bench -p walcodec-benches --bench observe_cost -- TASKS MILLIS
//! ```

use std::time::Duration;

#[path = "common/durable.rs"]
mod durable;

use durable::{bench_dir, group_commit_with, runtime};
use walcodec::WriterOptions;

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with("--"));
    let tasks: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(16);
    let millis: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let dir = bench_dir();
    let runtime = runtime();
    let options = WriterOptions::new();
    // Size the round from a short probe, then run it.
    let probe = runtime.block_on(group_commit_with(&dir, tasks, 50 * tasks as u64, &options));
    let iters = (probe.appends_per_second() * Duration::from_millis(millis).as_secs_f64())
        .max(100.0) as u64;
    let cpu_before = cpu_seconds();
    let tally = runtime.block_on(group_commit_with(&dir, tasks, iters, &options));
    let cpu = cpu_seconds() - cpu_before;
    // The instrumentation's own cost per batch (nothing without the features),
    // beside what a batch of this round took.
    let probes = 10_000_000;
    let report_ns = walcodec::testing::batch_report_cost(probes).as_nanos() as f64 / probes as f64;
    let batch_ns = tally.elapsed.as_nanos() as f64 / tally.syncs.max(1) as f64;
    println!(
        "{:.0} {:.0} {report_ns:.2} {batch_ns:.0}",
        tally.appends_per_second(),
        tally.appends as f64 / cpu.max(0.01)
    );
}

/// User and system CPU time of this process so far, all threads (ended ones
/// included), in seconds; 0 where `/proc` is missing.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) in parentheses.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after ')'.
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<f64>().ok())
        .sum();
    // Linux reports them in USER_HZ, 100 per second on every architecture.
    ticks / 100.0
}
