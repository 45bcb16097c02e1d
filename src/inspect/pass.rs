//! One pass over one range of a log: the layout walk, the decoder, and (for an
//! input read once) a strict reader fed beside it. See the module docs of
//! [`inspect`](super) for what it finds and in which order.

use std::io::{self, Read};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use tokio_util::codec::Decoder;

use crate::codec::record_decoder::LogRecord;
use crate::decoder::error::{CodecError, Corruption};
use crate::decoder::{DecodeStats, LogDecoder, LogDecoderBuilder};
use crate::format::fragment::{Dialect, FragmentRules, Parsed};
use crate::format::physical::{Piece, Pieces};
use crate::format::{block_start, Position, BLOCK_SIZE};
use crate::reader::ChunkReader;

use super::counts::{stats_since, Layout, WalFacts};
use super::{Item, ItemKind, Progress, RenderRecord, ReportHook, StrictEnd, EOF_BLOCK};

/// Items as a pass hands them over, with the text their records were rendered into.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub(crate) items: Vec<Item>,
    pub(crate) text: Vec<u8>,
}

/// How a pass reads: an [`Inspector`](super::Inspector)'s settings, with the
/// strict reader fed beside the decoder or not.
#[derive(Clone)]
pub(crate) struct Settings {
    /// The decoder's settings, whose reporter the pass replaces.
    pub(crate) builder: LogDecoderBuilder,
    /// The walk's header rules: the log's dialect and number.
    pub(crate) rules: FragmentRules,
    /// The first record wanted, 0 for the whole log.
    pub(crate) start: u64,
    /// Walk the layout (and check each checksum once).
    pub(crate) walk: bool,
    /// A strict reader fed beside the decoder, for an input read only once.
    pub(crate) eager_strict: Option<LogDecoderBuilder>,
    pub(crate) render: Option<Arc<RenderRecord>>,
    pub(crate) on_report: Option<Arc<ReportHook>>,
}

impl Settings {
    fn dialect(&self) -> Dialect {
        self.rules.dialect()
    }
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
        Parsed::Fragment(fragment) if fragment.log_number().is_some()
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
        offset = offset.saturating_add(n as u64);
        if n < buffer.len() {
            break;
        }
    }
    let failed = strict.feed(&[], true);
    Ok((strict.end(), failed.then_some(EOF_BLOCK)))
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
    pub(crate) error: Option<CodecError>,
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

/// Reads `source` in chunks with blocking reads on the calling thread: a stream, or
/// one range of a file.
///
/// Why not the crate's read-ahead pipeline: on a 2-core machine, a pass over a
/// 1 GiB log took 0.25 to 0.62 s through it and 0.23 to 0.29 s reading on the
/// decoding thread (a chunk read on the other core crosses between the cores'
/// caches), and with more than one range the ranges themselves use the cores.
/// [`ChunkReader`] reads into aligned memory, used again once nothing refers to it,
/// so the next read lands in memory still in this core's cache.
pub(crate) struct BlockingChunks<R> {
    chunks: ChunkReader<R>,
    progress: Option<Arc<Progress>>,
}

impl<R: Read> BlockingChunks<R> {
    pub(crate) fn new(source: R, chunk_bytes: usize) -> Self {
        BlockingChunks {
            chunks: ChunkReader::new(source, chunk_bytes),
            progress: None,
        }
    }

    /// Tells `progress` each chunk's length.
    pub(crate) fn with_progress(mut self, progress: Option<Arc<Progress>>) -> Self {
        self.progress = progress;
        self
    }
}

impl<R: Read> ChunkSource for BlockingChunks<R> {
    fn next_chunk(&mut self) -> Option<io::Result<BytesMut>> {
        let chunk = self.chunks.next();
        if let (Some(progress), Some(Ok(chunk))) = (&self.progress, &chunk) {
            progress(chunk.len() as u64);
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
    let hook = settings.on_report.clone();
    builder
        .start_offset(start)
        .on_corruption(move |c: &Corruption| {
            if let Some(hook) = &hook {
                hook(c);
            }
            sink.lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(c.clone())
        });
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
        strict: settings
            .eager_strict
            .as_ref()
            .map(|b| Strict::new(b.build(), Some(settings.rules))),
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
            let source = match &mut source {
                Some(source) => source,
                None => source.insert(rest()?),
            };
            source.next_chunk()
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
                pass.batch
                    .items
                    .push(Item::new(EOF_BLOCK, ItemKind::StrictFailed));
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
    error: Option<CodecError>,
    stop: bool,
    /// The offset of the next byte to decode.
    offset: u64,
    layout: Layout,
    wal: WalFacts,
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
                for piece in Pieces::new(&bytes, self.offset, self.settings.rules) {
                    self.layout.count_piece(&piece);
                    self.wal.add(&piece);
                    match piece {
                        // Pebble: a zero header over other bytes is an invalid chunk,
                        // which its rule (the decoder's) says is the end or damage.
                        Piece::ZeroFill { offset, bytes }
                            if bytes.iter().any(|&b| b != 0)
                                && self.settings.dialect() != Dialect::Pebble =>
                        {
                            self.batch.items.push(Item::new(
                                block,
                                ItemKind::HiddenData {
                                    offset,
                                    len: bytes.len() as u64,
                                },
                            ))
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
                if self.settings.dialect() != Dialect::LevelDb {
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
        self.offset = self.offset.saturating_add(bytes.len() as u64);
        if self.src.is_empty() {
            self.src = bytes;
        } else {
            self.src.extend_from_slice(&bytes);
        }
        self.drain(false, block);
        if strict_failed {
            // After the block's findings, as a reader fed block by block finds it.
            self.batch
                .items
                .push(Item::new(block, ItemKind::StrictFailed));
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
                    self.batch.items.push(Item::new(block, ItemKind::Diverged));
                }
                for report in reports {
                    self.batch
                        .items
                        .push(Item::new(block, ItemKind::Report(report)));
                }
            }
            match decoded {
                Ok(Some(data)) => {
                    let Some(position) = self.decoder.last_record() else {
                        // A decoder that returns a record knows where it sits.
                        self.error = Some(CodecError::from(io::Error::other(
                            "a record was returned without its position",
                        )));
                        self.stop = true;
                        return;
                    };
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
                    self.error = Some(e);
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
        let note = match &self.settings.render {
            Some(render) => render(&LogRecord { position, data }, text),
            None => None,
        };
        let mut item = Item::new(
            block,
            ItemKind::Record {
                position,
                len,
                note,
            },
        );
        item.rendered = from..text.len();
        self.batch.items.push(item);
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
