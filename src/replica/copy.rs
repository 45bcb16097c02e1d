//! The replica's side: [`Replica`], a directory of byte-identical segment copies.
//!
//! Why one file of about 1,100 lines: it is one `impl Replica` around one connection's
//! state (the handshake's outcome, the segment being written, the acknowledgements in
//! flight), which the sync loop, `rewind` and `promote` all take apart. The seam to cut
//! along is the narrow interface between replication and the directory (issue 38:
//! pin a segment, durable end, read a segment); splitting before it would only move the
//! shared fields about.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;
use tokio_util::codec::Decoder;

use super::handshake::{self, RecordCheck};
use super::wire::{self, Hello, Identity, Message, PROTOCOL_VERSION};
use crate::decoder::LogDecoder;
use crate::decoder::Recovery;
use crate::error::Error;
use crate::format::block_start;
use crate::format::fragment::Dialect;
use crate::format::BLOCK_SIZE;
use crate::log_id::LogId;
use crate::logdir::fs::{blocking, DirStorage, OsDirStorage};
use crate::logdir::history::{self, History, HistoryFile};
use crate::logdir::report::CopyObserver;
use crate::logdir::segment::segment_path;
use crate::logdir::DirReader;
use crate::logdir::LogDir;
use crate::logdir::LogDirOptions;
use crate::logdir::{lock, recovery};
use crate::position::LogPosition;
use crate::writer::Storage;
use crate::writer::WriterOptions;

/// The largest record a replica accepts (the decoder's default limit, as a
/// [`DirReader`] reads with).
const MAX_RECORD_BYTES: usize = 64 << 20;

/// The most bytes a replica holds that do not yet end a record: the largest record
/// with its headers, plus a block.
const MAX_PENDING: usize = MAX_RECORD_BYTES + MAX_RECORD_BYTES / 1024 + 2 * BLOCK_SIZE;

/// The most bytes a replica writes before it syncs, while the primary keeps
/// sending. With the last write ([`MAX_WRITE`]) it stays within what recovery
/// takes for a tail lost since the last sync
/// ([`WriterOptions::unsynced_window`], about 5 MiB): a power cut that loses a
/// page further back than that leaves a segment that `Replica::open` and
/// `LogDir::open` refuse as damaged.
const MAX_UNSYNCED: u64 = 4 << 20;

/// The most bytes written in one go: a record larger than this is written in
/// pieces, synced every [`MAX_UNSYNCED`] bytes.
const MAX_WRITE: usize = 1 << 20;

/// A copy of a primary [`LogDir`], kept up to date over any stream by
/// [`sync_from`](Self::sync_from), for readers on another machine and for a
/// failover ([`promote`](Self::promote)). The directory is itself a valid `LogDir`:
/// each segment is byte-identical to the primary's, up to the last complete record
/// received; after the replica is dropped or closed, [`LogDir::open`] works on it
/// and `walcodec verify` finds it clean.
///
/// ```
/// # #[tokio::main]
/// # async fn main() -> Result<(), walcodec::Error> {
/// use walcodec::{LogDir, LogPosition, Replica};
///
/// let (primary_dir, replica_dir) = (tempfile::tempdir()?, tempfile::tempdir()?);
/// let log = LogDir::open(primary_dir.path()).await?;
/// log.append("hello").await?;
/// let mut replica = Replica::open(replica_dir.path()).await?;
/// let (a, b) = tokio::io::duplex(64 * 1024);
/// let serving = tokio::spawn({
///     let log = log.clone();
///     async move { log.serve_replica(a).await }
/// });
/// let syncing = tokio::spawn(async move {
///     let end = replica.sync_from(b).await;
///     (replica, end)
/// });
/// log.append("world").await?;
/// let end = log.close().await?; // serve_replica returns once all is shipped
/// serving.await.unwrap()?;
/// let (replica, synced) = syncing.await.unwrap();
/// let synced = synced?;
/// assert_eq!(synced.end, end);
/// assert!(synced.primary_closed_cleanly);
/// let mut reader = replica.read_from(LogPosition::START).await?;
/// assert_eq!(reader.next_record().await.unwrap()?.data, "hello");
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Replica {
    dir: PathBuf,
    /// The directory's `flock`, as a `LogDir` takes it; shared with the work in
    /// flight ([`InFlight`]), so a replica dropped mid-write keeps the directory
    /// locked until that write is done.
    lock: Option<Arc<std::fs::File>>,
    /// The first segment kept.
    first: u64,
    /// The last segment: copies go on there.
    segment: u64,
    /// Its length: the end of its last complete record, synced.
    len: u64,
    /// The log's id, as the directory's `HISTORY` holds it: `None` until the
    /// replica first follows a primary (or for a copy made before logs had ids).
    log_id: Option<LogId>,
    /// The log's history as the replica holds it durably: its primary's, as
    /// shipped.
    history: History,
    end: watch::Sender<LogPosition>,
    /// How long [`sync_from`](Self::sync_from) waits for the primary.
    timeout: Duration,
    /// The directory's file-system steps (a simulator's in the power-cut tests).
    storage: Arc<dyn DirStorage>,
    /// The secret a primary must prove it knows (feature `replica-auth`).
    #[cfg(feature = "replica-auth")]
    secret: Option<super::auth::Secret>,
    /// Closed once the directory work in flight is done: the work of a call that
    /// was dropped runs on (a blocking thread cannot be stopped), and no later
    /// call touches the directory, nor lets another open it, before it ends.
    in_flight: Option<oneshot::Receiver<()>>,
    /// When the replica last held all its primary had made durable.
    caught_up: watch::Sender<Option<Instant>>,
    /// Its metrics and events, under the name [`set_name`](Self::set_name) gave.
    observer: CopyObserver,
    /// Whether the fields above are the directory's state: false from the start
    /// of a call that changes the directory until it returns, so that a call
    /// dropped mid-way (or failed in a file-system step) leaves it false and the
    /// next one recovers the directory again, as [`open`](Replica::open) does.
    settled: bool,
}

