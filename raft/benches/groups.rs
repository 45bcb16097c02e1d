//! Many Raft groups on one node, store level (no network, like openraft's storage
//! benchmarks): N groups, one writer per group appending one entry at a time and
//! awaiting its flush (what openraft 0.9 does for each client write), with the
//! groups on one `SharedLog` against the same groups on one `LogStore` each (a
//! `LogDir` each). Reports writes/s, p50/p99 latency and segment syncs per write
//! and the mean time of a sync (counted and timed through the log directory's
//! storage seam), and the ratios of one run.
//!
//! `cargo bench -p walcodec-raft --bench groups` (`WALCODEC_BENCH_DIR` picks the
//! disk; the default is the temp directory; `WALCODEC_BENCH_GROUPS=1,16,64,256`
//! picks the group counts, `WALCODEC_BENCH_ROUNDS=3` the rounds;
//! `WALCODEC_BENCH_STORES=rocksdb` runs `SharedLog` against only the contenders
//! whose names hold one of its comma-separated words).
//!
//! Both walcodec contenders run with their defaults, segments preallocated
//! included (the counting storage passes preallocation on and counts its sync).
//! The runs are short (8,000 appends a contender, under a second for the shared
//! stores): run it on a machine that is otherwise idle, or read the load beside
//! the figures. On a machine whose cores other processes keep busy, every sync
//! takes the disk's time plus the wait for a core once the disk is done (up to a
//! scheduler tick: 4 ms at 250 Hz), so the writes each sync carries decide
//! throughput there.
//!
//! `raft/cluster-bench`'s `groups` binary runs this file as a module with a third
//! contender, a shared RocksDB (`scripts/raft-cluster-bench.sh groups`): the
//! RocksDB bindings stay out of this workspace. Hence [`Contender`] and [`run`].

#[path = "../tests/support/mod.rs"]
#[allow(unreachable_pub)]
pub(crate) mod support;

use std::fs::File;
use std::future::Future;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::storage::RaftLogStorageExt;
use support::{entry, TypeConfig};
use walcodec::testing::{DirStorage, FileStorage, Storage};
use walcodec::LogDirOptions;
use walcodec_raft::{LogStore, SharedLog};

/// Appends in all, spread over the groups (each group at least `MIN_PER_GROUP`):
/// enough that a run of the shared stores lasts a tenth of a second or more, well
/// past the scheduler's ticks.
const TOTAL: u64 = 8000;
const MIN_PER_GROUP: u64 = 10;
/// Rounds unless `WALCODEC_BENCH_ROUNDS` says otherwise.
const ROUNDS: usize = 3;

fn bench_dir() -> std::path::PathBuf {
    std::env::var_os("WALCODEC_BENCH_DIR")
        .map(Into::into)
        .unwrap_or_else(std::env::temp_dir)
}

/// The syncs of a contender's files: how many, and the time spent in them.
#[derive(Debug, Default)]
pub(crate) struct Syncs {
    pub(crate) count: AtomicU64,
    nanos: AtomicU64,
}

impl Syncs {
    /// Runs `sync` (one sync of a file), counting and timing it.
    fn time(&self, sync: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
        let started = Instant::now();
        let result = sync();
        let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(nanos, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        result
    }

    /// The count and the time spent so far.
    pub(crate) fn read(&self) -> (u64, Duration) {
        (
            self.count.load(Ordering::Relaxed),
            Duration::from_nanos(self.nanos.load(Ordering::Relaxed)),
        )
    }
}

/// A log directory's storage that counts the syncs of its files and times them.
#[derive(Debug)]
pub(crate) struct CountingDir(pub(crate) Arc<Syncs>);

impl DirStorage for CountingDir {
    fn storage(&self, file: File) -> Box<dyn Storage> {
        Box::new(CountingFile {
            inner: FileStorage::new(file),
            syncs: Arc::clone(&self.0),
        })
    }
}

struct CountingFile {
    inner: FileStorage,
    syncs: Arc<Syncs>,
}

impl Storage for CountingFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.syncs.time(|| self.inner.sync())
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)
    }

    /// Passed on, as the file's own storage does it (zeros written and synced
    /// ahead of the log, the default), and counted as a sync: without it the
    /// files grew with every write, which is not how either store runs.
    fn preallocate(&mut self, from: u64, to: u64) -> io::Result<()> {
        self.syncs.time(|| self.inner.preallocate(from, to))
    }
}

