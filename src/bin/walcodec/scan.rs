//! One pass over a log, or over one range of it, that gives each reading command
//! everything it reports: the physical layout (`walcodec::physical::Pieces`, in the
//! log's dialect), the records and the reports of one `LogDecoder`, and what a
//! strict reader makes of the same bytes. Each fragment's checksum is computed once
//! in LevelDB's dialect: the walk checks a block first, and the decoder checks again
//! only in a block where the walk found a bad one (`LogDecoder::set_checksums`). A
//! log read in RocksDB's dialect keeps the decoder's checks on (its old fragments and
//! recycled-file rules make the decoder's decisions depend on more than a checksum),
//! and is read as one range with a strict reader fed beside the decoder (see
//! `parallel::read`).
//!
//! What the pass finds comes out as [`Item`]s in log order, block by block: the
//! layout's findings in a block, then what the decoder found while it read that
//! block, in the order it found it. That order does not depend on how the bytes were
//! read or split (`parallel` merges ranges into it).
//!
//! The strict (`TolerateTail`) reader's verdict, whether the log is damaged or only
//! torn, differs from the decoder's (`SkipCorrupted` for `verify` and `stat`) only
//! from the first point where the decoder reported something or found a zeroed
//! block: before it, the two make the same decisions. So the pass marks that point
//! ([`What::Diverged`]) and the strict reader runs only from the last record before
//! it (`strict_from`), on a damaged log only. An input that cannot be read twice (a
//! pipe) gets a strict reader fed beside the decoder instead ([`Strict`]).

use std::io::{self, Read};
use std::ops::Range;
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use indicatif::ProgressBar;
use tokio_util::codec::Decoder;
use walcodec::fragment::FragmentRules;
use walcodec::physical::{Chunk, Piece, Pieces};
use walcodec::{
    block_start, ChunkReader, Corruption, DecodeStats, Dialect, LogDecoder, LogDecoderBuilder,
    LogRecord, Position, BLOCK_SIZE, HEADER_SIZE,
};

use crate::common::{watched, Failure, Limits, READ_SIZE};
use crate::dialect::LogChoice;
use crate::input::{Input, InputEnd};
use crate::wal::WalFacts;

/// The block of what the decoder finds at the end of the input.
pub(crate) const EOF_BLOCK: u64 = u64::MAX;

/// One finding of a pass.
#[derive(Debug)]
pub(crate) struct Item {
    /// The block whose bytes were being read when it was found (`EOF_BLOCK` at the
    /// end of the input).
    pub(crate) block: u64,
    pub(crate) what: What,
}

#[derive(Debug)]
pub(crate) enum What {
    /// Zero fill that is not all zeros (the layout's finding): data a reader skips.
    Hidden { offset: u64, len: u64 },
    /// A report of the decoder.
    Report(Corruption),
    /// A record; `line` is its formatted line in the batch's text (commands that
    /// print records), else empty.
    Record {
        position: Position,
        len: u64,
        line: Range<usize>,
        /// Why the line's record is not a whole WriteBatch (`dump --format batch`),
        /// for stderr after the line.
        not_batch: Option<Box<str>>,
    },
    /// The first decode that made a report or found a zeroed block: from here on the
    /// strict reader may decide otherwise than the decoder.
    Diverged,
    /// The strict reader found damage in this block.
    StrictFailed,
}

/// Items as a pass hands them over, with the text of their record lines.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub(crate) items: Vec<Item>,
    pub(crate) text: Vec<u8>,
}

/// The layout of the blocks a pass walked, counted.
#[derive(Debug, Default, Clone)]
pub(crate) struct Layout {
    /// Fragments with a good checksum by type byte 0..=4, and the rest.
    pub(crate) by_type: [u64; 5],
    pub(crate) other_types: u64,
    pub(crate) header_bytes: u64,
    pub(crate) trailer_bytes: u64,
    pub(crate) zero_fill_bytes: u64,
    pub(crate) bad_checksum_bytes: u64,
    pub(crate) bad_length_bytes: u64,
    pub(crate) skipped_bytes: u64,
    pub(crate) torn_bytes: u64,
    /// Pieces of zero fill that are not all zeros.
    pub(crate) hidden_zero_fills: u64,
    pub(crate) hidden_bytes: u64,
}