/// How a [`Replica::sync_from`] connection ended.
///
/// | `primary_closed_cleanly` | what happened | what to do |
/// |---|---|---|
/// | `true` | the primary [closed](LogDir::close) its log and sent all of it, then said goodbye: `end` is its whole log | a planned switch-over: [`promote`](Replica::promote) now loses nothing |
/// | `false` | the connection ended without a goodbye: the primary died, was cut off, or went away | reconnect, or fail over ([`promote`](Replica::promote)): what the primary acknowledged but did not ship is not here unless it had [synchronous replicas](crate::LogDirOptions::sync_replicas) |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SyncEnd {
    /// The replica's durable end when the connection ended.
    pub end: LogPosition,
    /// Whether the primary said goodbye: it closed its log cleanly, having sent
    /// everything it held.
    pub primary_closed_cleanly: bool,
}

/// Held by directory work while it runs: the directory's lock, and the sender
/// whose drop tells the replica the work ended.
struct InFlight {
    _lock: Option<Arc<std::fs::File>>,
    _done: oneshot::Sender<()>,
}

/// One segment being copied.
struct Stream {
    /// The segment's file, written where the replica ends; `None` only while a
    /// blocking thread has it.
    file: Option<Box<dyn Storage>>,
    decoder: LogDecoder,
    /// What the decoder has yet to consume.
    feed: BytesMut,
    /// Bytes still to arrive that end a block before the decoder's first.
    skip: u64,
    /// Bytes written since the last sync (not yet reported durable).
    unsynced: u64,
    /// The bytes received past the replica's length, not yet a whole record.
    pending: BytesMut,
}

impl Replica {
    /// Opens (creating it if needed) the replica directory at `path` and recovers
    /// it as [`LogDir::open`] does: a torn tail left by a crash is cut, so the
    /// replica resumes after its last complete record. Takes the directory's lock
    /// ([`Error::Locked`] when a `LogDir` or another `Replica` has it).
    pub async fn open(path: impl AsRef<Path>) -> Result<Replica, Error> {
        Self::open_with_storage(path, Arc::new(OsDirStorage)).await
    }

    /// [`open`](Self::open) with the replica's file-system steps (creating,
    /// writing, syncing and deleting its files and syncing its directory) done by
    /// `storage`, as [`LogDirOptions::dir_storage`] does for a `LogDir`: the power-cut
    /// tests record them to build what a crash could leave. A testing hook, not a
    /// stable API.
    #[doc(hidden)]
    pub async fn open_with_storage(
        path: impl AsRef<Path>,
        storage: Arc<dyn DirStorage>,
    ) -> Result<Replica, Error> {
        let dir = path.as_ref().to_path_buf();
        let lock = lock::create_and_lock(&dir, &storage).await?;
        let mut replica = Replica {
            dir,
            lock: Some(Arc::new(lock)),
            first: 0,
            segment: 0,
            len: 0,
            log_id: None,
            history: History::default(),
            end: watch::channel(LogPosition::START).0,
            timeout: wire::DEFAULT_TIMEOUT,
            storage,
            #[cfg(feature = "replica-auth")]
            secret: None,
            in_flight: None,
            caught_up: watch::channel(None).0,
            observer: CopyObserver::new(""),
            settled: false,
        };
        replica.settle().await?;
        Ok(replica)
    }

    /// Waits for directory work left by a dropped call; then, unless the state is
    /// known, recovers the directory as [`LogDir::open`] does (a torn tail cut)
    /// and makes what it holds durable: the replica resumes after its last
    /// complete record, whatever step a dropped call stopped at.
    async fn settle(&mut self) -> Result<(), Error> {
        if let Some(done) = self.in_flight.as_mut() {
            // An error only says the sender is gone: the work ended.
            let _ = done.await;
            self.in_flight = None;
        }
        if self.settled {
            return Ok(());
        }
        let (dir, storage) = (self.dir.clone(), self.storage.clone());
        // A task of its own, so a settle dropped mid-way leaves no file-system step
        // of the recovery unwaited for.
        let recovered = self
            .run(async move {
                let recovered = recovery::recover(
                    &dir,
                    &storage,
                    WriterOptions::new().unsynced_window(),
                    0,
                    false,
                )
                .await?;
                // Records a dropped call wrote but did not sync are whole and
                // verified: synced now, before they are reported.
                let file = recovered.active_file.try_clone()?;
                blocking(move || {
                    storage.sync_file(&file)?;
                    storage.sync_dir(&dir)
                })
                .await?;
                Ok(recovered)
            })
            .await?;
        self.first = recovered
            .sealed
            .keys()
            .next()
            .copied()
            .unwrap_or(recovered.active);
        self.segment = recovered.active;
        self.len = recovered.active_len;
        (self.log_id, self.history) = match recovered.history {
            Some(file) => (Some(file.log_id), file.history),
            None => (None, History::default()),
        };
        self.end
            .send_replace(LogPosition::new(self.segment, self.len));
        self.settled = true;
        Ok(())
    }

