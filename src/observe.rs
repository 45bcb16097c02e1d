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
//! | `walcodec_replica_connections_total` | counter | replicas that connected to this primary |
//! | `walcodec_replicas` | gauge | replicas connected now |
//! | `walcodec_replica_disconnections_total` | counter | connections that ended, by `how`: `clean`, `refused`, `failed` |
//! | `walcodec_replica_refusals_total` | counter | connections refused, by `reason`: `too_far_behind`, `diverged`, `another_log`, `version`, `protocol`, `authentication` |
//! | `walcodec_shipped_bytes_total` | counter | segment bytes shipped to replicas (each message's once its write returns) |

use std::future::Future;
use std::path::Path;

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
        (
            "walcodec_replica_connections_total",
            Counter,
            Count,
            "Replicas that connected to this primary.",
        ),
        (
            "walcodec_replicas",
            Gauge,
            Count,
            "Replicas connected to this primary now.",
        ),
        (
            "walcodec_replica_disconnections_total",
            Counter,
            Count,
            "Replica connections that ended, by how: clean, refused, failed.",
        ),
        (
            "walcodec_replica_refusals_total",
            Counter,
            Count,
            "Replica connections refused, by reason.",
        ),
        (
            "walcodec_shipped_bytes_total",
            Counter,
            Bytes,
            "Segment bytes shipped to replicas, counted as they are sent.",
        ),
        (
            "walcodec_replica_behind_bytes",
            Gauge,
            Bytes,
            "Bytes the furthest-behind connected replica lacks of this primary's durable log (by its last acknowledgement).",
        ),
        (
            "walcodec_replica_lag_seconds",
            Gauge,
            Seconds,
            "On a replica: seconds since it last held everything its primary had made durable.",
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