impl Layout {
    /// Counts `piece`: what has a LevelDB view (`leveldb_chunk`) as that chunk, what
    /// only RocksDB's dialect has here (old fragments only in `WalFacts`).
    fn count_piece(&mut self, piece: &Piece<'_>) {
        if let Some(chunk) = leveldb_chunk(piece) {
            return self.count(&chunk);
        }
        match *piece {
            Piece::Fragment {
                fragment,
                checksum_ok: true,
                ..
            }
            | Piece::Metadata { fragment, .. } => {
                let part = fragment.part().map(|part| part.type_byte(false));
                match part.and_then(|t| self.by_type.get_mut(usize::from(t))) {
                    Some(count) => *count += 1,
                    None => self.other_types += 1,
                }
                self.header_bytes += fragment.header_len() as u64;
            }
            Piece::Fragment { .. } => self.bad_checksum_bytes += piece.len(),
            _ => {}
        }
    }

    fn count(&mut self, chunk: &Chunk<'_>) {
        match *chunk {
            Chunk::Fragment {
                header,
                checksum_ok,
                ..
            } => {
                if checksum_ok {
                    match self.by_type.get_mut(header.type_byte as usize) {
                        Some(count) => *count += 1,
                        None => self.other_types += 1,
                    }
                    self.header_bytes += HEADER_SIZE as u64;
                } else {
                    self.bad_checksum_bytes += chunk.len();
                }
            }
            Chunk::Trailer { .. } => self.trailer_bytes += chunk.len(),
            Chunk::ZeroFill { bytes, .. } => {
                self.zero_fill_bytes += chunk.len();
                if bytes.iter().any(|&b| b != 0) {
                    self.hidden_zero_fills += 1;
                    self.hidden_bytes += chunk.len();
                }
            }
            Chunk::BadLength { .. } => self.bad_length_bytes += chunk.len(),
            Chunk::Skipped { .. } => self.skipped_bytes += chunk.len(),
            Chunk::Torn { .. } => self.torn_bytes += chunk.len(),
        }
    }

    pub(crate) fn add(&mut self, other: &Layout) {
        for (mine, theirs) in self.by_type.iter_mut().zip(other.by_type) {
            *mine += theirs;
        }
        self.other_types += other.other_types;
        self.header_bytes += other.header_bytes;
        self.trailer_bytes += other.trailer_bytes;
        self.zero_fill_bytes += other.zero_fill_bytes;
        self.bad_checksum_bytes += other.bad_checksum_bytes;
        self.bad_length_bytes += other.bad_length_bytes;
        self.skipped_bytes += other.skipped_bytes;
        self.torn_bytes += other.torn_bytes;
        self.hidden_zero_fills += other.hidden_zero_fills;
        self.hidden_bytes += other.hidden_bytes;
    }
}

/// `a + b`, counter by counter.
pub(crate) fn stats_sum(a: DecodeStats, b: DecodeStats) -> DecodeStats {
    let mut sum = a;
    sum.records += b.records;
    sum.record_bytes += b.record_bytes;
    sum.fragments += b.fragments;
    sum.trailer_bytes += b.trailer_bytes;
    sum.zero_fill_bytes += b.zero_fill_bytes;
    sum.dropped_bytes += b.dropped_bytes;
    sum.corruptions += b.corruptions;
    sum.zeroed_blocks += b.zeroed_blocks;
    sum
}

/// `a - b` for counters `a` that went on from `b`.
fn stats_since(a: DecodeStats, b: DecodeStats) -> DecodeStats {
    let mut since = a;
    since.records -= b.records;
    since.record_bytes -= b.record_bytes;
    since.fragments -= b.fragments;
    since.trailer_bytes -= b.trailer_bytes;
    since.zero_fill_bytes -= b.zero_fill_bytes;
    since.dropped_bytes -= b.dropped_bytes;
    since.corruptions -= b.corruptions;
    since.zeroed_blocks -= b.zeroed_blocks;
    since
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

/// The LevelDB view of a piece: the chunk `physical::Chunks` yields for it. `None`
/// for what only RocksDB's dialect has: a fragment with an 11-byte header, an old
/// fragment. (A metadata record with a 7-byte header is a fragment of a type LevelDB
/// does not know; a 7-to-10-byte trailer a trailer.)
pub(crate) fn leveldb_chunk<'a>(piece: &Piece<'a>) -> Option<Chunk<'a>> {
    (!piece.is_rocksdb_only()).then(|| piece.to_chunk())
}

