//! [`LogStore`]: openraft's [`RaftLogStorage`] on a [`LogDir`].

use std::borrow::Borrow;
use std::fmt::{self, Debug};
use std::marker::PhantomData;
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{
    LogId, LogState, OptionalSend, RaftLogId, RaftLogReader, RaftTypeConfig, StorageError, Vote,
};
use tokio::sync::{mpsc, oneshot};
use walcodec::{LogDirOptions, LogPosition};

use crate::error::{vote_error, write_error};
use crate::group::Lease;
use crate::reader::LogReader;
use crate::record;
use crate::state::State;
use crate::writer::{Done, Op, Writer, SOLO};
use crate::Error;

/// Configures a [`LogStore`], then opens it.
///
/// ```
/// # #[tokio::main]
/// # async fn main() -> Result<(), walcodec_raft::Error> {
/// use walcodec::LogDirOptions;
/// use walcodec_raft::LogStore;
/// # use std::io::Cursor;
/// # openraft::declare_raft_types!(pub TypeConfig:);
///
/// let dir = tempfile::tempdir().unwrap();
/// let mut store = LogStore::<TypeConfig>::builder()
///     .log_dir(LogDirOptions::new().max_segment_bytes(16 << 20))
///     .open(dir.path())
///     .await?;
/// store.close().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct LogStoreBuilder<C: RaftTypeConfig> {
    options: LogDirOptions,
    max_read_bytes: Option<u64>,
    config: PhantomData<fn() -> C>,
}

impl<C: RaftTypeConfig> LogStoreBuilder<C> {
    /// The log directory's options: segment size, the writer's group-commit
    /// settings. Leave retention ([`LogDirOptions::retain_bytes`],
    /// [`LogDirOptions::retain_age`]) off, as it is by default: openraft decides
    /// what may go with [`purge`](RaftLogStorage::purge), and a segment deleted
    /// behind its back loses entries it still needs.
    ///
    /// Takes the options as a builder chain leaves them (`&mut LogDirOptions`), by
    /// reference or by value; they are copied.
    ///
    /// ```
    /// # use std::io::Cursor;
    /// # openraft::declare_raft_types!(pub TypeConfig:);
    /// use walcodec::LogDirOptions;
    /// use walcodec_raft::LogStore;
    ///
    /// let mut builder = LogStore::<TypeConfig>::builder();
    /// builder.log_dir(LogDirOptions::new().max_segment_bytes(4 << 20));
    /// let options = LogDirOptions::new();
    /// builder.log_dir(&options);
    /// builder.log_dir(options);
    /// ```
    pub fn log_dir(&mut self, options: impl Borrow<LogDirOptions>) -> &mut Self {
        self.options = options.borrow().clone();
        self
    }

    /// The most bytes of entry records one
    /// [`limited_get_log_entries`](RaftLogReader::limited_get_log_entries) call returns
    /// (at least one entry, however large), so that a replication message stays
    /// bounded; default [`MAX_READ_BYTES`](crate::MAX_READ_BYTES), 4 MiB.
    pub fn max_read_bytes(&mut self, bytes: u64) -> &mut Self {
        self.max_read_bytes = Some(bytes);
        self
    }

    /// Opens the store in the directory at `path` (creating it when missing) and
    /// replays its log: entries, vote, committed and purged ids as the calls
    /// before the last close or crash left them.
    ///
    /// Must be called inside a Tokio runtime: the store's writer is a task of it.
    ///
    /// # Errors
    /// [`Error::Log`] when the directory cannot be opened or recovered (see
    /// [`LogDirOptions::open`]); [`Error::Decode`] or [`Error::Gap`] when its log is
    /// not one this store wrote.
    pub async fn open(&self, path: impl AsRef<Path>) -> Result<LogStore<C>, Error> {
        let log = self.options.open(path).await?;
        let state = match State::<C>::replay(&log).await {
            Ok(state) => state,
            Err(e) => {
                let _ = log.close().await;
                return Err(e);
            }
        };
        let (ops, receiver) = mpsc::unbounded_channel();
        tokio::spawn(Writer::new(log.clone(), receiver, None).run());
        Ok(LogStore {
            reader: LogReader {
                log,
                state: Arc::new(Mutex::new(state)),
                max_read_bytes: self.max_read_bytes.unwrap_or(crate::MAX_READ_BYTES),
                group: None,
            },
            ops: Some(ops),
            lease: None,
        })
    }
}

