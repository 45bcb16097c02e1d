//! Many Raft groups on a three-node cluster: three openraft 0.9 nodes in one
//! process on the cluster bench's function-call network, each node a member of
//! every one of G groups, with the leaders spread over the nodes (group g is
//! started from node g % 3). One client per group writes one entry at a time
//! through its group's leader and waits until it is applied. Side by side in one
//! run, rounds alternating the order:
//!
//! - `shared`: one `SharedLog` per node holding all of that node's groups;
//! - `separate`: one `LogStore` (its own `LogDir`) per group on each node.
//!
//! Reports writes/s, p50/p99 and syncs per write: the segment syncs of all three
//! nodes (counted through the log directory's storage seam) over the client
//! writes, and the ratio of the two in each round (the median of the rounds).
//!
//! `scripts/raft-cluster-bench.sh groups-cluster` runs it. Flags:
//!
//! ```text
//! --groups 1,64     group counts (default 64)
//! --writes N        client writes per run, spread over the groups (default 2048)
//! --rounds N        rounds (default 3)
//! --dir PATH        where the nodes' directories go (default: the temp dir)
//! ```

#[path = "../../../benches/groups.rs"]
#[allow(dead_code)]
mod harness;
#[path = "../network.rs"]
mod network;
#[path = "../node.rs"]
mod node;
#[path = "../state_machine.rs"]
mod state_machine;
#[path = "../types.rs"]
#[allow(dead_code)]
mod types;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use walcodec::LogDirOptions;
use walcodec_raft::{LogStore, SharedLog};

use harness::{CountingDir, Syncs};
use network::Router;
use node::{clients, start, BoxError};
use types::{Command, NodeId, Raft, Request, TypeConfig};

const NODES: [NodeId; 3] = [0, 1, 2];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Shared,
    Separate,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Shared => "SharedLog per node",
            Kind::Separate => "LogStore per group",
        }
    }
}

struct Options {
    groups: Vec<u64>,
    writes: u64,
    rounds: usize,
    dir: PathBuf,
}

impl Options {
    fn parse() -> Result<Options, BoxError> {
        let mut options = Options {
            groups: vec![64],
            writes: 2048,
            rounds: 3,
            dir: std::env::temp_dir(),
        };
        let mut args = std::env::args().skip(1);
        while let Some(flag) = args.next() {
            let value = args.next().ok_or(format!("{flag} needs a value"))?;
            match flag.as_str() {
                "--groups" => {
                    options.groups = value
                        .split(',')
                        .map(|s| s.trim().parse())
                        .collect::<Result<_, _>>()?
                }
                "--writes" => options.writes = value.parse()?,
                "--rounds" => options.rounds = value.parse()?,
                "--dir" => options.dir = value.into(),
                _ => return Err(format!("unknown flag {flag}").into()),
            }
        }
        if options.rounds == 0 || options.writes == 0 || options.groups.contains(&0) {
            return Err("--rounds, --writes and --groups must not be zero".into());
        }
        Ok(options)
    }
}

/// The cluster: a router per group (its three members), the shared logs (empty
/// for `Separate`) and the sync counter of every node's log directories.
struct Cluster {
    groups: Vec<Router>,
    shared: Vec<SharedLog>,
    syncs: Arc<Syncs>,
}

async fn cluster(kind: Kind, dir: &Path, groups: u64) -> Result<Cluster, BoxError> {
    let syncs = Arc::new(Syncs::default());
    let options = || {
        LogDirOptions::new()
            .dir_storage(Arc::new(CountingDir(Arc::clone(&syncs))))
            .clone()
    };
    let mut shared = Vec::new();
    if kind == Kind::Shared {
        for id in NODES {
            shared.push(
                SharedLog::builder()
                    .log_dir(&options())
                    .open(dir.join(format!("node-{id}")))
                    .await?,
            );
        }
    }
    let mut routers = Vec::new();
    for group in 0..groups {
        let router = Router::default();
        for id in NODES {
            match kind {
                Kind::Shared => {
                    let store = shared[id as usize].store::<TypeConfig>(group).await?;
                    start(&router, id, store).await?
                }
                Kind::Separate => {
                    let store = LogStore::<TypeConfig>::builder()
                        .log_dir(options())
                        .open(
                            dir.join(format!("node-{id}"))
                                .join(format!("group-{group}")),
                        )
                        .await?;
                    start(&router, id, store).await?
                }
            }
        }
        let first = NODES[group as usize % NODES.len()];
        router
            .get(first)
            .initialize(NODES.into_iter().collect::<BTreeSet<_>>())
            .await?;
        routers.push(router);
    }
    for (group, router) in routers.iter().enumerate() {
        let first = NODES[group % NODES.len()];
        for id in NODES {
            let timeout = Some(Duration::from_secs(60));
            router
                .get(id)
                .wait(timeout)
                .current_leader(first, "the first node leads")
                .await?;
            router
                .get(id)
                .wait(timeout)
                .applied_index_at_least(Some(1), "the leader's first entry")
                .await?;
        }
    }
    Ok(Cluster {
        groups: routers,
        shared,
        syncs,
    })
}