    /// Marks directory work as in flight until the returned guard is dropped.
    fn start_work(&mut self) -> InFlight {
        let (done, waiter) = oneshot::channel();
        self.in_flight = Some(waiter);
        InFlight {
            _lock: self.lock.clone(),
            _done: done,
        }
    }

    /// Runs `work` as a task of its own: dropping this future leaves it running to
    /// its end, and the next call waits for it ([`settle`](Self::settle)).
    async fn run<T, F>(&mut self, work: F) -> Result<T, Error>
    where
        F: std::future::Future<Output = Result<T, Error>> + Send + 'static,
        T: Send + 'static,
    {
        let guard = self.start_work();
        let out = tokio::spawn(async move {
            let out = work.await;
            drop(guard);
            out
        })
        .await
        .map_err(std::io::Error::other)?;
        self.in_flight = None;
        out
    }

    /// Runs the blocking file-system step `f` on a blocking thread: dropping this
    /// future leaves it running to its end, and the next call waits for it.
    async fn blocking<T, F>(&mut self, f: F) -> std::io::Result<T>
    where
        F: FnOnce() -> std::io::Result<T> + Send + 'static,
        T: Send + 'static,
    {
        let guard = self.start_work();
        let out = tokio::task::spawn_blocking(move || {
            let out = f();
            drop(guard);
            out
        })
        .await
        .map_err(std::io::Error::other)?;
        self.in_flight = None;
        out
    }

    /// How long [`sync_from`](Self::sync_from) waits for the primary (default
    /// 10 s): for its hello, to take the replica's, and then for each message, a
    /// whole one (at most 1 MiB) within the time. Past it, `sync_from` fails with
    /// [`Error::ReplicaProtocol`], having written only what verified. An idle
    /// primary sends a heartbeat every quarter of its own
    /// [`replica_timeout`](crate::LogDirOptions::replica_timeout), at most every
    /// 500 ms: keep this longer than that interval. A zero duration is taken as
    /// 1 ms.
    pub fn set_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// Require the primary to prove it knows `secret`, and prove it in turn, before
    /// anything else is said (feature `replica-auth`; see
    /// [`LogDirOptions::replica_secret`] for the primary's side): a primary that
    /// does not know it fails [`sync_from`](Self::sync_from) with
    /// [`Error::ReplicaAuthentication`] before a byte is written.
    #[cfg(feature = "replica-auth")]
    pub fn set_secret(&mut self, secret: impl AsRef<[u8]>) -> &mut Self {
        self.secret = Some(super::auth::Secret::new(secret.as_ref()));
        self
    }

    /// The replica's directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Where the replica ends (durably): just past its last complete record.
    pub fn end(&self) -> LogPosition {
        *self.end.borrow()
    }

    /// The replica's durable end as a [`watch::Receiver`], as
    /// [`LogDir::durable_end`]: it moves on once copied records are synced, and to
    /// `(next, 0)` when a segment is sealed.
    pub fn durable_end(&self) -> watch::Receiver<LogPosition> {
        self.end.subscribe()
    }

    /// When the replica last held everything its primary had made durable (it
    /// received a data message reaching the primary's durable end as it was when
    /// sent, or a heartbeat, which an idle primary sends once it has sent all),
    /// as a [`watch::Receiver`]: `None` until it first does. The replica's lag is
    /// the time since then; with feature `metrics` it is the gauge
    /// `walcodec_replica_lag_seconds` (0 while it keeps up). Under a steady load a
    /// replica that keeps up is caught up at every commit it receives; one that
    /// falls behind (a slow disk, a slow link, catching up after a reconnect) is
    /// not until it has copied all the primary had.
    pub fn caught_up(&self) -> watch::Receiver<Option<Instant>> {
        self.caught_up.subscribe()
    }

    /// The replica's name (default empty): the `log` label of its metrics
    /// (feature `metrics`) and the `log` field of its events (feature
    /// `tracing`), as [`LogDirOptions::name`](crate::LogDirOptions::name) names a
    /// primary's.
    pub fn set_name(&mut self, name: impl AsRef<str>) -> &mut Self {
        self.observer = CopyObserver::new(name.as_ref());
        self
    }

    /// Reads the replica from `from` on, as [`DirReader::open`] reads a `LogDir` in
    /// another process; [`DirReader::follow`] follows what
    /// [`sync_from`](Self::sync_from) copies (by polling the files).
    pub async fn read_from(&self, from: LogPosition) -> Result<DirReader, Error> {
        DirReader::open(&self.dir, from).await
    }

