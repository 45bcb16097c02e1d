//! What a writer reports (tracing events, metrics): built once when it starts, used once
//! per batch. The metric names are listed in one place, [`crate::observe`].

use std::io;
use std::time::Duration;

use crate::observe::describe_metrics;

/// What a writer reports: built once when it starts, used once per batch.
pub(crate) struct WriterObserver {
    #[cfg(feature = "tracing")]
    name: std::sync::Arc<str>,
    #[cfg(feature = "tracing")]
    slow_sync: Duration,
    #[cfg(feature = "metrics")]
    metrics: WriterMetrics,
}

#[cfg(feature = "metrics")]
struct WriterMetrics {
    appends: metrics::Counter,
    appended_bytes: metrics::Counter,
    syncs: metrics::Counter,
    sync_seconds: metrics::Histogram,
    batch_records: metrics::Histogram,
    queued_bytes: metrics::Gauge,
}

impl WriterObserver {
    /// The observer of the writer named `name` (the `log` label), warning of syncs
    /// that take `slow_sync` or longer.
    #[allow(unused_variables)]
    pub(crate) fn new(name: &str, slow_sync: Duration) -> WriterObserver {
        describe_metrics();
        WriterObserver {
            #[cfg(feature = "tracing")]
            name: name.into(),
            #[cfg(feature = "tracing")]
            slow_sync,
            #[cfg(feature = "metrics")]
            metrics: WriterMetrics {
                appends: metrics::counter!("walcodec_appends_total", "log" => name.to_string()),
                appended_bytes: metrics::counter!(
                    "walcodec_appended_bytes_total",
                    "log" => name.to_string()
                ),
                syncs: metrics::counter!("walcodec_syncs_total", "log" => name.to_string()),
                sync_seconds: metrics::histogram!(
                    "walcodec_sync_seconds",
                    "log" => name.to_string()
                ),
                batch_records: metrics::histogram!(
                    "walcodec_batch_records",
                    "log" => name.to_string()
                ),
                queued_bytes: metrics::gauge!("walcodec_queued_bytes", "log" => name.to_string()),
            },
        }
    }

    /// A batch of `records` records, `bytes` bytes, was written, and synced in
    /// `sync` when it was synced; `queued_bytes` wait behind it.
    #[inline]
    #[allow(unused_variables)]
    pub(crate) fn batch(
        &self,
        records: u64,
        bytes: usize,
        sync: Option<Duration>,
        queued_bytes: usize,
    ) {
        #[cfg(feature = "metrics")]
        {
            let m = &self.metrics;
            m.appends.increment(records);
            m.appended_bytes.increment(bytes as u64);
            if bytes > 0 {
                m.batch_records.record(records as f64);
            }
            if let Some(latency) = sync {
                m.syncs.increment(1);
                m.sync_seconds.record(latency.as_secs_f64());
            }
            m.queued_bytes.set(queued_bytes as f64);
        }
        #[cfg(feature = "tracing")]
        if let Some(latency) = sync {
            if latency >= self.slow_sync {
                tracing::warn!(
                    target: "walcodec",
                    log = %self.name,
                    seconds = latency.as_secs_f64(),
                    threshold_seconds = self.slow_sync.as_secs_f64(),
                    records,
                    bytes,
                    "slow log sync"
                );
            }
        }
    }

    /// A write or sync failed: the writer refuses appends from now on.
    #[allow(unused_variables)]
    pub(crate) fn poisoned(&self, durable_len: u64, error: &io::Error) {
        #[cfg(feature = "tracing")]
        tracing::error!(
            target: "walcodec",
            log = %self.name,
            durable_len,
            error = %error,
            "log writer poisoned"
        );
    }
}

/// Runs a writer's per-batch report `batches` times, as the flusher does after
/// each batch, and returns how long that took: the instrumentation's own cost per
/// batch, for `benches/observe_cost.rs` (no recorder, no subscriber installed
/// there: the common case). Not a stable API.
#[doc(hidden)]
pub fn batch_report_cost(batches: u64) -> Duration {
    let observer = WriterObserver::new(
        "probe",
        crate::writer::WriterOptions::DEFAULT_SLOW_SYNC_THRESHOLD,
    );
    let started = std::time::Instant::now();
    for i in 0..batches {
        let i = std::hint::black_box(i);
        observer.batch(
            i & 63,
            (i & 4095) as usize,
            Some(Duration::from_nanos(i & 1023)),
            (i & 255) as usize,
        );
    }
    started.elapsed()
}
