//! How the reading commands drive `walcodec::inspect`, the library's pass over a
//! log: `--jobs`, the input (a file read in ranges, or a stream), the progress bar,
//! the hint that a log read as LevelDB's is a RocksDB WAL, and the errors as the
//! tool words them. The pass itself (the layout walk, the decoder, the strict
//! verdict, the ranges and their merge) is the library's.

use std::num::NonZeroUsize;

use walcodec::inspect::{InspectError, Inspection, Inspector, Item, Layout, StrictEnd, WalFacts};
use walcodec::{block_start, DecodeStats};

use crate::common::{io_message, Failure, Limits};
use crate::dialect::LogChoice;
use crate::input::{Input, InputEnd};

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

/// What a pass over a whole log saw, at its end.
#[derive(Debug)]
pub(crate) struct ScanEnd {
    /// The offset just past the last byte read: the length of the log as read.
    pub(crate) file_len: u64,
    /// How the read of the input ended.
    pub(crate) input: InputEnd,
    /// The decoder's counters (all zero when nothing was decoded).
    pub(crate) stats: DecodeStats,
    /// What a `TolerateTail` reader makes of the same bytes.
    pub(crate) strict: StrictEnd,
    /// The layout of the blocks read.
    pub(crate) layout: Layout,
    /// What the walk saw of a RocksDB WAL's own pieces.
    pub(crate) wal: WalFacts,
}

/// What a command does with each item in log order, and its rendering.
pub(crate) type Consume<'a> = dyn FnMut(&Item, &[u8]) -> Result<(), Failure> + 'a;

/// Reads `input` from the block holding `inspector`'s start, in ranges on `jobs`
/// threads when it is a file, and hands every item to `consume` in log order with
/// its rendering. Every decoder's reports are watched by `log` (for its hint).
pub(crate) fn read(
    input: &mut Input,
    inspector: &mut Inspector,
    start: u64,
    log: &LogChoice,
    jobs: &JobsArgs,
    consume: &mut Consume<'_>,
) -> Result<(Inspection, InputEnd), Failure> {
    let name = input.name().to_string();
    let watcher = log.clone();
    inspector
        .start(start)
        .on_report(move |c| watcher.watch(c))
        .jobs(jobs.jobs())
        .range_bytes(jobs.split_bytes());
    let read = match input.split_source() {
        Some((file, end)) => {
            if let Some(bar) = input.progress_bar() {
                inspector.progress(move |bytes| bar.inc(bytes));
            }
            inspector.read_file(&file, end, &mut *consume)
        }
        None => {
            // A stream: read on, from here, by a reader that moves the progress bar.
            input.skip_to(block_start(start))?;
            let reader = input.reader().map_err(|e| input.failure(e))?;
            inspector.read_stream(reader, &mut *consume)
        }
    };
    let inspection = read.map_err(|e| match e {
        InspectError::Io(e) => Failure::named(&name, e),
        InspectError::StrictRead(e) => Failure::new(format!("strict read: {}", io_message(&e))),
        InspectError::Consumer(failure) => failure,
        other => Failure::new(format!("{name}: {other}")),
    })?;
    input.set_read_to(inspection.read_to);
    Ok((inspection, input.finish()))
}

/// The pass of `verify` and `stat` over a whole log (`Inspector::verify`): the
/// layout, LevelDB's reader (Pebble's rule for a Pebble WAL) and the strict
/// reader's verdict.
pub(crate) fn scan(
    input: &mut Input,
    jobs: &JobsArgs,
    limits: Limits,
    log: &LogChoice,
    consume: &mut dyn FnMut(&Item) -> Result<(), Failure>,
) -> Result<ScanEnd, Failure> {
    let mut inspector = Inspector::verify(log.dialect, log.log_number, limits.max_record_bytes);
    let (inspection, input_end) = read(input, &mut inspector, 0, log, jobs, &mut |item, _| {
        consume(item)
    })?;
    if let Some(error) = inspection.error {
        // SkipCorrupted reports damage instead of failing, so only a bug lands here.
        return Err(Failure::new(format!(
            "decoder: {}",
            walcodec::Error::from(error)
        )));
    }
    Ok(ScanEnd {
        file_len: inspection.read_to,
        input: input_end,
        stats: inspection.stats,
        strict: inspection.strict,
        layout: inspection.layout,
        wal: inspection.wal,
    })
}
