//! Following a live `LogDir`: how long after `append` returns a follower yields the
//! record, and what a follower costs the writer.
//!
//! 100-byte records from 1 and 64 tasks, each awaiting its append, into a `LogDir`
//! (default 64 MiB segments) preallocated (the default) and growing
//! (`preallocate(0)`), followed
//!
//! - in the writer's process: `LogDir::read_from(..).follow()`, woken by the durable
//!   end (never past it), at most once per wake interval while the log is busy (the
//!   default, 1 ms) and on every commit (`with_wake_interval(Duration::ZERO)`);
//! - in another process: `DirReader::open(..).follow()` polling every 1 ms (this
//!   bench binary run again as the follower).
//!
//! Follow latency is the time from an append returning in the writer to the
//! follower yielding that record (both clocks are the system's wall clock, so the
//! other process's figures compare). A follower in the writer's process is woken
//! by the same durable-end update that releases the append, so it may yield the
//! record before the appending task runs again: those count as 0.
//!
//! The writer's cost: appends/s with each follower against appends/s with none, in
//! the same rounds (each configuration first in turn), medians of per-round ratios.
//! The issue's goal: following costs the writer at most 5%. Beside it, the CPU the
//! writer's process and the follower's process used, in cores (CPU time over the
//! writer's run time, medians): on a machine with few cores, what a follower in
//! another process takes is what the writer may miss.
//!
//! ```text
//! cargo bench -p walcodec-benches --bench follow -- zzz_nomatch   # the tables only
//! ```
//!
//! Files go to `WALCODEC_BENCH_DIR`, else the system temp dir: it must be on a real
//! disk (not tmpfs), or syncs cost nothing and the comparison means nothing.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use criterion::Criterion;
use futures::{FutureExt, StreamExt};
use walcodec::{DirReader, LogDir, LogPosition, WriterOptions};

#[path = "common/durable.rs"]
mod durable;

use durable::{bench_dir, fresh_path, median, record, runtime};

const TASKS: [usize; 2] = [1, 64];
/// Rounds per configuration (`WALCODEC_FOLLOW_ROUNDS` sets another count).
fn rounds() -> usize {
    std::env::var("WALCODEC_FOLLOW_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5)
}
const ROUND_TIME: Duration = Duration::from_millis(300);
const POLL_INTERVAL: Duration = Duration::from_millis(1);
/// Set in the follower child: the directory to follow.
const CHILD_ENV: &str = "WALCODEC_FOLLOW_BENCH_CHILD";
/// Set in the follower child: how many records to follow.
const COUNT_ENV: &str = "WALCODEC_FOLLOW_BENCH_COUNT";
/// Set in the sleeping child (the bound): it sleeps until its stdin closes.
const SLEEP_ENV: &str = "WALCODEC_FOLLOW_BENCH_SLEEP";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Follower {
    None,
    /// Woken at most once per `LogDirOptions::DEFAULT_WAKE_INTERVAL` while the log is busy.
    InProcess,
    /// `with_wake_interval(Duration::ZERO)`: woken by every commit.
    InProcessEveryCommit,
    OtherProcess,
    /// The bound for `OtherProcess`: a process that wakes as often and does
    /// nothing else, which is what any 1 ms poller costs the machine.
    OtherProcessSleeping,
}

/// Every configuration, `None` first (the tables' pairing relies on it).
const FOLLOWERS: [Follower; 5] = [
    Follower::None,
    Follower::InProcess,
    Follower::InProcessEveryCommit,
    Follower::OtherProcess,
    Follower::OtherProcessSleeping,
];

impl Follower {
    fn name(self) -> &'static str {
        match self {
            Follower::None => "none",
            Follower::InProcess => "writer's process, 1 ms wake interval",
            Follower::InProcessEveryCommit => "writer's process, woken per commit",
            Follower::OtherProcess => "other process, 1 ms poll",
            Follower::OtherProcessSleeping => "bound: other process, 1 ms sleeps only",
        }
    }
}

/// The wall clock in nanoseconds: comparable between the writer and the follower
/// child, which `Instant` is not.
fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// When a follower yielded each record, with one clock read per wake-up rather
/// than per record: the records a follower finds on one look come out within
/// microseconds of each other, and a clock read per record (a hundred per look at
/// 64 tasks) was a measurable part of the follower's CPU, charged to following.
#[derive(Default)]
struct YieldClock {
    last: u64,
}

