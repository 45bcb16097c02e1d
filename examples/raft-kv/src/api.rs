//! The HTTP endpoints of a node, as in openraft's own examples: JSON bodies in,
//! and openraft's `Result` as JSON out (`{"Ok": ...}` or `{"Err": ...}`). A node
//! of several groups serves each group's at `/groups/{group}/...`
//! ([`group_prefix`](crate::node::group_prefix)).
//!
//! | endpoint | body | answers |
//! |---|---|---|
//! | `POST /write` | a [`Request`] | `Result<ClientWriteResponse, _>`; on a follower, an error naming the leader |
//! | `POST /read` | a key | `Result<Option<String>, _>`, this node's value |
//! | `POST /consistent_read` | a key | the same after `ensure_linearizable` (leader only) |
//! | `GET /dump` | | the whole state machine ([`Dump`]) |
//! | `POST /init` | `[[id, "host:port"], ...]` (`[]`: this node alone) | `Result<(), InitializeError>` |
//! | `POST /add-learner` | `[id, "host:port"]` | `Result<ClientWriteResponse, _>` |
//! | `POST /change-membership` | `[id, ...]` | `Result<ClientWriteResponse, _>` |
//! | `GET /metrics` | | `Result<RaftMetrics, _>` |
//! | `POST /raft-append`, `/raft-vote`, `/raft-snapshot` | openraft's RPCs | their responses |

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, State};
use axum::routing::{get, post};
use axum::{Json, Router};
// openraft's `Infallible` (not std's): it is (de)serializable.
use openraft::error::{
    CheckIsLeaderError, ClientWriteError, Infallible, InitializeError, RaftError,
};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, ClientWriteResponse, InstallSnapshotRequest,
    InstallSnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{BasicNode, RaftMetrics};
use serde::Serialize;

use crate::store::{Request, StateMachineData, StateMachineStore};
use crate::{NodeId, Raft, TypeConfig};

/// What the handlers share.
pub struct App {
    /// This node's id.
    pub id: NodeId,
    /// This node's address (`host:port`), for `/init` with an empty list.
    pub addr: String,
    /// This node's Raft.
    pub raft: Raft,
    /// This node's state machine, for reads.
    pub state_machine: Arc<StateMachineStore>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("id", &self.id)
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// The largest request body: a snapshot chunk is sent as JSON numbers, up to
/// about four bytes per byte of a 1 MiB chunk (see [`crate::node`]).
const MAX_BODY: usize = 16 << 20;

/// The node's endpoints.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        // Raft's own RPCs, from the other nodes.
        .route("/raft-append", post(append))
        .route("/raft-vote", post(vote))
        .route("/raft-snapshot", post(snapshot))
        // Cluster management.
        .route("/init", post(init))
        .route("/add-learner", post(add_learner))
        .route("/change-membership", post(change_membership))
        .route("/metrics", get(metrics))
        // The application.
        .route("/write", post(write))
        .route("/read", post(read))
        .route("/consistent_read", post(consistent_read))
        .route("/dump", get(dump))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(app)
}

type WriteResult =
    Result<ClientWriteResponse<TypeConfig>, RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>>;

async fn append(
    State(app): State<Arc<App>>,
    Json(request): Json<AppendEntriesRequest<TypeConfig>>,
) -> Json<Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>> {
    Json(app.raft.append_entries(request).await)
}

async fn vote(
    State(app): State<Arc<App>>,
    Json(request): Json<VoteRequest<NodeId>>,
) -> Json<Result<VoteResponse<NodeId>, RaftError<NodeId>>> {
    Json(app.raft.vote(request).await)
}

async fn snapshot(
    State(app): State<Arc<App>>,
    Json(request): Json<InstallSnapshotRequest<TypeConfig>>,
) -> Json<
    Result<
        InstallSnapshotResponse<NodeId>,
        RaftError<NodeId, openraft::error::InstallSnapshotError>,
    >,
> {
    Json(app.raft.install_snapshot(request).await)
}

async fn init(
    State(app): State<Arc<App>>,
    Json(nodes): Json<Vec<(NodeId, String)>>,
) -> Json<Result<(), RaftError<NodeId, InitializeError<NodeId, BasicNode>>>> {
    let mut members = BTreeMap::new();
    if nodes.is_empty() {
        members.insert(
            app.id,
            BasicNode {
                addr: app.addr.clone(),
            },
        );
    }
    for (id, addr) in nodes {
        members.insert(id, BasicNode { addr });
    }
    Json(app.raft.initialize(members).await)
}

async fn add_learner(
    State(app): State<Arc<App>>,
    Json((id, addr)): Json<(NodeId, String)>,
) -> Json<WriteResult> {
    Json(app.raft.add_learner(id, BasicNode { addr }, true).await)
}

async fn change_membership(
    State(app): State<Arc<App>>,
    Json(members): Json<BTreeSet<NodeId>>,
) -> Json<WriteResult> {
    Json(app.raft.change_membership(members, false).await)
}

async fn metrics(
    State(app): State<Arc<App>>,
) -> Json<Result<RaftMetrics<NodeId, BasicNode>, Infallible>> {
    Json(Ok(app.raft.metrics().borrow().clone()))
}

async fn write(State(app): State<Arc<App>>, Json(request): Json<Request>) -> Json<WriteResult> {
    Json(app.raft.client_write(request).await)
}

async fn read(
    State(app): State<Arc<App>>,
    Json(key): Json<String>,
) -> Json<Result<Option<String>, Infallible>> {
    Json(Ok(app.state_machine.get(&key).await))
}

async fn consistent_read(
    State(app): State<Arc<App>>,
    Json(key): Json<String>,
) -> Json<Result<Option<String>, RaftError<NodeId, CheckIsLeaderError<NodeId, BasicNode>>>> {
    // Once the leader has confirmed it still leads and its state machine has
    // caught up with its commit index, its value is the latest acknowledged one.
    match app.raft.ensure_linearizable().await {
        Ok(_) => Json(Ok(app.state_machine.get(&key).await)),
        Err(e) => Json(Err(e)),
    }
}

/// The answer of `GET /dump`.
#[derive(Debug, Serialize)]
pub struct Dump {
    /// The state machine.
    #[serde(flatten)]
    pub data: StateMachineData,
    /// Snapshots installed from a leader since the node started.
    pub snapshots_installed: u64,
}

async fn dump(State(app): State<Arc<App>>) -> Json<Result<Dump, Infallible>> {
    Json(Ok(Dump {
        data: app.state_machine.data().await,
        snapshots_installed: app.state_machine.snapshots_installed(),
    }))
}
