//! Starting a node of the bench's clusters: one Raft config for every cluster the
//! bench builds, so that the stores are the only thing that differs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::storage::RaftLogStorage;
use openraft::Config;

use crate::network::Router;
use crate::state_machine::StateMachine;
use crate::types::{NodeId, Raft, Request, TypeConfig};

/// An error of any kind, as the bench's functions return them.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Long election timeouts: the machine is shared and a sync can stall for a
/// while; a leader change in the middle of a run would measure elections.
pub fn config() -> Result<Arc<Config>, BoxError> {
    let config = Config {
        heartbeat_interval: 100,
        election_timeout_min: 1500,
        election_timeout_max: 3000,
        ..Default::default()
    };
    Ok(Arc::new(config.validate()?))
}

/// Starts node `id` on `log_store` and adds it to `router`.
pub async fn start<LS>(router: &Router, id: NodeId, log_store: LS) -> Result<(), BoxError>
where
    LS: RaftLogStorage<TypeConfig>,
{
    let raft: Raft = Raft::new(
        id,
        config()?,
        router.clone(),
        log_store,
        StateMachine::default(),
    )
    .await?;
    router.add(id, raft);
    Ok(())
}

/// One client per handle in `leaders`, all at once: client `c` writes
/// `request(c, i)` for `i` in `0..per_client`, one at a time, each awaited before
/// the next. Returns the latency of every write.
pub async fn clients<F>(
    leaders: Vec<Raft>,
    per_client: u64,
    request: F,
) -> Result<Vec<Duration>, BoxError>
where
    F: Fn(usize, u64) -> Request + Clone + Send + 'static,
{
    let mut tasks = Vec::new();
    for (client, leader) in leaders.into_iter().enumerate() {
        let request = request.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(per_client as usize);
            for i in 0..per_client {
                let sent = Instant::now();
                leader.client_write(request(client, i)).await?;
                latencies.push(sent.elapsed());
            }
            Ok::<_, BoxError>(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await??);
    }
    Ok(latencies)
}
