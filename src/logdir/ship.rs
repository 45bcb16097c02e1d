//! [`ShipSource`]: what log shipping (`crate::replica`) may see of a directory.
//!
//! Why it is narrow: the directory's catalog (its segments, pins, truncations,
//! pool of reusable files) and its active writer are kept consistent by the
//! directory alone, under its own locks; a sender that read or changed them
//! directly would tie replication to every detail of rotation, purging and
//! truncation, and one mistake there would let a purge delete bytes a replica is
//! being sent. So replication gets only what shipping needs, all of it read-only
//! but the pin: it may pin a segment (and so every later one) against purges, up
//! to [`replica_retain_bytes`](crate::LogDirOptions::replica_retain_bytes), read
//! the durable end and wait for it to move, open a segment to read its durable
//! prefix, ask how long a sealed segment is, and read the log's identity and the
//! truncations since it last looked. It may not append, rotate, purge, truncate,
//! reach the writer, or hold the catalog's lock across an await (every method
//! takes and releases it). It joins the quorum of synchronous replicas as one
//! [`Member`].
//!
//! Replication's options are its own: [`ReplicaOptions`] holds them, their
//! builder methods on [`LogDirOptions`](crate::LogDirOptions) live with
//! replication (`replica/options.rs`), and replication reads them through
//! [`ShipSource::options`]. The directory carries them (a replica is served from
//! a [`LogDir`]) and acts on two itself: it keeps segments for replicas up to
//! `retain_bytes` when it purges, and waits for `sync_replicas` of them (within
//! `timeout`) when it appends. So the type is defined here, below replication.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::history::{Epoch, History};
use super::quorum::Member;
use super::report::DirObserver;
use super::segment::segment_path;
use super::wake::DurableWatch;
use super::{Inner, LogDir, LogDirOptions};
use crate::error::Error;
use crate::format::fragment::Dialect;
use crate::log_id::LogId;
use crate::position::LogPosition;

/// How long either end of a replication connection waits by default for the
/// other: for its hello, then for each message (a replica) or for the peer to
/// take one (a primary).
pub(crate) const DEFAULT_REPLICA_TIMEOUT: Duration = Duration::from_secs(10);

/// A shared secret for replication's handshake; never printed.
#[cfg(feature = "replica-auth")]
#[derive(Clone)]
pub(crate) struct Secret(Arc<[u8]>);

#[cfg(feature = "replica-auth")]
impl Secret {
    pub(crate) fn new(secret: &[u8]) -> Secret {
        Secret(secret.into())
    }

    /// The secret's bytes, for the handshake's proofs.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }
}

#[cfg(feature = "replica-auth")]
impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// The default [`LogDirOptions::replica_retain_bytes`](crate::LogDirOptions::replica_retain_bytes), in segments.
const DEFAULT_REPLICA_RETAIN_SEGMENTS: u64 = 16;

/// Replication's options: set through
/// [`LogDirOptions`](crate::LogDirOptions)'s `replica_*` and `sync_replicas`
/// methods, each documented there.
#[derive(Clone, Debug)]
pub(crate) struct ReplicaOptions {
    /// [`replica_retain_bytes`](crate::LogDirOptions::replica_retain_bytes);
    /// `None`: [`DEFAULT_REPLICA_RETAIN_SEGMENTS`] segments.
    pub(crate) retain_bytes: Option<u64>,
    /// [`replica_timeout`](crate::LogDirOptions::replica_timeout).
    pub(crate) timeout: Duration,
    /// [`replica_wake_interval`](crate::LogDirOptions::replica_wake_interval).
    pub(crate) wake_interval: Duration,
    /// [`sync_replicas`](crate::LogDirOptions::sync_replicas).
    pub(crate) sync_replicas: usize,
    /// [`replica_secret`](crate::LogDirOptions::replica_secret).
    #[cfg(feature = "replica-auth")]
    pub(crate) secret: Option<Secret>,
}

impl Default for ReplicaOptions {
    fn default() -> Self {
        ReplicaOptions {
            retain_bytes: None,
            timeout: DEFAULT_REPLICA_TIMEOUT,
            wake_interval: LogDirOptions::DEFAULT_WAKE_INTERVAL,
            sync_replicas: 0,
            #[cfg(feature = "replica-auth")]
            secret: None,
        }
    }
}

impl ReplicaOptions {
    /// The bytes of segments kept for connected replicas beyond what purges
    /// leave, for segments of at most `max_segment_bytes`.
    pub(crate) fn retain_limit(&self, max_segment_bytes: u64) -> u64 {
        self.retain_bytes
            .unwrap_or(max_segment_bytes.saturating_mul(DEFAULT_REPLICA_RETAIN_SEGMENTS))
    }
}

/// A directory as log shipping sees it: see the [module docs](self).
#[derive(Clone)]
pub(crate) struct ShipSource {
    inner: Arc<Inner>,
}

/// Keeps a segment (and every later one) from being purged while a replica needs
/// it, up to [`replica_retain_bytes`](crate::LogDirOptions::replica_retain_bytes);
/// released when dropped.
pub(crate) struct SegmentPin {
    inner: Arc<Inner>,
    segment: u64,
}

impl Drop for SegmentPin {
    fn drop(&mut self) {
        self.inner.catalog().unpin_for_replica(self.segment);
    }
}

/// Why [`ShipSource::pin`] pinned nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PinRefused {
    /// The position's segment was purged; the log now starts at `first`.
    Purged { first: LogPosition },
    /// The position lies past the log's durable `end`.
    PastEnd { end: LogPosition },
}

