//! Durable appends: walcodec's `AsyncLogWriter` beside okaywal and beside one `write`
//! + `fdatasync` per record on a std file, in one run.
//!
//! 100-byte records; N appenders each wait for their append to be durable before the
//! next: N tokio tasks sharing one `AsyncLogWriter`, against N threads sharing one
//! okaywal `WriteAheadLog` (`begin_entry`, `write_chunk`, `commit`), for N = 1, 16,
//! 64, 256. The records and the baseline are those of walcodec's own
//! `benches/group_commit.rs` (shared through `benches/common/durable.rs`).
//!
//! A second bound, `preallocated_write_fdatasync`, writes and syncs each record into
//! space already written with zeros and synced (as okaywal preallocates its
//! segments): a sync with no file growth to commit.
//!
//! Criterion reports time per append. Then a table from a paired run: baseline,
//! walcodec and okaywal take turns over a few short rounds (a shared disk's sync
//! latency drifts over seconds), with appends/s, `fdatasync`s per append, p50 and p99
//! latency, and walcodec's appends/s as the median of its per-round ratios to
//! okaywal's.
//!
//! A second paired table sets walcodec's segmented `LogDir` beside okaywal (which
//! segments its log too): LogDir with 4 MiB and with 64 MiB segments, both with
//! `preallocate(1 MiB)` as okaywal's segments, and with 64 MiB segments without
//! preallocation (LogDir's defaults), beside the preallocated `AsyncLogWriter` on one
//! file and okaywal, for the same N tasks (threads for okaywal) and records, taking
//! turns in rounds as above. Each LogDir lives across all the rounds of its row, so
//! its segments fill and rotate at their natural rate; its sealed segments are purged
//! between rounds, untimed (as in walcodec's `benches/logdir.rs`). Columns: appends/s
//! of each, LogDir vs okaywal and LogDir 64 MiB vs one file (what segmenting costs:
//! the reservation check, the shared lock, the rotations) as medians of per-round
//! ratios, the segments each LogDir rotated during its rounds, and p99 latency. The
//! criterion benches `durable_logdir/*` time the same LogDir configurations; their
//! one-file and okaywal counterparts are `durable/walcodec_preallocated_tasks` and
//! `durable/okaywal_threads`.
//!
//! ```text
//! cargo bench --bench durable -- --warm-up-time 1 --measurement-time 3
//! cargo bench --bench durable -- zzz_nomatch   # only the paired tables
//! ```
//!
//! Files go to `WALCODEC_BENCH_DIR`, else the system temp dir: it must be on a real
//! disk (not tmpfs), or syncs cost nothing and the comparison means nothing.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Instant;

use criterion::{BenchmarkId, Criterion, Throughput};
use okaywal::{LogVoid, WriteAheadLog};

#[path = "../../common/durable.rs"]
mod durable;

use durable::{
    baseline, bench_dir, fresh_path, group_commit, group_commit_with, median, record, runtime,
    spread_appends, Tally, ROUNDS, ROUND_TIME, TASKS,
};
use walcodec::{LogDir, LogPosition, WriterOptions};

/// The preallocation step of the `walcodec_preallocated` runs: the 1 MiB okaywal
/// grows its segments by.
const PREALLOCATE: u64 = 1 << 20;

fn preallocating() -> WriterOptions {
    let mut options = WriterOptions::new();
    options.preallocate(PREALLOCATE);
    options
}

/// Every `fdatasync` this process makes. okaywal does not count its syncs, so this
/// binary counts them for it: the definition below takes the place of libc's for
/// every caller in the process (std's `File::sync_data` included) and forwards to
/// the system call.
static FDATASYNCS: AtomicU64 = AtomicU64::new(0);

#[cfg(target_os = "linux")]
#[no_mangle]
pub extern "C" fn fdatasync(fd: libc::c_int) -> libc::c_int {
    FDATASYNCS.fetch_add(1, Ordering::Relaxed);
    // SAFETY: the raw system call with the caller's descriptor, as libc's wrapper
    // makes it; it sets errno and returns -1 on failure the same way.
    unsafe { libc::syscall(libc::SYS_fdatasync, fd) as libc::c_int }
}

