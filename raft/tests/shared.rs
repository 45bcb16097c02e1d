//! `SharedLog`: many groups' stores on one log. openraft's suite on one group
//! while others write; a seeded model of many groups with closes and reopens;
//! group commit across groups (one sync for what every group queued, and for
//! the groups a sync released, which queue again before the next batch); a bad call
//! failing alone; an I/O failure poisoning every group; groups kept apart.

use crate::support;

use std::fs::File;
use std::future::Future;
use std::io::{self, Cursor};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;

use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::testing::{StoreBuilder, Suite};
use openraft::{RaftLogReader, StorageError, Vote};
use support::ops::{Model, Workload};
use support::{entry, log_id, MemStateMachine, Rng, TypeConfig};
use tempfile::TempDir;
use tokio::task::JoinHandle;
use walcodec::testing::{DirStorage, FileStorage, Storage};
use walcodec::LogDirOptions;
use walcodec_raft::{Error, LogStore, SharedLog};

openraft::declare_raft_types!(
    /// A second type config, for a group opened as another type.
    pub Other: D = u64, R = u64
);

/// A case's directory, and the other groups' writers, stopped when the case ends.
struct Guard {
    _dir: TempDir,
    others: Vec<JoinHandle<()>>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        for task in &self.others {
            task.abort();
        }
    }
}

/// Group 0 of a fresh shared log, while groups 1 to 3 append (and purge) in a
/// loop on the same log.
struct Builder;

impl StoreBuilder<TypeConfig, LogStore<TypeConfig>, MemStateMachine, Guard> for Builder {
    async fn build(
        &self,
    ) -> Result<(Guard, LogStore<TypeConfig>, MemStateMachine), StorageError<u64>> {
        let dir = tempfile::tempdir().expect("temporary directory");
        let shared = SharedLog::builder()
            .log_dir(LogDirOptions::new().max_segment_bytes(4096))
            .open(dir.path())
            .await
            .expect("open the shared log");
        let mut others = Vec::new();
        for group in 1..=3 {
            let mut store = shared.store::<TypeConfig>(group).await.unwrap();
            others.push(tokio::spawn(async move {
                for i in 0.. {
                    if store.blocking_append([entry(7, i)]).await.is_err() {
                        return;
                    }
                    if i % 16 == 15 && store.purge(log_id(7, i - 8)).await.is_err() {
                        return;
                    }
                    tokio::task::yield_now().await;
                }
            }));
        }
        let store = shared.store::<TypeConfig>(0).await.unwrap();
        Ok((
            Guard { _dir: dir, others },
            store,
            MemStateMachine::default(),
        ))
    }
}

#[test]
fn openraft_suite_passes_on_a_group_while_others_write() {
    Suite::test_all(Builder).unwrap();
}

async fn open_shared(path: &Path, segment_bytes: u64) -> SharedLog {
    SharedLog::builder()
        .log_dir(LogDirOptions::new().max_segment_bytes(segment_bytes))
        .open(path)
        .await
        .expect("a shared log reopens")
}

/// Random calls across many groups (appends, votes, committed ids, truncations,
/// purges), with groups closed and opened again and the whole log closed and
/// reopened between them: every group holds what its own calls left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_groups_match_the_model_across_closes_and_reopens() {
    const GROUPS: u64 = 12;
    let seed = support::Rng::new(0x5eed).next() ^ std::process::id() as u64;
    eprintln!("shared model seed {seed}");
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    let mut shared = open_shared(dir.path(), 2048).await;
    let mut models: Vec<Model> = (0..GROUPS).map(|_| Model::default()).collect();
    let mut workloads: Vec<Workload> = (0..GROUPS)
        .map(|g| Workload::new(seed ^ g, &models[g as usize]))
        .collect();
    let mut stores: Vec<Option<LogStore<TypeConfig>>> = (0..GROUPS).map(|_| None).collect();
    for step in 0..1500 {
        let g = rng.below(GROUPS) as usize;
        match rng.below(100) {
            0..=3 => {
                // Close the group's store; its next call opens it again.
                if let Some(mut store) = stores[g].take() {
                    store.close().await.unwrap();
                }
                continue;
            }
            4 => {
                for store in stores.iter_mut().filter_map(Option::take) {
                    let mut store = store;
                    store.close().await.unwrap();
                }
                shared.close().await.unwrap();
                shared = open_shared(dir.path(), 2048).await;
                let mut expected: Vec<u64> = (0..GROUPS)
                    .filter(|&g| models[g as usize] != Model::default())
                    .collect();
                expected.sort_unstable();
                let listed = shared.groups();
                assert!(
                    expected.iter().all(|g| listed.contains(g)),
                    "step {step}: groups {listed:?} lack some of {expected:?}"
                );
                continue;
            }
            _ => {}
        }
        let store = match &mut stores[g] {
            Some(store) => store,
            slot => {
                let mut store = shared.store::<TypeConfig>(g as u64).await.unwrap();
                let found = Model::read(&mut store).await;
                assert_eq!(found, models[g], "step {step}: group {g} reopened");
                slot.insert(store)
            }
        };
        let op = workloads[g].next(&models[g]);
        op.execute(store, &models[g]).await;
        models[g].apply(&op);
    }
    for (g, store) in stores.iter_mut().enumerate() {
        let store = match store {
            Some(store) => store,
            slot => slot.insert(shared.store::<TypeConfig>(g as u64).await.unwrap()),
        };
        assert_eq!(Model::read(store).await, models[g], "group {g} at the end");
        store.close().await.unwrap();
    }
    shared.close().await.unwrap();
    let shared = open_shared(dir.path(), 2048).await;
    for g in 0..GROUPS {
        let mut store = shared.store::<TypeConfig>(g).await.unwrap();
        assert_eq!(
            Model::read(&mut store).await,
            models[g as usize],
            "group {g} after the last reopen"
        );
        store.close().await.unwrap();
    }
    shared.close().await.unwrap();
}