    /// Pulls from a primary's [`LogDir::serve_replica`] over `conn` until the
    /// connection ends; returns how it ended ([`SyncEnd`]): the replica's durable
    /// end then, and whether the primary closed its log cleanly after sending all
    /// of it (else the connection was cut: the primary died, or the network
    /// failed). Call it again on a new connection to go on: it resumes after the
    /// last complete record, whatever byte the previous connection was cut at.
    ///
    /// # Identity and history
    /// Before a byte is written, the two ends compare their copies of the log:
    /// the log id, the [history](LogDir::history), and the checksum of the
    /// replica's last record (see the [protocol](crate::Replica#protocol)). A
    /// replica that holds no record takes the primary's id and history, durably,
    /// before its first record; afterwards its `HISTORY` follows the primary's
    /// (epochs the primary starts while connected included), so a promoted
    /// replica and its old primary can tell where they forked.
    ///
    /// # Cancellation
    /// Dropping the future at any point (a timeout, a `select!`) is safe: it
    /// writes nothing unverified, and the one file-system step it may leave
    /// running on a blocking thread (a write, a sync, a new segment) is waited for
    /// by every later call ([`sync_from`](Self::sync_from), [`close`](Self::close),
    /// [`promote`](Self::promote)), which then recovers the directory and resumes
    /// after its last complete record, synced. A replica dropped meanwhile keeps
    /// its directory locked until that step is done, so nothing written by the
    /// dropped call can land after a new owner's appends.
    ///
    /// Every fragment's checksum is checked on arrival, and a record is written only
    /// whole, where it sits in the primary's segment, and synced before
    /// [`durable_end`](Self::durable_end) reports it: once nothing more has arrived,
    /// at least every 4 MiB while the primary keeps sending, at a segment's seal and
    /// before this returns.
    ///
    /// # Errors
    /// [`Error::ReplicaTooFarBehind`] (seed the replica again),
    /// [`Error::ReplicaOfAnotherLog`] (nothing written),
    /// [`Error::ReplicaDiverged`] (nothing written; [`rewind`](Self::rewind) to
    /// its `common` position to follow the primary), [`Error::ReplicaVersion`],
    /// [`Error::ReplicaProtocol`] (a peer that breaks the protocol or stalls),
    /// [`Error::Corruption`] for a damaged fragment; what was written before stands.
    pub async fn sync_from<C>(&mut self, conn: C) -> Result<SyncEnd, Error>
    where
        C: AsyncRead + AsyncWrite + Unpin + Send,
    {
        self.settle().await?;
        self.settled = false;
        let result = self.sync(conn).await;
        // A failed file-system step may have left the directory anywhere between
        // two states: the next call reads it again.
        self.settled = !matches!(result, Err(Error::Io(_)));
        result
    }

    async fn sync<C>(&mut self, conn: C) -> Result<SyncEnd, Error>
    where
        C: AsyncRead + AsyncWrite + Unpin + Send,
    {
        let (rd, mut wr) = tokio::io::split(conn);
        // Buffered, so the replica can tell whether more has already arrived: it
        // syncs once the primary has nothing more in flight, not per message.
        let mut rd = tokio::io::BufReader::with_capacity(wire::MAX_DATA, rd);
        #[cfg(feature = "replica-auth")]
        if let Some(secret) = &self.secret {
            super::auth::handshake(
                &mut rd,
                &mut wr,
                secret,
                super::auth::Role::Replica,
                self.timeout,
            )
            .await?;
        }
        let position = if self.is_empty() {
            LogPosition::START
        } else {
            LogPosition::new(self.segment, self.len)
        };
        let hello = Hello {
            version: PROTOCOL_VERSION,
            from_replica: true,
            position,
        };
        let last = handshake::last_record(&self.dir, self.first, self.segment, self.len).await?;
        let ours = Identity {
            log_id: self.log_id,
            last,
            history: self.history.clone(),
        };
        let send = async {
            wr.write_all(&hello.encode()).await?;
            wr.write_all(&ours.encode()).await?;
            wr.flush().await
        };
        let cut = SyncEnd {
            end: self.end(),
            primary_closed_cleanly: false,
        };
        match tokio::time::timeout(self.timeout, send).await {
            Err(_) => return Err(wire::protocol("the primary took no hello in time")),
            Ok(Err(_)) => return Ok(cut),
            Ok(Ok(())) => {}
        }
        let primary = wire::read_hello(&mut rd, self.timeout).await?;
        primary.check(false)?;
        self.judge(&mut rd, position, primary.position, ours)
            .await?;
        let mut stream: Option<Stream> = None;
        // Nothing before the primary's first segment message: until then the
        // replica's end may not be a position of the primary's (a new replica).
        let mut acker = Acker {
            acked: Some(self.end()),
            live: true,
        };
        let result = self.pull(&mut rd, &mut wr, &mut acker, &mut stream).await;
        // Whatever ended the pull, what was written is made durable and reported,
        // so the next connection resumes exactly there.
        if let Some(stream) = stream.as_mut() {
            self.make_durable(stream).await?;
        }
        result.map(|primary_closed_cleanly| SyncEnd {
            end: self.end(),
            primary_closed_cleanly,
        })
    }