/// `iters` appends spread over `threads` threads sharing one okaywal log, each
/// committing its entry before writing the next. Timed from when every thread is
/// ready, so thread start-up is not counted.
fn okaywal(dir: &Path, threads: usize, iters: u64) -> Tally {
    let wal_dir = fresh_path(dir);
    let wal = WriteAheadLog::recover(&wal_dir, LogVoid).unwrap();
    let ready = Barrier::new(threads + 1);
    let (elapsed, syncs, latencies) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let (wal, ready) = (&wal, &ready);
                let appends =
                    iters / threads as u64 + u64::from((thread as u64) < iters % threads as u64);
                scope.spawn(move || {
                    let mut latencies = Vec::with_capacity(appends as usize);
                    ready.wait();
                    for seq in 0..appends {
                        let record = record(thread, seq);
                        let began = Instant::now();
                        let mut entry = wal.begin_entry().unwrap();
                        entry.write_chunk(&record).unwrap();
                        entry.commit().unwrap();
                        latencies.push(began.elapsed());
                    }
                    latencies
                })
            })
            .collect();
        let syncs_before = FDATASYNCS.load(Ordering::Relaxed);
        ready.wait();
        let start = Instant::now();
        let latencies: Vec<_> = handles
            .into_iter()
            .flat_map(|handle| handle.join().unwrap())
            .collect();
        let elapsed = start.elapsed();
        let syncs = FDATASYNCS.load(Ordering::Relaxed) - syncs_before;
        (elapsed, syncs, latencies)
    });
    wal.shutdown().unwrap();
    std::fs::remove_dir_all(&wal_dir).unwrap();
    Tally {
        appends: iters,
        elapsed,
        syncs,
        latencies,
    }
}

/// The baseline on a file whose space was written (with zeros) and synced beforehand,
/// as okaywal prepares its segments: each `fdatasync` then has no size or block
/// allocation to commit, only data. Not a valid log tail for a LevelDB reader (zero
/// fill is skipped but hides nothing only up to a block end); it shows what
/// preallocation is worth.
fn preallocated_baseline(dir: &Path, iters: u64) -> Tally {
    use std::io::{Seek, SeekFrom, Write};
    let path = fresh_path(dir);
    let mut file = std::fs::File::create(&path).unwrap();
    let mut encoder = walcodec::LogEncoder::new();
    let len = encoder.encoded_len(durable::RECORD_BYTES) as u64 * iters;
    let zeros = vec![0u8; 1 << 20];
    let mut left = len;
    while left > 0 {
        let n = left.min(zeros.len() as u64) as usize;
        file.write_all(&zeros[..n]).unwrap();
        left -= n as u64;
    }
    file.sync_all().unwrap();
    file.seek(SeekFrom::Start(0)).unwrap();
    let mut buf = bytes::BytesMut::new();
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
    Tally {
        appends: iters,
        elapsed,
        syncs: iters,
        latencies,
    }
}

/// The baseline, with a check that this binary sees every `fdatasync` (one per
/// record), so okaywal's count means something.
fn counted_baseline(dir: &Path, iters: u64) -> Tally {
    let before = FDATASYNCS.load(Ordering::Relaxed);
    let tally = baseline(dir, iters);
    let seen = FDATASYNCS.load(Ordering::Relaxed) - before;
    assert!(
        !cfg!(target_os = "linux") || seen == iters,
        "counted {seen} fdatasyncs for {iters} synced records"
    );
    tally
}

fn benches(c: &mut Criterion, dir: &Path) {
    let runtime = runtime();
    let mut group = c.benchmark_group("durable");
    group.throughput(Throughput::Elements(1));
    group.sample_size(10);
    group.bench_function("baseline_write_fdatasync", |b| {
        b.iter_custom(|iters| counted_baseline(dir, iters).elapsed)
    });
    for tasks in TASKS {
        group.bench_with_input(
            BenchmarkId::new("walcodec_tasks", tasks),
            &tasks,
            |b, &n| b.iter_custom(|iters| runtime.block_on(group_commit(dir, n, iters)).elapsed),
        );
        group.bench_with_input(
            BenchmarkId::new("walcodec_preallocated_tasks", tasks),
            &tasks,
            |b, &n| {
                b.iter_custom(|iters| {
                    runtime
                        .block_on(group_commit_with(dir, n, iters, &preallocating()))
                        .elapsed
                })
            },
        );
        group.bench_with_input(
            BenchmarkId::new("okaywal_threads", tasks),
            &tasks,
            |b, &n| b.iter_custom(|iters| okaywal(dir, n, iters).elapsed),
        );
    }
    group.finish();
}

