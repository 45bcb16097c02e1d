//! The layout of a file walked in ranges on threads, in order: `walcodec dump
//! --physical`.

use std::io;
use std::sync::Arc;

use crate::format::block_start;
use crate::format::fragment::FragmentRules;
use crate::format::physical::Pieces;

use super::ordered::{in_order, Sender};
use super::parallel::plan;
use super::pass::{BlockingChunks, ChunkSource};
use super::{InspectError, Progress, RangeSource, READ_BYTES};

/// The largest range of a layout walk: a range's results wait for the ranges before
/// it, and a block of tiny fragments may render to several times its size.
const MAX_LAYOUT_RANGE_BYTES: u64 = 2 << 20;

/// Ranges walked ahead of the one being consumed, per thread.
const WINDOW_PER_JOB: usize = 2;

/// A walk of a file's physical layout ([`Pieces`]) in ranges on threads, its
/// results handed over in log order.
///
/// In LevelDB's dialect each block's layout depends on that block alone (and the
/// file's end), so ranges of whole blocks walked apart give the pieces of one walk.
/// RocksDB's and Pebble's layouts depend on what came before (an old log number
/// ends the log): walk those with [`Pieces`] from the start, in one go.
///
/// ```
/// use walcodec::fragment::FragmentRules;
/// use walcodec::inspect::LayoutWalk;
/// use walcodec::physical::Piece;
/// use walcodec::{Dialect, BLOCK_SIZE};
///
/// // Three blocks of zero fill (preallocated space): one piece a block.
/// let log = vec![0u8; 3 * BLOCK_SIZE];
/// let mut offsets = Vec::new();
/// LayoutWalk::new(FragmentRules::new(Dialect::LevelDb))
///     .jobs(2)
///     .range_bytes(Some(BLOCK_SIZE as u64))
///     .read_file(
///         &log[..],
///         0,
///         log.len() as u64,
///         |pieces| pieces.map(|piece: Piece<'_>| piece.offset()).collect::<Vec<_>>(),
///         |chunk| {
///             offsets.extend(chunk);
///             Ok::<_, std::convert::Infallible>(())
///         },
///     )?;
/// assert_eq!(offsets, [0, 32768, 65536]);
/// # Ok::<_, Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
#[must_use]
pub struct LayoutWalk {
    rules: FragmentRules,
    jobs: usize,
    range_bytes: Option<u64>,
    progress: Option<Arc<Progress>>,
}

impl std::fmt::Debug for LayoutWalk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LayoutWalk")
            .field("rules", &self.rules)
            .field("jobs", &self.jobs)
            .field("range_bytes", &self.range_bytes)
            .finish_non_exhaustive()
    }
}

impl LayoutWalk {
    /// A walk in `rules` on one thread.
    pub fn new(rules: FragmentRules) -> LayoutWalk {
        LayoutWalk {
            rules,
            jobs: 1,
            range_bytes: None,
            progress: None,
        }
    }

    /// Threads that walk at once, each a range (default 1).
    pub fn jobs(&mut self, jobs: usize) -> &mut Self {
        self.jobs = jobs.max(1);
        self
    }

    /// Ranges of this many bytes (rounded up to whole blocks); `None`, the default,
    /// for about four per thread.
    pub fn range_bytes(&mut self, bytes: Option<u64>) -> &mut Self {
        self.range_bytes = bytes;
        self
    }

    /// Calls `progress` with the length of each chunk read, on the thread that
    /// reads it.
    pub fn progress<F>(&mut self, progress: F) -> &mut Self
    where
        F: Fn(u64) + Send + Sync + 'static,
    {
        self.progress = Some(Arc::new(progress));
        self
    }

    /// Walks `source` from the block holding `start` to `end`: `visit` gets the
    /// pieces of each chunk read (whole blocks, or what is left at the end), on the
    /// thread that read it, and `consume` what it made of them, in log order. An
    /// error of `consume` stops the walk and is returned.
    pub fn read_file<S, T, E, V, C>(
        &self,
        source: &S,
        start: u64,
        end: u64,
        visit: V,
        mut consume: C,
    ) -> Result<(), InspectError<E>>
    where
        S: RangeSource + ?Sized,
        T: Send,
        V: Fn(Pieces<'_>) -> T + Sync,
        C: FnMut(T) -> Result<(), E>,
    {
        enum Message<T> {
            Chunk(T),
            Done,
            Failed(io::Error),
        }
        let ranges = plan(
            block_start(start),
            end,
            self.jobs,
            self.range_bytes,
            MAX_LAYOUT_RANGE_BYTES,
        );
        let work = |index: usize, send: &mut Sender<'_, Message<T>>| {
            let (from, to) = ranges[index];
            let walked = (|| -> io::Result<bool> {
                let mut chunks = BlockingChunks::new(source.open_range(from, to)?, READ_BYTES)
                    .with_progress(self.progress.clone());
                let mut offset = from;
                while let Some(chunk) = chunks.next_chunk() {
                    let chunk = chunk?;
                    // Chunks are whole blocks but at the file's end: no block is cut.
                    let made = visit(Pieces::new(&chunk, offset, self.rules));
                    offset = offset.saturating_add(chunk.len() as u64);
                    if !send(Message::Chunk(made)) {
                        return Ok(false);
                    }
                }
                Ok(true)
            })();
            match walked {
                Ok(true) => send(Message::Done),
                Ok(false) => false,
                Err(e) => send(Message::Failed(e)),
            };
        };
        let mut outcome = Ok(());
        in_order(
            ranges.len(),
            self.jobs,
            self.jobs.saturating_mul(WINDOW_PER_JOB),
            &work,
            &mut |_, receiver| loop {
                let failed = match receiver.recv() {
                    Ok(Message::Chunk(made)) => match consume(made) {
                        Ok(()) => continue,
                        Err(e) => InspectError::Consumer(e),
                    },
                    Ok(Message::Done) => return true,
                    Ok(Message::Failed(e)) => InspectError::Io(e),
                    Err(_) => {
                        InspectError::Io(io::Error::other("a range's thread ended without a word"))
                    }
                };
                outcome = Err(failed);
                return false;
            },
        );
        outcome
    }
}