impl YieldClock {
    /// The follower's next record, and when it was yielded.
    async fn next(&mut self, follower: &mut DirReader) -> (walcodec::DirRecord, u64) {
        // A dropped `next` loses nothing (the read goes on at the next call).
        if let Some(record) = follower.next().now_or_never() {
            return (record.unwrap().unwrap(), self.last);
        }
        let record = follower.next().await.unwrap().unwrap();
        self.last = now_ns();
        (record, self.last)
    }
}

/// A record's (task, seq), as `durable::record` writes them.
fn key(data: &[u8]) -> (u64, u64) {
    (
        u64::from_le_bytes(data[..8].try_into().unwrap()),
        u64::from_le_bytes(data[8..16].try_into().unwrap()),
    )
}

/// CPU time (user and system) this process has used so far.
fn cpu_time() -> Duration {
    // SAFETY: `getrusage` only writes the struct it is given.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut usage), 0);
        usage
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// What one run measured: the writer's appends/s, the CPU its process and the
/// follower's used (in cores: CPU time over the run's time) and, with a follower,
/// each record's follow latency.
struct Run {
    appends_per_second: f64,
    writer_cores: f64,
    /// Only for a follower in another process (in the writer's process, its CPU
    /// counts in `writer_cores`).
    follower_cores: Option<f64>,
    latencies: Vec<Duration>,
}

/// The sleeping child, the bound beside the follower child: wakes every
/// `POLL_INTERVAL` on the same runtime, and does nothing else, until its stdin
/// closes; then prints `cpu NS` as the follower child does.
fn sleeping_child() {
    let done = Arc::new(AtomicBool::new(false));
    let closed = done.clone();
    // Blocked in a read until the parent closes the pipe: no wake-ups of its own.
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        closed.store(true, Ordering::Relaxed);
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let cpu_before = cpu_time();
    println!("ready");
    std::io::stdout().flush().unwrap();
    runtime.block_on(async {
        while !done.load(Ordering::Relaxed) {
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    });
    println!("cpu {}", (cpu_time() - cpu_before).as_nanos());
}

/// The follower child: follows the directory for `count` records, then prints
/// `task seq yielded_ns` per record (after the run, so printing costs nothing while
/// the writer is measured) and last `cpu NS`, the CPU time it used following.
fn child(dir: PathBuf, count: usize) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let yielded = runtime.block_on(async move {
        let mut follower = DirReader::open(&dir, LogPosition::START)
            .await
            .unwrap()
            .follow()
            .with_poll_interval(POLL_INTERVAL);
        let mut yielded = Vec::with_capacity(count);
        let cpu_before = cpu_time();
        println!("ready");
        std::io::stdout().flush().unwrap();
        let mut clock = YieldClock::default();
        for _ in 0..count {
            let (record, at) = clock.next(&mut follower).await;
            yielded.push((key(&record.data), at));
        }
        (yielded, cpu_time() - cpu_before)
    });
    let (yielded, cpu) = yielded;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for ((task, seq), at) in yielded {
        writeln!(out, "{task} {seq} {at}").unwrap();
    }
    writeln!(out, "cpu {}", cpu.as_nanos()).unwrap();
}

/// `iters` appends from `tasks` tasks into a fresh `LogDir`, with `follower`
/// following it; opening, the child's start and the latency bookkeeping are
/// untimed.
async fn run(dir: &Path, tasks: usize, iters: u64, preallocate: u64, follower: Follower) -> Run {
    let path = fresh_path(dir).with_extension("dir");
    let mut writer = WriterOptions::new();
    writer.preallocate(preallocate);
    let log = LogDir::builder().writer(writer).open(&path).await.unwrap();

    let mut child = None;
    let mut in_process = None;
    match follower {
        Follower::None => {}
        Follower::InProcess | Follower::InProcessEveryCommit => {
            let mut reader = log.read_from(LogPosition::START).unwrap().follow();
            if follower == Follower::InProcessEveryCommit {
                reader = reader.with_wake_interval(Duration::ZERO);
            }
            in_process = Some(tokio::spawn(async move {
                let mut yielded = Vec::with_capacity(iters as usize);
                let mut clock = YieldClock::default();
                for _ in 0..iters {
                    let (record, at) = clock.next(&mut reader).await;
                    yielded.push((key(&record.data), at));
                }
                yielded
            }));
        }
        Follower::OtherProcess | Follower::OtherProcessSleeping => {
            let mut process = Command::new(std::env::current_exe().unwrap());
            if follower == Follower::OtherProcess {
                process
                    .env(CHILD_ENV, &path)
                    .env(COUNT_ENV, iters.to_string());
            } else {
                process.env(SLEEP_ENV, "1");
            }
            let mut process = process
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let mut lines = BufReader::new(process.stdout.take().unwrap()).lines();
            // Blocking is fine: `run` goes through `Runtime::block_on`, whose thread
            // is none of the runtime's workers.
            assert_eq!(lines.next().unwrap().unwrap(), "ready");
            child = Some((process, lines));
        }
    }

    let start = Instant::now();
    let cpu_before = cpu_time();
    let mut handles = Vec::with_capacity(tasks);
    for task in 0..tasks {
        let appends = iters / tasks as u64 + u64::from((task as u64) < iters % tasks as u64);
        let log = log.clone();
        handles.push(tokio::spawn(async move {
            let mut acked = Vec::with_capacity(appends as usize);
            for seq in 0..appends {
                log.append(record(task, seq)).await.unwrap();
                acked.push(((task as u64, seq), now_ns()));
            }
            acked
        }));
    }
    let mut acked = HashMap::with_capacity(iters as usize);
    for handle in handles {
        acked.extend(handle.await.unwrap());
    }
    let elapsed = start.elapsed();
    let writer_cores = (cpu_time() - cpu_before).as_secs_f64() / elapsed.as_secs_f64();

    let mut follower_cpu = None;
    let yielded: Vec<((u64, u64), u64)> = match follower {
        Follower::None => Vec::new(),
        Follower::InProcess | Follower::InProcessEveryCommit => {
            tokio::time::timeout(Duration::from_secs(60), in_process.unwrap())
                .await
                .expect("the follower keeps up")
                .unwrap()
        }
        Follower::OtherProcess | Follower::OtherProcessSleeping => {
            let (mut process, lines) = child.unwrap();
            // The sleeping child stops here; the follower child stopped at its
            // last record.
            drop(process.stdin.take());
            let (yielded, cpu) = tokio::task::spawn_blocking(move || {
                let mut cpu = None;
                let mut yielded = Vec::new();
                for line in lines {
                    let line = line.unwrap();
                    if let Some(ns) = line.strip_prefix("cpu ") {
                        cpu = Some(Duration::from_nanos(ns.parse().unwrap()));
                        continue;
                    }
                    let f: Vec<u64> = line.split(' ').map(|n| n.parse().unwrap()).collect();
                    yielded.push(((f[0], f[1]), f[2]));
                }
                (yielded, cpu.expect("the child reports its CPU time"))
            })
            .await
            .unwrap();
            assert!(process.wait().unwrap().success());
            follower_cpu = Some(cpu);
            yielded
        }
    };
    if !matches!(follower, Follower::None | Follower::OtherProcessSleeping) {
        assert_eq!(
            yielded.len(),
            iters as usize,
            "the follower yields every record"
        );
    }
    let latencies = yielded
        .iter()
        .map(|(key, at)| Duration::from_nanos(at.saturating_sub(acked[key])))
        .collect();
    log.close().await.unwrap();
    std::fs::remove_dir_all(&path).unwrap();
    Run {
        appends_per_second: iters as f64 / elapsed.as_secs_f64(),
        writer_cores,
        // The child follows until its last record, a little after the writer's
        // last append: its CPU over the writer's time.
        follower_cores: follower_cpu.map(|cpu| cpu.as_secs_f64() / elapsed.as_secs_f64()),
        latencies,
    }
}

/// The median of `values` and a 95% confidence interval for it, from order
/// statistics (no assumption about the distribution): `median (low–high)`. The
/// machines these run on are shared, and a ratio's rounds scatter by several
/// percent; the interval says how far the median itself can be trusted.
fn median_with_interval(mut values: Vec<f64>) -> String {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let median = median(values.clone());
    // Ranks j and n - j + 1 (from 1) bound the median with 95% confidence.
    let j = ((n as f64 / 2.0) - 0.98 * (n as f64).sqrt())
        .floor()
        .max(1.0) as usize;
    if n < 6 {
        return format!("{median:.3}x");
    }
    format!("{median:.3}x ({:.2}–{:.2})", values[j - 1], values[n - j])
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn benches(c: &mut Criterion, dir: &Path) {
    let runtime = runtime();
    let mut group = c.benchmark_group("follow");
    group.sample_size(10);
    for (name, follower) in [
        ("no_follower", Follower::None),
        ("in_process", Follower::InProcess),
    ] {
        group.bench_function(format!("logdir_1_task_{name}"), |b| {
            b.iter_custom(|iters| {
                let run = runtime.block_on(run(
                    dir,
                    1,
                    iters,
                    WriterOptions::DEFAULT_PREALLOCATE_BYTES,
                    follower,
                ));
                Duration::from_secs_f64(iters as f64 / run.appends_per_second)
            })
        });
    }
    group.finish();
}

fn tables(dir: &Path) {
    let runtime = runtime();
    println!();
    println!(
        "paired: {} rounds of about {} ms per configuration, each configuration \
         first in turn; cost ratios are medians of per-round ratios to no follower \
         (in brackets, a 95% confidence interval of that median); latencies pooled \
         over the rounds",
        rounds(),
        ROUND_TIME.as_millis()
    );
    println!();
    println!(
        "| tasks | segments | follower | follow p50 | follow p99 | writer appends/s | \
         vs no follower | writer's process CPU | follower process CPU |"
    );
    println!("|---:|---|---|---:|---:|---:|---:|---:|---:|");
    // `WALCODEC_FOLLOW_ONLY=1:preallocated` (tasks, segments; either may be left
    // out) measures one cell of the table, for a longer run of it.
    let only = std::env::var("WALCODEC_FOLLOW_ONLY").unwrap_or_default();
    let (only_tasks, only_segments) = only.split_once(':').unwrap_or((&only, ""));
    for tasks in TASKS {
        if !only_tasks.is_empty() && only_tasks != tasks.to_string() {
            continue;
        }
        for (label, step) in [
            ("preallocated", WriterOptions::DEFAULT_PREALLOCATE_BYTES),
            ("growing", 0),
        ] {
            if !only_segments.is_empty() && only_segments != label {
                continue;
            }
            let probe = runtime.block_on(run(dir, tasks, 50 * tasks as u64, step, Follower::None));
            let iters =
                (probe.appends_per_second * ROUND_TIME.as_secs_f64()).max(tasks as f64) as u64;
            let mut order = FOLLOWERS;
            let mut rates: HashMap<&str, Vec<f64>> = HashMap::new();
            let mut ratios: HashMap<&str, Vec<f64>> = HashMap::new();
            let mut latencies: HashMap<&str, Vec<Duration>> = HashMap::new();
            let mut writer_cores: HashMap<&str, Vec<f64>> = HashMap::new();
            let mut follower_cores: HashMap<&str, Vec<f64>> = HashMap::new();
            for _ in 0..rounds() {
                let mut round = HashMap::new();
                for follower in order {
                    let run = runtime.block_on(run(dir, tasks, iters, step, follower));
                    let name = follower.name();
                    round.insert(name, run.appends_per_second);
                    rates.entry(name).or_default().push(run.appends_per_second);
                    latencies.entry(name).or_default().extend(run.latencies);
                    writer_cores.entry(name).or_default().push(run.writer_cores);
                    if let Some(cores) = run.follower_cores {
                        follower_cores.entry(name).or_default().push(cores);
                    }
                }
                for follower in &FOLLOWERS[1..] {
                    let name = follower.name();
                    ratios
                        .entry(name)
                        .or_default()
                        .push(round[name] / round[Follower::None.name()]);
                }
                order.rotate_left(1);
            }
            for follower in FOLLOWERS {
                let name = follower.name();
                let rate = median(rates[name].clone());
                let writer_cpu = median(writer_cores[name].clone());
                let follower_cpu = follower_cores.get(name).map_or(String::new(), |cores| {
                    format!("{:.3}", median(cores.clone()))
                });
                if follower == Follower::None {
                    println!(
                        "| {tasks} | {label} | {name} | | | {rate:.0} | | {writer_cpu:.3} | |"
                    );
                    continue;
                }
                let mut sorted = latencies.remove(name).unwrap();
                sorted.sort_unstable();
                // The bound follows nothing: no latencies.
                let latency = |p| {
                    if sorted.is_empty() {
                        String::new()
                    } else {
                        format!("{:.0} µs", percentile(&sorted, p).as_secs_f64() * 1e6)
                    }
                };
                println!(
                    "| {tasks} | {label} | {name} | {} | {} | {rate:.0} | {} \
                     | {writer_cpu:.3} | {follower_cpu} |",
                    latency(0.5),
                    latency(0.99),
                    median_with_interval(ratios[name].clone()),
                );
            }
        }
    }
}

fn main() {
    if std::env::var_os(SLEEP_ENV).is_some() {
        sleeping_child();
        return;
    }
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        let count = std::env::var(COUNT_ENV).unwrap().parse().unwrap();
        child(PathBuf::from(dir), count);
        return;
    }
    let dir = tempfile::tempdir_in(bench_dir()).unwrap();
    let mut criterion = Criterion::default().configure_from_args();
    benches(&mut criterion, dir.path());
    criterion.final_summary();
    // Not in `cargo bench --no-run`, nor when criterion only lists or tests.
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--list" || a == "--test") {
        tables(dir.path());
    }
}