/// The log as it stands, for a sender: see [`ShipSource::standing`].
#[derive(Debug, Clone)]
pub(crate) struct Standing {
    pub(crate) log_id: LogId,
    pub(crate) history: History,
    /// The oldest segment kept.
    pub(crate) first: u64,
    /// How many truncations the log has seen: pass it to
    /// [`ShipSource::since`] to hear of later ones only.
    pub(crate) truncations: usize,
}

/// What changed since a sender last looked: see [`ShipSource::since`].
#[derive(Debug, Clone)]
pub(crate) struct Since {
    /// The oldest segment kept.
    pub(crate) first: u64,
    /// The earliest truncation after the ones seen that cut below the position
    /// asked about.
    pub(crate) cut: Option<LogPosition>,
    /// The log's history, when its current epoch is not the one the sender knows
    /// (with the truncations counted in it).
    pub(crate) history: Option<(History, usize)>,
}

impl LogDir {
    /// The directory as log shipping sees it.
    pub(crate) fn ship_source(&self) -> ShipSource {
        ShipSource {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl ShipSource {
    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// The dialect new segments are written in.
    pub(crate) fn dialect(&self) -> Dialect {
        self.inner.options.dialect_in_use()
    }

    /// Replication's options, as the directory was opened with them.
    pub(crate) fn options(&self) -> &ReplicaOptions {
        &self.inner.options.replica
    }

    /// Where events and metrics go.
    pub(crate) fn observer(&self) -> &DirObserver {
        &self.inner.observer
    }

    /// The durable end of the whole log.
    pub(crate) fn end(&self) -> LogPosition {
        *self.inner.end.borrow()
    }

    /// The durable end, to wait for it to move, looked at at most once per
    /// [`replica_wake_interval`](crate::LogDirOptions::replica_wake_interval)
    /// while it keeps moving.
    pub(crate) fn durable_watch(&self) -> DurableWatch {
        DurableWatch::new(self.inner.subscribe(), self.options().wake_interval)
    }

    /// Whether [`close`](LogDir::close) ran (or a failure stopped appends for
    /// good).
    pub(crate) fn is_closed(&self) -> bool {
        match self.inner.active.try_read() {
            Ok(active) => active.writer.is_none(),
            // A rotation, truncation or close is under way: not closed yet.
            Err(_) => false,
        }
    }

    /// Whether appends wait for synchronous replicas.
    pub(crate) fn is_sync(&self) -> bool {
        self.inner.quorum().is_sync()
    }

    /// Counts a replica among the connected ones, for synchronous appends, until
    /// the member is dropped.
    pub(crate) fn join(&self) -> Member {
        self.inner.quorum().join()
    }

    /// The log's id, history, first segment and count of truncations, read at
    /// once.
    pub(crate) fn standing(&self) -> Standing {
        let catalog = self.inner.catalog();
        Standing {
            log_id: catalog.history.log_id,
            history: catalog.history.history.clone(),
            first: catalog.first,
            truncations: catalog.truncations.len(),
        }
    }

    /// The oldest segment kept.
    pub(crate) fn first(&self) -> u64 {
        self.inner.catalog().first
    }

    /// The length of sealed segment `segment`; `None` for the active segment and
    /// for segments not (or no longer) in the log.
    pub(crate) fn sealed_len(&self, segment: u64) -> Option<u64> {
        self.inner.catalog().sealed.get(&segment).copied()
    }

    /// The segment bytes from `from` to the durable end; purged segments count
    /// from the first one kept.
    pub(crate) fn bytes_behind(&self, from: LogPosition) -> u64 {
        let end = self.end();
        self.inner.catalog().bytes_between(from, end)
    }

    /// What changed since a sender that had seen `seen` truncations and knows
    /// `epoch` as the current one last looked, for one now at `here`.
    pub(crate) fn since(&self, seen: usize, here: LogPosition, epoch: Option<&Epoch>) -> Since {
        let catalog = self.inner.catalog();
        let cut = catalog.truncations[seen.min(catalog.truncations.len())..]
            .iter()
            .filter(|&&t| t < here)
            .min()
            .copied();
        let history = &catalog.history.history;
        let history =
            (history.current() != epoch).then(|| (history.clone(), catalog.truncations.len()));
        Since {
            first: catalog.first,
            cut,
            history,
        }
    }

    /// Pins the segment `from` resolves to (the start of the first segment for
    /// [`LogPosition::START`] and for the end of the last one purged), and with
    /// it every later one, against purges.
    pub(crate) fn pin(&self, from: LogPosition) -> Result<(LogPosition, SegmentPin), PinRefused> {
        let mut catalog = self.inner.catalog();
        let Ok(from) = catalog.resolve(from) else {
            return Err(PinRefused::Purged {
                first: LogPosition::new(catalog.first, 0),
            });
        };
        let end = self.end();
        let past_end = match catalog.sealed.get(&from.segment) {
            _ if from.segment > catalog.active => true,
            Some(&len) if from.segment < catalog.active => from.offset > len,
            _ => from > end,
        };
        if past_end {
            return Err(PinRefused::PastEnd { end });
        }
        catalog.pin_for_replica(from.segment);
        Ok((
            from,
            SegmentPin {
                inner: Arc::clone(&self.inner),
                segment: from.segment,
            },
        ))
    }

    /// Opens segment `segment` to read, without touching its access time: only
    /// its durable prefix ([`end`](Self::end), [`sealed_len`](Self::sealed_len))
    /// holds records, and the writer modifies the segment between any two reads
    /// (see `open_to_read`). Read bytes count only if the segment is still not
    /// purged after the read ([`first`](Self::first)): a purge releases a
    /// segment before it deletes (or pools, to be written over) its file.
    pub(crate) fn open_segment(&self, segment: u64) -> Result<Arc<File>, Error> {
        let path = segment_path(&self.inner.dir, segment);
        Ok(Arc::new(crate::open::open_to_read(&path)?))
    }
}