/// Segment syncs counted, and failing once `fail` is set.
#[derive(Debug, Default)]
struct Syncs {
    count: AtomicU64,
    fail: AtomicBool,
}

#[derive(Debug)]
struct CountingDir(Arc<Syncs>);

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
        if self.syncs.fail.load(Ordering::SeqCst) {
            return Err(io::Error::other("injected sync failure"));
        }
        self.syncs.count.fetch_add(1, Ordering::SeqCst);
        self.inner.sync()
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)
    }
}

async fn open_counted(path: &Path, syncs: &Arc<Syncs>) -> SharedLog {
    SharedLog::builder()
        .log_dir(LogDirOptions::new().dir_storage(Arc::new(CountingDir(Arc::clone(syncs)))))
        .open(path)
        .await
        .unwrap()
}

/// Queues an append without waiting for its flush (see committed_order.rs).
async fn start_append(store: &mut LogStore<TypeConfig>, term: u64, index: u64) {
    let mut append = std::pin::pin!(store.blocking_append([entry(term, index)]));
    std::future::poll_fn(|cx| {
        assert!(append.as_mut().poll(cx).is_pending());
        Poll::Ready(())
    })
    .await;
}

#[tokio::test(flavor = "current_thread")]
async fn what_every_group_queued_goes_out_with_one_sync() {
    const GROUPS: u64 = 32;
    let dir = tempfile::tempdir().unwrap();
    let syncs = Arc::new(Syncs::default());
    let shared = open_counted(dir.path(), &syncs).await;
    let mut stores = Vec::new();
    for g in 0..GROUPS {
        stores.push(shared.store::<TypeConfig>(g).await.unwrap());
    }
    let before = syncs.count.load(Ordering::SeqCst);
    // Every group's append queued before the writer runs, then a vote that
    // returns once it and everything before it are durable.
    for (g, store) in stores.iter_mut().enumerate() {
        start_append(store, 1, g as u64).await;
    }
    stores[0].save_vote(&Vote::new(1, 1)).await.unwrap();
    assert_eq!(
        syncs.count.load(Ordering::SeqCst) - before,
        1,
        "{GROUPS} groups' appends and a vote: one batch, one sync"
    );
    for store in &mut stores {
        store.close().await.unwrap();
    }
    shared.close().await.unwrap();
    // Durable, each in its own group and no other.
    let shared = SharedLog::open(dir.path()).await.unwrap();
    assert_eq!(shared.groups(), (0..GROUPS).collect::<Vec<_>>());
    for g in 0..GROUPS {
        let mut store = shared.store::<TypeConfig>(g).await.unwrap();
        let entries = store.try_get_log_entries(..).await.unwrap();
        let ids: Vec<_> = entries.iter().map(|e| e.log_id).collect();
        assert_eq!(ids, vec![log_id(1, g)], "group {g}");
        store.close().await.unwrap();
    }
    shared.close().await.unwrap();
}

