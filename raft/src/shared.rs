//! [`SharedLog`]: many Raft groups' log stores on one log, one writer, one sync
//! per batch across groups.

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt::{self, Debug};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use openraft::RaftTypeConfig;
use tokio::sync::{mpsc, oneshot};
use walcodec::{LogDir, LogDirOptions};

use crate::group::{self, Group, GroupView, Lease};
use crate::reader::LogReader;
use crate::space::{Counters, Space, SpaceOptions, SpaceStats};
use crate::state::State;
use crate::store::LogStore;
use crate::writer::{Op, Writer};
use crate::Error;

/// Configures a [`SharedLog`], then opens it.
///
/// ```
/// # #[tokio::main]
/// # async fn main() -> Result<(), walcodec_raft::Error> {
/// use walcodec::LogDirOptions;
/// use walcodec_raft::SharedLog;
///
/// let dir = tempfile::tempdir().unwrap();
/// let shared = SharedLog::builder()
///     .log_dir(LogDirOptions::new().max_segment_bytes(64 << 20))
///     .open(dir.path())
///     .await?;
/// shared.close().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct SharedLogBuilder {
    options: LogDirOptions,
    max_read_bytes: Option<u64>,
    space: SpaceOptions,
}

impl SharedLogBuilder {
    /// The log directory's options (segment size, the writer's group-commit
    /// settings), as for [`LogStoreBuilder::log_dir`](crate::LogStoreBuilder::log_dir):
    /// leave retention off.
    pub fn log_dir(&mut self, options: &LogDirOptions) -> &mut Self {
        self.options = options.clone();
        self
    }

    /// Every group store's
    /// [`LogStoreBuilder::max_read_bytes`](crate::LogStoreBuilder::max_read_bytes).
    pub fn max_read_bytes(&mut self, bytes: u64) -> &mut Self {
        self.max_read_bytes = Some(bytes);
        self
    }

    /// Rewrite lagging groups once the segments kept hold more than `bytes`
    /// (default 1 GiB): the groups whose live records pin the oldest segments
    /// have them copied to the head of the log, and those segments go. A rewrite
    /// is done only when it frees at least twice the bytes it copies (so that
    /// rewrites at most double the bytes written: see
    /// [`SpaceStats::write_amplification`]); below the threshold, only the
    /// segments no group needs go. `u64::MAX` turns rewrites off.
    pub fn rewrite_threshold(&mut self, bytes: u64) -> &mut Self {
        self.space.rewrite_threshold = bytes;
        self
    }

    /// The most bytes one rewrite copies (default 64 MiB): the log's writer
    /// reads and writes them between two batches, so every group's writes wait
    /// for it.
    pub fn max_rewrite_bytes(&mut self, bytes: u64) -> &mut Self {
        self.space.max_rewrite_bytes = bytes;
        self
    }

    /// Opens the shared log in the directory at `path` (creating it when
    /// missing) and replays it once, indexing every group in it.
    ///
    /// Must be called inside a Tokio runtime: the log's writer is a task of it.
    ///
    /// # Errors
    /// [`Error::Log`] when the directory cannot be opened or recovered;
    /// [`Error::Decode`] when a record is not one a shared log writes (a
    /// [`LogStore`]'s own directory is not a shared log).
    pub async fn open(&self, path: impl AsRef<Path>) -> Result<SharedLog, Error> {
        let log = self.options.open(path).await?;
        let (groups, kept) = match group::replay(&log).await {
            Ok(replayed) => replayed,
            Err(e) => {
                let _ = log.close().await;
                return Err(e);
            }
        };
        let groups = Arc::new(Mutex::new(
            groups
                .into_iter()
                .map(|(g, raw)| (g, Group::Raw(Box::new(raw))))
                .collect(),
        ));
        let counters = Arc::new(Counters::default());
        let space = Space::new(Arc::clone(&groups), kept, self.space, Arc::clone(&counters));
        let (ops, receiver) = mpsc::unbounded_channel();
        tokio::spawn(Writer::new(log.clone(), receiver, Some(space)).run());
        Ok(SharedLog {
            inner: Arc::new(Inner {
                log,
                ops,
                groups,
                counters,
                max_read_bytes: self.max_read_bytes.unwrap_or(crate::MAX_READ_BYTES),
            }),
        })
    }
}