    /// Reads the primary's identity (or its refusal) and judges it as the primary
    /// judged the replica ([`handshake::verdict`]); then takes its id and history,
    /// durably, before any record.
    async fn judge<R: AsyncRead + Unpin>(
        &mut self,
        rd: &mut R,
        position: LogPosition,
        primary_end: LogPosition,
        ours: Identity,
    ) -> Result<(), Error> {
        let theirs = match tokio::time::timeout(self.timeout, wire::read_message(rd)).await {
            Err(_) => return Err(wire::protocol("no identity from the primary in time")),
            Ok(Ok(None)) | Ok(Err(Error::Io(_))) => {
                return Err(wire::protocol("the connection ended in the handshake"))
            }
            Ok(Err(e)) => return Err(e),
            Ok(Ok(Some(Message::Refused(refusal)))) => return Err(refusal.into_error()),
            Ok(Ok(Some(Message::Identity(identity)))) => identity,
            Ok(Ok(Some(_))) => {
                return Err(wire::protocol(
                    "the primary's first message is not its identity",
                ))
            }
        };
        let Some(log_id) = theirs.log_id else {
            return Err(wire::protocol("a primary without a log id"));
        };
        let record = match (ours.last, theirs.last) {
            (None, _) => RecordCheck::Nothing,
            (Some(mine), Some(vouched)) if mine == vouched => RecordCheck::Same,
            (Some(_), None) => RecordCheck::Purged,
            (Some(_), Some(_)) => RecordCheck::Differs,
        };
        handshake::verdict(
            handshake::Copy {
                id: Some(log_id),
                history: &theirs.history,
                end: primary_end,
            },
            handshake::Copy {
                id: ours.log_id,
                history: &ours.history,
                end: position,
            },
            record,
        )?;
        self.adopt(log_id, theirs.history).await
    }

    /// Makes `log_id` and `history` the replica's, durably (a no-op when they
    /// already are).
    async fn adopt(&mut self, log_id: LogId, history: History) -> Result<(), Error> {
        if self.log_id == Some(log_id) && self.history == history {
            return Ok(());
        }
        let file = HistoryFile {
            log_id,
            history,
            truncate: None,
        };
        let (dir, storage, write) = (self.dir.clone(), self.storage.clone(), file.clone());
        self.blocking(move || history::write(&dir, &write, &*storage))
            .await?;
        self.log_id = Some(file.log_id);
        self.history = file.history;
        Ok(())
    }

