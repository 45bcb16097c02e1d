//! Three openraft 0.9 nodes in one process on a function-call network (the shape
//! of openraft's `cluster_benchmark`), clients writing through the leader until
//! each write is applied, with each node's log in its own directory on the real
//! disk. Side by side in one run, rounds alternating the order:
//!
//! - `logstore`: walcodec-raft's `LogStore` with its defaults (the writer
//!   preallocates 1 MiB of zeros ahead of the log, so that a sync does not commit
//!   a new file size);
//! - `logstore-growing`: the same with `preallocate(0)`, files growing with each
//!   write (the default before preallocation was);
//! - `memory`: an in-memory log store, the ceiling (see `memory.rs`);
//! - `rocksdb`: a RocksDB log store that syncs its WAL on every append, as
//!   openraft's `rocksstore-v2` does (feature `rocksdb`, see `rocks.rs`);
//!
//! and, as the bound for one client, a bare `write` + `fdatasync` per entry of the
//! same size on a plain file, run just before and just after the one-client runs
//! of each round. Then packing: several commands per entry.
//!
//! `scripts/raft-cluster-bench.sh` builds and runs it (with `short` for a quick
//! run, `syncs` to count syncs per write under strace). Flags:
//!
//! ```text
//! --rounds N            rounds of every contender (default 3)
//! --writes N            client writes (entries) per run (default 4096)
//! --clients 1,64,256    client counts of the main table
//! --stores a,b,c        any of memory, logstore, logstore-growing, rocksdb
//!                       (default: all built)
//! --pack 16,64          commands per entry for the packing table ("" skips it)
//! --pack-clients 1,64   client counts of the packing table
//! --dir PATH            where the nodes' directories go (default: the temp dir)
//! --no-bare             skip the bare write + fdatasync bound
//! ```

mod memory;
mod network;
mod node;
#[cfg(feature = "rocksdb")]
mod rocks;
mod state_machine;
#[cfg(test)]
mod tests;
mod types;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use openraft::{CommittedLeaderId, EntryPayload, LogId};

use network::Router;
use node::{start, BoxError};
use walcodec::{LogDirOptions, WriterOptions};

use types::{Command, Entry, NodeId, Request, TypeConfig};

const NODES: [NodeId; 3] = [0, 1, 2];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Memory,
    LogStore,
    /// `LogStore` with files growing with each write (`preallocate(0)`).
    LogStoreGrowing,
    Rocks,
}

impl Kind {
    fn parse(name: &str) -> Result<Kind, BoxError> {
        match name {
            "memory" => Ok(Kind::Memory),
            "logstore" => Ok(Kind::LogStore),
            "logstore-growing" => Ok(Kind::LogStoreGrowing),
            "rocksdb" if cfg!(feature = "rocksdb") => Ok(Kind::Rocks),
            "rocksdb" => Err("built without the `rocksdb` feature".into()),
            _ => Err(format!("unknown store {name:?}").into()),
        }
    }

    fn all() -> Vec<Kind> {
        let mut all = vec![Kind::Memory, Kind::LogStore, Kind::LogStoreGrowing];
        if cfg!(feature = "rocksdb") {
            all.push(Kind::Rocks);
        }
        all
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Memory => "memory",
            Kind::LogStore => "logstore",
            Kind::LogStoreGrowing => "logstore-growing",
            Kind::Rocks => "rocksdb",
        })
    }
}

struct Options {
    rounds: usize,
    writes: u64,
    clients: Vec<usize>,
    stores: Vec<Kind>,
    packs: Vec<usize>,
    pack_clients: Vec<usize>,
    dir: PathBuf,
    bare: bool,
}

fn list<T: std::str::FromStr>(value: &str) -> Result<Vec<T>, BoxError> {
    value
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().map_err(|_| format!("bad list item {s:?}").into()))
        .collect()
}

impl Options {
    fn parse() -> Result<Options, BoxError> {
        let mut options = Options {
            rounds: 3,
            writes: 4096,
            clients: vec![1, 64, 256],
            stores: Kind::all(),
            packs: vec![16, 64],
            pack_clients: vec![1, 64],
            dir: std::env::temp_dir(),
            bare: true,
        };
        let mut args = std::env::args().skip(1);
        while let Some(flag) = args.next() {
            if flag == "--no-bare" {
                options.bare = false;
                continue;
            }
            let value = args.next().ok_or(format!("{flag} needs a value"))?;
            match flag.as_str() {
                "--rounds" => options.rounds = value.parse()?,
                "--writes" => options.writes = value.parse()?,
                "--clients" => options.clients = list(&value)?,
                "--stores" => {
                    options.stores = value
                        .split(',')
                        .map(Kind::parse)
                        .collect::<Result<_, _>>()?
                }
                "--pack" => options.packs = list(&value)?,
                "--pack-clients" => options.pack_clients = list(&value)?,
                "--dir" => options.dir = value.into(),
                _ => return Err(format!("unknown flag {flag}").into()),
            }
        }
        if options.rounds == 0 || options.writes == 0 || options.stores.is_empty() {
            return Err("--rounds, --writes and --stores must not be zero or empty".into());
        }
        Ok(options)
    }
}

