//! Random sequences of append / save_vote / save_committed / truncate / purge /
//! reopen against a model of what a Raft log store must hold: after every step the
//! store's log state, vote and committed id equal the model's, and after every
//! reopen every entry reads back as appended.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;

use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{LogId, RaftLogReader, Vote};
use support::{entry, is_genuine, log_id, Rng, TypeConfig};
use walcodec::LogDirOptions;
use walcodec_raft::LogStore;

#[derive(Debug, Default)]
struct Model {
    entries: BTreeMap<u64, LogId<u64>>,
    purged: Option<LogId<u64>>,
    vote: Option<Vote<u64>>,
    committed: Option<LogId<u64>>,
}

impl Model {
    fn last(&self) -> Option<LogId<u64>> {
        self.entries.values().last().copied().or(self.purged)
    }

    fn next_index(&self) -> u64 {
        self.last().map_or(0, |l| l.index + 1)
    }
}

async fn open(path: &Path, segment_bytes: u64) -> LogStore<TypeConfig> {
    LogStore::<TypeConfig>::builder()
        .log_dir(
            LogDirOptions::new()
                .max_segment_bytes(segment_bytes)
                .clone(),
        )
        .open(path)
        .await
        .expect("reopen")
}

async fn check(store: &mut LogStore<TypeConfig>, model: &Model, step: usize) {
    let state = store.get_log_state().await.unwrap();
    assert_eq!(
        state.last_purged_log_id, model.purged,
        "step {step}: purged"
    );
    assert_eq!(state.last_log_id, model.last(), "step {step}: last log id");
    assert_eq!(
        store.read_vote().await.unwrap(),
        model.vote,
        "step {step}: vote"
    );
    assert_eq!(
        store.read_committed().await.unwrap(),
        model.committed,
        "step {step}: committed"
    );
}

async fn check_entries(store: &mut LogStore<TypeConfig>, model: &Model, step: usize) {
    let mut reader = store.get_log_reader().await;
    let entries = reader.try_get_log_entries(..).await.unwrap();
    let ids: Vec<LogId<u64>> = entries.iter().map(|e| e.log_id).collect();
    let expected: Vec<LogId<u64>> = model.entries.values().copied().collect();
    assert_eq!(ids, expected, "step {step}: entries");
    assert!(entries.iter().all(is_genuine), "step {step}: payloads");
    // A range in the middle, as a replication task asks for it.
    if let (Some(&first), Some(&last)) = (model.entries.keys().next(), model.entries.keys().last())
    {
        let from = first + (last - first) / 3;
        let got = reader.try_get_log_entries(from..=last).await.unwrap();
        assert_eq!(
            got.len() as u64,
            last - from + 1,
            "step {step}: middle range"
        );
        assert_eq!(got[0].log_id.index, from);
        let limited = reader
            .limited_get_log_entries(from, last + 1)
            .await
            .unwrap();
        assert!(!limited.is_empty() && limited[0].log_id.index == from);
    }
}

async fn run(seed: u64, steps: usize, segment_bytes: u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng::new(seed);
    let mut store = open(dir.path(), segment_bytes).await;
    let mut model = Model::default();
    let mut term = 1;
    for step in 0..steps {
        match rng.below(100) {
            // Append a batch, sometimes in a new term.
            0..=44 => {
                if rng.below(8) == 0 {
                    term += 1;
                }
                let first = model.next_index();
                let n = 1 + rng.below(12);
                let batch: Vec<_> = (first..first + n).map(|i| entry(term, i)).collect();
                store.blocking_append(batch).await.unwrap();
                for i in first..first + n {
                    model.entries.insert(i, log_id(term, i));
                }
            }
            45..=54 => {
                let current = model.vote.map_or(0, |v| v.leader_id.term);
                let vote = Vote::new(current + rng.below(2), 1 + rng.below(3));
                store.save_vote(&vote).await.unwrap();
                model.vote = Some(vote);
            }
            55..=69 => {
                // Committed moves forward within what the log holds.
                if let Some(last) = model.entries.values().last().copied() {
                    let from = model.committed.map_or(0, |c| c.index);
                    let index = from + rng.below(last.index.saturating_sub(from) + 1);
                    let committed = model.entries.get(&index).copied().or(model.committed);
                    store.save_committed(committed).await.unwrap();
                    model.committed = committed;
                }
            }
            70..=79 => {
                // Truncate uncommitted entries, as a follower does on a conflict.
                let floor = model.committed.map_or(0, |c| c.index + 1);
                let candidates: Vec<u64> = model.entries.range(floor..).map(|(&i, _)| i).collect();
                if !candidates.is_empty() {
                    let index = candidates[rng.below(candidates.len() as u64) as usize];
                    let id = model.entries[&index];
                    store.truncate(id).await.unwrap();
                    drop(model.entries.split_off(&index));
                }
            }
            80..=89 => {
                // Purge up to the committed id, sometimes past the last entry (as
                // after installing a snapshot).
                let target = if rng.below(6) == 0 {
                    let next = model.next_index() + rng.below(5);
                    term += 1;
                    Some(log_id(term, next))
                } else {
                    model.committed
                };
                if let Some(purged) = target {
                    if model.purged.is_none_or(|p| p < purged) {
                        store.purge(purged).await.unwrap();
                        model.entries = model.entries.split_off(&(purged.index + 1));
                        model.purged = Some(purged);
                        if model.committed.is_none_or(|c| c < purged) {
                            // openraft purges only what is applied, so committed.
                            model.committed = Some(purged);
                            store.save_committed(Some(purged)).await.unwrap();
                        }
                    }
                }
            }
            _ => {
                store.close().await.unwrap();
                store = open(dir.path(), segment_bytes).await;
                check(&mut store, &model, step).await;
                check_entries(&mut store, &model, step).await;
            }
        }
        check(&mut store, &model, step).await;
    }
    check_entries(&mut store, &model, steps).await;
    store.close().await.unwrap();
    let mut store = open(dir.path(), segment_bytes).await;
    check(&mut store, &model, steps).await;
    check_entries(&mut store, &model, steps).await;
    store.close().await.unwrap();
}

/// Runs `run(seed, steps, segment_bytes)` for each seed at once, each in its own
/// directory (the seeds' syncs overlap, so a loaded disk slows them once, not once
/// per seed), and names the seeds that failed. Each seed's steps stay in order, so
/// a seed replays alone exactly.
async fn run_seeds(seeds: std::ops::RangeInclusive<u64>, steps: usize, segment_bytes: u64) {
    let runs: Vec<_> = seeds
        .map(|seed| (seed, tokio::spawn(run(seed, steps, segment_bytes))))
        .collect();
    let mut failed = Vec::new();
    for (seed, run) in runs {
        if run.await.is_err() {
            failed.push(seed);
        }
    }
    assert!(
        failed.is_empty(),
        "seeds {failed:?} failed (their panics are above)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_operations_match_the_model_across_reopens() {
    run_seeds(1..=12, 400, 1024).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_operations_match_the_model_with_large_segments() {
    run_seeds(100..=103, 400, 64 << 20).await;
}
