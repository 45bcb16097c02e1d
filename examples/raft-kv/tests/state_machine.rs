//! The key-value state machine: what `apply` answers, and snapshots that survive
//! a restart (built or installed) so that openraft may purge the log behind them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use openraft::storage::RaftStateMachine;
use openraft::{
    BasicNode, CommittedLeaderId, Entry, EntryPayload, LogId, Membership, RaftSnapshotBuilder,
};
use walcodec_raft_kv::store::{Request, Response, StateMachineStore, SNAPSHOT_FILE};
use walcodec_raft_kv::TypeConfig;

fn log_id(term: u64, index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

fn set(index: u64, key: &str, value: &str) -> Entry<TypeConfig> {
    Entry {
        log_id: log_id(1, index),
        payload: EntryPayload::Normal(Request::Set {
            key: key.to_string(),
            value: value.to_string(),
        }),
    }
}

fn membership() -> Membership<u64, BasicNode> {
    let nodes: BTreeMap<u64, BasicNode> = (1..=3)
        .map(|id| {
            (
                id,
                BasicNode {
                    addr: format!("127.0.0.1:{}", 21000 + id),
                },
            )
        })
        .collect();
    Membership::new(vec![BTreeSet::from([1, 2, 3])], nodes)
}

/// Entries 1..=5: a membership, two sets, an overwrite, a delete.
fn entries() -> Vec<Entry<TypeConfig>> {
    vec![
        Entry {
            log_id: log_id(1, 1),
            payload: EntryPayload::Membership(membership()),
        },
        set(2, "a", "1"),
        set(3, "b", "2"),
        set(4, "a", "3"),
        Entry {
            log_id: log_id(1, 5),
            payload: EntryPayload::Normal(Request::Delete {
                key: "b".to_string(),
            }),
        },
    ]
}

#[tokio::test]
async fn apply_answers_previous_values_and_tracks_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut sm = Arc::new(StateMachineStore::open(dir.path()).await.unwrap());
    let responses = sm.apply(entries()).await.unwrap();
    let previous: Vec<_> = responses
        .into_iter()
        .map(|r: Response| r.previous)
        .collect();
    assert_eq!(
        previous,
        [None, None, None, Some("1".into()), Some("2".into())]
    );
    let (applied, stored) = sm.applied_state().await.unwrap();
    assert_eq!(applied, Some(log_id(1, 5)));
    assert_eq!(stored.log_id(), &Some(log_id(1, 1)));
    assert_eq!(sm.get("a").await.as_deref(), Some("3"));
    assert_eq!(sm.get("b").await, None);
    // Nothing on disk until a snapshot is built.
    assert!(!dir.path().join(SNAPSHOT_FILE).exists());
}

#[tokio::test]
async fn a_built_snapshot_is_on_disk_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let mut sm = Arc::new(StateMachineStore::open(dir.path()).await.unwrap());
    sm.apply(entries()).await.unwrap();
    let snapshot = sm
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    assert_eq!(snapshot.meta.last_log_id, Some(log_id(1, 5)));
    // Applied after the snapshot: not in it, so gone after a restart (openraft
    // replays it from the log).
    sm.apply([set(6, "c", "4")]).await.unwrap();
    let before = sm.data().await;
    drop(sm);

    let mut reopened = Arc::new(StateMachineStore::open(dir.path()).await.unwrap());
    let data = reopened.data().await;
    assert_eq!(data.last_applied, Some(log_id(1, 5)));
    assert_eq!(data.last_membership, before.last_membership);
    assert_eq!(
        data.kv,
        BTreeMap::from([("a".to_string(), "3".to_string())])
    );
    let current = reopened.get_current_snapshot().await.unwrap().unwrap();
    assert_eq!(current.meta, snapshot.meta);
    assert_eq!(
        current.snapshot.into_inner(),
        snapshot.snapshot.into_inner()
    );
}

#[tokio::test]
async fn an_installed_snapshot_replaces_the_state_and_survives_a_restart() {
    let leader_dir = tempfile::tempdir().unwrap();
    let mut leader = Arc::new(StateMachineStore::open(leader_dir.path()).await.unwrap());
    leader.apply(entries()).await.unwrap();
    let snapshot = leader
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let mut follower = Arc::new(StateMachineStore::open(dir.path()).await.unwrap());
    follower.apply([set(1, "stale", "x")]).await.unwrap();
    let mut data = follower.begin_receiving_snapshot().await.unwrap();
    data.get_mut()
        .extend_from_slice(snapshot.snapshot.get_ref());
    follower
        .install_snapshot(&snapshot.meta, data)
        .await
        .unwrap();
    assert_eq!(follower.data().await, leader.data().await);
    drop(follower);

    let mut reopened = Arc::new(StateMachineStore::open(dir.path()).await.unwrap());
    assert_eq!(reopened.data().await, leader.data().await);
    let current = reopened.get_current_snapshot().await.unwrap().unwrap();
    assert_eq!(current.meta, snapshot.meta);
}

#[tokio::test]
async fn a_damaged_snapshot_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(SNAPSHOT_FILE), b"{\"not\": \"a snapshot\"}").unwrap();
    assert!(StateMachineStore::open(dir.path()).await.is_err());
    std::fs::write(dir.path().join(SNAPSHOT_FILE), b"{}\n{}").unwrap();
    assert!(StateMachineStore::open(dir.path()).await.is_err());
}