/// openraft's log storage on a walcodec [`LogDir`](walcodec::LogDir): entries, the
/// vote and the committed and purged ids as LevelDB-format records in numbered
/// segment files, written with group commit (see the [crate docs](crate) for the
/// layout).
///
/// - [`append`](RaftLogStorage::append) returns at once with the entries
///   readable (from memory until they are durable); its [`LogFlushed`] callback
///   fires once they are on disk (`fdatasync`), or with the I/O error.
/// - Every write goes to the log in call order through one writer task, so a
///   vote, append, truncation or purge is never on disk before an earlier one;
///   writes queued together share one sync.
/// - [`save_vote`](RaftLogStorage::save_vote), [`truncate`](RaftLogStorage::truncate)
///   and [`purge`](RaftLogStorage::purge) return once durable;
///   [`save_committed`](RaftLogStorage::save_committed) does not wait: the id is
///   written with the next write or at [`close`](Self::close) (openraft allows
///   losing it in a crash), in call order like every write, so never ahead of
///   the entries it names (replay lowers a committed id past the last entry, as
///   a log written otherwise could hold, to that entry, with a warning).
///
/// After a failed write the store is poisoned: every later write fails; reopen it.
pub struct LogStore<C: RaftTypeConfig> {
    pub(crate) reader: LogReader<C>,
    /// To the writer task; `None` once closed.
    pub(crate) ops: Option<mpsc::UnboundedSender<Op>>,
    /// A group's store: its hold on the group in its shared log, released on
    /// close or drop.
    pub(crate) lease: Option<Lease>,
}

impl<C: RaftTypeConfig> Debug for LogStore<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogStore")
            .field("path", &self.path())
            .field("group", &self.reader.group)
            .finish_non_exhaustive()
    }
}

impl<C: RaftTypeConfig> LogStore<C> {
    /// Configures a store: see [`LogStoreBuilder`].
    pub fn builder() -> LogStoreBuilder<C> {
        LogStoreBuilder::default()
    }

    /// Opens (or creates) the store at `path` with the default options: see
    /// [`LogStoreBuilder::open`].
    pub async fn open(path: impl AsRef<Path>) -> Result<LogStore<C>, Error> {
        LogStoreBuilder::default().open(path).await
    }

    /// The log directory.
    pub fn path(&self) -> &Path {
        self.reader.log.path()
    }

    /// Writes what is queued (the committed id included), syncs and closes the log
    /// and releases the directory's lock. Later calls fail with [`Error::Closed`].
    ///
    /// # Errors
    /// [`Error::Poisoned`] when an earlier write failed; the log's error when the
    /// last write or the close fails.
    ///
    /// A group's store (from [`SharedLog::store`](crate::SharedLog::store)) makes
    /// its committed id durable and lets the group go, leaving the shared log and
    /// the other groups running; the group may be opened again.
    pub async fn close(&mut self) -> Result<(), Error> {
        let Some(ops) = self.ops.take() else {
            return Ok(());
        };
        let lease = self.lease.take();
        match self.reader.group {
            None => {
                let (reply, done) = oneshot::channel();
                ops.send(Op::Close(reply)).map_err(|_| Error::Closed)?;
                done.await.map_err(|_| Error::Closed)?
            }
            Some(group) => {
                let (reply, done) = oneshot::channel();
                ops.send(Op::Flush { group, reply })
                    .map_err(|_| Error::Closed)?;
                let flushed = match done.await {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => Err(Error::Poisoned(e.to_string())),
                    Err(_) => Err(Error::Closed),
                };
                drop(lease);
                flushed
            }
        }
    }

    /// The writer's key for this store's records.
    fn group(&self) -> u64 {
        self.reader.group.unwrap_or(SOLO)
    }

    fn state(&self) -> MutexGuard<'_, State<C>> {
        self.reader
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn send(&self, op: Op) -> Result<(), Error> {
        match &self.ops {
            Some(ops) => ops.send(op).map_err(|_| Error::Closed),
            None => Err(Error::Closed),
        }
    }

    /// Queues `records` after everything queued; the receiver resolves once
    /// they are durable. A call that changes the index before its record is
    /// durable does both under the index's lock, so that whoever looks at the
    /// index (a shared log's reclaimer) finds the record queued.
    fn queue(
        &self,
        records: Vec<Arc<[u8]>>,
    ) -> Result<oneshot::Receiver<crate::writer::Outcome>, Error> {
        let (reply, done) = oneshot::channel();
        self.send(Op::Write {
            group: self.group(),
            records,
            done: Box::new(move |outcome| {
                let _ = reply.send(outcome);
            }),
        })?;
        Ok(done)
    }

    /// Waits for records [`queue`](Self::queue)d.
    async fn written(
        done: oneshot::Receiver<crate::writer::Outcome>,
    ) -> Result<Vec<Range<LogPosition>>, Error> {
        match done.await {
            Ok(Ok(ranges)) => Ok(ranges),
            Ok(Err(e)) => Err(Error::Poisoned(e.to_string())),
            Err(_) => Err(Error::Closed),
        }
    }

    /// Writes `records` after everything queued; resolves once they are durable.
    async fn write(&self, records: Vec<Arc<[u8]>>) -> Result<Vec<Range<LogPosition>>, Error> {
        Self::written(self.queue(records)?).await
    }

