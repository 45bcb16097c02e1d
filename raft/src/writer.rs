//! The store's one writer task: every write (entries, vote, committed id,
//! truncation, purge) goes through it in call order, so they reach the log in that
//! order, and whatever is queued when it comes round goes to the log together
//! (one [`LogDir::append_batch`], one sync).

use std::ops::Range;
use std::sync::{Arc, Mutex, PoisonError};

use openraft::storage::LogFlushed;
use openraft::{LogId, RaftTypeConfig};
use tokio::sync::{mpsc, oneshot};
use walcodec::{LogDir, LogPosition};

use crate::record;
use crate::state::State;
use crate::Error;

/// A reply to a write that waits for its records: their ranges in the log.
pub(crate) type Reply = oneshot::Sender<Result<Vec<Range<LogPosition>>, Arc<Error>>>;

pub(crate) enum Op<C: RaftTypeConfig> {
    /// Entries (`records[i]` is entry `first + i`) whose slots carry `seq`; the
    /// callback fires once they are durable.
    Append {
        first: u64,
        seq: u64,
        records: Vec<Arc<[u8]>>,
        callback: LogFlushed<C>,
    },
    /// Records whose caller waits until they are durable.
    Write {
        records: Vec<Arc<[u8]>>,
        reply: Reply,
    },
    /// The committed id changed: written with the next batch that has other
    /// records, or at close, never costing a sync of its own.
    Committed(Option<LogId<C::NodeId>>),
    /// Write what is queued, then close the log.
    Close(oneshot::Sender<Result<(), Error>>),
}

/// Most bytes of records the writer gathers into one batch: a queue that grew
/// while a sync ran goes out in batches of about this size, so that no batch
/// outgrows a segment by much.
const MAX_GROUP_BYTES: usize = 8 << 20;

impl<C: RaftTypeConfig> Op<C> {
    /// The bytes of records this op writes.
    fn bytes(&self) -> usize {
        match self {
            Op::Append { records, .. } | Op::Write { records, .. } => {
                records.iter().map(|r| r.len()).sum()
            }
            Op::Committed(_) | Op::Close(_) => 0,
        }
    }
}

pub(crate) struct Writer<C: RaftTypeConfig> {
    pub(crate) log: LogDir,
    pub(crate) state: Arc<Mutex<State<C>>>,
    pub(crate) ops: mpsc::UnboundedReceiver<Op<C>>,
    /// A committed id not yet in the log.
    pub(crate) committed: Option<Option<LogId<C::NodeId>>>,
    /// Set by the first failed write; every later one fails with it.
    pub(crate) failure: Option<Arc<Error>>,
}

impl<C: RaftTypeConfig> Writer<C> {
    pub(crate) async fn run(mut self) {
        while let Some(first) = self.ops.recv().await {
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
            self.write(batch).await;
            if let Some(reply) = close {
                let _ = reply.send(self.close().await);
                return;
            }
        }
        // Every handle dropped without close: write the committed id, if any.
        let _ = self.close().await;
    }

    async fn close(&mut self) -> Result<(), Error> {
        if let Some(failure) = &self.failure {
            // Nothing more is written, but the directory's lock is released, so
            // that the store can be reopened at once.
            let _ = self.log.close().await;
            return Err(Error::Poisoned(failure.to_string()));
        }
        if let Some(committed) = self.committed.take() {
            self.log
                .append_batch([record::committed::<C>(&committed)?])
                .await?;
        }
        self.log.close().await?;
        Ok(())
    }