struct Outcome {
    writes: u64,
    elapsed: Duration,
    p50: Duration,
    p99: Duration,
    syncs: u64,
}

impl Outcome {
    fn writes_per_second(&self) -> f64 {
        self.writes as f64 / self.elapsed.as_secs_f64()
    }
}

/// One run: a fresh cluster of `groups` groups, one client per group writing
/// `per_group` entries through the group's leader, each awaited until applied.
async fn run(kind: Kind, base: &Path, groups: u64, per_group: u64) -> Result<Outcome, BoxError> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("groups-{groups}-"))
        .tempdir_in(base)?;
    let cluster = cluster(kind, dir.path(), groups).await?;
    let leaders: Vec<Raft> = (0..groups as usize)
        .map(|g| cluster.groups[g].get(NODES[g % NODES.len()]))
        .collect();
    let before = cluster.syncs.count.load(Ordering::Relaxed);
    let started = Instant::now();
    let request = |group: usize, i: u64| Request {
        commands: vec![Command {
            key: group as u64,
            value: i,
        }],
    };
    let mut latencies = clients(leaders.clone(), per_group, request).await?;
    let elapsed = started.elapsed();
    let syncs = cluster.syncs.count.load(Ordering::Relaxed) - before;
    // Not timed: in every group, every node has applied every entry.
    for (router, leader) in cluster.groups.iter().zip(&leaders) {
        let last = leader.metrics().borrow().last_log_index;
        for id in NODES {
            router
                .get(id)
                .wait(Some(Duration::from_secs(60)))
                .applied_index_at_least(last, "every entry applied on every node")
                .await?;
        }
    }
    for router in &cluster.groups {
        router.shutdown().await;
    }
    for log in cluster.shared {
        log.close().await?;
    }
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    Ok(Outcome {
        writes: latencies.len() as u64,
        elapsed,
        p50: at(0.5),
        p99: at(0.99),
        syncs,
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() -> Result<(), BoxError> {
    let options = Options::parse()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    println!("| store | groups | writes/s | p50 ms | p99 ms | syncs/write (3 nodes) |");
    println!("|---|---:|---:|---:|---:|---:|");
    let mut ratios = Vec::new();
    for &groups in &options.groups {
        let per_group = (options.writes / groups).max(10);
        let mut rounds = Vec::new();
        for round in 0..options.rounds {
            let mut order = [Kind::Separate, Kind::Shared];
            let turn = round % order.len();
            order.rotate_left(turn);
            let mut rates = [0.0; 2];
            for kind in order {
                let o = runtime.block_on(run(kind, &options.dir, groups, per_group))?;
                println!(
                    "| {} (round {}) | {groups} | {:.0} | {:.2} | {:.2} | {:.3} |",
                    kind.name(),
                    round + 1,
                    o.writes_per_second(),
                    ms(o.p50),
                    ms(o.p99),
                    o.syncs as f64 / o.writes as f64
                );
                rates[usize::from(kind == Kind::Shared)] = o.writes_per_second();
            }
            rounds.push(rates[1] / rates[0]);
        }
        rounds.sort_by(f64::total_cmp);
        ratios.push((groups, rounds));
    }
    for (groups, rounds) in ratios {
        let shown: Vec<String> = rounds.iter().map(|r| format!("{r:.2}")).collect();
        println!(
            "{groups} groups: a SharedLog per node {:.2}x the writes/s of a LogStore per group (median; rounds {})",
            rounds[rounds.len() / 2],
            shown.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small run of each kind is a working multi-group cluster: every write of
    /// every group acknowledged and applied on every node (`run` waits for it),
    /// with the groups' leaders spread over the nodes, and the syncs counted.
    #[test]
    fn a_run_counts_every_write_of_every_group() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        for kind in [Kind::Shared, Kind::Separate] {
            let dir = tempfile::tempdir().unwrap();
            let outcome = runtime
                .block_on(run(kind, dir.path(), 4, 10))
                .unwrap_or_else(|e| panic!("{}: {e}", kind.name()));
            assert_eq!(outcome.writes, 40, "{}", kind.name());
            assert!(outcome.syncs > 0, "{}", kind.name());
            assert!(outcome.p50 <= outcome.p99, "{}", kind.name());
        }
    }
}