/// The end of a `TolerateTail` read: damage stops it, a torn tail does not.
#[derive(Debug, Default, Clone)]
pub(crate) struct StrictEnd {
    /// The damage that stopped it, if any.
    pub(crate) damage: Option<String>,
    /// End of the last complete record it returned.
    pub(crate) valid_prefix_len: u64,
    /// Whether it found the log ending inside a record.
    pub(crate) incomplete_tail: bool,
    /// A recycled WAL whose bytes after its last record are no write of its own
    /// cut short but the rest of the file's earlier use (another log number, or no
    /// fragment header at all): its end, and no record lost.
    pub(crate) earlier_use: bool,
    /// A recycled WAL that ended at another log's fragment or at a bad checksum or
    /// length, as RocksDB's reader ends it: its earlier use, or its own last write
    /// cut short over it.
    pub(crate) recycled_end: bool,
    /// Pebble: where the log ended before the file did (its EOF trailer, or an
    /// invalid chunk nothing proved damage), and whether by the trailer.
    pub(crate) log_end: Option<(u64, bool)>,
}

/// Pebble: where `decoder` found the log's end before the file's, and whether it
/// was the EOF trailer.
pub(crate) fn pebble_end(decoder: &LogDecoder) -> Option<(u64, bool)> {
    if decoder.dialect() != Dialect::Pebble {
        return None;
    }
    decoder
        .recycled_end()
        .map(|at| (at, decoder.has_eof_trailer()))
}

/// A `TolerateTail` decoder fed bytes of its own, for its verdict only.
pub(crate) struct Strict {
    decoder: LogDecoder,
    pending: BytesMut,
    damage: Option<String>,
    /// The log's header rules (its number), to tell in a recycled WAL a write of
    /// its own cut short from what is left of the file's earlier use.
    rules: Option<FragmentRules>,
}

impl Strict {
    pub(crate) fn new(decoder: LogDecoder, rules: Option<FragmentRules>) -> Strict {
        Strict {
            decoder,
            pending: BytesMut::new(),
            damage: None,
            rules,
        }
    }

    /// Decodes `bytes`; says whether this found the first damage.
    pub(crate) fn feed(&mut self, bytes: &[u8], eof: bool) -> bool {
        if self.damage.is_some() {
            return false;
        }
        self.pending.extend_from_slice(bytes);
        loop {
            let decoded = if eof {
                self.decoder.decode_eof(&mut self.pending)
            } else {
                self.decoder.decode(&mut self.pending)
            };
            match decoded {
                Ok(Some(_record)) => {}
                Ok(None) => return false,
                Err(e) => {
                    self.damage = Some(e.to_string());
                    self.pending = BytesMut::new();
                    return true;
                }
            }
        }
    }

    pub(crate) fn end(self) -> StrictEnd {
        let incomplete_tail = self.decoder.has_incomplete_tail();
        let earlier_use = incomplete_tail
            && self.decoder.is_recycled()
            // Nothing open: the bytes left start where the last record ended.
            && self.decoder.offset() == self.decoder.valid_prefix_len()
            && self
                .rules
                .is_some_and(|rules| !written_by_this_log(rules, &self.pending));
        StrictEnd {
            damage: self.damage,
            valid_prefix_len: self.decoder.valid_prefix_len(),
            incomplete_tail: incomplete_tail && !earlier_use,
            earlier_use,
            // Pebble's end of log is `log_end`'s.
            recycled_end: self.decoder.dialect() != Dialect::Pebble
                && self.decoder.recycled_end().is_some(),
            log_end: pebble_end(&self.decoder),
        }
    }
}