/// What one run measured.
#[derive(Debug, Clone)]
struct Outcome {
    /// Client writes (log entries) acknowledged.
    writes: u64,
    commands: u64,
    elapsed: Duration,
    p50: Duration,
    p99: Duration,
}

impl Outcome {
    fn writes_per_second(&self) -> f64 {
        self.writes as f64 / self.elapsed.as_secs_f64()
    }

    fn commands_per_second(&self) -> f64 {
        self.commands as f64 / self.elapsed.as_secs_f64()
    }
}

/// Starts the three nodes of a cluster, each with its log in `dir/node-<id>`.
async fn cluster(store: Kind, dir: &Path) -> Result<Router, BoxError> {
    let router = Router::default();
    for id in NODES {
        let path = dir.join(format!("node-{id}"));
        match store {
            Kind::Memory => start(&router, id, memory::MemLogStore::default()).await?,
            Kind::LogStore => {
                let log = walcodec_raft::LogStore::<TypeConfig>::open(&path).await?;
                start(&router, id, log).await?
            }
            Kind::LogStoreGrowing => {
                let log = walcodec_raft::LogStore::<TypeConfig>::builder()
                    .log_dir(
                        LogDirOptions::new()
                            .writer(WriterOptions::new().preallocate(0))
                            .clone(),
                    )
                    .open(&path)
                    .await?;
                start(&router, id, log).await?
            }
            #[cfg(feature = "rocksdb")]
            Kind::Rocks => start(&router, id, rocks::RocksLogStore::open(&path)?).await?,
            #[cfg(not(feature = "rocksdb"))]
            Kind::Rocks => unreachable!("Kind::parse refuses rocksdb without the feature"),
        }
    }
    let leader = router.get(0);
    leader
        .initialize(NODES.into_iter().collect::<BTreeSet<_>>())
        .await?;
    for id in NODES {
        let timeout = Some(Duration::from_secs(30));
        router
            .get(id)
            .wait(timeout)
            .current_leader(0, "node 0 leads")
            .await?;
        // Index 1: the leader's blank entry of its term.
        router
            .get(id)
            .wait(timeout)
            .applied_index_at_least(Some(1), "the leader's first entry")
            .await?;
    }
    Ok(router)
}

fn request(client: usize, i: u64, pack: usize) -> Request {
    Request {
        commands: (0..pack as u64)
            .map(|j| Command {
                key: (client as u64) << 32 | j,
                value: i,
            })
            .collect(),
    }
}

/// Syncs a marker file: `strace -y` shows its path, so the sync counting of
/// `scripts/raft-cluster-bench.sh syncs` counts only what is between the marks.
fn mark(dir: &Path, name: &str) -> std::io::Result<()> {
    std::fs::File::create(dir.join(name))?.sync_all()
}

/// One run: a fresh cluster, `clients` clients writing `writes` entries of `pack`
/// commands between them, each client waiting for each write to be applied.
async fn run(
    store: Kind,
    base: &Path,
    clients: usize,
    pack: usize,
    writes: u64,
) -> Result<Outcome, BoxError> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("{store}-c{clients}-p{pack}-"))
        .tempdir_in(base)?;
    let router = cluster(store, dir.path()).await?;
    let leader = router.get(0);
    for i in 0..16 {
        leader.client_write(request(0, i, pack)).await?;
    }
    let per_client = writes.div_ceil(clients as u64);
    mark(dir.path(), "mark-start")?;
    let started = Instant::now();
    let leaders = vec![leader.clone(); clients];
    let latencies = node::clients(leaders, per_client, move |c, i| request(c, i, pack)).await?;
    let elapsed = started.elapsed();
    mark(dir.path(), "mark-end")?;
    // Not timed: every node holds and has applied every entry, or the run fails.
    let last = leader.metrics().borrow().last_log_index;
    for id in NODES {
        router
            .get(id)
            .wait(Some(Duration::from_secs(30)))
            .applied_index_at_least(last, "every entry applied on every node")
            .await?;
    }
    router.shutdown().await;
    Ok(summarize(latencies, elapsed, pack))
}

