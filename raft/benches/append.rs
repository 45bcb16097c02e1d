//! One Raft client on one node's log, beside its bound: `LogStore::append` of one
//! entry, waited for until its flush callback fires (what openraft 0.9's core does
//! for each client write on the leader), against a bare `write` + `fdatasync` of
//! the same record bytes per entry on a plain file. Then the same store with 64
//! entries per append (what a follower's append-entries batch, or packing several
//! commands into one call, gives). Rounds alternate the contenders; the ratios are
//! per round, so disk noise hits both sides alike.
//!
//! `cargo bench -p walcodec-raft --bench append` (`WALCODEC_BENCH_DIR` picks the
//! disk; the default is the temp directory).

#[path = "../tests/support/mod.rs"]
#[allow(unreachable_pub)]
mod support;

use std::io::Write;
use std::time::{Duration, Instant};

use openraft::storage::RaftLogStorageExt;
use support::{entry, TypeConfig};
use walcodec_raft::LogStore;

const ENTRIES: u64 = 400;
const ROUNDS: usize = 5;

fn bench_dir() -> std::path::PathBuf {
    std::env::var_os("WALCODEC_BENCH_DIR")
        .map(Into::into)
        .unwrap_or_else(std::env::temp_dir)
}

/// `write` + `fdatasync` of a 40-byte record per entry (the size of an entry's
/// record with its framing).
fn bare(dir: &std::path::Path) -> Duration {
    let mut file = std::fs::File::create(dir.join("bare.log")).unwrap();
    let record = [7u8; 40];
    let started = Instant::now();
    for _ in 0..ENTRIES {
        file.write_all(&record).unwrap();
        file.sync_data().unwrap();
    }
    started.elapsed()
}

async fn store(dir: &std::path::Path, per_append: u64) -> Duration {
    let mut store = LogStore::<TypeConfig>::open(dir.join(format!("store-{per_append}")))
        .await
        .unwrap();
    let started = Instant::now();
    let mut next = 0;
    while next < ENTRIES {
        store
            .blocking_append((next..next + per_append).map(|i| entry(1, i)))
            .await
            .unwrap();
        next += per_append;
    }
    let elapsed = started.elapsed();
    store.close().await.unwrap();
    elapsed
}

fn per_second(d: Duration) -> f64 {
    ENTRIES as f64 / d.as_secs_f64()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!("| round | bare write+fdatasync entries/s | LogStore, 1 entry/append | ratio | LogStore, 64 entries/append | vs bare |");
    println!("|---:|---:|---:|---:|---:|---:|");
    let mut ratios = Vec::new();
    for round in 1..=ROUNDS {
        let dir = tempfile::tempdir_in(bench_dir()).unwrap();
        let bare = per_second(bare(dir.path()));
        let one = per_second(runtime.block_on(store(dir.path(), 1)));
        let batched = per_second(runtime.block_on(store(dir.path(), 64)));
        ratios.push(one / bare);
        println!(
            "| {round} | {bare:.0} | {one:.0} | {:.2}x | {batched:.0} | {:.1}x |",
            one / bare,
            batched / bare
        );
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "median ratio, 1 entry per append: {:.2}x",
        ratios[ratios.len() / 2]
    );
}
