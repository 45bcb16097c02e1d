//! The memory a `SharedLog`'s per-group index takes, measured with a counting
//! allocator (a test binary of its own: the allocator is global): many groups
//! with many entries each, written, then the log reopened and every group's
//! store opened, so that what is counted is the index replay builds (no records
//! cached). Prints the bytes per entry; fails if it grows past a bound.
//!
//! `cargo test --release -p walcodec-raft --test index_memory -- --nocapture`
//! (`RAFT_INDEX_GROUPS` and `RAFT_INDEX_ENTRIES` set the size; defaults 200 × 500).

#[path = "support/mod.rs"]
#[allow(unreachable_pub)]
mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use openraft::storage::RaftLogStorageExt;
use support::{entry, TypeConfig};
use walcodec_raft::SharedLog;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Bytes of index per entry this test accepts: today's index (a `BTreeMap` of
/// slots holding each entry's log id and record range) measures about 164.
const MAX_BYTES_PER_ENTRY: f64 = 200.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_bytes_per_entry() {
    let groups = env("RAFT_INDEX_GROUPS", 200);
    let entries = env("RAFT_INDEX_ENTRIES", 500);
    let dir = tempfile::tempdir().unwrap();
    let shared = SharedLog::open(dir.path()).await.unwrap();
    for g in 0..groups {
        let mut store = shared.store::<TypeConfig>(g).await.unwrap();
        store
            .blocking_append((0..entries).map(|i| entry(1, i)))
            .await
            .unwrap();
        store.close().await.unwrap();
    }
    shared.close().await.unwrap();

    let before = LIVE.load(Ordering::Relaxed);
    let shared = SharedLog::open(dir.path()).await.unwrap();
    let mut stores = Vec::new();
    for g in 0..groups {
        stores.push(shared.store::<TypeConfig>(g).await.unwrap());
    }
    let after = LIVE.load(Ordering::Relaxed);
    let total = (groups * entries) as f64;
    let per_entry = after.saturating_sub(before) as f64 / total;
    println!(
        "{groups} groups x {entries} entries: {:.1} MiB of index, {per_entry:.1} bytes per entry",
        after.saturating_sub(before) as f64 / (1 << 20) as f64
    );
    for mut store in stores {
        store.close().await.unwrap();
    }
    shared.close().await.unwrap();
    assert!(
        per_entry <= MAX_BYTES_PER_ENTRY,
        "{per_entry:.1} bytes per entry, over {MAX_BYTES_PER_ENTRY}"
    );
}
