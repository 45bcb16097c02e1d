//! What a log directory reports (tracing events, metrics): rotations, purges, its size.
//! The metric names are listed in one place, [`crate::observe`].

use std::path::Path;
#[cfg(feature = "metrics")]
use std::sync::PoisonError;
use std::time::Duration;

use crate::observe::describe_metrics;
use crate::position::LogPosition;

/// What a log directory reports: built once when it opens.
pub(crate) struct DirObserver {
    #[cfg(any(feature = "tracing", feature = "metrics"))]
    name: std::sync::Arc<str>,
    #[cfg(feature = "metrics")]
    rotations: metrics::Counter,
    #[cfg(feature = "metrics")]
    purged: metrics::Counter,
    #[cfg(feature = "metrics")]
    retention_purged: metrics::Counter,
    #[cfg(feature = "metrics")]
    segments: metrics::Gauge,
    #[cfg(feature = "metrics")]
    dir_bytes: metrics::Gauge,
    /// How far behind each connected replica is, by connection, for the gauge of
    /// the furthest behind.
    #[cfg(feature = "metrics")]
    behind: std::sync::Mutex<std::collections::BTreeMap<u64, u64>>,
    /// The next replica connection's number.
    #[cfg(any(feature = "tracing", feature = "metrics"))]
    connections: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for DirObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirObserver").finish_non_exhaustive()
    }
}

impl DirObserver {
    /// The observer of the directory named `name` (the `log` label).
    #[allow(unused_variables)]
    pub(crate) fn new(name: &str) -> DirObserver {
        describe_metrics();
        DirObserver {
            #[cfg(any(feature = "tracing", feature = "metrics"))]
            name: name.into(),
            #[cfg(feature = "metrics")]
            rotations: metrics::counter!("walcodec_rotations_total", "log" => name.to_string()),
            #[cfg(feature = "metrics")]
            purged: metrics::counter!(
                "walcodec_purged_segments_total",
                "log" => name.to_string()
            ),
            #[cfg(feature = "metrics")]
            retention_purged: metrics::counter!(
                "walcodec_retention_purged_segments_total",
                "log" => name.to_string()
            ),
            #[cfg(feature = "metrics")]
            segments: metrics::gauge!("walcodec_segments", "log" => name.to_string()),
            #[cfg(feature = "metrics")]
            dir_bytes: metrics::gauge!("walcodec_dir_bytes", "log" => name.to_string()),
            #[cfg(feature = "metrics")]
            behind: Default::default(),
            #[cfg(any(feature = "tracing", feature = "metrics"))]
            connections: Default::default(),
        }
    }

    /// The directory at `path` was recovered: `sealed` sealed segments, appends go
    /// on in segment `active` at `active_len`.
    #[allow(unused_variables)]
    pub(crate) fn recovered(
        &self,
        path: &Path,
        sealed: usize,
        active: u64,
        active_len: u64,
        purged_through: LogPosition,
    ) {
        #[cfg(feature = "tracing")]
        tracing::info!(
            target: "walcodec",
            log = %self.name,
            path = %path.display(),
            sealed,
            active,
            active_len,
            purged_through = %purged_through,
            "log directory recovered"
        );
    }

    /// Segment `sealed` was sealed at `sealed_len` bytes; appends go on in `next`.
    #[allow(unused_variables)]
    pub(crate) fn rotated(&self, sealed: u64, sealed_len: u64, next: u64) {
        #[cfg(feature = "metrics")]
        self.rotations.increment(1);
        #[cfg(feature = "tracing")]
        tracing::info!(
            target: "walcodec",
            log = %self.name,
            sealed,
            sealed_len,
            next,
            "log segment rotated"
        );
    }

    /// `segments` were purged (by a retention rule or on demand).
    #[allow(unused_variables)]
    pub(crate) fn purged(&self, segments: &[u64]) {
        #[cfg(feature = "metrics")]
        self.purged.increment(segments.len() as u64);
        #[cfg(feature = "tracing")]
        if let (Some(first), Some(last)) = (segments.first(), segments.last()) {
            tracing::info!(
                target: "walcodec",
                log = %self.name,
                segments = segments.len(),
                first,
                last,
                "log segments purged"
            );
        }
    }