fn micros(tally: &mut Tally, p: f64) -> f64 {
    tally.percentile(p).as_secs_f64() * 1e6
}

/// The table: the configurations take turns in rounds of about `ROUND_TIME` each, so
/// that all see the same disk; walcodec vs okaywal is the median of the per-round
/// ratios.
fn paired_table(dir: &Path) {
    let runtime = runtime();
    let iters_for =
        |rate: f64, at_least: usize| (rate * ROUND_TIME.as_secs_f64()).max(at_least as f64) as u64;
    let base_iters = iters_for(counted_baseline(dir, 200).appends_per_second(), 100);
    let prealloc = preallocating();
    println!();
    println!(
        "paired run: {ROUNDS} rounds of about {} ms for each of baseline, walcodec, walcodec \
         with preallocate({} MiB) and okaywal (1 MiB preallocated segments); 100-byte \
         records; ratios are medians of per-round ratios",
        ROUND_TIME.as_millis(),
        PREALLOCATE >> 20,
    );
    println!();
    println!(
        "| appenders | walcodec appends/s | walcodec prealloc appends/s | okaywal appends/s \
         | walcodec vs okaywal | walcodec prealloc vs okaywal \
         | syncs/append walcodec, prealloc, okaywal \
         | p99 walcodec, prealloc, okaywal | baseline appends/s | preallocated baseline appends/s |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut base_all = Tally::default();
    for tasks in TASKS {
        let warm = 50 * tasks as u64;
        let ours_iters = iters_for(
            runtime
                .block_on(group_commit(dir, tasks, warm))
                .appends_per_second(),
            tasks,
        );
        let prealloc_iters = iters_for(
            runtime
                .block_on(group_commit_with(dir, tasks, warm, &prealloc))
                .appends_per_second(),
            tasks,
        );
        let theirs_iters = iters_for(okaywal(dir, tasks, warm).appends_per_second(), tasks);
        let mut ours_all = Tally::default();
        let mut prealloc_all = Tally::default();
        let mut theirs_all = Tally::default();
        let (mut base_row, mut prealloc_base_row) = (Tally::default(), Tally::default());
        let (mut ratios, mut prealloc_ratios) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            base_row.add(counted_baseline(dir, base_iters));
            prealloc_base_row.add(preallocated_baseline(dir, base_iters));
            let ours = runtime.block_on(group_commit(dir, tasks, ours_iters));
            let ours_prealloc =
                runtime.block_on(group_commit_with(dir, tasks, prealloc_iters, &prealloc));
            let theirs = okaywal(dir, tasks, theirs_iters);
            ratios.push(ours.appends_per_second() / theirs.appends_per_second());
            prealloc_ratios.push(ours_prealloc.appends_per_second() / theirs.appends_per_second());
            ours_all.add(ours);
            prealloc_all.add(ours_prealloc);
            theirs_all.add(theirs);
        }
        let syncs = |t: &Tally| {
            if cfg!(target_os = "linux") {
                format!("{:.4}", t.syncs as f64 / t.appends as f64)
            } else {
                "n/a".to_string()
            }
        };
        println!(
            "| {tasks} | {:.0} | {:.0} | {:.0} | {:.2}x | {:.2}x | {:.4}, {:.4}, {} \
             | {:.0}, {:.0}, {:.0} µs | {:.0} | {:.0} |",
            ours_all.appends_per_second(),
            prealloc_all.appends_per_second(),
            theirs_all.appends_per_second(),
            median(ratios),
            median(prealloc_ratios),
            ours_all.syncs as f64 / ours_all.appends as f64,
            prealloc_all.syncs as f64 / prealloc_all.appends as f64,
            syncs(&theirs_all),
            micros(&mut ours_all, 0.99),
            micros(&mut prealloc_all, 0.99),
            micros(&mut theirs_all, 0.99),
            base_row.appends_per_second(),
            prealloc_base_row.appends_per_second(),
        );
        base_all.add(base_row);
    }
    println!(
        "\nbaseline (write + fdatasync per record, all rounds): p50 {:.0} µs, p99 {:.0} µs",
        micros(&mut base_all, 0.5),
        micros(&mut base_all, 0.99),
    );
}

