//! A read split into ranges that threads read at once, merged into exactly what one
//! read of the whole log finds; and the read of a stream, on a thread of its own.
//!
//! The split uses the format's split property: a decoder that starts at a block
//! boundary `B` skips the fragments of a record begun before `B` (it *resyncs*), and
//! from the first intact FULL or FIRST fragment at or after `B` on, it decides
//! everything as a decoder that read the log from its start: both have no record
//! open, nothing to skip and no zeros pending there. So the first record it returns
//! is the first record that starts at or after `B` for the whole-log decoder too,
//! and after that record the two are in the same state.
//!
//! | range `i`, read from `B_i`     | does                                          |
//! |--------------------------------|-----------------------------------------------|
//! | up to its first record         | decodes, keeps nothing (range 0: keeps all)   |
//! | from there on                  | walks each block it starts, decodes, keeps    |
//! | past `B_i+1`                   | reads on to its first record that starts at or after `B_i+1` (the next range's first record) and stops after it |
//!
//! Merged in order, the ranges' findings are the whole log's: range `i+1` takes over
//! right after the record range `i` stopped at, and each block is walked by the
//! range that kept its findings where the block starts. A range whose decoder
//! reaches the log's end without such a record (damage or zeros to the end) is the
//! last kept: the ranges after it have no record either, and find nothing to keep.
//! Only the last range kept sees the log's end, so torn tails, PointInTime stops
//! and errors come from the decoder that a whole-log read would have then.
//!
//! Ranges are read a few at a time ahead of the one being consumed
//! (`WINDOW_PER_JOB`), so memory stays bounded whatever the log's length.