/// Whether `bytes` start with a recyclable fragment header of the log `rules`
/// read (a write of its own, perhaps cut short): its type and log number, whatever
/// its length and checksum say, since a write cut short has neither intact.
fn written_by_this_log(rules: FragmentRules, bytes: &[u8]) -> bool {
    // checksum (4), length (2), type (1), log number (4).
    const RECYCLABLE_HEADER: usize = 11;
    let Some(head) = bytes.get(..RECYCLABLE_HEADER) else {
        // Too little to tell: taken as this log's write cut short.
        return true;
    };
    let mut probe = [0u8; RECYCLABLE_HEADER];
    probe.copy_from_slice(head);
    // A length of 0 and no checksum check: only the type and number decide.
    probe[4] = 0;
    probe[5] = 0;
    matches!(
        rules.verify_checksums(false).parse(&probe, BLOCK_SIZE),
        walcodec::fragment::Parsed::Fragment(fragment) if fragment.log_number().is_some()
    )
}

/// The strict reader's verdict on the bytes of `source`, which starts at
/// `block_start(record)`, read from the record that starts at `record` (0: the
/// log's start) by a decoder of `builder` (`TolerateTail`): what a strict read of the
/// whole log says, when no report was made before that record. Also the block in
/// which it found damage, if it did.
pub(crate) fn strict_from(
    mut source: impl Read,
    record: u64,
    builder: &LogDecoderBuilder,
) -> io::Result<(StrictEnd, Option<u64>)> {
    let mut builder = builder.clone();
    builder.start_offset(record);
    let mut strict = Strict::new(builder.build(), None);
    let mut offset = block_start(record);
    let mut buffer = vec![0u8; BLOCK_SIZE];
    loop {
        // Block by block, so that damage is placed in its block.
        let n = read_full(&mut source, &mut buffer)?;
        if strict.feed(&buffer[..n], false) {
            return Ok((strict.end(), Some(offset / BLOCK_SIZE as u64)));
        }
        offset += n as u64;
        if n < buffer.len() {
            break;
        }
    }
    let failed = strict.feed(&[], true);
    Ok((strict.end(), failed.then_some(EOF_BLOCK)))
}

/// Formats a record's line for the commands that print records; says why when the
/// record is not what the format wants (not a whole WriteBatch).
pub(crate) type LineFormat = dyn Fn(&LogRecord, &mut Vec<u8>) -> Option<Box<str>> + Send + Sync;

/// How a pass reads.
#[derive(Clone)]
pub(crate) struct Settings {
    /// The decoder's settings (`common::decoder_builder`), without a reporter.
    pub(crate) builder: LogDecoderBuilder,
    /// The log's dialect and number, which the walk reads in and whose reports
    /// `LogChoice::watch` sees.
    pub(crate) log: LogChoice,
    /// The first record wanted (`dump --start`), 0 for the whole log.
    pub(crate) start: u64,
    /// Walk the layout (and check each checksum once): `verify` and `stat`.
    pub(crate) walk: bool,
    /// A strict reader fed beside the decoder, for an input read only once.
    pub(crate) eager_strict: Option<LogDecoderBuilder>,
    /// The line of each record, for `dump`.
    pub(crate) line: Option<Arc<LineFormat>>,
}

/// One range of a split read: its decoder starts at `from` and reads on past `to`
/// to hand over to the next range (see `parallel`).
#[derive(Debug, Clone)]
pub(crate) struct Task {
    pub(crate) index: usize,
    pub(crate) from: u64,
    pub(crate) to: u64,
    /// The range that ends at the input's end.
    pub(crate) last: bool,
}

/// How a range's read ended.
#[derive(Debug, Default)]
pub(crate) struct RangeEnd {
    /// The first record the range's decoder returned, which the range before hands
    /// over (ranges after the first; the first's is its own).
    pub(crate) first_record: Option<Position>,
    /// The record at which it stopped: the first that starts at or after `to`.
    pub(crate) handoff: Option<Position>,
    /// The decoder's counters after its first record (the first range: all).
    pub(crate) stats: DecodeStats,
    pub(crate) valid_prefix_len: u64,
    pub(crate) incomplete_tail: bool,
    /// Pebble: where the log ended before the file (see [`StrictEnd::log_end`]).
    pub(crate) log_end: Option<(u64, bool)>,
    pub(crate) error: Option<walcodec::Error>,
    /// The layout of the blocks it walked (those it read while kept).
    pub(crate) layout: Layout,
    /// What the walk saw of a RocksDB WAL's own pieces in those blocks.
    pub(crate) wal: WalFacts,
    /// The offset just past the last byte decoded.
    pub(crate) read_to: u64,
    /// The eager strict reader's end, when there is one.
    pub(crate) strict: Option<StrictEnd>,
}

