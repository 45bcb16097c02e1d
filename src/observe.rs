//! Instrumentation: `tracing` events and spans (feature `tracing`) and `metrics`
//! counters, histograms and gauges (feature `metrics`), all of it here.
//!
//! The rest of the crate calls the functions of this module at the few places
//! where something worth an operator's attention happens. With neither feature on,
//! the types are empty and every function an empty `#[inline]` body: no cost, no
//! dependency. Nothing here runs per record: the writer reports once per batch,
//! the decoder once per piece of damage, the log directory once per open,
//! rotation or purge.
//!
//! Events (target `walcodec`):
//!
//! | level | message | fields |
//! |---|---|---|
//! | WARN | `torn tail cut` | `log`, `path`, `offset` (the log's new length), `bytes` (cut), `incomplete` |
//! | DEBUG | `zero fill cut` | `log`, `path`, `offset`, `bytes` (preallocated space after the last record) |
//! | WARN | `damaged log bytes skipped` | `log`, `file`, `offset`, `bytes`, `kind`, `reason`, `recovery` (tolerant modes only) |
//! | ERROR | `log writer poisoned` | `log`, `durable_len`, `error` |
//! | WARN | `slow log sync` | `log`, `seconds`, `threshold_seconds`, `records`, `bytes` |
//! | INFO | `log opened` | `path`, `len` |
//! | INFO | `log directory recovered` | `log`, `path`, `sealed`, `active`, `active_len`, `purged_through` |
//! | INFO | `log segment rotated` | `log`, `sealed`, `sealed_len`, `next` |
//! | INFO | `log segments purged` | `log`, `segments` (how many), `first`, `last` |
//! | INFO | `log retention applied` | `log`, `segments`, `retain_bytes`, `retain_age_seconds` |
//! | DEBUG | `log segment files kept for reuse` | `log`, `segments` |
//! | DEBUG | `log segment file reused` | `log`, `old`, `new` |
//!
//! Spans `walcodec.open` (`path`) around [`AsyncLogWriter`](crate::AsyncLogWriter)'s
//! and [`LogDir`](crate::LogDir)'s open, and `walcodec.recover` (`path`) around a log
//! directory's recovery.
//!
//! In `damaged log bytes skipped`, `log` is the decoder's
//! [`LogDecoderBuilder::name`](crate::LogDecoderBuilder::name) and `file` the path a
//! [`LogReader::open`](crate::LogReader::open) (or its siblings) read, empty for a
//! decoder of a stream.
//!
//! Metrics, each labelled `log` with the writer's, directory's or decoder's name
//! ([`WriterOptions::name`](crate::WriterOptions::name),
//! [`LogDirOptions::name`](crate::LogDirOptions::name),
//! [`LogDecoderBuilder::name`](crate::LogDecoderBuilder::name)); the handles are
//! registered when the writer or directory opens, so install the recorder before.
//! Every metric has a description and a unit (Prometheus' `HELP` and `UNIT`),
//! given to the recorder each time a writer, a directory or a damage report first
//! uses its metrics, or all at once by [`describe_metrics`]:
//!
//! | metric | kind | what |
//! |---|---|---|
//! | `walcodec_appends_total` | counter | records written |
//! | `walcodec_appended_bytes_total` | counter | bytes written (headers and trailers included) |
//! | `walcodec_syncs_total` | counter | syncs completed |
//! | `walcodec_rotations_total` | counter | segments sealed by rotation |
//! | `walcodec_sync_seconds` | histogram | each sync's latency |
//! | `walcodec_batch_records` | histogram | records per batch written |
//! | `walcodec_queued_bytes` | gauge | encoded bytes queued behind the last batch |
//! | `walcodec_segments` | gauge | segments in the directory (at open, rotation, purge) |
//! | `walcodec_dir_bytes` | gauge | bytes of those segments (at open, rotation, purge) |
//! | `walcodec_torn_tails_cut_total` | counter | torn tails cut when a log or a directory's last segment was opened |
//! | `walcodec_torn_tail_bytes_cut_total` | counter | bytes of those torn tails |
//! | `walcodec_corruptions_skipped_total` | counter | pieces of damage a decoder in a tolerant mode skipped |
//! | `walcodec_damaged_bytes_skipped_total` | counter | bytes of those pieces |
//! | `walcodec_purged_segments_total` | counter | segments purged, by a retention rule or on demand |
//! | `walcodec_retention_purged_segments_total` | counter | segments of those that a retention rule purged |

