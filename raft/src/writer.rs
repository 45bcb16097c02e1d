//! The log's one writer task: every write (entries, vote, committed id,
//! truncation, purge) of every store on the log goes through it in call order, so
//! they reach the log in that order, and whatever is queued when it comes round
//! goes to the log together (one [`LogDir::append_batch`], one sync), whichever
//! groups of a [`SharedLog`](crate::SharedLog) it comes from.
//!
//! The writer knows nothing of type configs: stores hand it encoded records and
//! a completion to run once they are durable (or failed).

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};
use walcodec::{LogDir, LogPosition};

use crate::space::Space;
use crate::Error;

/// What a write's records came to: their ranges in the log, or the error that
/// poisoned the log.
pub(crate) type Outcome = Result<Vec<Range<LogPosition>>, Arc<Error>>;

/// Runs once the records of a [`Op::Write`] are durable (or failed); called on
/// the writer task, so it must not block.
pub(crate) type Done = Box<dyn FnOnce(Outcome) + Send>;

/// The group of a store of its own.
pub(crate) const SOLO: u64 = 0;

pub(crate) enum Op {
    /// Records of `group`; `done` runs once they are durable.
    Write {
        group: u64,
        records: Vec<Arc<[u8]>>,
        done: Done,
    },
    /// The committed id of `group` changed (its encoded record): written before
    /// the group's next records, or with the next batch that has records, or at
    /// close, never costing a sync of its own.
    Committed { group: u64, record: Arc<[u8]> },
    /// Makes `group`'s committed id durable if one waits (closing a group's
    /// store); answers once it is.
    Flush {
        group: u64,
        reply: oneshot::Sender<Result<(), Arc<Error>>>,
    },
    /// Write what is queued, then close the log.
    Close(oneshot::Sender<Result<(), Error>>),
}

/// Most bytes of records the writer gathers into one batch: a queue that grew
/// while a sync ran goes out in batches of about this size, so that no batch
/// outgrows a segment by much.
const MAX_GROUP_BYTES: usize = 8 << 20;

/// Most yields before a shared log's batch closes (see
/// [`Writer::let_woken_stores_queue`]): stores that keep queueing cannot hold a
/// batch back for longer.
const MAX_GATHER_YIELDS: usize = 8;

impl Op {
    /// The bytes of records this op writes.
    fn bytes(&self) -> usize {
        match self {
            Op::Write { records, .. } => records.iter().map(|r| r.len()).sum(),
            Op::Committed { .. } | Op::Flush { .. } | Op::Close(_) => 0,
        }
    }
}

pub(crate) struct Writer {
    pub(crate) log: LogDir,
    pub(crate) ops: mpsc::UnboundedReceiver<Op>,
    /// Committed ids not yet in the log, by group.
    pub(crate) committed: BTreeMap<u64, Arc<[u8]>>,
    /// Set by the first failed write; every later one fails with it.
    pub(crate) failure: Option<Arc<Error>>,
    /// A shared log's reclaimer (a store of its own purges itself).
    space: Option<Space>,
}

impl Writer {
    pub(crate) fn new(
        log: LogDir,
        ops: mpsc::UnboundedReceiver<Op>,
        space: Option<Space>,
    ) -> Writer {
        Writer {
            log,
            ops,
            committed: BTreeMap::new(),
            failure: None,
            space,
        }
    }

    pub(crate) async fn run(mut self) {
        while let Some(first) = self.ops.recv().await {
            if self.space.is_some() {
                self.let_woken_stores_queue().await;
            }
            // Group commit: what is queued meanwhile shares the write and the sync,
            // up to a close or MAX_GROUP_BYTES of records.
            let mut batch = Vec::new();
            let mut bytes = 0;
            let mut next = Some(first);
            let mut close = None;
            while let Some(op) = next.take() {
                match op {
                    Op::Close(reply) => close = Some(reply),
                    op => {
                        bytes += op.bytes();
                        batch.push(op);
                        if bytes < MAX_GROUP_BYTES {
                            next = self.ops.try_recv().ok();
                        }
                    }
                }
            }
            let written = batch.len();
            self.write(batch).await;
            if let (Some(space), None) = (&mut self.space, &self.failure) {
                let ops = &self.ops;
                if let Err(e) = space.tick(&self.log, written, || ops.len()).await {
                    self.failure = Some(Arc::new(e));
                }
            }
            if let Some(reply) = close {
                let _ = reply.send(self.close().await);
                return;
            }
        }
        // Every handle dropped without close: write the committed ids, if any.
        let _ = self.close().await;
    }