/// One writer per group, each appending one entry at a time and awaiting its
/// flush (openraft's way): the groups a batch's sync released queue their next
/// entries before the next batch closes, so every round of appends shares one
/// sync. Without that, the first group to queue woke the log's writer ahead of
/// the rest, and the groups split into two cohorts taking turns: twice the syncs.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn groups_released_by_a_sync_share_the_next_one() {
    const GROUPS: u64 = 32;
    const ROUNDS: u64 = 40;
    let dir = tempfile::tempdir().unwrap();
    let syncs = Arc::new(Syncs::default());
    let shared = open_counted(dir.path(), &syncs).await;
    let mut stores = Vec::new();
    for g in 0..GROUPS {
        stores.push(shared.store::<TypeConfig>(g).await.unwrap());
    }
    let before = syncs.count.load(Ordering::SeqCst);
    let writers: Vec<_> = stores
        .into_iter()
        .map(|mut store| {
            tokio::spawn(async move {
                for i in 0..ROUNDS {
                    store.blocking_append([entry(1, i)]).await.unwrap();
                }
                store
            })
        })
        .collect();
    let mut stores = Vec::new();
    for writer in writers {
        stores.push(writer.await.unwrap());
    }
    let synced = syncs.count.load(Ordering::SeqCst) - before;
    // A round is one batch once the groups are in step (the first rounds may
    // take two while the writers start); two cohorts would take 2 * ROUNDS.
    assert!(
        synced <= ROUNDS * 5 / 4,
        "{synced} syncs for {ROUNDS} rounds of {GROUPS} groups' appends"
    );
    for mut store in stores {
        let entries = store.try_get_log_entries(..).await.unwrap();
        assert_eq!(entries.len() as u64, ROUNDS);
        store.close().await.unwrap();
    }
    shared.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_call_fails_alone_an_io_failure_fails_every_group() {
    let dir = tempfile::tempdir().unwrap();
    let syncs = Arc::new(Syncs::default());
    let shared = open_counted(dir.path(), &syncs).await;
    let mut one = shared.store::<TypeConfig>(1).await.unwrap();
    let mut two = shared.store::<TypeConfig>(2).await.unwrap();
    one.blocking_append((0..3).map(|i| entry(1, i)))
        .await
        .unwrap();
    // Entries that skip an index: refused before anything is written; the group
    // and its neighbour carry on.
    one.blocking_append([entry(1, 3), entry(1, 5)])
        .await
        .expect_err("an append with a gap is refused");
    two.blocking_append([entry(1, 0)]).await.unwrap();
    one.blocking_append([entry(1, 3)]).await.unwrap();
    assert_eq!(
        one.get_log_state().await.unwrap().last_log_id,
        Some(log_id(1, 3))
    );
    // The same group twice at once, or with another type config, is refused.
    assert!(matches!(
        shared.store::<TypeConfig>(1).await,
        Err(Error::GroupInUse { group: 1 })
    ));
    // An I/O failure poisons the log: every group's writes fail.
    syncs.fail.store(true, Ordering::SeqCst);
    one.blocking_append([entry(1, 4)])
        .await
        .expect_err("the failed sync reaches the callback");
    two.save_vote(&Vote::new(2, 2))
        .await
        .expect_err("another group's write fails too");
    let mut three = shared.store::<TypeConfig>(3).await.unwrap();
    three
        .save_vote(&Vote::new(1, 1))
        .await
        .expect_err("a group opened after the failure fails too");
    drop((one, two, three));
    assert!(matches!(shared.close().await, Err(Error::Poisoned(_))));
    // What was acknowledged before the failure is there.
    let shared = SharedLog::open(dir.path()).await.unwrap();
    let mut one = shared.store::<TypeConfig>(1).await.unwrap();
    assert_eq!(
        one.get_log_state().await.unwrap().last_log_id,
        Some(log_id(1, 3))
    );
    let mut two = shared.store::<TypeConfig>(2).await.unwrap();
    assert_eq!(
        two.get_log_state().await.unwrap().last_log_id,
        Some(log_id(1, 0))
    );
    assert_eq!(two.read_vote().await.unwrap(), None);
    one.close().await.unwrap();
    two.close().await.unwrap();
    shared.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_of_its_own_is_not_a_shared_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = LogStore::<TypeConfig>::open(dir.path()).await.unwrap();
    store.blocking_append([entry(1, 0)]).await.unwrap();
    store.close().await.unwrap();
    assert!(matches!(
        SharedLog::open(dir.path()).await,
        Err(Error::Decode { .. })
    ));
    let other = tempfile::tempdir().unwrap();
    let shared = SharedLog::open(other.path()).await.unwrap();
    let mut group = shared.store::<TypeConfig>(0).await.unwrap();
    group.blocking_append([entry(1, 0)]).await.unwrap();
    group.close().await.unwrap();
    assert!(matches!(
        shared.store::<Other>(0).await,
        Err(Error::GroupType { group: 0 })
    ));
    shared.close().await.unwrap();
    assert!(matches!(
        LogStore::<TypeConfig>::open(other.path()).await,
        Err(Error::Decode { .. })
    ));
}
