//! One node over real HTTP on localhost: the endpoints answer as documented, and a
//! stopped node comes back from its directory (log and snapshot) with every
//! acknowledged write; the same for a node of several groups on one shared log,
//! each group with its own writes alone. The three-node failover is scripts/raft-kill-leader.sh.

use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::oneshot;
use walcodec_raft_kv::dump::{dump_group_log, dump_log};
use walcodec_raft_kv::node::{self, group_prefix, NodeOptions};
use walcodec_raft_kv::store::Request;

fn options(dir: &std::path::Path) -> NodeOptions {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    NodeOptions {
        id: 1,
        addr: format!("127.0.0.1:{port}"),
        dir: dir.to_path_buf(),
        heartbeat_ms: 50,
        election_timeout_ms: (150, 300),
        // Snapshots and purges happen within the test's writes.
        snapshot_every: 10,
        keep_before_snapshot: 2,
        segment_bytes: 512,
        groups: None,
    }
}

struct Running {
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
    client: reqwest::Client,
    base: String,
}

impl Running {
    async fn start(options: NodeOptions) -> Running {
        let (stop, stopped) = oneshot::channel::<()>();
        let base = format!("http://{}", options.addr);
        let task = tokio::spawn(async move {
            node::run(options, async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        });
        let running = Running {
            stop,
            task,
            client: reqwest::Client::new(),
            base,
        };
        for _ in 0..200 {
            if running
                .client
                .get(running.url("/metrics"))
                .send()
                .await
                .is_ok()
            {
                return running;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the node does not answer");
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let response = self
            .client
            .post(self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "{path}: {}",
            response.status()
        );
        response.json().await.unwrap()
    }

    async fn get(&self, path: &str) -> Value {
        self.client
            .get(self.url(path))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Waits until the node leads and has applied its whole log.
    async fn wait_leader(&self) -> Value {
        for _ in 0..500 {
            let metrics = self.get("/metrics").await["Ok"].clone();
            if metrics["state"] == "Leader"
                && metrics["last_applied"]["index"] == metrics["last_log_index"]
            {
                return metrics;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("no leader");
    }

    async fn stop(self) {
        self.stop.send(()).unwrap();
        self.task.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_serves_and_recovers_its_writes_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let options = options(dir.path());
    let node = Running::start(options.clone()).await;

    // Before init: a write is refused with openraft's error, not an HTTP one.
    let early = node
        .post("/write", json!({"Set": {"key": "k", "value": "v"}}))
        .await;
    assert!(early.get("Err").is_some(), "{early}");

    assert_eq!(node.post("/init", json!([])).await, json!({"Ok": null}));
    node.wait_leader().await;
    for i in 0..25 {
        let written = node
            .post(
                "/write",
                json!({"Set": {"key": format!("k{}", i % 20), "value": format!("v{i}")}}),
            )
            .await;
        let previous = &written["Ok"]["data"]["previous"];
        let expected = if i >= 20 {
            json!(format!("v{}", i - 20))
        } else {
            Value::Null
        };
        assert_eq!(*previous, expected, "{written}");
    }
    let deleted = node.post("/write", json!({"Delete": {"key": "k0"}})).await;
    assert_eq!(deleted["Ok"]["data"]["previous"], json!("v20"));
    assert_eq!(node.post("/read", json!("k1")).await, json!({"Ok": "v21"}));
    assert_eq!(
        node.post("/consistent_read", json!("k19")).await,
        json!({"Ok": "v19"})
    );
    assert_eq!(node.post("/read", json!("k0")).await, json!({"Ok": null}));
    let metrics = node.wait_leader().await;
    assert!(
        metrics["snapshot"]["index"].as_u64().unwrap() >= 10,
        "a snapshot was built: {metrics}"
    );
    let before = node.get("/dump").await["Ok"].clone();
    assert_eq!(before["kv"].as_object().unwrap().len(), 19);
    node.stop().await;

    // The log after a graceful stop: the entries since the last purge, in order.
    let log = dump_log(dir.path()).await.unwrap();
    let last = log.last.unwrap();
    assert_eq!(log.committed, Some(last));
    let purged = log.purged.expect("the snapshot let openraft purge");
    let indexes: Vec<u64> = log.entries.iter().map(|e| e.log_id.index).collect();
    assert_eq!(indexes, (purged.index + 1..=last.index).collect::<Vec<_>>());

    // Restarted on its directory: the snapshot, then the log after it.
    let node = Running::start(options).await;
    node.wait_leader().await;
    let after = node.get("/dump").await["Ok"].clone();
    assert_eq!(after["kv"], before["kv"]);
    assert_eq!(
        node.post("/consistent_read", json!("k5")).await,
        json!({"Ok": "v5"})
    );
    node.stop().await;
}

async fn group_read(node: &Running, group: u64, key: &str) -> Value {
    node.post(&format!("{}/read", group_prefix(group)), json!(key))
        .await
}

/// Waits until group `prefix` of `node` leads and has applied its whole log.
async fn wait_group_leader(node: &Running, prefix: &str) {
    for _ in 0..500 {
        let metrics = node.get(&format!("{prefix}/metrics")).await["Ok"].clone();
        if metrics["state"] == "Leader"
            && metrics["last_applied"]["index"] == metrics["last_log_index"]
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("group {prefix} has no leader");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_of_several_groups_keeps_each_groups_writes_apart_on_one_log() {
    let dir = tempfile::tempdir().unwrap();
    let options = NodeOptions {
        groups: Some(3),
        ..options(dir.path())
    };
    let node = Running::start(options.clone()).await;
    for group in 0..3u64 {
        let prefix = group_prefix(group);
        let init = node.post(&format!("{prefix}/init"), json!([])).await;
        assert_eq!(init, json!({"Ok": null}));
        wait_group_leader(&node, &prefix).await;
    }
    // The same keys in every group, each group its own values; group 2 writes
    // more, so that it builds snapshots and purges while the others do not.
    for i in 0..30u64 {
        for group in 0..3u64 {
            if i >= 5 && group != 2 {
                continue;
            }
            let written = node
                .post(
                    &format!("{}/write", group_prefix(group)),
                    json!({"Set": {"key": format!("k{}", i % 5), "value": format!("g{group}v{i}")}}),
                )
                .await;
            assert!(written.get("Ok").is_some(), "{written}");
        }
    }
    assert_eq!(group_read(&node, 0, "k1").await, json!({"Ok": "g0v1"}));
    assert_eq!(group_read(&node, 1, "k2").await, json!({"Ok": "g1v2"}));
    assert_eq!(group_read(&node, 2, "k3").await, json!({"Ok": "g2v28"}));
    let mut before = Vec::new();
    for group in 0..3u64 {
        before.push(node.get(&format!("{}/dump", group_prefix(group))).await["Ok"]["kv"].clone());
    }
    // No endpoints at the root: a group is always named.
    let root = node
        .client
        .post(node.url("/write"))
        .json(&json!({"Set": {"key": "k", "value": "v"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(root.status(), reqwest::StatusCode::NOT_FOUND);
    node.stop().await;

    // Each group's log on the shared log holds its own writes alone.
    for group in 0..3u64 {
        let log = dump_group_log(dir.path(), group).await.unwrap();
        let writes: Vec<String> = log
            .entries
            .iter()
            .filter_map(|e| match &e.payload {
                openraft::EntryPayload::Normal(Request::Set { value, .. }) => Some(value.clone()),
                _ => None,
            })
            .collect();
        assert!(!writes.is_empty(), "group {group}: {writes:?}");
        assert!(
            writes.iter().all(|v| v.starts_with(&format!("g{group}v"))),
            "group {group}: {writes:?}"
        );
        let indexes: Vec<u64> = log.entries.iter().map(|e| e.log_id.index).collect();
        let first = log.purged.map_or(0, |p| p.index + 1);
        assert_eq!(
            indexes,
            (first..=log.last.unwrap().index).collect::<Vec<_>>()
        );
        if group == 2 {
            assert!(log.purged.is_some(), "group 2 purged after its snapshots");
        } else {
            assert_eq!(log.purged, None, "group {group} wrote too little to purge");
        }
    }

    // Restarted: each group from its snapshot and its part of the shared log.
    let node = Running::start(options).await;
    for group in 0..3u64 {
        let prefix = group_prefix(group);
        wait_group_leader(&node, &prefix).await;
        let after = node.get(&format!("{prefix}/dump")).await["Ok"]["kv"].clone();
        assert_eq!(after, before[group as usize], "group {group}");
    }
    assert_eq!(group_read(&node, 1, "k2").await, json!({"Ok": "g1v2"}));
    node.stop().await;
}
