//! The memory a `SharedLog`'s per-group index takes, measured with a counting
//! allocator (a test binary of its own: the allocator is global): many groups
//! with many entries each, written the way a multi-Raft node writes them (every
//! group appending a few entries in turn, terms changing now and then, over
//! several segments), then the log reopened and every group's store opened, so
//! that what is counted is the index replay builds (no records cached). Prints
//! the bytes per entry, of the index replay builds before any store is opened
//! and of the stores' indexes; fails if either grows past a bound.
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
use walcodec::LogDirOptions;
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

/// Bytes of index per entry this test accepts: the compact index measures
/// about 10 (8 bytes of position per entry, plus the runs of leader ids and
/// segments); the `BTreeMap` of per-entry slots it replaced measured 164.
const MAX_BYTES_PER_ENTRY: f64 = 16.0;

/// Entries a group appends in one turn.
const TURN: u64 = 25;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_bytes_per_entry() {
    let groups = env("RAFT_INDEX_GROUPS", 200);
    let entries = env("RAFT_INDEX_ENTRIES", 500);
    let dir = tempfile::tempdir().unwrap();
    let shared = SharedLog::builder()
        .log_dir(LogDirOptions::new().max_segment_bytes(1 << 20))
        .open(dir.path())
        .await
        .unwrap();
    let mut stores = Vec::new();
    for g in 0..groups {
        stores.push(shared.store::<TypeConfig>(g).await.unwrap());
    }
    let mut next = 0;
    while next < entries {
        let end = (next + TURN).min(entries);
        // Every group's turn at once (one batch, one sync); a new term every 200
        // entries: a leader change now and then.
        futures::future::join_all(stores.iter_mut().map(|store| async move {
            store
                .blocking_append((next..end).map(|i| entry(1 + i / 200, i)))
                .await
                .unwrap()
        }))
        .await;
        next = end;
    }
    for mut store in stores {
        store.close().await.unwrap();
    }
    shared.close().await.unwrap();

    // The closed log's writer task drops its buffers after `close` returned:
    // let it, so that their frees do not count against the index.
    for _ in 0..10 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let total = (groups * entries) as f64;
    let mib = |bytes: usize| bytes as f64 / (1 << 20) as f64;
    let before = LIVE.load(Ordering::Relaxed);
    let shared = SharedLog::open(dir.path()).await.unwrap();
    let replayed = LIVE.load(Ordering::Relaxed).saturating_sub(before);
    let mut stores = Vec::new();
    for g in 0..groups {
        stores.push(shared.store::<TypeConfig>(g).await.unwrap());
    }
    let opened = LIVE.load(Ordering::Relaxed).saturating_sub(before);
    let (replayed_per_entry, per_entry) = (replayed as f64 / total, opened as f64 / total);
    println!(
        "{groups} groups x {entries} entries, {} segments: replayed {:.1} MiB \
         ({replayed_per_entry:.1} bytes per entry), stores opened {:.1} MiB \
         ({per_entry:.1} bytes per entry)",
        std::fs::read_dir(dir.path()).unwrap().count(),
        mib(replayed),
        mib(opened)
    );
    for mut store in stores {
        store.close().await.unwrap();
    }
    shared.close().await.unwrap();
    assert!(
        replayed_per_entry <= MAX_BYTES_PER_ENTRY && per_entry <= MAX_BYTES_PER_ENTRY,
        "{replayed_per_entry:.1} and {per_entry:.1} bytes per entry, over {MAX_BYTES_PER_ENTRY}"
    );
}