/// Many Raft groups' log storage on one walcodec [`LogDir`]: each group's
/// [`LogStore`] (the same type a store of its own is, so openraft's
/// [`RaftLogStorage`](openraft::storage::RaftLogStorage) for any type config; groups
/// of different type configs may share a log) writes its records, each naming
/// its group, through the log's one writer task.
///
/// - **Group commit across groups**: writes from every group queued together go
///   to the log as one batch with one sync; each append's flush callback fires
///   once the batch holding its records is durable. Before a batch closes, the
///   log's writer yields to the runtime until no new write arrives (at most 8
///   times), so the groups the last sync released queue their next writes in
///   time: 64 groups each appending one entry at a time made 0.017 syncs a write
///   (one a round), not 0.030 (two cohorts taking turns); see docs/raft.md, "Many
///   groups: figures".
/// - **Per group, the rules of [`LogStore`]**: the vote, a truncation and a purge
///   are durable when their call returns, an append's callback fires after the
///   sync, the committed id is written in call order with the group's next write
///   (or the next batch, or at the group's close).
/// - **Failures**: an I/O failure of the log poisons every group (each later
///   write fails: reopen the shared log); a bad call of one group (an append whose
///   entries skip an index) fails that call alone, before anything is written.
/// - **Replay**: opening the log replays it once and indexes every group;
///   [`store`](Self::store) then decodes a group's index for its type config.
/// - **Space**: a segment is deleted once no group needs a record in it (a
///   group needs its live entries and the records holding its latest vote,
///   committed id and purge). A group that lags pins old segments: once the
///   segments kept pass [`SharedLogBuilder::rewrite_threshold`], the groups
///   pinning the oldest ones have their live records copied to the head of the
///   log and those segments go; [`space_stats`](Self::space_stats) counts the
///   bytes written, rewritten and deleted.
///
/// ```
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use openraft::storage::RaftLogStorage;
/// use openraft::Vote;
/// use walcodec_raft::SharedLog;
///
/// # use std::io::Cursor;
/// openraft::declare_raft_types!(pub TypeConfig:);
///
/// let dir = tempfile::tempdir()?;
/// let shared = SharedLog::open(dir.path()).await?;
/// let mut one = shared.store::<TypeConfig>(1).await?;
/// let mut two = shared.store::<TypeConfig>(2).await?;
/// one.save_vote(&Vote::new(3, 1)).await?;
/// two.save_vote(&Vote::new(5, 2)).await?;
/// one.close().await?;
/// two.close().await?;
/// shared.close().await?;
///
/// let shared = SharedLog::open(dir.path()).await?;
/// assert_eq!(shared.groups(), vec![1, 2]);
/// let mut two = shared.store::<TypeConfig>(2).await?;
/// assert_eq!(two.read_vote().await?, Some(Vote::new(5, 2)));
/// two.close().await?;
/// shared.close().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct SharedLog {
    inner: Arc<Inner>,
}

impl Debug for SharedLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedLog")
            .field("path", &self.inner.log.path())
            .finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    log: LogDir,
    /// To the writer task.
    ops: mpsc::UnboundedSender<Op>,
    /// Shared with the writer's reclaimer.
    groups: Arc<Mutex<BTreeMap<u64, Group>>>,
    counters: Arc<Counters>,
    max_read_bytes: u64,
}