use std::io::{self, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

use crate::decoder::{DecodeStats, LogDecoderBuilder};
use crate::format::{block_start, Position, BLOCK_SIZE};

use super::counts::{stats_sum, Layout, WalFacts};
use super::ordered::{in_order, Sender};
use super::pass::{
    run_range, strict_from, Batch, BlockingChunks, ChunkSource, RangeEnd, Settings, Task,
};
use super::{InspectError, Inspection, Item, ItemKind, RangeSource, StrictEnd, READ_BYTES};

/// The most ranges a read is cut into: past that, ranges grow.
const MAX_RANGES: u64 = 1 << 16;

/// Ranges read ahead of the one being consumed, per thread.
const WINDOW_PER_JOB: usize = 2;

/// What a consumer does with each item in log order, and its rendered bytes.
pub(crate) type Consume<'a, E> = dyn FnMut(&Item, &[u8]) -> Result<(), E> + 'a;

enum Message {
    Batch(Batch),
    End(Box<RangeEnd>),
    Failed(io::Error),
}

/// What went wrong in a merge: the consumer's error or the strict re-read's stop
/// everything; a range's read error ends the read with that error.
type Outcome<E> = Result<io::Result<()>, InspectError<E>>;

/// One range, the whole stream, read on a thread of its own with blocking reads
/// while the calling thread consumes its batches as they come. The thread is not
/// waited for when the consumer fails: it may be waiting on a pipe whose writer has
/// nothing more to say for now.
pub(crate) fn read_stream<R, E>(
    reader: R,
    settings: Settings,
    progress: Option<Arc<super::Progress>>,
    consume: &mut Consume<'_, E>,
) -> Result<Inspection, InspectError<E>>
where
    R: Read + Send + 'static,
{
    let task = Task {
        index: 0,
        from: block_start(settings.start),
        to: u64::MAX,
        last: true,
    };
    let abort = Arc::new(AtomicBool::new(false));
    let (sender, receiver) = mpsc::sync_channel(4);
    let stop = abort.clone();
    std::thread::spawn(move || {
        let mut own = BlockingChunks::new(reader, READ_BYTES).with_progress(progress);
        let mut send = |batch: Batch| {
            !stop.load(Ordering::Relaxed) && sender.send(Message::Batch(batch)).is_ok()
        };
        let end = run_range(
            &settings,
            &task,
            &mut own,
            &mut || Err(io::Error::other("a stream has no rest")),
            &mut send,
        );
        let _ = sender.send(match end {
            Ok(end) => Message::End(Box::new(end)),
            Err(e) => Message::Failed(e),
        });
    });
    let mut merger = Merger::<[u8]>::new(None, None);
    let result = merger.take(&receiver, 0, consume);
    if result.is_err() {
        abort.store(true, Ordering::Relaxed);
    }
    result?.map_err(InspectError::Io)?;
    merger.finish(consume)
}

/// Reads `ranges` of `file` (which ends at `end`) on `threads` threads and merges
/// their items in log order; the strict verdict by a re-read with `strict` from the
/// last record before the first divergence, when given.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_ranges<S: RangeSource + ?Sized, E>(
    file: &S,
    end: u64,
    ranges: &[(u64, u64)],
    threads: usize,
    settings: &Settings,
    strict: Option<&LogDecoderBuilder>,
    progress: Option<Arc<super::Progress>>,
    consume: &mut Consume<'_, E>,
) -> Result<Inspection, InspectError<E>> {
    let work = |index: usize, send: &mut Sender<'_, Message>| {
        let (from, to) = ranges[index];
        let task = Task {
            index,
            from,
            to,
            last: index + 1 == ranges.len(),
        };
        let end = (|| {
            let mut own = BlockingChunks::new(file.open_range(from, to)?, READ_BYTES)
                .with_progress(progress.clone());
            // Past its end a range reads only to its first record there, usually a
            // few blocks: small chunks.
            let mut rest = || -> io::Result<Box<dyn ChunkSource + '_>> {
                Ok(Box::new(BlockingChunks::new(
                    file.open_range(to, end)?,
                    4 * BLOCK_SIZE,
                )))
            };
            run_range(settings, &task, &mut own, &mut rest, &mut |batch| {
                send(Message::Batch(batch))
            })
        })();
        send(match end {
            Ok(end) => Message::End(Box::new(end)),
            Err(e) => Message::Failed(e),
        });
    };
    let strict = strict.map(|builder| (builder, file));
    let mut merger = Merger::new(strict, Some(end));
    let mut outcome: Outcome<E> = Ok(Ok(()));
    in_order(
        ranges.len(),
        threads,
        threads.saturating_mul(WINDOW_PER_JOB),
        &work,
        &mut |index, receiver| {
            outcome = merger.take(receiver, index, consume);
            matches!(outcome, Ok(Ok(())))
        },
    );
    outcome?.map_err(InspectError::Io)?;
    merger.finish(consume)
}

/// Puts the ranges' items in log order and adds up their ends.
struct Merger<'a, S: ?Sized> {
    /// For the strict verdict: its settings and the file to read again.
    strict: Option<(&'a LogDecoderBuilder, &'a S)>,
    end: Option<u64>,
    /// The record the last range kept stopped at, which the next one starts after.
    handoff: Option<Position>,
    /// Whether every range so far handed over to the next.
    chained: bool,
    /// The start of the last record before the first divergence.
    quiet_record: u64,
    diverged: bool,
    /// The block where the re-read strict reader found damage, until it is said.
    strict_block: Option<u64>,
    strict_end: Option<StrictEnd>,
    merged: Inspection,
    authority: Option<RangeEnd>,
}