/// A `LogDir` configuration of the second table: its name in bench ids, its segment
/// size, and whether its writer preallocates `PREALLOCATE`.
struct Segmented {
    name: &'static str,
    max_segment_bytes: u64,
    preallocate: bool,
}

const SEGMENTED: [Segmented; 3] = [
    Segmented {
        name: "4MiB",
        max_segment_bytes: 4 << 20,
        preallocate: true,
    },
    Segmented {
        name: "64MiB",
        max_segment_bytes: 64 << 20,
        preallocate: true,
    },
    Segmented {
        name: "64MiB_no_prealloc",
        max_segment_bytes: 64 << 20,
        preallocate: false,
    },
];

/// The `SEGMENTED` entry that differs from the preallocated one-file writer only by
/// segmenting: their ratio is what segmenting costs.
const ONE_FILE_TWIN: usize = 1;

impl Segmented {
    /// Opens a fresh log directory `name` under `dir` with this configuration.
    async fn open(&self, dir: &Path, name: &str) -> LogDir {
        let writer = if self.preallocate {
            preallocating()
        } else {
            WriterOptions::new()
        };
        LogDir::builder()
            .max_segment_bytes(self.max_segment_bytes)
            .writer(writer)
            .open(dir.join(name))
            .await
            .unwrap()
    }
}

/// `iters` appends to `log` spread over `tasks` tasks, each awaiting its append
/// before the next (as `group_commit`, on a `LogDir` that outlives the run). Its
/// `syncs` are every `fdatasync` the process made meanwhile.
async fn logdir_appends(log: &LogDir, tasks: usize, iters: u64) -> Tally {
    let syncs_before = FDATASYNCS.load(Ordering::Relaxed);
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
        syncs: FDATASYNCS.load(Ordering::Relaxed) - syncs_before,
        latencies,
    }
}

/// Drops the sealed segments, untimed, so a long run does not fill the disk.
async fn trim(log: &LogDir) {
    log.purge_before(LogPosition::new(u64::MAX, 0))
        .await
        .unwrap();
}