/// One contender's run.
pub(crate) struct Outcome {
    writes_per_s: f64,
    p50: Duration,
    p99: Duration,
    syncs_per_write: f64,
    /// The mean time of a sync (the contender's own clock of its syncs).
    sync_time: Duration,
}

/// A boxed future that can move between the runtime's threads.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One group's writer.
pub(crate) trait GroupWriter: Send + 'static {
    /// Appends the group's entry `index` and returns once it is durable.
    fn append(&mut self, index: u64) -> BoxFuture<'_, ()>;

    /// Closes what this writer holds of its own (nothing for a shared store).
    fn close(self: Box<Self>) -> BoxFuture<'static, ()>;
}

impl GroupWriter for LogStore<TypeConfig> {
    fn append(&mut self, index: u64) -> BoxFuture<'_, ()> {
        let store = &mut *self;
        Box::pin(async move { store.blocking_append([entry(1, index)]).await.unwrap() })
    }

    fn close(mut self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move { self.as_mut().close().await.unwrap() })
    }
}

/// A contender: its name and how to run `groups` groups of `per_group` appends
/// each in a directory of its own.
pub(crate) struct Contender {
    pub(crate) name: &'static str,
    pub(crate) run: fn(&Path, u64, u64) -> BoxFuture<'_, Outcome>,
}

