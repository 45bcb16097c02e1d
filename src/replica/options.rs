//! Replication's options: the `replica_*` and `sync_replicas` methods of
//! [`LogDirOptions`], kept with the code they configure. The values live in
//! [`ReplicaOptions`](crate::logdir::ship::ReplicaOptions), which the directory
//! carries (it acts on two of them itself: see `logdir/ship.rs`).

use std::time::Duration;

#[cfg(feature = "replica-auth")]
use crate::logdir::ship::Secret;
use crate::logdir::LogDirOptions;
// Named by the docs' links only.
#[cfg(doc)]
use crate::error::Error;
#[cfg(doc)]
use crate::logdir::LogDir;

impl LogDirOptions {
    /// Keep at most `bytes` of segments for connected replicas beyond what purges
    /// leave, so a slow or stalled replica cannot fill the disk. The default is
    /// 16 segments' worth (16 × [`max_segment_bytes`](Self::max_segment_bytes),
    /// 1 GiB with the default 64 MiB segments): a limit that grows with the
    /// segments the log is configured for, enough for a replica that restarts or
    /// rides out a network blip to catch up, and small beside the disk of a
    /// machine that holds 64 MiB segments; a replica that stays connected but
    /// takes bytes slower than the log grows (within its timeout, so never cut off
    /// for stalling) would otherwise pin every segment from its position on,
    /// forever. `u64::MAX` keeps every segment a replica needs (no limit).
    ///
    /// A replica served by [`LogDir::serve_replica`] pins the segment it is being
    /// sent and every later one against purges ([`purge_before`](LogDir::purge_before),
    /// [`retain_bytes`](Self::retain_bytes), [`retain_age`](Self::retain_age)). At
    /// each purge, the sealed segments it would delete but a connected replica
    /// still needs are kept while together they hold at most `bytes`; past that,
    /// the oldest of them are deleted until the rest fit, and each replica that
    /// needed one is cut off: its [`serve_replica`](LogDir::serve_replica) and
    /// [`sync_from`](crate::Replica::sync_from) fail with
    /// [`Error::ReplicaTooFarBehind`] (so does every later connection of it: seed
    /// it again), after sending no byte read once the segment was released. With
    /// [`retain_bytes`](Self::retain_bytes), the sealed segments then hold at most
    /// about `retain_bytes + bytes`. A [`DirReader`](crate::DirReader)'s pins are not limited.
    pub fn replica_retain_bytes(&mut self, bytes: u64) -> &mut Self {
        self.replica.retain_bytes = Some(bytes);
        self
    }

    /// How long [`LogDir::serve_replica`] waits for a replica (default 10 s): for
    /// its hello, and for it to take each message (a replica that reads nothing
    /// while the socket's buffers are full). An idle primary sends a heartbeat
    /// every quarter of it, at most every 500 ms, so keep it at most the replicas'
    /// own [`Replica::set_timeout`](crate::Replica::set_timeout) (a replica whose
    /// timeout is shorter than the heartbeat interval takes an idle primary for a
    /// stalled one). Past it, `serve_replica` fails with
    /// [`Error::ReplicaProtocol`]. A zero duration is taken as 1 ms.
    pub fn replica_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.replica.timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// How long [`serve_replica`](LogDir::serve_replica) lets a busy log's commits
    /// gather before it sends them (default [`DEFAULT_WAKE_INTERVAL`](Self::DEFAULT_WAKE_INTERVAL), 1 ms): it
    /// is woken by the durable end as an in-process
    /// [`DirReader`](crate::DirReader::with_wake_interval) is, and for the same reason.
    /// While the log keeps growing, a replica receives (and syncs) at most one
    /// batch per interval instead of one per commit, which saves the primary a
    /// wake, a read and a send per commit and the replica a sync, at the cost of
    /// up to that much replication lag; the first commit after a quiet spell is
    /// sent at once. `Duration::ZERO` sends every commit as it is made durable.
    pub fn replica_wake_interval(&mut self, interval: Duration) -> &mut Self {
        self.replica.wake_interval = interval;
        self
    }

    /// Acknowledge an append (and an [`append_batch`](LogDir::append_batch)) only
    /// once its records are durable on the primary *and* on `n` connected replicas
    /// (default 0: replication is asynchronous). Each replica served by
    /// [`LogDir::serve_replica`] acknowledges its own durable end after each sync;
    /// [`LogDir::replicated_end`] watches the end `n` of them hold. Group commit
    /// keeps working: the records of one commit travel together and one
    /// acknowledgement of each replica serves them all.
    ///
    /// When fewer than `n` replicas have been connected for
    /// [`replica_timeout`](Self::replica_timeout) or longer (counted from
    /// [`open`](Self::open), and from the moment the count last fell below `n`),
    /// appends fail with [`Error::ReplicasUnavailable`], those waiting and new ones
    /// alike, never acknowledged as replicated when they are not; they succeed
    /// again once enough replicas are back. A replica that owes an acknowledgement
    /// for `replica_timeout` is disconnected, so a stalled one counts as gone.
    ///
    /// A failed append's outcome is unknown: its record is written on the primary
    /// before the wait (it may be durable there, and reaches the replicas once
    /// they return, as every record does), and the log is not poisoned. Treat the
    /// error as a timeout: retry idempotently, or read the log back.
    ///
    /// The cost: every append waits for a network round trip and a sync on the
    /// replica as well as its own sync (see the figures of `examples/replica_lag`
    /// with `SYNC_REPLICAS`).
    pub fn sync_replicas(&mut self, n: usize) -> &mut Self {
        self.replica.sync_replicas = n;
        self
    }

    /// Require every replica served by [`LogDir::serve_replica`] to prove it knows
    /// `secret`, and prove it to them in turn, before anything else is said
    /// (feature `replica-auth`): a challenge answered with an HMAC-SHA256 of both
    /// ends' random nonces, compared in constant time; the secret never crosses the
    /// wire. A peer without it fails with [`Error::ReplicaAuthentication`] before
    /// it can read the log's end, pin a segment or be sent a byte of the log; a
    /// replica given the secret ([`Replica::set_secret`](crate::Replica::set_secret)) refuses a primary that
    /// does not know it, so a fake primary cannot feed it records. Set the same
    /// secret on both ends (32 random bytes, say).
    ///
    /// This keeps out strays and impostors, not an attacker on the path of a live
    /// connection (the messages after the handshake carry no MAC, and travel in
    /// the clear): over a network you do not trust, run replication over TLS with
    /// client certificates (see `examples/replicate_tls.rs`), with or without a
    /// secret.
    #[cfg(feature = "replica-auth")]
    pub fn replica_secret(&mut self, secret: impl AsRef<[u8]>) -> &mut Self {
        self.replica.secret = Some(Secret::new(secret.as_ref()));
        self
    }
}
