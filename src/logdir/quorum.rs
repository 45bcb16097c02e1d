//! Synchronous replicas: who holds the bytes an append acknowledges.
//!
//! With [`LogDirOptions::sync_replicas(n)`](crate::LogDirOptions::sync_replicas),
//! an append returns `Ok` once its record is durable on the primary *and* on `n`
//! connected replicas, each of which acknowledged its own durable end (the
//! replication layer reports those acknowledgements here). The end that `n`
//! replicas hold is a watch ([`LogDir::replicated_end`](crate::LogDir::replicated_end));
//! an append waits on it.
//!
//! | connected replicas | appends |
//! |---|---|
//! | at least `n` | wait for `n` acknowledgements of their end (one round trip serves every record of a commit) |
//! | fewer than `n`, for less than `replica_timeout` | wait (a replica reconnecting after a cut) |
//! | fewer than `n`, for `replica_timeout` or longer | fail with [`Error::ReplicasUnavailable`], those waiting and new ones alike, until enough replicas are back |
//!
//! Failing rather than waiting forever (PostgreSQL's choice) or acknowledging
//! anyway (a silent downgrade) is the choice here: a caller learns within a bounded
//! time that the promise cannot be kept, and decides. The cost is that a failed
//! append has an unknown outcome: its record may be durable on the primary (it is
//! written before the wait) and reaches the replicas once they return, as every
//! record does. Treat it like a timeout: retry idempotently, or read back.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::error::Error;
use crate::position::LogPosition;

/// The connected replicas' acknowledgements, and the end `need` of them hold.
#[derive(Debug)]
pub(crate) struct Quorum {
    /// How many replicas must hold a record before its append returns `Ok`.
    need: usize,
    /// How long fewer than `need` may be connected before appends fail.
    timeout: Duration,
    state: Mutex<State>,
    /// The end `need` replicas acknowledged: it only moves on (but for a
    /// truncation of the primary below it).
    replicated: watch::Sender<LogPosition>,
    /// How many replicas are connected: waiting appends look again when it
    /// changes.
    connected: watch::Sender<usize>,
}

#[derive(Debug)]
struct State {
    /// Each connected replica's acknowledged end (`None` before its first).
    acks: BTreeMap<u64, Option<LogPosition>>,
    next_id: u64,
    /// Since when fewer than `need` replicas are connected (`None`: enough are).
    short_since: Option<Instant>,
}

impl Quorum {
    pub(crate) fn new(need: usize, timeout: Duration) -> Quorum {
        Quorum {
            need,
            timeout,
            state: Mutex::new(State {
                acks: BTreeMap::new(),
                next_id: 0,
                short_since: (need > 0).then(Instant::now),
            }),
            replicated: watch::channel(LogPosition::START).0,
            connected: watch::channel(0).0,
        }
    }

    /// Whether appends wait for replicas at all.
    pub(crate) fn is_sync(&self) -> bool {
        self.need > 0
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<LogPosition> {
        self.replicated.subscribe()
    }

    /// A replica that completed its handshake: it counts as connected until the
    /// returned member is dropped.
    pub(crate) fn join(self: &Arc<Self>) -> Member {
        let mut state = self.state();
        let id = state.next_id;
        state.next_id += 1;
        state.acks.insert(id, None);
        if state.acks.len() >= self.need {
            state.short_since = None;
        }
        let connected = state.acks.len();
        drop(state);
        self.connected.send_replace(connected);
        Member {
            quorum: Arc::clone(self),
            id,
        }
    }

    /// The end that `need` replicas hold, from their acknowledgements.
    fn recompute(&self, state: &State) {
        if self.need == 0 {
            return;
        }
        let mut acked: Vec<LogPosition> = state.acks.values().filter_map(|a| *a).collect();
        if acked.len() < self.need {
            return;
        }
        acked.sort_unstable_by(|a, b| b.cmp(a));
        let held = acked[self.need - 1];
        self.replicated.send_if_modified(|end| {
            if held > *end {
                *end = held;
                true
            } else {
                false
            }
        });
    }

    /// The primary's log was cut back to `pos`: nothing past it is held anywhere.
    pub(crate) fn truncated(&self, pos: LogPosition) {
        let mut state = self.state();
        for ack in state.acks.values_mut().flatten() {
            *ack = (*ack).min(pos);
        }
        drop(state);
        self.replicated.send_if_modified(|end| {
            if *end > pos {
                *end = pos;
                true
            } else {
                false
            }
        });
    }

    /// Fails when fewer than `need` replicas have been connected for the
    /// timeout or longer.
    pub(crate) fn check(&self) -> Result<(), Error> {
        let state = self.state();
        match state.short_since {
            Some(since) if Instant::now() >= since + self.timeout => {
                Err(Error::ReplicasUnavailable {
                    needed: self.need,
                    connected: state.acks.len(),
                })
            }
            _ => Ok(()),
        }
    }

    /// Waits until `need` replicas hold `end`; fails once fewer than `need` have
    /// been connected for the timeout. Cancel-safe (it only watches).
    pub(crate) async fn wait(&self, end: LogPosition) -> Result<(), Error> {
        if self.need == 0 {
            return Ok(());
        }
        let mut replicated = self.replicated.subscribe();
        let mut connected = self.connected.subscribe();
        loop {
            connected.borrow_and_update();
            if *replicated.borrow_and_update() >= end {
                return Ok(());
            }
            self.check()?;
            let deadline = self.state().short_since.map(|since| since + self.timeout);
            tokio::select! {
                _ = replicated.changed() => {}
                _ = connected.changed() => {}
                _ = sleep_until(deadline) => {}
            }
        }
    }
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// A connected replica, counted until dropped.
#[derive(Debug)]
pub(crate) struct Member {
    quorum: Arc<Quorum>,
    id: u64,
}

impl Member {
    /// The replica acknowledged `end` as durable on its disk.
    pub(crate) fn ack(&self, end: LogPosition) {
        let mut state = self.quorum.state();
        if let Some(ack) = state.acks.get_mut(&self.id) {
            *ack = Some(ack.map_or(end, |a| a.max(end)));
        }
        self.quorum.recompute(&state);
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let mut state = self.quorum.state();
        state.acks.remove(&self.id);
        if state.acks.len() < self.quorum.need && state.short_since.is_none() {
            state.short_since = Some(Instant::now());
        }
        let connected = state.acks.len();
        drop(state);
        self.quorum.connected.send_replace(connected);
    }
}