fn logdir_benches(c: &mut Criterion, dir: &Path) {
    let runtime = runtime();
    let mut group = c.benchmark_group("durable_logdir");
    group.throughput(Throughput::Elements(1));
    group.sample_size(10);
    for tasks in TASKS {
        for config in &SEGMENTED {
            let log = runtime.block_on(config.open(dir, &format!("bench-{}-{tasks}", config.name)));
            group.bench_with_input(
                BenchmarkId::new(format!("logdir_{}_tasks", config.name), tasks),
                &tasks,
                |b, &tasks| {
                    b.iter_custom(|iters| {
                        let tally = runtime.block_on(logdir_appends(&log, tasks, iters));
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

/// The second table: each `SEGMENTED` LogDir, the preallocated one-file writer and
/// okaywal take turns in rounds of about `ROUND_TIME` each. A row's LogDirs stay
/// open across its rounds (their segments rotate when they fill) and are purged of
/// sealed segments between rounds, untimed. The LogDirs run as many appends per
/// round as the one-file writer, so the rotation cost compares equal work.
fn logdir_table(dir: &Path) {
    let runtime = runtime();
    let iters_for =
        |rate: f64, at_least: usize| (rate * ROUND_TIME.as_secs_f64()).max(at_least as f64) as u64;
    let prealloc = preallocating();
    println!();
    println!(
        "paired run, LogDir: {ROUNDS} rounds of about {} ms for each of LogDir with 4 MiB \
         and with 64 MiB segments (both with preallocate({} MiB)), LogDir with 64 MiB \
         segments without preallocation, AsyncLogWriter on one file with preallocate({} MiB) \
         and okaywal (1 MiB preallocated segments); 100-byte records; ratios are medians \
         of per-round ratios; rotations are the segments each LogDir sealed during the \
         rounds",
        ROUND_TIME.as_millis(),
        PREALLOCATE >> 20,
        PREALLOCATE >> 20,
    );
    println!();
    println!(
        "| appenders | LogDir 4 MiB appends/s | LogDir 64 MiB appends/s \
         | LogDir 64 MiB no prealloc appends/s | one file appends/s | okaywal appends/s \
         | LogDir 4 MiB vs okaywal | LogDir 64 MiB vs okaywal \
         | LogDir 64 MiB no prealloc vs okaywal | LogDir 64 MiB vs one file \
         | rotations 4 MiB, 64 MiB, 64 MiB no prealloc \
         | p99 LogDir 4 MiB, 64 MiB, 64 MiB no prealloc, one file, okaywal |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for tasks in TASKS {
        let warm = 50 * tasks as u64;
        let ours_iters = iters_for(
            runtime
                .block_on(group_commit_with(dir, tasks, warm, &prealloc))
                .appends_per_second(),
            tasks,
        );
        let theirs_iters = iters_for(okaywal(dir, tasks, warm).appends_per_second(), tasks);
        let logs: Vec<LogDir> = SEGMENTED
            .iter()
            .map(|config| {
                let log =
                    runtime.block_on(config.open(dir, &format!("table-{}-{tasks}", config.name)));
                // Warm up as the other configurations were, then start counting.
                runtime.block_on(logdir_appends(&log, tasks, warm));
                runtime.block_on(trim(&log));
                log
            })
            .collect();
        let firsts: Vec<u64> = logs.iter().map(|log| log.end().segment).collect();
        let mut logs_all = vec![Tally::default(); logs.len()];
        let mut vs_okaywal = vec![Vec::new(); logs.len()];
        let mut rotation_cost = Vec::new();
        let (mut one_file_all, mut theirs_all) = (Tally::default(), Tally::default());
        for _ in 0..ROUNDS {
            let one_file = runtime.block_on(group_commit_with(dir, tasks, ours_iters, &prealloc));
            let segmented: Vec<Tally> = logs
                .iter()
                .map(|log| {
                    let tally = runtime.block_on(logdir_appends(log, tasks, ours_iters));
                    runtime.block_on(trim(log));
                    tally
                })
                .collect();
            let theirs = okaywal(dir, tasks, theirs_iters);
            rotation_cost.push(
                segmented[ONE_FILE_TWIN].appends_per_second() / one_file.appends_per_second(),
            );
            for (i, tally) in segmented.into_iter().enumerate() {
                vs_okaywal[i].push(tally.appends_per_second() / theirs.appends_per_second());
                logs_all[i].add(tally);
            }
            one_file_all.add(one_file);
            theirs_all.add(theirs);
        }
        let rotations: Vec<String> = logs
            .iter()
            .zip(&firsts)
            .map(|(log, first)| (log.end().segment - first).to_string())
            .collect();
        for log in logs {
            runtime.block_on(log.close()).unwrap();
        }
        let p99s: Vec<String> = logs_all
            .iter_mut()
            .chain([&mut one_file_all, &mut theirs_all])
            .map(|tally| format!("{:.0}", micros(tally, 0.99)))
            .collect();
        println!(
            "| {tasks} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2}x | {:.2}x | {:.2}x \
             | {:.2}x | {} | {} µs |",
            logs_all[0].appends_per_second(),
            logs_all[1].appends_per_second(),
            logs_all[2].appends_per_second(),
            one_file_all.appends_per_second(),
            theirs_all.appends_per_second(),
            median(vs_okaywal[0].clone()),
            median(vs_okaywal[1].clone()),
            median(vs_okaywal[2].clone()),
            median(rotation_cost),
            rotations.join(", "),
            p99s.join(", "),
        );
    }
}

fn main() {
    let dir = tempfile::tempdir_in(bench_dir()).unwrap();
    let mut criterion = Criterion::default().configure_from_args();
    benches(&mut criterion, dir.path());
    logdir_benches(&mut criterion, dir.path());
    criterion.final_summary();
    // Not in `cargo bench --no-run`, nor when criterion only lists or tests.
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--list" || a == "--test") {
        paired_table(dir.path());
        logdir_table(dir.path());
    }
}