    async fn purge_now(&mut self, log_id: LogId<C::NodeId>) -> Result<(), Error> {
        let done = {
            let mut state = self.state();
            if state.purged.as_ref().is_some_and(|p| *p >= log_id) {
                return Ok(());
            }
            let (vote, committed) = (&state.vote, &state.committed);
            let record = match self.reader.group {
                None => record::purge::<C>(&log_id, vote, committed)?,
                Some(group) => record::group_purge::<C>(group, &log_id, vote, committed)?,
            };
            state.purge(log_id.clone());
            self.queue(vec![record.into()])?
        };
        let ranges = Self::written(done).await?;
        if self.reader.group.is_some() {
            // The segments of a shared log hold other groups' records too: its
            // writer deletes them once no group needs them.
            return Ok(());
        }
        // The purge record holds all the state the records before it held: the
        // whole segments before it, and before the first entry kept, may go.
        let mut cut = ranges[0].start;
        let first = {
            let state = self.state();
            state
                .index
                .first()
                .and_then(|first| state.index.position(first))
        };
        if let Some(at) = first {
            cut = cut.min(at.start);
        }
        self.reader.log.purge_before(cut).await?;
        Ok(())
    }
}

impl<C: RaftTypeConfig> RaftLogReader<C> for LogStore<C> {
    async fn try_get_log_entries<RB: std::ops::RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<C::Entry>, StorageError<C::NodeId>> {
        self.reader.try_get_log_entries(range).await
    }
}

impl<C: RaftTypeConfig> RaftLogStorage<C> for LogStore<C> {
    type LogReader = LogReader<C>;

    async fn get_log_state(&mut self) -> Result<LogState<C>, StorageError<C::NodeId>> {
        let state = self.state();
        Ok(LogState {
            last_purged_log_id: state.purged.clone(),
            last_log_id: state.last_log_id(),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.reader.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        let record = match self.reader.group {
            None => record::vote::<C>(vote),
            Some(group) => record::group_vote::<C>(group, vote),
        }
        .map_err(vote_error)?;
        self.write(vec![record.into()]).await.map_err(vote_error)?;
        self.state().vote = Some(vote.clone());
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<C::NodeId>>, StorageError<C::NodeId>> {
        Ok(self.state().vote.clone())
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<C::NodeId>>,
    ) -> Result<(), StorageError<C::NodeId>> {
        let record = match self.reader.group {
            None => record::committed::<C>(&committed),
            Some(group) => record::group_committed::<C>(group, &committed),
        }
        .map_err(write_error)?;
        let mut state = self.state();
        state.committed = committed;
        self.send(Op::Committed {
            group: self.group(),
            record: record.into(),
        })
        .map_err(write_error)
    }

    async fn read_committed(
        &mut self,
    ) -> Result<Option<LogId<C::NodeId>>, StorageError<C::NodeId>> {
        Ok(self.state().committed.clone())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<C>,
    ) -> Result<(), StorageError<C::NodeId>>
    where
        I: IntoIterator<Item = C::Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<C::Entry> = entries.into_iter().collect();
        let mut records = Vec::with_capacity(entries.len());
        for entry in &entries {
            let log_id = entry.get_log_id();
            let record = match self.reader.group {
                None => record::entry::<C>(log_id, entry),
                Some(group) => record::group_entry::<C>(group, log_id, entry),
            };
            records.push(Arc::<[u8]>::from(record.map_err(write_error)?));
        }
        let first = entries.first().map_or(0, |e| e.get_log_id().index);
        let shared = Arc::clone(&self.reader.state);
        let mut state = self.state();
        // A bad call fails alone, before anything is written: an append's
        // entries follow each other. (Where the first goes is openraft's
        // business: its suite appends past the last entry.)
        for (expected, entry) in (first..).zip(&entries) {
            let found = entry.get_log_id().index;
            if found != expected {
                return Err(write_error(Error::Gap { expected, found }));
            }
        }
        state.seq += 1;
        let seq = state.seq;
        if !entries.is_empty() {
            // As replay does: an append replaces what it overlaps.
            state.index.append(
                first,
                entries.iter().zip(&records).map(|(entry, record)| {
                    (entry.get_log_id().leader_id.clone(), Arc::clone(record))
                }),
                seq,
            );
        }
        let done: Done = Box::new(move |outcome| match outcome {
            Ok(ranges) => {
                // Entries still in the index now point into the log (first, so
                // that no reader misses them once the callback fired).
                {
                    let mut state = shared.lock().unwrap_or_else(PoisonError::into_inner);
                    for (index, range) in (first..).zip(ranges) {
                        state.keep(index, seq, range);
                    }
                }
                callback.log_io_completed(Ok(()));
            }
            Err(e) => callback.log_io_completed(Err(e.to_io())),
        });
        // Sent under the index's lock: see `queue`.
        let sent = self.send(Op::Write {
            group: self.group(),
            records,
            done,
        });
        drop(state);
        sent.map_err(write_error)
    }

    async fn truncate(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        let record = match self.reader.group {
            None => record::truncate(log_id.index).map_err(write_error)?,
            Some(group) => record::group_truncate(group, log_id.index),
        };
        let done = {
            let mut state = self.state();
            state.truncate(log_id.index);
            self.queue(vec![record.into()]).map_err(write_error)?
        };
        Self::written(done).await.map_err(write_error)?;
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<C::NodeId>) -> Result<(), StorageError<C::NodeId>> {
        self.purge_now(log_id).await.map_err(write_error)
    }
}