    /// Writes the records of `ops` as one batch and answers each op.
    async fn write(&mut self, ops: Vec<Op<C>>) {
        let result = match &self.failure {
            Some(failure) => Err(Arc::clone(failure)),
            None => self.append(&ops).await.map_err(|e| {
                let e = Arc::new(e);
                self.failure = Some(Arc::clone(&e));
                e
            }),
        };
        match result {
            Ok(ranges) => self.acknowledge(ops, ranges),
            Err(e) => {
                for op in ops {
                    match op {
                        Op::Append { callback, .. } => callback.log_io_completed(Err(e.to_io())),
                        Op::Write { reply, .. } => {
                            let _ = reply.send(Err(Arc::clone(&e)));
                        }
                        Op::Committed(_) | Op::Close(_) => {}
                    }
                }
            }
        }
    }

    /// Appends the records of `ops` in call order, the committed ids among them
    /// where they were given: a power cut keeps a prefix of a batch, and a
    /// committed id written ahead of the entries it names could outlive them.
    /// Returns the ranges of the ops' own records (committed ids left out).
    ///
    /// A batch of nothing but committed ids writes nothing: the last of them is
    /// kept for the next batch (or the close), where it goes first, which is its
    /// place in call order.
    async fn append(&mut self, ops: &[Op<C>]) -> Result<Vec<Range<LogPosition>>, Error> {
        let has_records = ops.iter().any(|op| op.bytes() > 0);
        if !has_records {
            for op in ops {
                if let Op::Committed(committed) = op {
                    self.committed = Some(committed.clone());
                }
            }
            // Empty appends' callbacks may fire now: every earlier batch is
            // durable.
            return Ok(Vec::new());
        }
        let mut records: Vec<Arc<[u8]>> = Vec::new();
        // Which records are committed ids, whose ranges nobody waits for.
        let mut is_committed = Vec::new();
        let mut pending = self.committed.take();
        for op in ops {
            match op {
                Op::Append { records: r, .. } | Op::Write { records: r, .. } => {
                    if r.is_empty() {
                        continue;
                    }
                    // Only the last of a run of committed ids matters.
                    if let Some(committed) = pending.take() {
                        records.push(record::committed::<C>(&committed)?.into());
                        is_committed.push(true);
                    }
                    records.extend(r.iter().cloned());
                    is_committed.extend(r.iter().map(|_| false));
                }
                Op::Committed(committed) => pending = Some(committed.clone()),
                // Taken off the batch by `run`.
                Op::Close(_) => {}
            }
        }
        // A committed id after the last entry of the batch still costs no sync.
        if let Some(committed) = pending {
            records.push(record::committed::<C>(&committed)?.into());
            is_committed.push(true);
        }
        let ranges = self.log.append_batch(records).await?;
        Ok(ranges
            .into_iter()
            .zip(is_committed)
            .filter_map(|(range, committed)| (!committed).then_some(range))
            .collect())
    }

    /// The batch is durable: entries still in the index now point into the log
    /// (first, so that no reader misses them once a callback fired), then every
    /// op is answered.
    fn acknowledge(&mut self, ops: Vec<Op<C>>, ranges: Vec<Range<LogPosition>>) {
        let mut ranges = ranges.into_iter();
        let mut answers = Vec::with_capacity(ops.len());
        {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            for op in ops {
                match op {
                    Op::Append {
                        first,
                        seq,
                        records,
                        callback,
                    } => {
                        for (index, range) in (first..).zip(ranges.by_ref().take(records.len())) {
                            state.keep(index, seq, range);
                        }
                        answers.push(Answer::Flushed(callback));
                    }
                    Op::Write { records, reply } => {
                        let mine = ranges.by_ref().take(records.len()).collect();
                        answers.push(Answer::Written(reply, mine));
                    }
                    Op::Committed(_) | Op::Close(_) => {}
                }
            }
        }
        for answer in answers {
            match answer {
                Answer::Flushed(callback) => callback.log_io_completed(Ok(())),
                Answer::Written(reply, ranges) => {
                    let _ = reply.send(Ok(ranges));
                }
            }
        }
    }
}

enum Answer<C: RaftTypeConfig> {
    Flushed(LogFlushed<C>),
    Written(Reply, Vec<Range<LogPosition>>),
}