/// Where a range's bytes come from, in chunks.
pub(crate) trait ChunkSource {
    /// The next bytes; `None` at the end.
    fn next_chunk(&mut self) -> Option<io::Result<BytesMut>>;
}

/// Reads `source` in chunks (of `READ_SIZE` unless told) with blocking reads on the
/// calling thread: a stream, or one range of a file.
///
/// Why not the library's read-ahead pipeline: on the 2-core machine this was measured
/// on, `verify --jobs 1` of a 1 GiB log took 0.25 to 0.62 s through it and 0.23 to
/// 0.29 s reading on the decoding thread (a chunk read on the other core crosses
/// between the cores' caches), and with `--jobs 2` the ranges themselves use the
/// cores. [`ChunkReader`] reads into aligned memory, used again once nothing refers
/// to it, so the next read lands in memory still in this core's cache.
pub(crate) struct BlockingChunks<R> {
    chunks: ChunkReader<R>,
    progress: Option<ProgressBar>,
}

impl<R: Read> BlockingChunks<R> {
    pub(crate) fn new(source: R) -> Self {
        BlockingChunks {
            chunks: ChunkReader::new(source, READ_SIZE),
            progress: None,
        }
    }

    /// Reads chunks of `bytes` (at least 1) instead.
    pub(crate) fn with_chunk_bytes(self, bytes: usize) -> Self {
        BlockingChunks {
            chunks: ChunkReader::new(self.chunks.into_inner(), bytes),
            ..self
        }
    }

    /// Advances `bar` by each chunk's length.
    pub(crate) fn with_progress(mut self, bar: Option<ProgressBar>) -> Self {
        self.progress = bar;
        self
    }
}

impl<R: Read> ChunkSource for BlockingChunks<R> {
    fn next_chunk(&mut self) -> Option<io::Result<BytesMut>> {
        let chunk = self.chunks.next();
        if let (Some(bar), Some(Ok(chunk))) = (&self.progress, &chunk) {
            bar.inc(chunk.len() as u64);
        }
        chunk
    }
}

/// Reads one range: its own blocks from `own`, then, when its decoder has not
/// handed over yet, the rest of the log from `rest()`. Hands its items to `send` a
/// batch at a time.
pub(crate) fn run_range<'r>(
    settings: &Settings,
    task: &Task,
    own: &mut dyn ChunkSource,
    rest: &mut dyn FnMut() -> io::Result<Box<dyn ChunkSource + 'r>>,
    send: &mut dyn FnMut(Batch) -> bool,
) -> io::Result<RangeEnd> {
    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink = reports.clone();
    let mut builder = settings.builder.clone();
    let start = if task.index == 0 {
        settings.start
    } else {
        task.from
    };
    builder
        .start_offset(start)
        .on_corruption(watched(&settings.log, move |c: &Corruption| {
            sink.lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(c.clone())
        }));
    let mut pass = RangePass {
        settings,
        handoff_at: (!task.last).then_some(task.to),
        decoder: builder.build(),
        reports,
        src: BytesMut::new(),
        kept: task.index == 0,
        diverged: false,
        first_record: None,
        since: DecodeStats::default(),
        handoff: None,
        error: None,
        stop: false,
        offset: task.from,
        layout: Layout::default(),
        wal: WalFacts::default(),
        rules: settings.log.rules(),
        strict: settings
            .eager_strict
            .as_ref()
            .map(|b| Strict::new(b.build(), Some(settings.log.rules()))),
        batch: Batch::default(),
    };
    let mut source: Option<Box<dyn ChunkSource + 'r>> = None;
    let mut own_done = false;
    while !pass.stop {
        let next = if !own_done {
            match own.next_chunk() {
                Some(chunk) => Some(chunk),
                None => {
                    own_done = true;
                    continue;
                }
            }
        } else {
            if task.last {
                break;
            }
            if source.is_none() {
                source = Some(rest()?);
            }
            source.as_mut().expect("opened").next_chunk()
        };
        let Some(chunk) = next else { break };
        let mut chunk = chunk?;
        while !chunk.is_empty() && !pass.stop {
            // Up to the next block boundary: a range starts at one, and chunks are
            // whole blocks except at the end.
            let left = BLOCK_SIZE - (pass.offset % BLOCK_SIZE as u64) as usize;
            let block = chunk.split_to(left.min(chunk.len()));
            pass.block(block);
        }
        if !send(std::mem::take(&mut pass.batch)) {
            pass.stop = true;
        }
    }
    if !pass.stop {
        pass.drain(true, EOF_BLOCK);
        if let Some(strict) = pass.strict.as_mut() {
            if strict.feed(&[], true) {
                pass.batch.items.push(Item {
                    block: EOF_BLOCK,
                    what: What::StrictFailed,
                });
            }
        }
    }
    send(std::mem::take(&mut pass.batch));
    let stats = if pass.kept {
        stats_since(pass.decoder.stats(), pass.since)
    } else {
        DecodeStats::default()
    };
    Ok(RangeEnd {
        first_record: pass.first_record,
        handoff: pass.handoff,
        stats,
        valid_prefix_len: pass.decoder.valid_prefix_len(),
        incomplete_tail: pass.decoder.has_incomplete_tail(),
        log_end: pebble_end(&pass.decoder),
        error: pass.error,
        layout: pass.layout,
        wal: pass.wal,
        read_to: pass.offset,
        strict: pass.strict.map(Strict::end),
    })
}