    /// The retention rules purged `segments`.
    #[allow(unused_variables)]
    pub(crate) fn retention(
        &self,
        segments: &[u64],
        retain_bytes: Option<u64>,
        retain_age: Option<Duration>,
    ) {
        #[cfg(feature = "metrics")]
        self.retention_purged.increment(segments.len() as u64);
        #[cfg(feature = "tracing")]
        if !segments.is_empty() {
            tracing::info!(
                target: "walcodec",
                log = %self.name,
                segments = segments.len(),
                retain_bytes,
                retain_age_seconds = retain_age.map(|age| age.as_secs_f64()),
                "log retention applied"
            );
        }
    }

    /// Purged segments kept as files for reuse (recycling).
    #[allow(unused_variables)]
    pub(crate) fn pooled(&self, segments: &[u64]) {
        #[cfg(feature = "tracing")]
        if !segments.is_empty() {
            tracing::debug!(
                target: "walcodec",
                log = %self.name,
                segments = ?segments,
                "log segment files kept for reuse"
            );
        }
    }

    /// The purged file of segment `old` now holds segment `new`.
    #[allow(unused_variables)]
    pub(crate) fn reused(&self, old: u64, new: u64) {
        #[cfg(feature = "tracing")]
        tracing::debug!(
            target: "walcodec",
            log = %self.name,
            old,
            new,
            "log segment file reused"
        );
    }

    /// The directory holds `segments` segments of `bytes` bytes in all.
    #[allow(unused_variables)]
    pub(crate) fn size(&self, segments: usize, bytes: u64) {
        #[cfg(feature = "metrics")]
        {
            self.segments.set(segments as f64);
            self.dir_bytes.set(bytes as f64);
        }
    }
}

/// How a replica's connection ended, for [`DirObserver::replica_ended`]: the
/// `reason` label of a refusal, `None` when the connection was not refused.
pub(crate) fn refusal_reason(error: &crate::error::Error) -> Option<&'static str> {
    use crate::error::Error;
    match error {
        Error::ReplicaTooFarBehind { .. } => Some("too_far_behind"),
        Error::ReplicaDiverged { .. } => Some("diverged"),
        Error::ReplicaOfAnotherLog { .. } => Some("another_log"),
        Error::ReplicaVersion { .. } => Some("version"),
        Error::ReplicaProtocol { .. } => Some("protocol"),
        Error::ReplicaAuthentication { .. } => Some("authentication"),
        _ => None,
    }
}

impl DirObserver {
    /// A replica connected to this primary: returns the connection's number, for
    /// [`replica_behind`](Self::replica_behind) and
    /// [`replica_ended`](Self::replica_ended).
    pub(crate) fn replica_connected(&self) -> u64 {
        #[cfg(feature = "metrics")]
        {
            let log = self.name.to_string();
            metrics::counter!("walcodec_replica_connections_total", "log" => log.clone())
                .increment(1);
            metrics::gauge!("walcodec_replicas", "log" => log).increment(1.0);
        }
        #[cfg(feature = "tracing")]
        tracing::info!(target: "walcodec", log = %self.name, "replica connected");
        #[cfg(any(feature = "tracing", feature = "metrics"))]
        return self
            .connections
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        #[cfg(not(any(feature = "tracing", feature = "metrics")))]
        0
    }

    /// `bytes` of segments were sent to a replica.
    #[allow(unused_variables)]
    pub(crate) fn shipped(&self, bytes: u64) {
        #[cfg(feature = "metrics")]
        metrics::counter!("walcodec_shipped_bytes_total", "log" => self.name.to_string())
            .increment(bytes);
    }

    /// Connection `connection`'s replica lacks `behind()` bytes of the durable log
    /// (computed only when someone watches: it takes the catalog's lock).
    #[allow(unused_variables)]
    pub(crate) fn replica_behind(&self, connection: u64, behind: impl FnOnce() -> u64) {
        #[cfg(any(feature = "metrics", feature = "tracing"))]
        let behind = behind();
        #[cfg(feature = "metrics")]
        {
            let mut all = self.behind.lock().unwrap_or_else(PoisonError::into_inner);
            all.insert(connection, behind);
            self.set_behind(&all);
        }
        #[cfg(feature = "tracing")]
        tracing::debug!(target: "walcodec", log = %self.name, connection, behind, "replica behind");
    }