impl Inner {
    fn groups(&self) -> MutexGuard<'_, BTreeMap<u64, Group>> {
        self.groups.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl SharedLog {
    /// Configures a shared log: see [`SharedLogBuilder`].
    pub fn builder() -> SharedLogBuilder {
        SharedLogBuilder::default()
    }

    /// Opens (or creates) the shared log at `path` with the default options: see
    /// [`SharedLogBuilder::open`].
    pub async fn open(path: impl AsRef<Path>) -> Result<SharedLog, Error> {
        SharedLogBuilder::default().open(path).await
    }

    /// The log directory.
    pub fn path(&self) -> &Path {
        self.inner.log.path()
    }

    /// What the log wrote, rewrote and deleted since it was opened (see
    /// [`SharedLogBuilder::rewrite_threshold`]).
    pub fn space_stats(&self) -> SpaceStats {
        self.inner.counters.stats()
    }

    /// The groups that have records in the log, or a store opened since it was
    /// opened that has written something, in order.
    pub fn groups(&self) -> Vec<u64> {
        self.inner
            .groups()
            .iter()
            .filter(|(_, group)| match group {
                Group::Raw(_) => true,
                Group::Typed { view, .. } => !view.is_empty(),
            })
            .map(|(&id, _)| id)
            .collect()
    }

    /// The log store of `group` (created when the log has none), for type config
    /// `C`. One store per group at a time; closing or dropping it lets the group
    /// go, and it may be asked for again.
    ///
    /// # Errors
    /// [`Error::GroupInUse`] while another store of the group is open;
    /// [`Error::GroupType`] when the group was opened with another type config
    /// since the log was opened; [`Error::Decode`] or [`Error::Gap`] when its
    /// records do not decode for `C`; [`Error::Closed`] once the log is closed.
    pub async fn store<C: RaftTypeConfig>(&self, group: u64) -> Result<LogStore<C>, Error> {
        if self.inner.ops.is_closed() {
            return Err(Error::Closed);
        }
        let mut groups = self.inner.groups();
        let state: Arc<Mutex<State<C>>> = match groups.remove(&group) {
            None => Arc::new(Mutex::new(State::new())),
            Some(Group::Raw(raw)) => match State::<C>::from_raw(&raw, self.path()) {
                Ok(state) => Arc::new(Mutex::new(state)),
                Err(e) => {
                    groups.insert(group, Group::Raw(raw));
                    return Err(e);
                }
            },
            Some(Group::Typed { state, open, view }) => {
                if open {
                    groups.insert(group, Group::Typed { state, open, view });
                    return Err(Error::GroupInUse { group });
                }
                match Arc::clone(&state).downcast::<Mutex<State<C>>>() {
                    Ok(typed) => typed,
                    Err(_) => {
                        groups.insert(group, Group::Typed { state, open, view });
                        return Err(Error::GroupType { group });
                    }
                }
            }
        };
        groups.insert(
            group,
            Group::Typed {
                state: Arc::clone(&state) as Arc<dyn Any + Send + Sync>,
                open: true,
                view: Arc::clone(&state) as Arc<dyn GroupView>,
            },
        );
        drop(groups);
        Ok(LogStore {
            reader: LogReader {
                log: self.inner.log.clone(),
                state,
                max_read_bytes: self.inner.max_read_bytes,
                group: Some(group),
            },
            ops: Some(self.inner.ops.clone()),
            lease: Some(Lease::new(Arc::clone(&self.inner.groups), group)),
        })
    }

    /// Writes what every group queued (committed ids included), syncs and closes
    /// the log and releases the directory's lock. Group stores still open fail
    /// every later call with [`Error::Closed`].
    ///
    /// # Errors
    /// [`Error::Poisoned`] when an earlier write failed; the log's error when the
    /// last write or the close fails.
    pub async fn close(&self) -> Result<(), Error> {
        let (reply, done) = oneshot::channel();
        if self.inner.ops.send(Op::Close(reply)).is_err() {
            return Ok(());
        }
        done.await.unwrap_or(Ok(()))
    }
}