struct RangePass<'a> {
    settings: &'a Settings,
    /// Stop after the first record that starts here or later (not for the last range).
    handoff_at: Option<u64>,
    decoder: LogDecoder,
    reports: Arc<Mutex<Vec<Corruption>>>,
    /// What the decoder has not consumed yet.
    src: BytesMut,
    /// Whether what the pass finds is this range's to hand over: from its decoder's
    /// first record on (the first range: from the start).
    kept: bool,
    diverged: bool,
    first_record: Option<Position>,
    /// The decoder's counters when `kept` began.
    since: DecodeStats,
    handoff: Option<Position>,
    error: Option<walcodec::Error>,
    stop: bool,
    /// The offset of the next byte to decode.
    offset: u64,
    layout: Layout,
    wal: WalFacts,
    /// The walk's header rules: the log's dialect and number.
    rules: FragmentRules,
    strict: Option<Strict>,
    batch: Batch,
}

impl RangePass<'_> {
    /// Walks (when the range's findings are kept) and decodes one block, or what
    /// the input holds of its last one.
    fn block(&mut self, bytes: BytesMut) {
        let block = self.offset / BLOCK_SIZE as u64;
        if self.settings.walk {
            let mut intact = false;
            if self.kept {
                // A block is walked by the range whose findings are kept at its
                // start: the layout's findings come before the decoder's.
                intact = true;
                for piece in Pieces::new(&bytes, self.offset, self.rules) {
                    self.layout.count_piece(&piece);
                    self.wal.add(&piece);
                    match piece {
                        // Pebble: a zero header over other bytes is an invalid chunk,
                        // which its rule (the decoder's) says is the end or damage.
                        Piece::ZeroFill { offset, bytes }
                            if bytes.iter().any(|&b| b != 0)
                                && self.settings.log.dialect != Dialect::Pebble =>
                        {
                            self.batch.items.push(Item {
                                block,
                                what: What::Hidden {
                                    offset,
                                    len: bytes.len() as u64,
                                },
                            })
                        }
                        Piece::Fragment {
                            checksum_ok: false, ..
                        } => intact = false,
                        _ => {}
                    }
                }
                // RocksDB's dialect: the decoder checks every checksum itself (an old
                // fragment ends the log before its checksum is looked at, a recycled
                // file's bad checksum ends it in one mode only: not worth the risk).
                if self.settings.log.dialect != Dialect::LevelDb {
                    intact = false;
                }
            }
            // The walk checked these checksums: checked again only where it found a
            // bad one, or where it did not walk.
            self.decoder.set_checksums(!intact);
        }
        let strict_failed = match self.strict.as_mut() {
            Some(strict) => strict.feed(&bytes, false),
            None => false,
        };
        self.offset += bytes.len() as u64;
        if self.src.is_empty() {
            self.src = bytes;
        } else {
            self.src.extend_from_slice(&bytes);
        }
        self.drain(false, block);
        if strict_failed {
            // After the block's findings, as a reader fed block by block finds it.
            self.batch.items.push(Item {
                block,
                what: What::StrictFailed,
            });
        }
    }

    /// Decodes what `src` holds, handing records and reports over in log order,
    /// and stops at the hand-over record or when the decoder is finished.
    fn drain(&mut self, eof: bool, block: u64) {
        if self.stop {
            return;
        }
        loop {
            let zeroed_before = self.decoder.stats().zeroed_blocks;
            let decoded = if eof {
                self.decoder.decode_eof(&mut self.src)
            } else {
                self.decoder.decode(&mut self.src)
            };
            // Reports made before a record was returned concern bytes before it.
            let reports = std::mem::take(
                &mut *self
                    .reports
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner()),
            );
            if self.kept {
                let diverged =
                    !reports.is_empty() || self.decoder.stats().zeroed_blocks != zeroed_before;
                if diverged && !self.diverged {
                    self.diverged = true;
                    self.batch.items.push(Item {
                        block,
                        what: What::Diverged,
                    });
                }
                for report in reports {
                    self.batch.items.push(Item {
                        block,
                        what: What::Report(report),
                    });
                }
            }
            match decoded {
                Ok(Some(data)) => {
                    let position = self
                        .decoder
                        .last_record()
                        .expect("a returned record has a position");
                    if !self.kept {
                        // The range before reads up to this record and hands it over:
                        // from here on this decoder is in the same state as that one.
                        self.kept = true;
                        self.first_record = Some(position);
                        self.since = self.decoder.stats();
                    } else {
                        self.record(position, data, block);
                    }
                    if self.handoff_at.is_some_and(|at| position.start >= at) {
                        self.handoff = Some(position);
                        self.stop = true;
                        return;
                    }
                }
                Ok(None) => {
                    if self.decoder.is_finished() {
                        self.stop = true;
                    }
                    return;
                }
                Err(e) => {
                    self.error = Some(e.into());
                    self.stop = true;
                    return;
                }
            }
        }
    }

    fn record(&mut self, position: Position, data: Bytes, block: u64) {
        let text = &mut self.batch.text;
        let from = text.len();
        let len = data.len() as u64;
        let not_batch = match &self.settings.line {
            Some(line) => line(&LogRecord { position, data }, text),
            None => None,
        };
        self.batch.items.push(Item {
            block,
            what: What::Record {
                position,
                len,
                line: from..text.len(),
                not_batch,
            },
        });
    }
}