use std::future::Future;
use std::io;
use std::path::Path;
use std::time::Duration;

use crate::decoder::Recovery;
use crate::error::Corruption;
use crate::logdir::LogPosition;
use crate::reader::repair::TailScan;

/// What kind of metric a name is.
#[cfg(feature = "metrics")]
#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Every metric the crate emits: name, kind, unit, description. The one list
/// [`describe_metrics`] describes from.
#[cfg(feature = "metrics")]
const METRICS: &[(&str, Kind, metrics::Unit, &str)] = {
    use metrics::Unit::{Bytes, Count, Seconds};
    use Kind::{Counter, Gauge, Histogram};
    &[
        (
            "walcodec_appends_total",
            Counter,
            Count,
            "Records appended to the log.",
        ),
        (
            "walcodec_appended_bytes_total",
            Counter,
            Bytes,
            "Bytes written to the log, headers and block trailers included.",
        ),
        (
            "walcodec_syncs_total",
            Counter,
            Count,
            "Syncs of the log file completed.",
        ),
        (
            "walcodec_rotations_total",
            Counter,
            Count,
            "Segments of the log directory sealed by rotation.",
        ),
        (
            "walcodec_sync_seconds",
            Histogram,
            Seconds,
            "Latency of each sync of the log file.",
        ),
        (
            "walcodec_batch_records",
            Histogram,
            Count,
            "Records per batch written.",
        ),
        (
            "walcodec_queued_bytes",
            Gauge,
            Bytes,
            "Encoded bytes queued behind the batch last written.",
        ),
        (
            "walcodec_segments",
            Gauge,
            Count,
            "Segments in the log directory.",
        ),
        (
            "walcodec_dir_bytes",
            Gauge,
            Bytes,
            "Bytes of the log directory's segments.",
        ),
        (
            "walcodec_torn_tails_cut_total",
            Counter,
            Count,
            "Torn tails (records a writer died writing) cut when a log was opened.",
        ),
        (
            "walcodec_torn_tail_bytes_cut_total",
            Counter,
            Bytes,
            "Bytes of the torn tails cut when a log was opened.",
        ),
        (
            "walcodec_corruptions_skipped_total",
            Counter,
            Count,
            "Pieces of damage a decoder in a tolerant recovery mode skipped.",
        ),
        (
            "walcodec_damaged_bytes_skipped_total",
            Counter,
            Bytes,
            "Bytes of damage a decoder in a tolerant recovery mode skipped.",
        ),
        (
            "walcodec_purged_segments_total",
            Counter,
            Count,
            "Segments purged from the log directory, by retention or on demand.",
        ),
        (
            "walcodec_retention_purged_segments_total",
            Counter,
            Count,
            "Segments purged from the log directory by its retention rules.",
        ),
    ]
};

/// Gives the installed `metrics` recorder the description and unit of every
/// metric the crate emits (see the [module docs](self)), so that an exporter
/// shows them (Prometheus' `HELP` and `UNIT` lines). Writers, log directories and
/// damage reports describe their metrics themselves when they first use them;
/// call this after installing a recorder to have every description at once, say
/// before anything was opened. Does nothing without the `metrics` feature, or
/// without a recorder. Cheap and idempotent: call it any number of times.
///
/// ```
/// walcodec::observe::describe_metrics();
/// ```
pub fn describe_metrics() {
    #[cfg(feature = "metrics")]
    for &(name, kind, unit, help) in METRICS {
        match kind {
            Kind::Counter => metrics::describe_counter!(name, unit, help),
            Kind::Gauge => metrics::describe_gauge!(name, unit, help),
            Kind::Histogram => metrics::describe_histogram!(name, unit, help),
        }
    }
}

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

