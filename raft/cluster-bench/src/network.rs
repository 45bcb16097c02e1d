//! The network: function calls into the target node's `Raft` handle, as in
//! openraft's own `cluster_benchmark`, so that the figures measure the log stores
//! and openraft, not sockets.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use openraft::error::{InstallSnapshotError, RPCError, RaftError, RemoteError};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};

use crate::types::{NodeId, Raft, TypeConfig};

/// Every node of the cluster by id; each node's network factory is a clone.
#[derive(Clone, Default)]
pub struct Router {
    table: Arc<Mutex<BTreeMap<NodeId, Raft>>>,
}

impl Router {
    pub fn add(&self, id: NodeId, raft: Raft) {
        self.table.lock().unwrap().insert(id, raft);
    }

    pub fn get(&self, id: NodeId) -> Raft {
        self.table.lock().unwrap()[&id].clone()
    }

    /// Shuts every node down (their log stores are dropped with them).
    pub async fn shutdown(&self) {
        let rafts: Vec<Raft> = std::mem::take(&mut *self.table.lock().unwrap())
            .into_values()
            .collect();
        for raft in rafts {
            let _ = raft.shutdown().await;
        }
    }
}

impl RaftNetworkFactory<TypeConfig> for Router {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, _node: &()) -> Connection {
        Connection {
            target,
            raft: self.get(target),
        }
    }
}

/// A "connection" to one node: its handle.
pub struct Connection {
    target: NodeId,
    raft: Raft,
}

type RpcResult<T, E = openraft::error::Infallible> =
    Result<T, RPCError<NodeId, (), RaftError<NodeId, E>>>;

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        self.raft
            .append_entries(rpc)
            .await
            .map_err(|e| RemoteError::new(self.target, e).into())
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        self.raft
            .install_snapshot(rpc)
            .await
            .map_err(|e| RemoteError::new(self.target, e).into())
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>> {
        self.raft
            .vote(rpc)
            .await
            .map_err(|e| RemoteError::new(self.target, e).into())
    }
}