impl<'a, S: RangeSource + ?Sized> Merger<'a, S> {
    fn new(strict: Option<(&'a LogDecoderBuilder, &'a S)>, end: Option<u64>) -> Merger<'a, S> {
        Merger {
            strict,
            end,
            handoff: None,
            chained: true,
            quiet_record: 0,
            diverged: false,
            strict_block: None,
            strict_end: None,
            merged: Inspection {
                read_to: 0,
                stats: DecodeStats::default(),
                valid_prefix_len: 0,
                incomplete_tail: false,
                error: None,
                layout: Layout::default(),
                wal: WalFacts::default(),
                strict: StrictEnd::default(),
            },
            authority: None,
        }
    }

    /// Takes the items of range `index` up to its end.
    fn take<E>(
        &mut self,
        receiver: &mpsc::Receiver<Message>,
        index: usize,
        consume: &mut Consume<'_, E>,
    ) -> Outcome<E> {
        // A range counts when the one before handed over to it; else the one before
        // read to the end, and this one has no record (its items are none).
        let kept = index == 0 || (self.chained && self.handoff.is_some());
        loop {
            let message = match receiver.recv() {
                Ok(message) => message,
                Err(_) => return Ok(Err(io::Error::other("a reading thread ended early"))),
            };
            match message {
                Message::Batch(batch) => {
                    if kept {
                        for item in &batch.items {
                            self.item(item, &batch.text, consume)?;
                        }
                    }
                }
                Message::Failed(e) => return Ok(Err(e)),
                Message::End(end) => {
                    if !kept {
                        return Ok(Ok(()));
                    }
                    // How far a whole read would have gone: as far as the decoder
                    // that a whole read would have had there.
                    self.merged.read_to = end.read_to;
                    if index > 0 && end.first_record != self.handoff {
                        // Ranges of the same bytes always agree (see the module docs):
                        // the bytes changed between the reads of two ranges.
                        return Ok(Err(io::Error::other(format!(
                            "the file changed while it was read in ranges (a writer filling it in place?): its ranges do not agree at offset {}; read it with --jobs 1",
                            self.handoff.map_or(0, |p| p.start)
                        ))));
                    }
                    self.merged.layout.add(&end.layout);
                    self.merged.wal.merge(&end.wal);
                    self.merged.stats = stats_sum(self.merged.stats, end.stats);
                    self.handoff = end.handoff;
                    self.chained = end.handoff.is_some();
                    self.authority = Some(*end);
                    return Ok(Ok(()));
                }
            }
        }
    }

    fn item<E>(
        &mut self,
        item: &Item,
        text: &[u8],
        consume: &mut Consume<'_, E>,
    ) -> Result<(), InspectError<E>> {
        match item.kind {
            ItemKind::Record { position, .. } if !self.diverged => {
                self.quiet_record = position.start;
            }
            ItemKind::Diverged if !self.diverged => {
                self.diverged = true;
                if let Some((builder, file)) = self.strict {
                    self.strict_read(builder, file)
                        .map_err(InspectError::StrictRead)?;
                }
            }
            // Each range marks its own first divergence; the log has one, the first.
            ItemKind::Diverged => return Ok(()),
            _ => {}
        }
        if let Some(block) = self.strict_block {
            if item.block > block {
                self.say_strict(consume)?;
            }
        }
        let rendered = text.get(item.rendered.clone()).unwrap_or_default();
        consume(item, rendered).map_err(InspectError::Consumer)
    }

    /// The strict reader's verdict, read again from the last record before the
    /// first divergence: before it, the strict reader decides as the decoder did.
    fn strict_read(&mut self, builder: &LogDecoderBuilder, file: &S) -> io::Result<()> {
        let from = block_start(self.quiet_record);
        let reader = file.open_range(from, self.end.unwrap_or(u64::MAX))?;
        let (end, block) = strict_from(reader, self.quiet_record, builder)?;
        self.strict_end = Some(end);
        self.strict_block = block;
        Ok(())
    }

    fn say_strict<E>(&mut self, consume: &mut Consume<'_, E>) -> Result<(), InspectError<E>> {
        if let Some(block) = self.strict_block.take() {
            consume(&Item::new(block, ItemKind::StrictFailed), &[])
                .map_err(InspectError::Consumer)?;
        }
        Ok(())
    }

    fn finish<E>(mut self, consume: &mut Consume<'_, E>) -> Result<Inspection, InspectError<E>> {
        self.say_strict(consume)?;
        let mut merged = self.merged;
        if let Some(end) = self.authority {
            merged.valid_prefix_len = end.valid_prefix_len;
            merged.incomplete_tail = end.incomplete_tail;
            merged.error = end.error;
            merged.strict = match (end.strict, self.strict_end) {
                (Some(eager), _) => eager,
                (None, Some(read_again)) => read_again,
                // No divergence: the strict reader decides as the decoder did.
                (None, None) => StrictEnd {
                    damage: None,
                    valid_prefix_len: end.valid_prefix_len,
                    incomplete_tail: end.incomplete_tail,
                    log_end: end.log_end,
                    earlier_use: false,
                    recycled_end: false,
                },
            };
        }
        Ok(merged)
    }
}

