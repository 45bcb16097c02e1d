//! Many Raft groups on one node, store level (no network, like openraft's storage
//! benchmarks): N groups, one writer per group appending one entry at a time and
//! awaiting its flush (what openraft 0.9 does for each client write), with the
//! groups on one `SharedLog` against the same groups on one `LogStore` each (a
//! `LogDir` each). Reports writes/s, p50/p99 latency and segment syncs per write
//! (counted through the log directory's storage seam), and the ratios of one run.
//!
//! `cargo bench -p walcodec-raft --bench groups` (`WALCODEC_BENCH_DIR` picks the
//! disk; the default is the temp directory; `WALCODEC_BENCH_GROUPS=1,16,64,256`
//! picks the group counts).

#[path = "../tests/support/mod.rs"]
#[allow(unreachable_pub)]
mod support;

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::storage::RaftLogStorageExt;
use support::{entry, TypeConfig};
use walcodec::testing::{DirStorage, FileStorage, Storage};
use walcodec::LogDirOptions;
use walcodec_raft::{LogStore, SharedLog};

/// Appends in all, spread over the groups (each group at least `MIN_PER_GROUP`).
const TOTAL: u64 = 2000;
const MIN_PER_GROUP: u64 = 10;
const ROUNDS: usize = 3;

fn bench_dir() -> std::path::PathBuf {
    std::env::var_os("WALCODEC_BENCH_DIR")
        .map(Into::into)
        .unwrap_or_else(std::env::temp_dir)
}

#[derive(Debug)]
struct CountingDir(Arc<AtomicU64>);

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
    syncs: Arc<AtomicU64>,
}

impl Storage for CountingFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.inner.sync()
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)
    }
}

struct Result {
    writes_per_s: f64,
    p50: Duration,
    p99: Duration,
    syncs_per_write: f64,
}

/// Runs one writer per store; each appends `per_group` entries one at a time.
async fn drive(stores: Vec<LogStore<TypeConfig>>, per_group: u64, syncs: &AtomicU64) -> Result {
    let before = syncs.load(Ordering::Relaxed);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for mut store in stores {
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(per_group as usize);
            for i in 0..per_group {
                let t = Instant::now();
                store.blocking_append([entry(1, i)]).await.unwrap();
                latencies.push(t.elapsed());
            }
            store.close().await.unwrap();
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.unwrap());
    }
    let elapsed = started.elapsed();
    let synced = syncs.load(Ordering::Relaxed) - before;
    latencies.sort();
    let writes = latencies.len() as f64;
    Result {
        writes_per_s: writes / elapsed.as_secs_f64(),
        p50: latencies[latencies.len() / 2],
        p99: latencies[latencies.len() * 99 / 100],
        syncs_per_write: synced as f64 / writes,
    }
}

async fn shared(dir: &Path, groups: u64, per_group: u64) -> Result {
    let syncs = Arc::new(AtomicU64::new(0));
    let log = SharedLog::builder()
        .log_dir(LogDirOptions::new().dir_storage(Arc::new(CountingDir(Arc::clone(&syncs)))))
        .open(dir.join(format!("shared-{groups}")))
        .await
        .unwrap();
    let mut stores = Vec::new();
    for g in 0..groups {
        stores.push(log.store::<TypeConfig>(g).await.unwrap());
    }
    let result = drive(stores, per_group, &syncs).await;
    // What the log wrote beyond the groups' records (rewrites of lagging groups).
    eprintln!("shared log, {groups} groups: {}", log.space_stats());
    log.close().await.unwrap();
    result
}

async fn separate(dir: &Path, groups: u64, per_group: u64) -> Result {
    let syncs = Arc::new(AtomicU64::new(0));
    let mut stores = Vec::new();
    for g in 0..groups {
        stores.push(
            LogStore::<TypeConfig>::builder()
                .log_dir(
                    LogDirOptions::new()
                        .dir_storage(Arc::new(CountingDir(Arc::clone(&syncs))))
                        .clone(),
                )
                .open(dir.join(format!("separate-{groups}-{g}")))
                .await
                .unwrap(),
        );
    }
    drive(stores, per_group, &syncs).await
}

fn row(name: &str, groups: u64, r: &Result) {
    println!(
        "| {name} | {groups} | {:.0} | {:.2} | {:.2} | {:.3} |",
        r.writes_per_s,
        r.p50.as_secs_f64() * 1e3,
        r.p99.as_secs_f64() * 1e3,
        r.syncs_per_write
    );
}

fn main() {
    let counts: Vec<u64> = std::env::var("WALCODEC_BENCH_GROUPS")
        .ok()
        .map(|v| {
            v.split(',')
                .map(|n| n.trim().parse().expect("a group count"))
                .collect()
        })
        .unwrap_or_else(|| vec![1, 16, 64, 256]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!("| store | groups | writes/s | p50 ms | p99 ms | syncs/write |");
    println!("|---|---:|---:|---:|---:|---:|");
    let mut ratios = Vec::new();
    for &groups in &counts {
        // Rounds alternate the contenders; the ratio is per round, so disk (and
        // CPU) noise hits both sides alike; the median round is reported.
        let mut round_ratios = Vec::new();
        for round in 1..=ROUNDS {
            let dir = tempfile::tempdir_in(bench_dir()).unwrap();
            let per_group = (TOTAL / groups).max(MIN_PER_GROUP);
            let separate = runtime.block_on(separate(dir.path(), groups, per_group));
            let shared = runtime.block_on(shared(dir.path(), groups, per_group));
            row(
                &format!("LogStore per group (round {round})"),
                groups,
                &separate,
            );
            row(&format!("SharedLog (round {round})"), groups, &shared);
            round_ratios.push(shared.writes_per_s / separate.writes_per_s);
        }
        round_ratios.sort_by(f64::total_cmp);
        ratios.push((groups, round_ratios));
    }
    for (groups, ratios) in ratios {
        let shown: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
        println!(
            "{groups} groups: SharedLog {:.2}x the writes/s of a LogStore per group (median; rounds {})",
            ratios[ratios.len() / 2],
            shown.join(", ")
        );
    }
}
