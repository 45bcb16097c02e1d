//! A group's reader racing the rewrites that move its entries: a lagging group's
//! entries are read from the segments again and again while busy groups fill
//! the log, so that rewrite after rewrite copies the lagging group's entries to
//! the head of the log and deletes the segments they were in, between a
//! reader's look at the index and its read of the files. Every read must give
//! exactly the entries asked for, or (only when more rewrites ran during it
//! than a read tries again for) an error; never other bytes, never a panic.
//!
//! A seeded stress (the reader's window is not reachable through the
//! directory's storage seam): `RAFT_READ_RACE_REWRITES` sets how many rewrites
//! it waits for (default 20). It checks that no read ever returns other entries
//! or panics while rewrites run; it does not reliably reach the narrow window
//! where a read's looked-up position is deleted before the read opens it (a run
//! with the reader's reading-again removed passed). That window, and every
//! other order of a read's steps against a rewrite's, is run exactly by the
//! crate's unit test `read_rewrite_race` (test-only pause points in the reader
//! and the rewrite; it fails without the reading-again).

use crate::power_support;
use crate::support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use futures::future::join_all;
use openraft::storage::RaftLogStorage;
use openraft::RaftLogReader;
use power_support::SplitMix;
use support::ops::{Model, Op};
use support::{is_genuine, TypeConfig};
use walcodec::LogDirOptions;
use walcodec_raft::SharedLog;

/// The group read while it is rewritten.
const LAGGING: u64 = 1000;
/// Its entries, written before the log is reopened (so none is in memory).
const LAGGING_ENTRIES: u64 = 60;
/// How many times a read looks again when its entries moved (the reader's
/// rule): an error is allowed only after more rewrites than this.
const TRIES: u64 = 3;

fn builder() -> walcodec_raft::SharedLogBuilder {
    let mut options = LogDirOptions::new();
    options.max_segment_bytes(2048);
    let mut builder = SharedLog::builder();
    builder.log_dir(&options).rewrite_threshold(6 << 10);
    builder
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_racing_rewrites_get_their_entries_or_a_clean_error() {
    let wanted_rewrites = power_support::env_number("RAFT_READ_RACE_REWRITES").unwrap_or(20);
    let seed = power_support::seed();
    eprintln!("read-vs-rewrite seed {seed} (replay with POWER_CUT_SEED={seed})");
    let mut rng = SplitMix::new(seed);
    let dir = tempfile::tempdir().unwrap();

    // The lagging group's entries, on disk only once the log is reopened.
    let shared = builder().open(dir.path()).await.unwrap();
    let mut lagging = shared.store::<TypeConfig>(LAGGING).await.unwrap();
    let mut model = Model::default();
    for first in (0..LAGGING_ENTRIES).step_by(6) {
        let op = Op::Append {
            term: 1,
            first,
            n: 6.min(LAGGING_ENTRIES - first),
        };
        op.execute(&mut lagging, &model).await;
        model.apply(&op);
    }
    lagging.close().await.unwrap();
    shared.close().await.unwrap();

    let shared = builder().open(dir.path()).await.unwrap();
    let mut lagging = shared.store::<TypeConfig>(LAGGING).await.unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let overlapped = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    for r in 0..2u64 {
        let mut reader = lagging.get_log_reader().await;
        let (shared, done, overlapped) = (shared.clone(), done.clone(), overlapped.clone());
        let mut rng = SplitMix::new(seed ^ (r + 1));
        readers.push(tokio::spawn(async move {
            let (mut reads, mut errors) = (0u64, 0u64);
            while !done.load(Ordering::Relaxed) {
                let start = rng.range(0, LAGGING_ENTRIES);
                let end = rng.range(start + 1, LAGGING_ENTRIES + 1);
                let before = shared.space_stats().rewrites;
                let read = reader.try_get_log_entries(start..end).await;
                let rewrites = shared.space_stats().rewrites - before;
                if rewrites > 0 {
                    overlapped.fetch_add(1, Ordering::Relaxed);
                }
                reads += 1;
                match read {
                    Ok(entries) => {
                        let indexes: Vec<u64> = entries.iter().map(|e| e.log_id.index).collect();
                        assert_eq!(
                            indexes,
                            (start..end).collect::<Vec<_>>(),
                            "seed {seed}: read {start}..{end} got other entries"
                        );
                        assert!(
                            entries.iter().all(is_genuine),
                            "seed {seed}: an entry read back changed"
                        );
                    }
                    Err(e) => {
                        errors += 1;
                        assert!(
                            rewrites > TRIES,
                            "seed {seed}: read {start}..{end} failed with {rewrites} \
                             rewrites during it: {e}"
                        );
                    }
                }
                tokio::task::yield_now().await;
            }
            (reads, errors)
        }));
    }

    // Busy groups: entries in, purged down to a dozen, so that the segments
    // fill with dead records that only the lagging group's entries pin.
    let mut busy = Vec::new();
    for g in 0..4u64 {
        busy.push((
            shared.store::<TypeConfig>(g).await.unwrap(),
            Model::default(),
        ));
    }
    let mut rounds = 0u64;
    while shared.space_stats().rewrites < wanted_rewrites {
        rounds += 1;
        assert!(
            rounds < 100_000,
            "seed {seed}: only {} rewrites",
            shared.space_stats().rewrites
        );
        let ops: Vec<Op> = busy
            .iter()
            .map(|(_, model)| {
                let next = model.last().map_or(0, |l| l.index + 1);
                if model.entries.len() > 24 {
                    let (&index, id) = model.entries.iter().rev().nth(12).unwrap();
                    Op::Purge {
                        term: id.leader_id.term,
                        index,
                    }
                } else {
                    Op::Append {
                        term: 1,
                        first: next,
                        n: 1 + rng.range(0, 6),
                    }
                }
            })
            .collect();
        // The busy groups' calls at once: one batch, one sync.
        join_all(
            busy.iter_mut()
                .zip(ops)
                .map(|((store, model), op)| async move {
                    op.execute(store, model).await;
                    model.apply(&op);
                }),
        )
        .await;
    }
    done.store(true, Ordering::Relaxed);
    let (mut reads, mut errors) = (0, 0);
    for reader in readers {
        let (r, e) = reader.await.unwrap();
        reads += r;
        errors += e;
    }
    let overlapped = overlapped.load(Ordering::Relaxed);
    eprintln!(
        "seed {seed}: {reads} reads, {overlapped} during a rewrite, {errors} errors \
         (more than {TRIES} rewrites during each); {}",
        shared.space_stats()
    );
    assert!(
        overlapped > 0,
        "seed {seed}: no read overlapped a rewrite: the race was not run"
    );
    // What the reads raced leaves the group as it was.
    let found = Model::read(&mut lagging).await;
    assert_eq!(found, model, "seed {seed}: the lagging group");
    lagging.close().await.unwrap();
    for (mut store, _) in busy {
        store.close().await.unwrap();
    }
    shared.close().await.unwrap();
}