    /// Yields to the runtime until a yield brings no new op (at most
    /// [`MAX_GATHER_YIELDS`] times), so that the stores whose flush callbacks the
    /// last batch fired run and queue their next writes before this batch closes.
    ///
    /// Why: the first store to send wakes this task into the runtime's LIFO slot,
    /// which polls it before the other stores the last batch woke. Without
    /// yielding, a batch held the few writes queued by then and the rest waited a
    /// whole sync: the groups split into two cohorts that took turns, about 33
    /// writes a sync at 64 groups instead of about 60 (`benches/groups.rs`).
    /// When other processes keep the machine's cores busy, each sync costs up to
    /// a scheduler tick more than the disk's time (the syncing thread waits that
    /// long for a core once the disk is done), so the writes a sync carries are
    /// what throughput rests on. A lone store pays one yield a batch.
    async fn let_woken_stores_queue(&self) {
        let mut seen = self.ops.len();
        for _ in 0..MAX_GATHER_YIELDS {
            tokio::task::yield_now().await;
            let now = self.ops.len();
            if now == seen {
                return;
            }
            seen = now;
        }
    }

    async fn close(&mut self) -> Result<(), Error> {
        if let Some(failure) = &self.failure {
            // Nothing more is written, but the directory's lock is released, so
            // that the log can be reopened at once.
            let _ = self.log.close().await;
            return Err(Error::Poisoned(failure.to_string()));
        }
        let committed = std::mem::take(&mut self.committed);
        if !committed.is_empty() {
            self.log.append_batch(committed.into_values()).await?;
        }
        self.log.close().await?;
        Ok(())
    }

    /// Writes the records of `ops` as one batch and answers each op.
    async fn write(&mut self, ops: Vec<Op>) {
        let result = match &self.failure {
            Some(failure) => Err(Arc::clone(failure)),
            None => {
                let gathered = self.gather(&ops);
                self.append(gathered).await
            }
            .map_err(|e| {
                let e = Arc::new(e);
                self.failure = Some(Arc::clone(&e));
                e
            }),
        };
        match result {
            Ok(ranges) => {
                let mut ranges = ranges.into_iter();
                for op in ops {
                    match op {
                        Op::Write { records, done, .. } => {
                            done(Ok(ranges.by_ref().take(records.len()).collect()))
                        }
                        Op::Flush { reply, .. } => {
                            let _ = reply.send(Ok(()));
                        }
                        Op::Committed { .. } | Op::Close(_) => {}
                    }
                }
            }
            Err(e) => {
                for op in ops {
                    match op {
                        Op::Write { done, .. } => done(Err(Arc::clone(&e))),
                        Op::Flush { reply, .. } => {
                            let _ = reply.send(Err(Arc::clone(&e)));
                        }
                        Op::Committed { .. } | Op::Close(_) => {}
                    }
                }
            }
        }
    }

    /// The records of `ops` in call order, and which of them are committed ids: each group's committed id
    /// where it was given (before the group's next records): a power cut keeps a
    /// prefix of a batch, and a committed id written ahead of the entries it names
    /// could outlive them.
    ///
    /// A batch of nothing but committed ids writes nothing: they wait for the next
    /// batch (or the close), where they go first, which is their place in call
    /// order. A batch that writes anything takes every waiting committed id along,
    /// after all the records of its group.
    fn gather(&mut self, ops: &[Op]) -> (Vec<Arc<[u8]>>, Vec<bool>) {
        let mut records: Vec<Arc<[u8]>> = Vec::new();
        // Which records are committed ids, whose ranges nobody waits for.
        let mut is_committed = Vec::new();
        let mut pending = std::mem::take(&mut self.committed);
        for op in ops {
            match op {
                Op::Write {
                    group, records: r, ..
                } => {
                    if r.is_empty() {
                        continue;
                    }
                    // Only the last of a run of committed ids matters.
                    if let Some(committed) = pending.remove(group) {
                        records.push(committed);
                        is_committed.push(true);
                    }
                    records.extend(r.iter().cloned());
                    is_committed.extend(r.iter().map(|_| false));
                }
                Op::Committed { group, record } => {
                    pending.insert(*group, Arc::clone(record));
                }
                Op::Flush { group, .. } => {
                    if let Some(committed) = pending.remove(group) {
                        records.push(committed);
                        is_committed.push(true);
                    }
                }
                // Taken off the batch by `run`.
                Op::Close(_) => {}
            }
        }
        if records.is_empty() {
            self.committed = pending;
            return (records, is_committed);
        }
        // Committed ids after the last records of their group cost no sync.
        for committed in pending.into_values() {
            records.push(committed);
            is_committed.push(true);
        }
        (records, is_committed)
    }

    /// Writes what [`gather`](Self::gather) gathered; the ranges of the ops' own
    /// records.
    async fn append(
        &mut self,
        (records, is_committed): (Vec<Arc<[u8]>>, Vec<bool>),
    ) -> Result<Vec<Range<LogPosition>>, Error> {
        if records.is_empty() {
            // Empty appends' callbacks may fire now: every earlier batch is
            // durable.
            return Ok(Vec::new());
        }
        let ranges = self.log.append_batch(records.iter()).await?;
        if let Some(space) = &mut self.space {
            space.written(&records, &ranges);
        }
        Ok(ranges
            .into_iter()
            .zip(is_committed)
            .filter_map(|(range, committed)| (!committed).then_some(range))
            .collect())
    }
}