    /// The gauge of the furthest-behind replica, from every connection's figure.
    #[cfg(feature = "metrics")]
    fn set_behind(&self, all: &std::collections::BTreeMap<u64, u64>) {
        let worst = all.values().copied().max().unwrap_or(0);
        metrics::gauge!("walcodec_replica_behind_bytes", "log" => self.name.to_string())
            .set(worst as f64);
    }

    /// Connection `connection`'s replica went: with what was shipped, or with
    /// `error`.
    #[allow(unused_variables)]
    pub(crate) fn replica_ended(
        &self,
        connection: u64,
        result: Result<
            (
                crate::position::LogPosition,
                crate::position::LogPosition,
                u64,
            ),
            &crate::error::Error,
        >,
    ) {
        let how = match result {
            Ok(_) => "clean",
            Err(error) => refusal_reason(error).map_or("failed", |_| "refused"),
        };
        #[cfg(feature = "metrics")]
        {
            let mut all = self.behind.lock().unwrap_or_else(PoisonError::into_inner);
            all.remove(&connection);
            self.set_behind(&all);
            drop(all);
            let log = self.name.to_string();
            metrics::gauge!("walcodec_replicas", "log" => log.clone()).decrement(1.0);
            metrics::counter!(
                "walcodec_replica_disconnections_total",
                "log" => log.clone(),
                "how" => how
            )
            .increment(1);
            if let Err(error) = result {
                if let Some(reason) = refusal_reason(error) {
                    metrics::counter!(
                        "walcodec_replica_refusals_total",
                        "log" => log,
                        "reason" => reason
                    )
                    .increment(1);
                }
            }
        }
        #[cfg(feature = "tracing")]
        match result {
            Ok((from, to, bytes)) => tracing::info!(
                target: "walcodec",
                log = %self.name,
                how,
                from = %from,
                to = %to,
                bytes,
                "replica disconnected"
            ),
            Err(error) => tracing::warn!(
                target: "walcodec",
                log = %self.name,
                how,
                reason = refusal_reason(error).unwrap_or(""),
                error = %error,
                "replica disconnected"
            ),
        }
    }
}

/// What a replica reports (feature `metrics`, `tracing`): its lag.
pub(crate) struct CopyObserver {
    #[cfg(feature = "tracing")]
    name: std::sync::Arc<str>,
    #[cfg(feature = "metrics")]
    lag: metrics::Gauge,
}

impl std::fmt::Debug for CopyObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CopyObserver").finish_non_exhaustive()
    }
}

impl CopyObserver {
    /// The observer of the replica named `name` (the `log` label).
    #[allow(unused_variables)]
    pub(crate) fn new(name: &str) -> CopyObserver {
        describe_metrics();
        CopyObserver {
            #[cfg(feature = "tracing")]
            name: name.into(),
            #[cfg(feature = "metrics")]
            lag: metrics::gauge!("walcodec_replica_lag_seconds", "log" => name.to_string()),
        }
    }

    /// The replica last held all its primary had made durable `lag` ago.
    #[allow(unused_variables)]
    pub(crate) fn lag(&self, lag: Duration) {
        #[cfg(feature = "metrics")]
        self.lag.set(lag.as_secs_f64());
    }

    /// The replica caught up after lagging `lag` (an event only when it lagged
    /// noticeably: a second or more).
    #[allow(unused_variables)]
    pub(crate) fn caught_up(&self, lag: Duration) {
        #[cfg(feature = "metrics")]
        self.lag.set(0.0);
        #[cfg(feature = "tracing")]
        if lag >= Duration::from_secs(1) {
            tracing::info!(
                target: "walcodec",
                log = %self.name,
                lagged_seconds = lag.as_secs_f64(),
                "replica caught up"
            );
        }
    }
}