    /// Copies what the primary sends; returns whether it said goodbye (a clean
    /// close) before the connection ended.
    async fn pull<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
        &mut self,
        rd: &mut tokio::io::BufReader<R>,
        wr: &mut W,
        acker: &mut Acker,
        stream: &mut Option<Stream>,
    ) -> Result<bool, Error> {
        // Until it first catches up, the replica lags since the connection began.
        let mut lagging_since = Instant::now();
        loop {
            // The primary learns each durable end (synchronous replicas), and that
            // the replica is alive: after its first segment message, after each
            // heartbeat, and whenever the end moved.
            acker.ack(wr, self.end(), self.timeout).await;
            let message = match tokio::time::timeout(self.timeout, wire::read_message(rd)).await {
                Err(_) => return Err(wire::protocol("no message from the primary in time")),
                // The connection ended, between messages or inside one.
                Ok(Ok(None)) | Ok(Err(Error::Io(_))) => return Ok(false),
                Ok(Err(e)) => return Err(e),
                Ok(Ok(Some(message))) => message,
            };
            match message {
                Message::Heartbeat => {
                    acker.acked = None;
                    self.held_all(&mut lagging_since);
                }
                Message::Refused(refusal) => return Err(refusal.into_error()),
                Message::Goodbye => return Ok(true),
                Message::Identity(_) => {
                    return Err(wire::protocol("an identity after the handshake"))
                }
                Message::History(history) => {
                    // Sent before the bytes of the new epoch: never a fork of
                    // what the replica holds (nor of the record it is receiving,
                    // which the primary checked lies before the epoch's start).
                    if !handshake::follows(&history, &self.history, self.end()) {
                        return Err(wire::protocol(
                            "a history that forks from what the replica holds",
                        ));
                    }
                    let Some(log_id) = self.log_id else {
                        return Err(wire::protocol("a history before the handshake"));
                    };
                    self.adopt(log_id, history).await?;
                }
                Message::Segment { segment, offset } => {
                    if stream.is_some() {
                        return Err(wire::protocol("a segment started inside another"));
                    }
                    *stream = Some(self.start_segment(segment, offset).await?);
                    acker.acked = None;
                }
                Message::Data { bytes, at_end } => {
                    let Some(current) = stream.as_mut() else {
                        return Err(wire::protocol("data outside a segment"));
                    };
                    let whole = self.take(current, bytes)?;
                    // Synced once the primary has nothing more in flight, or after
                    // enough bytes: with the write, in one step.
                    let sync = rd.buffer().is_empty();
                    self.write(current, whole, sync).await?;
                    if at_end {
                        self.held_all(&mut lagging_since);
                    } else {
                        self.observer.lag(lagging_since.elapsed());
                    }
                }
                Message::Sealed { len } => {
                    let Some(current) = stream.as_ref() else {
                        return Err(wire::protocol("a seal outside a segment"));
                    };
                    // Refused with the stream kept, so what it wrote is still made
                    // durable and reported before sync_from returns.
                    if len != self.len || !current.pending.is_empty() {
                        return Err(wire::protocol(
                            "the primary sealed a segment where no record of the replica ends",
                        ));
                    }
                    // The next segment must be one a log directory can hold and go
                    // on from: a seal of the second-to-last number is refused.
                    let next = match self.segment.checked_add(1) {
                        Some(next) if next != u64::MAX => next,
                        _ => {
                            return Err(wire::protocol(
                                "the primary sealed a segment with no next number",
                            ))
                        }
                    };
                    if let Some(mut current) = stream.take() {
                        self.make_durable(&mut current).await?;
                    }
                    self.next_segment(next).await?;
                }
            }
        }
    }

    /// The replica holds all its primary had made durable: it is caught up now.
    fn held_all(&self, lagging_since: &mut Instant) {
        let now = Instant::now();
        self.observer.caught_up(now - *lagging_since);
        *lagging_since = now;
        self.caught_up.send_replace(Some(now));
    }

    /// Syncs what was written to the segment and reports it durable.
    async fn make_durable(&mut self, stream: &mut Stream) -> Result<(), Error> {
        self.write(stream, Bytes::new(), true).await
    }

    /// Writes `whole` (complete records) where the replica ends, on a blocking
    /// thread; syncs when `sync` or every [`MAX_UNSYNCED`] bytes, and reports the
    /// end durable only once synced.
    async fn write(&mut self, stream: &mut Stream, whole: Bytes, sync: bool) -> Result<(), Error> {
        if whole.is_empty() && (!sync || stream.unsynced == 0) {
            return Ok(());
        }
        let Some(mut file) = stream.file.take() else {
            return Err(
                std::io::Error::other("a replica segment lost to a cancelled write").into(),
            );
        };
        let mut unsynced = stream.unsynced;
        let len = whole.len() as u64;
        let (file, result) = self
            .blocking(move || {
                let result = (|| {
                    for piece in whole.chunks(MAX_WRITE) {
                        write_all(&mut *file, piece)?;
                        unsynced += piece.len() as u64;
                        if unsynced >= MAX_UNSYNCED {
                            file.sync()?;
                            unsynced = 0;
                        }
                    }
                    if sync && unsynced > 0 {
                        file.sync()?;
                        unsynced = 0;
                    }
                    Ok(unsynced)
                })();
                Ok((file, result))
            })
            .await?;
        stream.file = Some(file);
        let unsynced: std::io::Result<u64> = result;
        let unsynced = unsynced?;
        self.len += len;
        stream.unsynced = unsynced;
        if unsynced == 0 {
            self.end
                .send_replace(LogPosition::new(self.segment, self.len));
        }
        Ok(())
    }

    /// Whether the replica holds nothing yet (a new replica starts at the primary's
    /// first segment, whatever its number).
    fn is_empty(&self) -> bool {
        self.first == self.segment && self.len == 0
    }

    /// Checks where the primary starts sending against the replica's end, and opens
    /// the segment to copy on.
    async fn start_segment(&mut self, segment: u64, offset: u64) -> Result<Stream, Error> {
        if segment == 0 || segment == u64::MAX {
            // A LogDir numbers its segments from 1, and each has a next one.
            return Err(wire::protocol("a segment number no log directory has"));
        }
        if self.is_empty() && offset == 0 && segment != self.segment {
            // A new replica takes the primary's numbering: its empty segment goes
            // first, so a crash never leaves two with a hole between them.
            let old = segment_path(&self.dir, self.segment);
            let (dir, storage) = (self.dir.clone(), self.storage.clone());
            self.blocking(move || {
                storage.remove(&old)?;
                storage.sync_dir(&dir)
            })
            .await?;
            self.first = segment;
            self.next_segment(segment).await?;
        } else if Some(segment) == self.segment.checked_add(1) && offset == 0 {
            // The replica has all of its last segment, which the primary purged:
            // it resolved the replica's end to the start of the next one.
            self.next_segment(segment).await?;
        } else if segment != self.segment || offset != self.len {
            return Err(wire::protocol(
                "the primary sends from another position than the replica's end",
            ));
        }
        // The decoder starts at the block holding the replica's end, so it finds
        // where fragments begin; it returns only records starting at the end.
        // At a block's last bytes, that block start is the next one: the trailer
        // up to it arrives first and is not the decoder's (it is checked as a gap).
        let from = block_start(self.len);
        let skip = from.saturating_sub(self.len);
        let (path, storage, len) = (
            segment_path(&self.dir, segment),
            self.storage.clone(),
            self.len,
        );
        let (file, feed) = self
            .blocking(move || {
                use std::io::{Read, Seek, SeekFrom};
                let mut file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(path)?;
                let mut feed = BytesMut::zeroed(len.saturating_sub(from) as usize);
                file.seek(SeekFrom::Start(from.min(len)))?;
                file.read_exact(&mut feed)?;
                file.seek(SeekFrom::Start(len))?;
                Ok((storage.storage(file), feed))
            })
            .await?;
        let decoder = LogDecoder::builder()
            .dialect(Dialect::RocksDb)
            .log_number(segment)
            .recovery(Recovery::AbsoluteConsistency)
            .max_record_bytes(MAX_RECORD_BYTES)
            .start_offset(self.len)
            .build();
        Ok(Stream {
            file: Some(file),
            decoder,
            feed,
            skip,
            unsynced: 0,
            pending: BytesMut::new(),
        })
    }

    /// Verifies received bytes; returns the whole records they complete (to be
    /// written where the replica ends).
    fn take(&mut self, stream: &mut Stream, mut bytes: BytesMut) -> Result<Bytes, Error> {
        stream.pending.extend_from_slice(&bytes);
        let skipped = (stream.skip as usize).min(bytes.len());
        stream.skip -= skipped as u64;
        // The decoder mostly has consumed all it was given: it takes the message's
        // buffer then, not a copy.
        let _ = bytes.split_to(skipped);
        stream.feed.unsplit(bytes);
        let mut end = self.len;
        while stream.decoder.decode(&mut stream.feed)?.is_some() {
            let Some(record) = stream.decoder.last_record() else {
                break;
            };
            // Between records only a block's zero trailer may sit; the decoder skips
            // it unread, so it is checked here, or a flipped byte there would be
            // copied.
            if record.start < end
                || stream.pending[(end - self.len) as usize..(record.start - self.len) as usize]
                    .iter()
                    .any(|&b| b != 0)
            {
                return Err(wire::protocol(
                    "bytes between records that are not a zero trailer",
                ));
            }
            end = record.end;
        }
        let whole = stream.pending.split_to((end - self.len) as usize).freeze();
        if stream.pending.len() > MAX_PENDING {
            return Err(wire::protocol(
                "more bytes than the largest record without one ending",
            ));
        }
        Ok(whole)
    }

    /// Makes `segment` (empty) the replica's last one, durably, as a `LogDir`'s
    /// rotation does.
    async fn next_segment(&mut self, segment: u64) -> Result<(), Error> {
        let (dir, storage) = (self.dir.clone(), self.storage.clone());
        self.run(async move {
            drop(recovery::create_segment(&dir, segment, &storage).await?);
            Ok(())
        })
        .await?;
        self.segment = segment;
        self.len = 0;
        self.end.send_replace(LogPosition::new(segment, 0));
        Ok(())
    }

    /// Cuts the replica back to `to`, durably: the records after it are deleted
    /// (the segments after `to.segment`, newest first, and the rest of
    /// `to.segment`), and the epochs of its [history](LogDir::history) that start
    /// after it are dropped, so the next [`sync_from`](Self::sync_from) continues
    /// the primary's history from there. This is the failback path: a former
    /// primary whose last records never reached the replica that took over is
    /// refused with [`Error::ReplicaDiverged`]; rewound to its `common` position,
    /// it follows the new primary, and ends byte-identical to it.
    ///
    /// [`LogPosition::START`] (a `common` where nothing shared could be proven)
    /// empties the replica: it copies the log again, from the primary's first
    /// segment.
    ///
    /// ```no_run
    /// # async fn failback(mut old_primary: walcodec::Replica, conn: tokio::net::TcpStream) -> Result<(), walcodec::Error> {
    /// use walcodec::Error;
    ///
    /// // `old_primary`: `Replica::open` on the directory the old primary wrote.
    /// match old_primary.sync_from(conn).await {
    ///     Err(Error::ReplicaDiverged { common, .. }) => {
    ///         // Its records after `common` never reached the new primary: drop
    ///         // them, then connect again.
    ///         old_primary.rewind(common).await?;
    ///     }
    ///     other => {
    ///         other?;
    ///     }
    /// }
    /// # Ok(())
    /// # }
    /// # let _ = failback;
    /// ```
    ///
    /// The cut is decided by one durable replacement of the directory's
    /// `HISTORY` (the trimmed history with the cut to make, as
    /// [`LogDir::truncate_after`] decides its own) before anything is deleted, so
    /// a crash (or a dropped future) in the middle leaves the replica at its old
    /// end with its old history, or it is reopened (and the next call goes on) at
    /// `to`, never in between.
    ///
    /// # Errors
    /// [`Error::InvalidPosition`] when `to` is past the replica's end or not the
    /// end of a record; [`Error::Purged`] when its segment is not held.
    pub async fn rewind(&mut self, to: LogPosition) -> Result<(), Error> {
        self.settle().await?;
        let end = self.end();
        // The start of the log: everything goes.
        let to = if to == LogPosition::START {
            LogPosition::new(self.first, 0)
        } else {
            to
        };
        if to > end {
            return Err(Error::InvalidPosition {
                position: to,
                reason: "past the end of the replica",
            });
        }
        if to.segment < self.first {
            return Err(Error::Purged {
                segment: to.segment,
            });
        }
        if to.offset > 0
            && handshake::checksum_ending_at(&self.dir, to)
                .await?
                .is_none()
        {
            return Err(Error::InvalidPosition {
                position: to,
                reason: "not the end of a record",
            });
        }
        self.settled = false;
        let mut trimmed = self.history.clone();
        trimmed.trim_after(to);
        let decided = self.log_id.map(|log_id| HistoryFile {
            log_id,
            history: trimmed.clone(),
            truncate: None,
        });
        let (dir, storage) = (self.dir.clone(), self.storage.clone());
        self.blocking(move || {
            // Decided before anything is deleted, by one durable step that `open`
            // finishes after a crash: deleting the later segments one by one
            // would otherwise leave the replica cut part of the way.
            match &decided {
                Some(file) => {
                    let mut deciding = file.clone();
                    deciding.truncate = Some(to);
                    history::write(&dir, &deciding, &*storage)?;
                }
                // A copy made before logs had ids: the marker of old.
                None => {
                    recovery::write_position_file(&dir, recovery::TRUNCATE_FILE, to, &*storage)?;
                    storage.sync_dir(&dir)?;
                }
            }
            recovery::apply_truncation(&dir, to, &*storage)?;
            match &decided {
                Some(file) => history::write(&dir, file, &*storage),
                None => Ok(()),
            }
        })
        .await?;
        self.history = trimmed;
        self.segment = to.segment;
        self.len = to.offset;
        self.end.send_replace(to);
        self.settled = true;
        Ok(())
    }

    /// The log's id, once the replica has followed a primary (or the directory
    /// was a `LogDir`): see [`LogDir::log_id`].
    pub fn log_id(&self) -> Option<LogId> {
        self.log_id
    }

    /// The log's history as the replica holds it: its primary's, as shipped
    /// (see [`LogDir::history`]).
    pub fn history(&self) -> &History {
        &self.history
    }

    /// Releases the directory's lock; returns the replica's end, durable. After a
    /// [`sync_from`](Self::sync_from) that was dropped mid-way, waits for its
    /// file-system step in flight and recovers the directory first.
    pub async fn close(mut self) -> Result<LogPosition, Error> {
        self.settle().await?;
        self.lock.take();
        Ok(self.end())
    }

    /// Ends replication and opens the directory as a [`LogDir`] to take over
    /// appending (after a failover): appends go on after the last record copied,
    /// in a new epoch of the log's [`history`](LogDir::history) that starts at the
    /// replica's end, durable before this returns.
    ///
    /// The log is opened with the default [`LogDirOptions`], not the primary's:
    /// to keep its segment size, retention, replica limits and writer settings,
    /// use [`promote_with`](Self::promote_with):
    ///
    /// ```
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), walcodec::Error> {
    /// # let dir = tempfile::tempdir()?;
    /// use walcodec::{LogDir, Replica};
    ///
    /// let replica = Replica::open(dir.path()).await?;
    /// // The primary's options.
    /// let options = LogDir::builder().max_segment_bytes(16 << 20).clone();
    /// let log = replica.promote_with(&options).await?;
    /// log.append("the first record of the new primary").await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn promote(self) -> Result<LogDir, Error> {
        self.promote_with(&LogDirOptions::new()).await
    }

    /// [`promote`](Self::promote) with `options` for the `LogDir`: give it the
    /// primary's options, so the new primary rotates, retains and syncs as the
    /// old one did.
    pub async fn promote_with(mut self, options: &LogDirOptions) -> Result<LogDir, Error> {
        // Nothing of a dropped sync may land after the new primary's appends.
        self.settle().await?;
        let dir = self.dir.clone();
        self.lock.take();
        let log = options.open(dir).await?;
        log.begin_epoch().await?;
        Ok(log)
    }
}

/// Sends the replica's acknowledgements of its durable end.
struct Acker {
    /// The end last acknowledged; `None`: acknowledge even if it did not move.
    acked: Option<LogPosition>,
    /// Cleared once a write failed or timed out: the primary is gone or reads
    /// nothing, and what it sends (or its silence) ends the connection.
    live: bool,
}

impl Acker {
    async fn ack<W: AsyncWrite + Unpin>(
        &mut self,
        wr: &mut W,
        end: LogPosition,
        timeout: Duration,
    ) {
        if !self.live || self.acked == Some(end) {
            return;
        }
        let bytes = wire::encode_ack(end);
        let sent = tokio::time::timeout(timeout, async {
            wr.write_all(&bytes).await?;
            wr.flush().await
        })
        .await;
        match sent {
            Ok(Ok(())) => self.acked = Some(end),
            _ => self.live = false,
        }
    }
}

/// Writes all of `buf` through `file`.
fn write_all(file: &mut dyn Storage, mut buf: &[u8]) -> std::io::Result<()> {
    while !buf.is_empty() {
        match file.write(buf)? {
            0 => return Err(std::io::ErrorKind::WriteZero.into()),
            n => buf = &buf[n..],
        }
    }
    Ok(())
}