/// The outcome of writes of `pack` commands that took `latencies` each and
/// `elapsed` in all.
fn summarize(mut latencies: Vec<Duration>, elapsed: Duration, pack: usize) -> Outcome {
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    let writes = latencies.len() as u64;
    Outcome {
        writes,
        commands: writes * pack as u64,
        elapsed,
        p50: at(0.50),
        p99: at(0.99),
    }
}

/// The size of one entry's record as `LogStore` writes it: a tag byte, the
/// postcard of the log id and entry, and the 7-byte LevelDB header.
fn entry_record_bytes() -> usize {
    let entry = Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 0), 1000),
        payload: EntryPayload::Normal(request(3, 1000, 1)),
    };
    let log_id = postcard::to_stdvec(&entry.log_id).expect("a log id encodes");
    let entry = postcard::to_stdvec(&entry).expect("an entry encodes");
    7 + 1 + log_id.len() + entry.len()
}

/// The bound for one client: `write` + `fdatasync` of one entry's record per
/// entry on a plain file, `writes` times: each write's latency, and the time of all.
fn bare(base: &Path, writes: u64) -> Result<(Vec<Duration>, Duration), BoxError> {
    let dir = tempfile::Builder::new().prefix("bare-").tempdir_in(base)?;
    let mut file = std::fs::File::create(dir.path().join("bare.log"))?;
    let record = vec![7u8; entry_record_bytes()];
    let mut latencies = Vec::with_capacity(writes as usize);
    mark(dir.path(), "mark-start")?;
    let started = Instant::now();
    for _ in 0..writes {
        let sent = Instant::now();
        file.write_all(&record)?;
        file.sync_data()?;
        latencies.push(sent.elapsed());
    }
    let elapsed = started.elapsed();
    mark(dir.path(), "mark-end")?;
    Ok((latencies, elapsed))
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Outcomes by (clients, pack, store), one per round.
type Results = BTreeMap<(usize, usize, Kind), Vec<Outcome>>;

/// Per round, `f(a) / f(b)` of the runs of `key` (clients, pack).
fn ratios(
    results: &Results,
    key: (usize, usize),
    a: Kind,
    b: Kind,
    f: impl Fn(&Outcome) -> f64,
) -> Option<Vec<f64>> {
    let a = results.get(&(key.0, key.1, a))?;
    let b = results.get(&(key.0, key.1, b))?;
    Some(a.iter().zip(b).map(|(a, b)| f(a) / f(b)).collect())
}

fn per_round_ratios(results: &Results, key: (usize, usize), a: Kind, b: Kind) -> Option<Vec<f64>> {
    ratios(results, key, a, b, Outcome::writes_per_second)
}

fn ratio_cell(ratios: Option<Vec<f64>>) -> String {
    match ratios {
        Some(r) => format!(
            "{:.2}x ({})",
            median(r.clone()),
            r.iter()
                .map(|x| format!("{x:.2}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => "".into(),
    }
}

fn print_tables(options: &Options, results: &Results, bare: &[Outcome]) {
    println!();
    println!(
        "## Three nodes, one entry per write ({} writes a run, {} rounds; medians over rounds, per-round ratios in brackets)",
        options.writes, options.rounds
    );
    println!();
    println!("| clients | store | writes/s | p50 ms | p99 ms | LogStore / this |");
    println!("|---:|---|---:|---:|---:|---|");
    for &clients in &options.clients {
        for &store in &options.stores {
            let Some(outcomes) = results.get(&(clients, 1, store)) else {
                continue;
            };
            let ratio = if store == Kind::LogStore {
                String::new()
            } else {
                ratio_cell(per_round_ratios(
                    results,
                    (clients, 1),
                    Kind::LogStore,
                    store,
                ))
            };
            println!(
                "| {clients} | {store} | {:.0} | {:.2} | {:.2} | {ratio} |",
                median(outcomes.iter().map(Outcome::writes_per_second).collect()),
                median(outcomes.iter().map(|o| ms(o.p50)).collect()),
                median(outcomes.iter().map(|o| ms(o.p99)).collect()),
            );
        }
    }
    if !bare.is_empty() {
        println!(
            "| 1 | bare write+fdatasync ({} B) | {:.0} | {:.2} | {:.2} | {} |",
            entry_record_bytes(),
            median(bare.iter().map(Outcome::writes_per_second).collect()),
            median(bare.iter().map(|o| ms(o.p50)).collect()),
            median(bare.iter().map(|o| ms(o.p99)).collect()),
            match results.get(&(1, 1, Kind::LogStore)) {
                Some(one) => ratio_cell(Some(
                    one.iter()
                        .zip(bare)
                        .map(|(a, b)| a.writes_per_second() / b.writes_per_second())
                        .collect(),
                )),
                None => String::new(),
            }
        );
    }
    println!();
    println!("Ratios, each the median of the per-round ratios (the rounds in brackets):");
    println!();
    println!("| clients | writes/s LogStore / RocksDB | p99 LogStore / RocksDB | writes/s LogStore-growing / RocksDB | p99 LogStore-growing / RocksDB | writes/s LogStore / memory |");
    println!("|---:|---|---|---|---|---|");
    let p99 = |o: &Outcome| 1.0 / ms(o.p99);
    for &clients in &options.clients {
        let key = (clients, 1);
        let rate = Outcome::writes_per_second;
        println!(
            "| {clients} | {} | {} | {} | {} | {} |",
            ratio_cell(ratios(results, key, Kind::LogStore, Kind::Rocks, rate)),
            ratio_cell(ratios(results, key, Kind::Rocks, Kind::LogStore, p99)),
            ratio_cell(ratios(
                results,
                key,
                Kind::LogStoreGrowing,
                Kind::Rocks,
                rate
            )),
            ratio_cell(ratios(
                results,
                key,
                Kind::Rocks,
                Kind::LogStoreGrowing,
                p99
            )),
            ratio_cell(ratios(results, key, Kind::LogStore, Kind::Memory, rate)),
        );
    }
    if options.packs.is_empty() {
        return;
    }
    println!();
    println!("## Packing: commands per entry (client-side batches)");
    println!();
    println!("| clients | commands/entry | store | entries/s | commands/s | p50 ms | p99 ms | LogStore / this |");
    println!("|---:|---:|---|---:|---:|---:|---:|---|");
    for &clients in &options.pack_clients {
        for &pack in &options.packs {
            for &store in &options.stores {
                let Some(outcomes) = results.get(&(clients, pack, store)) else {
                    continue;
                };
                let ratio = if store == Kind::LogStore {
                    String::new()
                } else {
                    ratio_cell(per_round_ratios(
                        results,
                        (clients, pack),
                        Kind::LogStore,
                        store,
                    ))
                };
                println!(
                    "| {clients} | {pack} | {store} | {:.0} | {:.0} | {:.2} | {:.2} | {ratio} |",
                    median(outcomes.iter().map(Outcome::writes_per_second).collect()),
                    median(outcomes.iter().map(Outcome::commands_per_second).collect()),
                    median(outcomes.iter().map(|o| ms(o.p50)).collect()),
                    median(outcomes.iter().map(|o| ms(o.p99)).collect()),
                );
            }
        }
    }
}

fn main() -> Result<(), BoxError> {
    let options = Options::parse()?;
    // Many workers, as openraft's cluster_benchmark has: RocksDB's store (like
    // rocksstore-v2) syncs inline in its async methods, blocking a worker.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(8)
        .enable_all()
        .build()?;
    let mut results = Results::new();
    let mut bare_outcomes = Vec::new();
    let mut plan: Vec<(usize, usize)> = options.clients.iter().map(|&c| (c, 1)).collect();
    for &clients in &options.pack_clients {
        plan.extend(options.packs.iter().map(|&p| (clients, p)));
    }
    for round in 0..options.rounds {
        for &(clients, pack) in &plan {
            let bound = options.bare && clients == 1 && pack == 1;
            let before = if bound {
                Some(bare(&options.dir, options.writes.min(2048))?)
            } else {
                None
            };
            // Alternate the order of the stores from round to round.
            let mut stores = options.stores.clone();
            let turn = round % stores.len();
            stores.rotate_left(turn);
            for store in stores {
                let writes = if pack == 1 {
                    options.writes
                } else {
                    (options.writes / 4).max(clients as u64)
                };
                let outcome = runtime.block_on(run(store, &options.dir, clients, pack, writes))?;
                eprintln!(
                    "round {}: {store}, {clients} clients, {pack} commands/entry: {} writes, {:.0} writes/s, {:.0} commands/s, p50 {:.2} ms, p99 {:.2} ms",
                    round + 1,
                    outcome.writes,
                    outcome.writes_per_second(),
                    outcome.commands_per_second(),
                    ms(outcome.p50),
                    ms(outcome.p99)
                );
                results
                    .entry((clients, pack, store))
                    .or_default()
                    .push(outcome);
            }
            if let Some((mut latencies, before)) = before {
                let (more, after) = bare(&options.dir, options.writes.min(2048))?;
                let rate = |d: Duration| more.len() as f64 / d.as_secs_f64();
                eprintln!(
                    "round {}: bare write+fdatasync: {:.0} writes/s before, {:.0} after",
                    round + 1,
                    rate(before),
                    rate(after),
                );
                latencies.extend(more);
                bare_outcomes.push(summarize(latencies, before + after, 1));
            }
        }
    }
    print_tables(&options, &results, &bare_outcomes);
    Ok(())
}