/// Reads until `buffer` is full or the source ends: a short read is not the end.
pub(crate) fn read_full(source: &mut impl Read, buffer: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match source.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// What `dump --physical` does with each piece of the layout.
pub(crate) trait Visitor {
    /// Each piece of the layout, in the log's dialect. By default, a piece that has a
    /// LevelDB view (see `leveldb_chunk`) goes to `chunk`.
    fn piece(&mut self, piece: &Piece<'_>) -> Result<(), Failure> {
        match leveldb_chunk(piece) {
            Some(chunk) => self.chunk(&chunk),
            None => Ok(()),
        }
    }
    fn chunk(&mut self, _chunk: &Chunk<'_>) -> Result<(), Failure> {
        Ok(())
    }
}

/// Walks the layout of `input` in `log`'s dialect from the block holding `start` to
/// where its read ends: `dump --physical`. Memory stays bounded by the read size.
pub(crate) fn walk(
    input: &mut Input,
    start: u64,
    _limits: Limits,
    log: &LogChoice,
    visitor: &mut dyn Visitor,
) -> Result<(u64, InputEnd), Failure> {
    let mut offset = block_start(start);
    input.skip_to(offset)?;
    let rules = log.rules();
    let name = input.name().to_string();
    for chunk in ChunkReader::new(&mut *input, READ_SIZE) {
        let chunk = chunk.map_err(|e| Failure::named(&name, e))?;
        // Whole blocks (READ_SIZE is a multiple of the block size) or the file's end,
        // so the walker never sees a block cut by the chunk.
        for piece in Pieces::new(&chunk, offset, rules) {
            visitor.piece(&piece)?;
        }
        offset += chunk.len() as u64;
    }
    Ok((offset, input.finish()))
}