/// Runs one writer per group; each appends `per_group` entries one at a time.
/// `syncs` reads the contender's sync count and time spent syncing so far.
pub(crate) async fn drive(
    writers: Vec<Box<dyn GroupWriter>>,
    per_group: u64,
    syncs: &(dyn Fn() -> (u64, Duration) + Sync),
) -> Outcome {
    let (before, before_time) = syncs();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for mut writer in writers {
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(per_group as usize);
            for i in 0..per_group {
                let t = Instant::now();
                writer.append(i).await;
                latencies.push(t.elapsed());
            }
            writer.close().await;
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    let elapsed = started.elapsed();
    let (after, after_time) = syncs();
    let synced = after - before;
    latencies.sort();
    let writes = latencies.len() as f64;
    Outcome {
        writes_per_s: writes / elapsed.as_secs_f64(),
        p50: latencies[latencies.len() / 2],
        p99: latencies[latencies.len() * 99 / 100],
        syncs_per_write: synced as f64 / writes,
        sync_time: (after_time - before_time)
            .checked_div(u32::try_from(synced).unwrap_or(u32::MAX))
            .unwrap_or_default(),
    }
}

async fn shared(dir: &Path, groups: u64, per_group: u64) -> Outcome {
    let syncs = Arc::new(Syncs::default());
    let log = SharedLog::builder()
        .log_dir(LogDirOptions::new().dir_storage(Arc::new(CountingDir(Arc::clone(&syncs)))))
        .open(dir.join(format!("shared-{groups}")))
        .await
        .unwrap();
    let mut writers: Vec<Box<dyn GroupWriter>> = Vec::new();
    for g in 0..groups {
        writers.push(Box::new(log.store::<TypeConfig>(g).await.unwrap()));
    }
    let result = drive(writers, per_group, &|| syncs.read()).await;
    // What the log wrote beyond the groups' records (rewrites of lagging groups).
    eprintln!("shared log, {groups} groups: {}", log.space_stats());
    log.close().await.unwrap();
    result
}

async fn separate(dir: &Path, groups: u64, per_group: u64) -> Outcome {
    let syncs = Arc::new(Syncs::default());
    let mut writers: Vec<Box<dyn GroupWriter>> = Vec::new();
    for g in 0..groups {
        writers.push(Box::new(
            LogStore::<TypeConfig>::builder()
                .log_dir(
                    LogDirOptions::new()
                        .dir_storage(Arc::new(CountingDir(Arc::clone(&syncs))))
                        .clone(),
                )
                .open(dir.join(format!("separate-{groups}-{g}")))
                .await
                .unwrap(),
        ));
    }
    drive(writers, per_group, &|| syncs.read()).await
}

fn row(name: &str, groups: u64, r: &Outcome) {
    println!(
        "| {name} | {groups} | {:.0} | {:.2} | {:.2} | {:.3} | {:.2} |",
        r.writes_per_s,
        r.p50.as_secs_f64() * 1e3,
        r.p99.as_secs_f64() * 1e3,
        r.syncs_per_write,
        r.sync_time.as_secs_f64() * 1e3
    );
}

const SHARED: &str = "SharedLog";
const SEPARATE: &str = "LogStore per group";

/// Runs `SharedLog`, a `LogStore` per group and the `others`, rounds rotating
/// their order, at each group count; prints a row per run and the ratios of
/// `SharedLog` to each of the others (the median of the per-round ratios).
pub(crate) fn run(others: Vec<Contender>) {
    let counts: Vec<u64> = std::env::var("WALCODEC_BENCH_GROUPS")
        .ok()
        .map(|v| {
            v.split(',')
                .map(|n| n.trim().parse().expect("a group count"))
                .collect()
        })
        .unwrap_or_else(|| vec![1, 16, 64, 256]);
    let mut contenders = vec![
        Contender {
            name: SEPARATE,
            run: |dir, groups, per_group| Box::pin(separate(dir, groups, per_group)),
        },
        Contender {
            name: SHARED,
            run: |dir, groups, per_group| Box::pin(shared(dir, groups, per_group)),
        },
    ];
    contenders.extend(others);
    if let Ok(only) = std::env::var("WALCODEC_BENCH_STORES") {
        let only = only.to_lowercase();
        contenders.retain(|c| {
            c.name == SHARED
                || only
                    .split(',')
                    .any(|word| c.name.to_lowercase().contains(word.trim()))
        });
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!("| store | groups | writes/s | p50 ms | p99 ms | syncs/write | ms/sync |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    // (groups, the other's name, SharedLog's writes/s over the other's, per round).
    let mut ratios: Vec<(u64, &str, Vec<f64>)> = Vec::new();
    let rounds: usize = std::env::var("WALCODEC_BENCH_ROUNDS")
        .ok()
        .map(|v| v.trim().parse().expect("a number of rounds"))
        .unwrap_or(ROUNDS)
        .max(1);
    for &groups in &counts {
        for round in 0..rounds {
            let dir = tempfile::tempdir_in(bench_dir()).unwrap();
            let per_group = (TOTAL / groups).max(MIN_PER_GROUP);
            // The order rotates from round to round, so that disk (and CPU) noise
            // and what a run leaves behind (dirty pages) fall on each in turn.
            let mut order: Vec<&Contender> = contenders.iter().collect();
            let turn = round % order.len();
            order.rotate_left(turn);
            let mut outcomes = Vec::new();
            for contender in order {
                let outcome = runtime.block_on((contender.run)(dir.path(), groups, per_group));
                row(
                    &format!("{} (round {})", contender.name, round + 1),
                    groups,
                    &outcome,
                );
                outcomes.push((contender.name, outcome));
            }
            let shared = outcomes
                .iter()
                .find(|(name, _)| *name == SHARED)
                .map(|(_, o)| o.writes_per_s)
                .unwrap();
            for (name, outcome) in &outcomes {
                if *name == SHARED {
                    continue;
                }
                let ratio = shared / outcome.writes_per_s;
                match ratios
                    .iter_mut()
                    .find(|(g, n, _)| *g == groups && n == name)
                {
                    Some((_, _, per_round)) => per_round.push(ratio),
                    None => ratios.push((groups, name, vec![ratio])),
                }
            }
        }
    }
    for (groups, name, mut per_round) in ratios {
        per_round.sort_by(f64::total_cmp);
        let shown: Vec<String> = per_round.iter().map(|r| format!("{r:.2}")).collect();
        println!(
            "{groups} groups: SharedLog {:.2}x the writes/s of {name} (median; rounds {})",
            per_round[per_round.len() / 2],
            shown.join(", ")
        );
    }
}

#[allow(dead_code)] // a module of cluster-bench's `groups`, which has its own
fn main() {
    run(Vec::new());
}
