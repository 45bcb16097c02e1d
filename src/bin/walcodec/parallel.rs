//! `--jobs N`: one read of a log split into ranges that threads read at once, merged
//! into exactly what one read of the whole log finds.
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
//! Ranges are read a few at a time ahead of the one being printed (`WINDOW_PER_JOB`),
//! so memory stays bounded whatever the log's length.

use std::io;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

use indicatif::ProgressBar;
use walcodec::{
    block_start, DecodeStats, Dialect, LogDecoderBuilder, Position, Recovery, BLOCK_SIZE,
};

use crate::common::{decoder_builder, io_message, Failure, Limits, READ_SIZE};
use crate::dialect::LogChoice;
use crate::input::{Input, SplitSource};
use crate::ordered::{in_order, Sender};
use crate::scan::{
    run_range, stats_sum, strict_from, Batch, BlockingChunks, ChunkSource, Item, Layout, RangeEnd,
    ScanEnd, Settings, StrictEnd, Task, What,
};
use crate::wal::WalFacts;

/// `--jobs` and the split size, for the commands that read a whole log.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct JobsArgs {
    /// Threads that read the log at once, each a range of it (default: the cores
    /// available). The output is the same for any N. Stdin and pipes are read by one,
    /// and so is a log read in RocksDB's dialect (--dialect), whose layout depends on
    /// what came before.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1024))]
    jobs: Option<u64>,
    /// The bytes of each range of a split read (rounded up to whole blocks); for
    /// tests, which split small logs.
    #[arg(long, value_name = "BYTES", hide = true)]
    split_bytes: Option<u64>,
}

impl JobsArgs {
    /// The split size asked for (tests).
    pub(crate) fn split_bytes(&self) -> Option<u64> {
        self.split_bytes
    }

    pub(crate) fn jobs(&self) -> usize {
        match self.jobs {
            Some(n) => n as usize,
            None => std::thread::available_parallelism().map_or(1, NonZeroUsize::get),
        }
    }
}

/// Ranges read ahead of the one being printed, per thread.
const WINDOW_PER_JOB: usize = 2;

/// The largest range of `dump --physical`: a range's lines wait for the ranges
/// before it, and a block of tiny fragments prints six times its size.
pub(crate) const MAX_LAYOUT_RANGE_BYTES: u64 = 2 << 20;

/// The largest range of a command that prints records (`dump`): its lines wait for
/// the ranges before it, so the ranges read ahead hold little.
const MAX_PRINTING_RANGE_BYTES: u64 = 16 << 20;

/// The largest range otherwise: a range reads into chunks of its own, whose first
/// use is fresh memory (page faults), so ranges are large where nothing waits in
/// them but a few counters and findings.
const MAX_RANGE_BYTES: u64 = 256 << 20;

