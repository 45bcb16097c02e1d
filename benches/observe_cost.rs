//! One round of group commit for `scripts/observe-cost.sh`: appends/s of an
//! `AsyncLogWriter` with `tasks` tasks appending 100-byte records for about a
//! second, printed as one number.
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
    let mut args = std::env::args().skip(1).filter(|arg| !arg.starts_with("--"));
    let tasks: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(16);
    let millis: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let dir = bench_dir();
    let runtime = runtime();
    let options = WriterOptions::new();
    // Size the round from a short probe, then run it.
    let probe = runtime.block_on(group_commit_with(&dir, tasks, 50 * tasks as u64, &options));
    let iters = (probe.appends_per_second() * Duration::from_millis(millis).as_secs_f64())
        .max(100.0) as u64;
    let tally = runtime.block_on(group_commit_with(&dir, tasks, iters, &options));
    println!("{:.0}", tally.appends_per_second());
}