/// Cuts `[from, end)` into ranges for `jobs` threads: whole numbers of
/// `READ_BYTES` (of blocks, with `range_bytes`), about four per thread, at most
/// `max_bytes` each, and at most `MAX_RANGES` of them.
pub(crate) fn plan(
    from: u64,
    end: u64,
    jobs: usize,
    range_bytes: Option<u64>,
    max_bytes: u64,
) -> Vec<(u64, u64)> {
    let len = end.saturating_sub(from);
    let read = READ_BYTES as u64;
    let size = match range_bytes {
        Some(bytes) => bytes
            .max(1)
            .checked_next_multiple_of(BLOCK_SIZE as u64)
            .unwrap_or(u64::MAX),
        None if jobs <= 1 => u64::MAX,
        None => (len / (jobs as u64).saturating_mul(4))
            .clamp(read, max_bytes.max(read))
            .checked_next_multiple_of(read)
            .unwrap_or(u64::MAX),
    };
    // However large the read (an end far past the log's), the list stays small.
    let size = size.max(
        len.div_ceil(MAX_RANGES)
            .checked_next_multiple_of(BLOCK_SIZE as u64)
            .unwrap_or(u64::MAX),
    );
    let mut ranges = Vec::new();
    let mut at = from;
    loop {
        // Ends on a multiple of `size`, so that ranges after the first are aligned.
        let to = (at / size).saturating_add(1).saturating_mul(size).min(end);
        ranges.push((at, to));
        if to >= end {
            return ranges;
        }
        at = to;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_tile_the_read_and_start_on_blocks() {
        let block = BLOCK_SIZE as u64;
        for (from, end, jobs, split) in [
            (0, 0, 4, None),
            (0, 100, 1, None),
            (0, 5 << 30, 1, None),
            (0, 5 << 30, 3, None),
            (block, 10 * block + 5, 2, Some(1)),
            (3 * block, 10 * block, 2, Some(2 * block)),
            (0, 200 << 20, 2, None),
            (0, u64::MAX, usize::MAX, Some(u64::MAX)),
            (0, 1 << 40, usize::MAX, None),
        ] {
            let ranges = plan(from, end, jobs, split, 16 << 20);
            assert_eq!(ranges[0].0, from);
            assert_eq!(ranges.last().unwrap().1, end.max(from));
            for pair in ranges.windows(2) {
                assert_eq!(pair[0].1, pair[1].0);
                assert!(pair[0].0 < pair[0].1);
                assert_eq!(pair[1].0 % block, 0);
            }
            if jobs == 1 && split.is_none() {
                assert_eq!(ranges.len(), 1);
            }
        }
        // About four ranges a thread, up to the largest range size.
        assert_eq!(plan(0, 200 << 20, 2, None, 16 << 20).len(), 13);
        assert_eq!(plan(0, 64 << 20, 2, None, 16 << 20).len(), 8);
        assert_eq!(plan(0, 1 << 30, 2, None, 256 << 20).len(), 8);
        // An end far past any log: few ranges, however small they were asked to be.
        assert!(plan(0, u64::MAX, 4, Some(1), 16 << 20).len() as u64 <= MAX_RANGES);
        assert!(plan(0, u64::MAX, 4, None, 16 << 20).len() as u64 <= MAX_RANGES);
    }
}