/// Cuts `[from, end)` into ranges for `jobs` threads: whole numbers of `READ_SIZE`
/// (of blocks, with `split_bytes`), about four per thread, at most `max_bytes` each.
pub(crate) fn plan(
    from: u64,
    end: u64,
    jobs: usize,
    split_bytes: Option<u64>,
    max_bytes: u64,
) -> Vec<(u64, u64)> {
    let len = end.saturating_sub(from);
    let size = match split_bytes {
        Some(bytes) => bytes.max(1).next_multiple_of(BLOCK_SIZE as u64),
        None if jobs == 1 => u64::MAX,
        None => (len / (jobs as u64 * 4))
            .clamp(READ_SIZE as u64, max_bytes)
            .next_multiple_of(READ_SIZE as u64),
    };
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

/// Where the strict reader's verdict comes from.
pub(crate) enum StrictMode {
    /// Not wanted (`dump`).
    None,
    /// From the record before the first divergence, re-read: `TolerateTail` settings.
    Wanted(LogDecoderBuilder),
}

/// What a split read found, merged.
#[derive(Debug)]
pub(crate) struct Merged {
    /// The offset just past the last byte read.
    pub(crate) read_to: u64,
    pub(crate) stats: DecodeStats,
    pub(crate) valid_prefix_len: u64,
    pub(crate) incomplete_tail: bool,
    pub(crate) error: Option<walcodec::Error>,
    pub(crate) layout: Layout,
    pub(crate) wal: WalFacts,
    pub(crate) strict: StrictEnd,
}

/// What a command does with each item in log order, and the batch's text (record
/// lines).
pub(crate) type Consume<'a> = dyn FnMut(&Item, &[u8]) -> Result<(), Failure> + 'a;

enum Message {
    Batch(Batch),
    End(Box<RangeEnd>),
    Failed(io::Error),
}

/// Reads `input` from the block holding `start` with `settings`, in ranges on
/// `jobs` threads when it is a file, and hands every item to `consume` in log order
/// (see the module docs): the layout's findings of each group, then the decoder's.
pub(crate) fn read(
    input: &mut Input,
    settings: &Settings,
    jobs: &JobsArgs,
    strict_mode: &StrictMode,
    consume: &mut Consume<'_>,
) -> Result<(Merged, crate::input::InputEnd), Failure> {
    let from = block_start(settings.start);
    let name = input.name().to_string();
    let split = input.split_source();
    let progress = input.progress_bar();
    // A log read in RocksDB's dialect is read as one range, with a strict reader fed
    // beside the decoder (as a pipe is): a range's decoder would start mid-log
    // without the recycled file's old-fragment and log-number state that decides
    // where such a log ends, and the strict reader's re-read from the last quiet
    // record would need it too. `--jobs` does not split it.
    // A RocksDB or Pebble WAL ends at its first fragment of another log (or at
    // Pebble's EOF trailer): what follows is not the log's, so it is read as one
    // range from its start.
    let split = split.filter(|_| settings.log.dialect == Dialect::LevelDb);
    let merged = match split {
        Some((file, end)) => {
            let max_bytes = match settings.line {
                Some(_) => MAX_PRINTING_RANGE_BYTES,
                None => MAX_RANGE_BYTES,
            };
            let ranges = plan(from, end, jobs.jobs(), jobs.split_bytes, max_bytes);
            let threads = jobs.jobs().min(ranges.len());
            let merged = read_split(
                &file,
                end,
                &ranges,
                threads,
                settings,
                strict_mode,
                progress,
                consume,
            )?;
            if let Ok(merged) = &merged {
                input.set_read_to(merged.read_to);
            }
            merged
        }
        None => {
            input.skip_to(from)?;
            let eager = match strict_mode {
                StrictMode::Wanted(builder) => Some(builder.clone()),
                StrictMode::None => None,
            };
            let settings = Settings {
                eager_strict: eager,
                ..settings.clone()
            };
            read_stream(input, &settings, consume)?
        }
    };
    let merged = merged.map_err(|e| Failure::named(&name, e))?;
    Ok((merged, input.finish()))
}

/// One range, the whole input, read on a thread of its own with blocking reads
/// while the calling thread consumes its batches as they come. The thread is not
/// waited for when the consumer fails (`dump - | head`): it may be waiting on a pipe
/// whose writer has nothing more to say for now.
fn read_stream(
    input: &mut Input,
    settings: &Settings,
    consume: &mut Consume<'_>,
) -> Result<io::Result<Merged>, Failure> {
    let task = Task {
        index: 0,
        from: block_start(settings.start),
        to: u64::MAX,
        last: true,
    };
    let reader = input.reader().map_err(|e| input.failure(e))?;
    let abort = Arc::new(AtomicBool::new(false));
    let (sender, receiver) = mpsc::sync_channel(4);
    let settings = settings.clone();
    let stop = abort.clone();
    std::thread::spawn(move || {
        let mut own = BlockingChunks::new(reader);
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
    let mut merger = Merger::new(None, None);
    let result = merger.take(&receiver, 0, consume);
    if result.is_err() {
        abort.store(true, Ordering::Relaxed);
    }
    match result? {
        Err(e) => Ok(Err(e)),
        Ok(()) => {
            let merged = merger.finish(consume)?;
            input.set_read_to(merged.read_to);
            Ok(Ok(merged))
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn read_split(
    file: &SplitSource,
    end: u64,
    ranges: &[(u64, u64)],
    threads: usize,
    settings: &Settings,
    strict_mode: &StrictMode,
    progress: Option<ProgressBar>,
    consume: &mut Consume<'_>,
) -> Result<io::Result<Merged>, Failure> {
    let work = |index: usize, send: &mut Sender<'_, Message>| {
        let (from, to) = ranges[index];
        let task = Task {
            index,
            from,
            to,
            last: index + 1 == ranges.len(),
        };
        let end = (|| {
            let mut own = BlockingChunks::new(file.open(from, to)?).with_progress(progress.clone());
            // Past its end a range reads only to its first record there, usually a
            // few blocks: small chunks.
            let mut rest = || -> io::Result<Box<dyn ChunkSource>> {
                Ok(Box::new(
                    BlockingChunks::new(file.open(to, end)?).with_chunk_bytes(4 * BLOCK_SIZE),
                ))
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
    let strict = match strict_mode {
        StrictMode::Wanted(builder) => Some((builder, file)),
        StrictMode::None => None,
    };
    let mut merger = Merger::new(strict, Some(end));
    let mut outcome = Ok(Ok(()));
    in_order(
        ranges.len(),
        threads,
        threads * WINDOW_PER_JOB,
        &work,
        &mut |index, receiver| {
            outcome = merger.take(receiver, index, consume);
            matches!(outcome, Ok(Ok(())))
        },
    );
    match outcome? {
        Err(e) => Ok(Err(e)),
        Ok(()) => merger.finish(consume).map(Ok),
    }
}

/// Puts the ranges' items in log order and adds up their ends.
struct Merger<'a> {
    /// For the strict verdict: its settings and the file to read again.
    strict: Option<(&'a LogDecoderBuilder, &'a SplitSource)>,
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
    merged: Merged,
    authority: Option<RangeEnd>,
}

impl<'a> Merger<'a> {
    fn new(
        strict: Option<(&'a LogDecoderBuilder, &'a SplitSource)>,
        end: Option<u64>,
    ) -> Merger<'a> {
        Merger {
            strict,
            end,
            handoff: None,
            chained: true,
            quiet_record: 0,
            diverged: false,
            strict_block: None,
            strict_end: None,
            merged: Merged {
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
    fn take(
        &mut self,
        receiver: &mpsc::Receiver<Message>,
        index: usize,
        consume: &mut Consume<'_>,
    ) -> Result<io::Result<()>, Failure> {
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

    fn item(&mut self, item: &Item, text: &[u8], consume: &mut Consume<'_>) -> Result<(), Failure> {
        match item.what {
            What::Record { position, .. } if !self.diverged => {
                self.quiet_record = position.start;
            }
            What::Diverged if !self.diverged => {
                self.diverged = true;
                if let Some((builder, file)) = self.strict {
                    self.strict_read(builder, file)?;
                }
            }
            _ => {}
        }
        if let Some(block) = self.strict_block {
            if item.block > block {
                self.say_strict(consume)?;
            }
        }
        consume(item, text)
    }

    /// The strict reader's verdict, read again from the last record before the
    /// first divergence: before it, the strict reader decides as the decoder did.
    fn strict_read(
        &mut self,
        builder: &LogDecoderBuilder,
        file: &SplitSource,
    ) -> Result<(), Failure> {
        let failure = |e: io::Error| Failure::new(format!("strict read: {}", io_message(&e)));
        let from = block_start(self.quiet_record);
        let reader = file
            .open(from, self.end.unwrap_or(u64::MAX))
            .map_err(failure)?;
        let (end, block) = strict_from(reader, self.quiet_record, builder).map_err(failure)?;
        self.strict_end = Some(end);
        self.strict_block = block;
        Ok(())
    }

    fn say_strict(&mut self, consume: &mut Consume<'_>) -> Result<(), Failure> {
        if let Some(block) = self.strict_block.take() {
            consume(
                &Item {
                    block,
                    what: What::StrictFailed,
                },
                &[],
            )?;
        }
        Ok(())
    }

    fn finish(mut self, consume: &mut Consume<'_>) -> Result<Merged, Failure> {
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

/// The recovery of the pass of `verify` and `stat`: LevelDB's reader
/// (`SkipCorrupted`), or for a Pebble WAL Pebble's rule (`PointInTime`: damage that
/// a later synced offset proves is reported and ends the log, anything else
/// invalid ends it cleanly), so that the stale bytes of a recycled file are never
/// reported as damage.
fn pass_recovery(log: &LogChoice) -> Recovery {
    match log.dialect {
        Dialect::Pebble => Recovery::PointInTime,
        _ => Recovery::SkipCorrupted,
    }
}

/// The pass of `verify` and `stat` over a whole log: the layout, a `SkipCorrupted`
/// decoder (LevelDB's reader; Pebble's rule for a Pebble WAL) and the strict
/// reader's verdict.
pub(crate) fn scan(
    input: &mut Input,
    jobs: &JobsArgs,
    limits: Limits,
    log: &LogChoice,
    consume: &mut dyn FnMut(&Item) -> Result<(), Failure>,
) -> Result<ScanEnd, Failure> {
    let settings = Settings {
        builder: decoder_builder(log, pass_recovery(log), 0, limits),
        log: log.clone(),
        start: 0,
        walk: true,
        eager_strict: None,
        line: None,
    };
    let strict = StrictMode::Wanted(decoder_builder(log, Recovery::TolerateTail, 0, limits));
    let (merged, input_end) = read(input, &settings, jobs, &strict, &mut |item, _| {
        consume(item)
    })?;
    if let Some(error) = merged.error {
        // SkipCorrupted reports damage instead of failing, so only a bug lands here.
        return Err(Failure::new(format!("decoder: {error}")));
    }
    Ok(ScanEnd {
        file_len: merged.read_to,
        input: input_end,
        stats: merged.stats,
        strict: merged.strict,
        layout: merged.layout,
        wal: merged.wal,
    })
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
    }
}
