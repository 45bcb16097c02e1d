//! Inspecting a log: one pass that gives everything a checker wants to know about a
//! log file, or a range of it, in log order, read in ranges on threads when it is a
//! file. The `walcodec` tool's `verify`, `stat` and `dump` are built on it; so can
//! an operator's tool or a service that checks its own WAL.
//!
//! ```
//! use bytes::BytesMut;
//! use tokio_util::codec::Encoder;
//! use walcodec::inspect::{Inspector, ItemKind};
//! use walcodec::{Dialect, LogEncoder};
//!
//! // A log of three records, its second damaged.
//! let mut log = BytesMut::new();
//! let mut encoder = LogEncoder::new();
//! for record in ["alpha", "beta", "gamma"] {
//!     encoder.encode(record.as_bytes(), &mut log)?;
//! }
//! log[7 + 5 + 7] ^= 0xff; // the first payload byte of "beta"
//!
//! let mut records = Vec::new();
//! let mut reports = Vec::new();
//! let inspection = Inspector::verify(Dialect::LevelDb, 0, 1 << 20)
//!     .jobs(2)
//!     .read_file(&log[..], log.len() as u64, |item, _rendered| {
//!         match &item.kind {
//!             ItemKind::Record { position, .. } => records.push(position.start),
//!             ItemKind::Report(corruption) => reports.push(corruption.offset()),
//!             _ => {}
//!         }
//!         Ok::<_, std::convert::Infallible>(())
//!     })?;
//! // LevelDB's reader drops the rest of a block after a bad checksum: "gamma" too.
//! assert_eq!(records, [0]);
//! assert_eq!(reports, [7 + 5]);
//! assert_eq!(inspection.stats.corruptions, 1);
//! // A strict reader stops at the damage: the log is corrupt, not only torn.
//! assert!(inspection.strict.damage.is_some());
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! ```
//!
//! # What a pass finds
//!
//! A pass reads the bytes once and gives, as [`Item`]s in log order, block by
//! block:
//!
//! | item | from |
//! |---|---|
//! | [`ItemKind::HiddenData`] | the layout walk ([`physical::Pieces`](crate::physical::Pieces), in the log's dialect): zero fill that is not all zeros, data every reader skips without a word |
//! | [`ItemKind::Report`] | the decoder: each piece of damage it reports, in the order it found it |
//! | [`ItemKind::Record`] | the decoder: each record it returns |
//! | [`ItemKind::Diverged`] | the first report or zeroed block: from here on a strict reader may decide otherwise than the decoder |
//! | [`ItemKind::StrictFailed`] | a strict (`TolerateTail`) reader found damage in this block |
//!
//! In a block, the layout's findings come first, then the decoder's. That order does
//! not depend on how the bytes were read or split, so a read in any number of
//! ranges gives exactly the items of one read of the whole log. At the end,
//! [`Inspection`] holds the decoder's counters, the layout counted ([`Layout`],
//! [`WalFacts`]) and the strict reader's verdict ([`StrictEnd`]).
//!
//! Each fragment's checksum is computed once in LevelDB's dialect: the walk checks a
//! block first, and the decoder checks again only in a block where the walk found a
//! bad one. A log read in RocksDB's or Pebble's dialect keeps the decoder's checks
//! on (their old fragments and recycled-file rules make the decoder's decisions
//! depend on more than a checksum), and is read as one range from its start, with
//! the strict reader fed beside the decoder.
//!
//! # The strict verdict
//!
//! Whether a log is damaged or only torn is a strict (`TolerateTail`) reader's
//! verdict: zeros after a FIRST fragment up to the end, which LevelDB's reader
//! reports as damage, is the torn tail a power cut leaves in a preallocated file.
//! The strict reader decides as the decoder until the decoder first reports
//! something or finds a zeroed block ([`ItemKind::Diverged`]); so on a file it runs
//! only on a damaged log, from the last record before that point, read again. A
//! stream, which cannot be read again, gets a strict reader fed beside the decoder.
//!
//! # Reading in ranges
//!
//! [`Inspector::read_file`] cuts a file into ranges of whole blocks that threads read
//! at once. A decoder that starts at a block boundary skips what belongs to a record
//! begun before it, and from its first record on decides as a decoder that read from
//! the start; so each range reads on past its end to the next range's first record,
//! and the ranges' findings, merged, are the whole log's. A file that changes between
//! the reads of two ranges (a writer filling it in place) makes them disagree: the
//! read fails ([`InspectError::Io`]) rather than merge two versions. A few ranges
//! are read ahead of the one being consumed, so memory stays bounded by the range
//! size whatever the log's length.

use std::fmt;
use std::io::{self, Read};
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use crate::codec::record_decoder::LogRecord;
use crate::decoder::error::{CodecError, Corruption};
use crate::decoder::{DecodeStats, LogDecoder, LogDecoderBuilder, LogInput, Recovery};
use crate::format::fragment::{Dialect, FragmentRules};
use crate::format::{block_start, Position, BLOCK_SIZE};

mod counts;
mod layout;
mod ordered;
mod parallel;
mod pass;
mod tail;

pub use counts::{Layout, WalFacts};
pub use layout::LayoutWalk;
pub use tail::Tail;

use pass::Settings;

/// The block of what is found at the end of the input (after its last byte).
pub const EOF_BLOCK: u64 = u64::MAX;

/// Bytes read at a time from a log (a multiple of the block size).
const READ_BYTES: usize = 32 * BLOCK_SIZE;

/// The largest range of a read that renders records: a range's renderings wait for
/// the ranges before it, so the ranges read ahead hold little.
const MAX_RENDERING_RANGE_BYTES: u64 = 16 << 20;

/// The largest range otherwise: a range reads into chunks of its own, whose first
/// use is fresh memory (page faults), so ranges are large where nothing waits in
/// them but a few counters and findings.
const MAX_RANGE_BYTES: u64 = 256 << 20;

/// Renders a record on the reading thread (see [`Inspector::render`]).
pub type RenderRecord = dyn Fn(&LogRecord, &mut Vec<u8>) -> Option<Box<str>> + Send + Sync;

/// Sees each report as the decoder makes it (see [`Inspector::on_report`]).
pub type ReportHook = dyn Fn(&Corruption) + Send + Sync;

/// Told the bytes of each chunk read (see [`Inspector::progress`]).
pub type Progress = dyn Fn(u64) + Send + Sync;

/// One finding of a pass, in log order.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Item {
    /// The block whose bytes were being read when it was found ([`EOF_BLOCK`] at the
    /// end of the input).
    pub block: u64,
    /// What was found.
    pub kind: ItemKind,
    /// A record's rendering, in the text of the batch it came in.
    rendered: Range<usize>,
}

/// Items are equal when their blocks and kinds are (wherever their renderings sat).
impl PartialEq for Item {
    fn eq(&self, other: &Item) -> bool {
        self.block == other.block && self.kind == other.kind
    }
}

impl Eq for Item {}

impl Item {
    fn new(block: u64, kind: ItemKind) -> Item {
        Item {
            block,
            kind,
            rendered: 0..0,
        }
    }
}

/// What an [`Item`] is (see the table in the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ItemKind {
    /// Zero fill that is not all zeros (the layout's finding): data a reader skips.
    /// Not reported in Pebble's dialect, whose rule (the decoder's) judges it.
    HiddenData {
        /// Where the zero fill starts.
        offset: u64,
        /// Its length, to its block's end.
        len: u64,
    },
    /// A report of the decoder.
    Report(Corruption),
    /// A record the decoder returned.
    Record {
        /// Where it sits in the log.
        position: Position,
        /// Its payload's length.
        len: u64,
        /// What the [renderer](Inspector::render) said about it, if anything.
        note: Option<Box<str>>,
    },
    /// The first decode that made a report or found a zeroed block: from here on the
    /// strict reader may decide otherwise than the decoder.
    Diverged,
    /// The strict reader found damage in this block.
    StrictFailed,
}

/// The end of a strict (`TolerateTail`) read: damage stops it, a torn tail does not.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StrictEnd {
    /// The damage that stopped it, if any: the error's message.
    pub damage: Option<String>,
    /// End of the last complete record it returned.
    pub valid_prefix_len: u64,
    /// Whether it found the log ending inside a record.
    pub incomplete_tail: bool,
    /// A recycled WAL whose bytes after its last record are no write of its own
    /// cut short but the rest of the file's earlier use (another log number, or no
    /// fragment header at all): its end, and no record lost.
    pub earlier_use: bool,
    /// A recycled WAL that ended at another log's fragment or at a bad checksum or
    /// length, as RocksDB's reader ends it: its earlier use, or its own last write
    /// cut short over it.
    pub recycled_end: bool,
    /// Pebble: where the log ended before the file did (its EOF trailer, or an
    /// invalid chunk nothing proved damage), and whether by the trailer.
    pub log_end: Option<(u64, bool)>,
}

/// What a pass found, at its end.
#[derive(Debug)]
#[non_exhaustive]
pub struct Inspection {
    /// The offset just past the last byte decoded: the length of the log as read.
    pub read_to: u64,
    /// The decoder's counters (all zero when nothing was decoded).
    pub stats: DecodeStats,
    /// The end of the last complete record the decoder returned.
    pub valid_prefix_len: u64,
    /// Whether the decoder found the log ending inside a record.
    pub incomplete_tail: bool,
    /// The error that ended the decoder's read, in a mode that stops at damage.
    pub error: Option<CodecError>,
    /// The layout of the blocks walked (all zero without [`Inspector::walk`]).
    pub layout: Layout,
    /// What the walk saw of a RocksDB WAL's own pieces.
    pub wal: WalFacts,
    /// The strict reader's verdict (without one, the decoder's end as it).
    pub strict: StrictEnd,
}

/// Why a pass stopped early.
#[derive(Debug)]
#[non_exhaustive]
pub enum InspectError<E> {
    /// Reading the log failed, or a file's ranges did not agree (it changed while it
    /// was read).
    Io(io::Error),
    /// Reading the log again for the strict verdict failed.
    StrictRead(io::Error),
    /// The consumer returned this error.
    Consumer(E),
}

impl<E: fmt::Display> fmt::Display for InspectError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InspectError::Io(e) => write!(f, "{e}"),
            InspectError::StrictRead(e) => write!(f, "strict read: {e}"),
            InspectError::Consumer(e) => write!(f, "{e}"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for InspectError<E> {}

/// A log that can be read from any offset, once per range: what
/// [`Inspector::read_file`] reads.
///
/// Implemented for a file by its path (opened once per range) and for bytes in
/// memory. A caller that must be sure every range reads the same file (not one
/// renamed over it meanwhile) implements it on a handle that checks.
pub trait RangeSource: Sync {
    /// A reader of the bytes `[from, to)` (fewer when the log ends first).
    fn open_range(&self, from: u64, to: u64) -> io::Result<Box<dyn Read + '_>>;
}

impl RangeSource for [u8] {
    fn open_range(&self, from: u64, to: u64) -> io::Result<Box<dyn Read + '_>> {
        let len = self.len() as u64;
        let (from, to) = (from.min(len), to.min(len).max(from.min(len)));
        // Both are at most `len`, which is a `usize`.
        let bytes = &self[from as usize..to as usize];
        Ok(Box::new(bytes))
    }
}

impl RangeSource for Path {
    fn open_range(&self, from: u64, to: u64) -> io::Result<Box<dyn Read + '_>> {
        use std::io::{Seek, SeekFrom};
        let mut file = std::fs::File::open(self)?;
        file.seek(SeekFrom::Start(from))?;
        Ok(Box::new(file.take(to.saturating_sub(from))))
    }
}

/// How a pass reads: the decoder's settings, the layout walk, the strict verdict,
/// and the threads. Built with setters (`&mut self -> &mut Self`), then
/// [`read_file`](Self::read_file) or [`read_stream`](Self::read_stream).
#[derive(Clone)]
#[must_use]
pub struct Inspector {
    settings: Settings,
    strict: Option<LogDecoderBuilder>,
    jobs: usize,
    range_bytes: Option<u64>,
    progress: Option<Arc<Progress>>,
}

impl fmt::Debug for Inspector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inspector")
            .field("rules", &self.settings.rules)
            .field("start", &self.settings.start)
            .field("walk", &self.settings.walk)
            .field("strict", &self.strict.is_some())
            .field("jobs", &self.jobs)
            .field("range_bytes", &self.range_bytes)
            .finish_non_exhaustive()
    }
}

impl Inspector {
    /// A pass whose decoder is built by `decoder` (its reporter is replaced: see
    /// [`on_report`](Self::on_report)), over a log whose headers follow `rules` (the
    /// same dialect and log number as the decoder's). No walk, no strict reader, one
    /// thread, from the log's start.
    pub fn new(decoder: LogDecoderBuilder, rules: FragmentRules) -> Inspector {
        Inspector {
            settings: Settings {
                builder: decoder,
                rules,
                start: 0,
                walk: false,
                eager_strict: None,
                render: None,
                on_report: None,
            },
            strict: None,
            jobs: 1,
            range_bytes: None,
            progress: None,
        }
    }

    /// The pass of `walcodec verify` and `stat` over a whole log in `dialect`
    /// (recyclable headers carrying `log_number`), records up to
    /// `max_record_bytes`: the layout walk, LevelDB's reader
    /// (`SkipCorrupted`; for a Pebble WAL Pebble's rule, `PointInTime`, so that the
    /// stale bytes of a recycled file are never reported as damage) and a strict
    /// reader's verdict.
    pub fn verify(dialect: Dialect, log_number: u64, max_record_bytes: usize) -> Inspector {
        let recovery = match dialect {
            Dialect::Pebble => Recovery::PointInTime,
            _ => Recovery::SkipCorrupted,
        };
        let decoder = |recovery| {
            let mut builder = LogDecoder::builder();
            builder
                .dialect(dialect)
                .log_number(log_number)
                .recovery(recovery)
                // A record cut at the end of a file is a torn tail.
                .input(LogInput::File)
                .max_record_bytes(max_record_bytes);
            builder
        };
        let rules = FragmentRules::new(dialect).log_number(log_number);
        let mut inspector = Inspector::new(decoder(recovery), rules);
        inspector
            .walk(true)
            .strict(Some(decoder(Recovery::TolerateTail)));
        inspector
    }

    /// Reads from the record at or after `offset` (from the block holding it); 0,
    /// the default, reads the whole log.
    pub fn start(&mut self, offset: u64) -> &mut Self {
        self.settings.start = offset;
        self
    }

    /// Whether to walk the layout: [`ItemKind::HiddenData`], [`Inspection::layout`]
    /// and [`Inspection::wal`]. In LevelDB's dialect the walk checks each checksum,
    /// and the decoder checks again only where the walk found a bad one.
    pub fn walk(&mut self, walk: bool) -> &mut Self {
        self.settings.walk = walk;
        self
    }

    /// The strict reader's settings (`TolerateTail`, from the log's start), for
    /// [`ItemKind::StrictFailed`] and [`Inspection::strict`]; `None`, the default,
    /// for none (the decoder's end stands in for its verdict).
    pub fn strict(&mut self, strict: Option<LogDecoderBuilder>) -> &mut Self {
        self.strict = strict;
        self
    }

    /// Renders each record on the thread that reads it, into bytes handed to the
    /// consumer with its item: the work of formatting spreads over the threads.
    /// What it returns is the record's [`note`](ItemKind::Record::note).
    pub fn render<F>(&mut self, render: F) -> &mut Self
    where
        F: Fn(&LogRecord, &mut Vec<u8>) -> Option<Box<str>> + Send + Sync + 'static,
    {
        self.settings.render = Some(Arc::new(render));
        self
    }

    /// Calls `hook` with each report as a decoder makes it, on the thread that
    /// reads (before the report is an item, and also for bytes a range reads only
    /// to find where it takes over, so a report may be seen twice).
    pub fn on_report<F>(&mut self, hook: F) -> &mut Self
    where
        F: Fn(&Corruption) + Send + Sync + 'static,
    {
        self.settings.on_report = Some(Arc::new(hook));
        self
    }

    /// Calls `progress` with the length of each chunk read, on the thread that
    /// reads it: a progress bar's increments.
    pub fn progress<F>(&mut self, progress: F) -> &mut Self
    where
        F: Fn(u64) + Send + Sync + 'static,
    {
        self.progress = Some(Arc::new(progress));
        self
    }

    /// Threads that read a file at once, each a range of it (default 1). The items
    /// are the same for any number. A log in RocksDB's or Pebble's dialect is read
    /// by one.
    pub fn jobs(&mut self, jobs: usize) -> &mut Self {
        self.jobs = jobs.max(1);
        self
    }

    /// Cuts a file into ranges of this many bytes (rounded up to whole blocks)
    /// instead of about four per thread; `None`, the default, for the latter.
    pub fn range_bytes(&mut self, bytes: Option<u64>) -> &mut Self {
        self.range_bytes = bytes;
        self
    }

    /// Reads `source` up to `end` (its length, or less to read only so far) in
    /// ranges on [`jobs`](Self::jobs) threads, and hands every item to `consume` in
    /// log order with its rendering (empty unless a record [rendered](Self::render)).
    /// An error of `consume` stops the read and is returned.
    pub fn read_file<S, E, F>(
        &self,
        source: &S,
        end: u64,
        mut consume: F,
    ) -> Result<Inspection, InspectError<E>>
    where
        S: RangeSource + ?Sized,
        F: FnMut(&Item, &[u8]) -> Result<(), E>,
    {
        let from = block_start(self.settings.start);
        if self.settings.rules.dialect() != Dialect::LevelDb {
            // A range's decoder would start mid-log without the recycled file's
            // old-fragment and log-number state that decides where such a log ends,
            // and the strict re-read from the last quiet record would need it too:
            // one range, with the strict reader fed beside the decoder.
            let settings = Settings {
                eager_strict: self.strict.clone(),
                ..self.settings.clone()
            };
            return parallel::read_ranges(
                source,
                end,
                &[(from, end.max(from))],
                1,
                &settings,
                None,
                self.progress.clone(),
                &mut consume,
            );
        }
        let max_bytes = match self.settings.render {
            Some(_) => MAX_RENDERING_RANGE_BYTES,
            None => MAX_RANGE_BYTES,
        };
        let ranges = parallel::plan(from, end, self.jobs, self.range_bytes, max_bytes);
        let threads = self.jobs.min(ranges.len());
        parallel::read_ranges(
            source,
            end,
            &ranges,
            threads,
            &self.settings,
            self.strict.as_ref(),
            self.progress.clone(),
            &mut consume,
        )
    }

    /// Reads `stream`, which starts at the block holding the
    /// [start](Self::start), to its end on a thread of its own, and hands every item
    /// to `consume` in log order on the calling thread (see
    /// [`read_file`](Self::read_file)). The strict reader, when set, is fed beside
    /// the decoder. When `consume` fails, the reading thread is not waited for (it
    /// may be blocked on a pipe): it ends at its next read.
    pub fn read_stream<R, E, F>(
        &self,
        stream: R,
        mut consume: F,
    ) -> Result<Inspection, InspectError<E>>
    where
        R: Read + Send + 'static,
        F: FnMut(&Item, &[u8]) -> Result<(), E>,
    {
        let settings = Settings {
            eager_strict: self.strict.clone(),
            ..self.settings.clone()
        };
        parallel::read_stream::<R, E>(stream, settings, self.progress.clone(), &mut consume)
    }
}
