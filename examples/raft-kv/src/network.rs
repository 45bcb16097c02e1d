//! The Raft network: openraft's RPCs as HTTP `POST`s with JSON bodies to the
//! other nodes' `/raft-append`, `/raft-vote` and `/raft-snapshot` (served by
//! [`api`](crate::api)), through one shared connection pool; a group of a node
//! running several calls the same group's endpoints
//! ([`group_prefix`](crate::node::group_prefix)).

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{NodeId, TypeConfig};

/// Makes a [`Connection`] to each node openraft replicates to.
#[derive(Debug, Clone, Default)]
pub struct Network {
    client: reqwest::Client,
    /// Before each RPC's path: empty for a node's one group, the group's
    /// prefix on a node running several.
    prefix: String,
}

impl Network {
    /// The network of group `group` of a node running several (its RPCs go to
    /// the same group on the other nodes), through `client`'s connection pool
    /// (a clone of one client: the node's groups share its connections).
    pub fn for_group(client: reqwest::Client, group: u64) -> Network {
        Network {
            client,
            prefix: crate::node::group_prefix(group),
        }
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Connection {
        Connection {
            client: self.client.clone(),
            target,
            base: format!("http://{}{}", node.addr, self.prefix),
        }
    }
}

/// The RPCs to one node.
#[derive(Debug)]
pub struct Connection {
    client: reqwest::Client,
    target: NodeId,
    /// `http://host:port` and the group's prefix.
    base: String,
}

impl Connection {
    /// Posts `request` to `path` and reads back the node's `Result` as JSON; gives
    /// up after openraft's hard time limit for the call.
    async fn call<Req, Resp, Err>(
        &self,
        path: &str,
        request: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RPCError<NodeId, BasicNode, Err>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        Err: std::error::Error + DeserializeOwned,
    {
        let response = self
            .client
            .post(format!("{}/{path}", self.base))
            .timeout(option.hard_ttl())
            .json(request)
            .send()
            .await
            .map_err(|e| {
                // Nobody listening: openraft backs off before trying it again.
                if e.is_connect() {
                    RPCError::Unreachable(Unreachable::new(&e))
                } else {
                    RPCError::Network(NetworkError::new(&e))
                }
            })?;
        let result: Result<Resp, Err> = response
            .json()
            .await
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        request: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call("raft-append", &request, &option).await
    }

    async fn install_snapshot(
        &mut self,
        request: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        self.call("raft-snapshot", &request, &option).await
    }

    async fn vote(
        &mut self,
        request: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.call("raft-vote", &request, &option).await
    }
}