/// The tail of the log file at `path` (of the writer or directory named `log`)
/// was scanned on open: says what was cut, if anything.
#[allow(unused_variables)]
pub(crate) fn tail_cut(log: &str, path: &Path, scan: &TailScan) {
    #[cfg(feature = "metrics")]
    if scan.needs_repair() && scan.incomplete_tail {
        describe_metrics();
        let bytes = scan.file_len.saturating_sub(scan.valid_len);
        metrics::counter!("walcodec_torn_tails_cut_total", "log" => log.to_string()).increment(1);
        metrics::counter!("walcodec_torn_tail_bytes_cut_total", "log" => log.to_string())
            .increment(bytes);
    }
    #[cfg(feature = "tracing")]
    if scan.needs_repair() {
        let bytes = scan.file_len - scan.valid_len;
        if scan.incomplete_tail {
            tracing::warn!(
                target: "walcodec",
                log,
                path = %path.display(),
                offset = scan.valid_len,
                bytes,
                incomplete = true,
                "torn tail cut"
            );
        } else {
            tracing::debug!(
                target: "walcodec",
                log,
                path = %path.display(),
                offset = scan.valid_len,
                bytes,
                "zero fill cut"
            );
        }
    }
}

/// A decoder in a tolerant mode dropped a damaged piece of its log: the decoder
/// named `log`, reading `file` (when it reads a file it knows).
#[inline]
#[allow(unused_variables)]
pub(crate) fn damage(corruption: &Corruption, recovery: Recovery, log: &str, file: Option<&Path>) {
    #[cfg(feature = "metrics")]
    {
        describe_metrics();
        metrics::counter!("walcodec_corruptions_skipped_total", "log" => log.to_string())
            .increment(1);
        metrics::counter!("walcodec_damaged_bytes_skipped_total", "log" => log.to_string())
            .increment(corruption.bytes());
    }
    #[cfg(feature = "tracing")]
    tracing::warn!(
        target: "walcodec",
        log,
        file = %file.map_or(std::borrow::Cow::Borrowed(""), |f| f.to_string_lossy()),
        offset = corruption.offset(),
        bytes = corruption.bytes(),
        kind = ?corruption.kind(),
        reason = corruption.reason(),
        recovery = %recovery,
        "damaged log bytes skipped"
    );
}

/// A log file was opened for appending at `len`.
#[allow(unused_variables)]
pub(crate) fn opened(path: &Path, len: u64) {
    #[cfg(feature = "tracing")]
    tracing::info!(target: "walcodec", path = %path.display(), len, "log opened");
}

/// A span: `tracing::Span` with the feature, nothing without.
#[cfg(feature = "tracing")]
pub(crate) type Span = tracing::Span;

/// A span: `tracing::Span` with the feature, nothing without.
#[cfg(not(feature = "tracing"))]
#[derive(Debug, Clone)]
pub(crate) struct Span;

/// The span around opening the log at `path`.
#[allow(unused_variables)]
pub(crate) fn open_span(path: &Path) -> Span {
    #[cfg(feature = "tracing")]
    return tracing::info_span!(target: "walcodec", "walcodec.open", path = %path.display());
    #[cfg(not(feature = "tracing"))]
    Span
}

/// The span around recovering the log directory at `path`.
#[allow(unused_variables)]
pub(crate) fn recovery_span(path: &Path) -> Span {
    #[cfg(feature = "tracing")]
    return tracing::info_span!(target: "walcodec", "walcodec.recover", path = %path.display());
    #[cfg(not(feature = "tracing"))]
    Span
}

/// Runs `future` inside `span`.
pub(crate) async fn within<F: Future>(span: Span, future: F) -> F::Output {
    #[cfg(feature = "tracing")]
    return tracing::Instrument::instrument(future, span).await;
    #[cfg(not(feature = "tracing"))]
    {
        let _ = span;
        future.await
    }
}

/// What a log directory reports: built once when it opens.
pub(crate) struct DirObserver {
    #[cfg(feature = "tracing")]
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
            #[cfg(feature = "tracing")]
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

/// Runs a writer's per-batch report `batches` times, as the flusher does after
/// each batch, and returns how long that took: the instrumentation's own cost per
/// batch, for `benches/observe_cost.rs` (no recorder, no subscriber installed
/// there: the common case). Not a stable API.
#[doc(hidden)]
pub fn batch_report_cost(batches: u64) -> Duration {
    let observer = WriterObserver::new("probe", DEFAULT_SLOW_SYNC);
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

/// The writers' default, from `crate::DEFAULT_SLOW_SYNC_THRESHOLD`.
const DEFAULT_SLOW_SYNC: Duration = crate::writer::DEFAULT_SLOW_SYNC_THRESHOLD;
