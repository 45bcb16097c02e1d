//! `LogDecoder`: a streaming reader of the LevelDB log format.
//!
//! # How a log ends
//!
//! | the log ends with                                        | dialect        | means          | `TolerateTail`        |
//! |----------------------------------------------------------|----------------|----------------|-----------------------|
//! | EOF where a record would start                           | all            | clean end      | `None`                |
//! | zeros to EOF (from a zero header, or padding)            | all            | preallocated space, clean | `None`     |
//! | a header or payload cut by EOF, a record without its LAST, reading a stream ([`LogInput::Stream`], the default) | all | cut in transit: the record is lost | [`CodecError::IncompleteRecord`], in every mode |
//! | a header or payload cut by EOF, a record without its LAST, reading a file ([`LogInput::File`]) | all | torn tail: a writer died | `None`, [`has_incomplete_tail`](LogDecoder::has_incomplete_tail) |
//! | a fragment of another log number                          | RocksDB        | the recycled file's old bytes: clean end | `None`, [`recycled_end`](LogDecoder::recycled_end) |
//! | the EOF trailer (log number + 1 at a record start)        | Pebble         | clean close    | `None`, [`has_eof_trailer`](LogDecoder::has_eof_trailer) |
//! | an invalid chunk, no later WAL-sync promise past it       | Pebble         | torn or recycled tail | `None`, [`recycled_end`](LogDecoder::recycled_end) |
//! | an invalid chunk a later synced offset proves             | Pebble         | corruption     | `Err` once the promise is read |
//! | damage with more log after it                             | LevelDB, RocksDB | corruption   | `Err`                 |
//! | a read error of the source                                | all            | not the log's: `CodecError::Io` ends the stream | `Err(CodecError::Io)` |
//!
//! Each [`Recovery`] mode maps these (see its table); Pebble's rule is in the
//! `pebble` module. A stream that stops inside a record is an error whatever the
//! mode, as tokio-util's own codecs end with "bytes remaining on stream": the
//! tolerant tail is for files, whose writer may have died mid-write, and only a
//! decoder told it reads one ([`LogDecoderBuilder::input`]) takes it; the readers of
//! files by path ([`LogReader::open`](crate::LogReader::open), [`LogTailer`](crate::LogTailer),
//! [`LogDir`](crate::LogDir)) do.
//!
//! The decoder counts every byte it consumes, so it knows where each block starts no
//! matter how the bytes are chunked on their way in. It never needs more than one
//! block buffered to make progress.
//!
//! # States
//!
//! | state                    | what the next bytes are                                 |
//! |--------------------------|---------------------------------------------------------|
//! | reading                  | a fragment header, or a trailer if < 7 bytes are left   |
//! | skipping (`Skip`)        | bytes up to a block end: trailer, zero fill or damage   |
//! | collecting (`Assembly`)  | reading fragments of a record that spans blocks         |
//! | halted                   | ignored: end of a split, `PointInTime` stop, or error   |
//!
//! # Modules
//!
//! `recovery` names the recovery modes and `builder` holds a decoder's
//! configuration. `plain` is the common case: an intact FULL fragment, taken without
//! the general loop. `dialect` is what RocksDB's dialect knows of one log, `pebble`
//! how Pebble's dialect tells a log's end from corruption. This file
//! is the general loop, where every rule of record assembly and recovery is decided.

mod assembly;
mod builder;
mod damage;
mod dialect;
pub(crate) mod error;
pub(crate) mod follow;
mod fragments;
mod input;
mod pebble;
mod plain;
mod recovery;
mod report;

pub use builder::LogDecoderBuilder;
pub use input::LogInput;
pub use recovery::{ParseRecoveryError, Recovery};

use std::fmt;
use std::sync::{Arc, Mutex};

use bytes::{Buf, Bytes, BytesMut};
use tokio_util::codec::Decoder;

use crate::decoder::error::{CodecError, Corruption, CorruptionKind};
use crate::format::fragment::{
    header_size_of, Defect, Dialect, Fragment, FragmentRules, FragmentType, Parsed, Part,
    RECYCLABLE_HEADER_SIZE, WAL_SYNC_HEADER_SIZE,
};
use crate::format::metadata::{
    MetadataRecord, PredecessorWalInfo, TimestampSize, TimestampSizes, WalCompressionType,
};
use crate::format::zeros::{all_zero, first_nonzero, last_nonzero};
use crate::format::{Position, BLOCK_SIZE, HEADER_SIZE};
use assembly::{Assembly, Parts};
use damage::{Skip, SkipReason, ZeroSuspect};
use dialect::{LogState, MetadataReporter};

type Reporter = Arc<Mutex<dyn FnMut(&Corruption) + Send>>;

/// Counters of what a decoder has seen.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DecodeStats {
    /// Records returned.
    pub records: u64,
    /// Payload bytes of the records returned.
    pub record_bytes: u64,
    /// Fragments with a valid checksum (or any, without checksums).
    pub fragments: u64,
    /// Trailer bytes skipped at block ends.
    pub trailer_bytes: u64,
    /// Bytes skipped because a block went on as zeros (preallocated space). LevelDB
    /// skips these silently; they are counted here so the loss is visible.
    pub zero_fill_bytes: u64,
    /// Bytes reported as dropped through corruption reports.
    pub dropped_bytes: u64,
    /// Corruption reports made.
    pub corruptions: u64,
    /// Blocks that begin with zero fill and are followed later by data: lost data
    /// that no writer of the format leaves. An error in the strict modes; in
    /// `SkipCorrupted` they are skipped silently, as LevelDB does, and counted here.
    pub zeroed_blocks: u64,
    /// RocksDB: metadata records read (types 9, 10, 11, 130, 131), never returned
    /// as records.
    pub metadata_records: u64,
    /// RocksDB: bytes of fragments left from a recycled file's earlier use (another
    /// log number) that the decoder passed over: the one that ended the log, or in
    /// `SkipCorrupted` every one.
    pub old_fragment_bytes: u64,
    /// RocksDB: fragments of unknown types with bit 7 set, which readers skip.
    pub ignored_fragments: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Reading,
    /// No more records: end of a split, or `PointInTime` stopped at `offset`.
    Halted {
        at: u64,
    },
    /// An error was returned; the stream is over.
    Failed,
}

/// [`LogDecoder::DEFAULT_MAX_RECORD_BYTES`] (64 MiB) at the crate's root, where
/// it was first specified.
pub const DEFAULT_MAX_RECORD_BYTES: usize = LogDecoder::DEFAULT_MAX_RECORD_BYTES;

/// Decodes records from the LevelDB log format.
///
/// Use it with [`FramedRead`](tokio_util::codec::FramedRead) over any
/// [`AsyncRead`](tokio::io::AsyncRead): a file, a socket, a pipe. Each record comes
/// out as [`Bytes`]; a record that fits in one fragment is a view of the read buffer
/// (no copy), a fragmented one is copied once into its own buffer.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), walcodec::Error> {
/// use bytes::BytesMut;
/// use futures::TryStreamExt;
/// use tokio_util::codec::FramedRead;
/// use walcodec::{LogDecoder, LogEncoder};
///
/// let mut log = BytesMut::new();
/// let mut encoder = LogEncoder::new();
/// encoder.encode_record(b"hello", &mut log);
/// encoder.encode_record(&vec![b'x'; 100_000], &mut log);
///
/// let records: Vec<_> = FramedRead::new(&log[..], LogDecoder::new()).try_collect().await?;
/// assert_eq!(records[0], &b"hello"[..]);
/// assert_eq!(records[1].len(), 100_000);
/// # Ok(())
/// # }
/// ```
///
/// A decoder is `Clone` (the clone goes on from the same point, on its own, with the
/// same reporter) and `Send + Sync`.
#[derive(Clone)]
pub struct LogDecoder {
    /// The header rules: dialect, log number, checksums.
    rules: FragmentRules,
    /// What RocksDB's dialect knows of the log so far.
    state: LogState,
    metadata: Option<MetadataReporter>,
    recovery: Recovery,
    checksums: bool,
    max_record_bytes: usize,
    start_offset: u64,
    end_offset: u64,
    reporter: Option<Reporter>,

    /// Log offset of the first byte of the buffer handed to `decode`.
    offset: u64,
    skip: Option<Skip>,
    assembly: Assembly,
    /// Started past offset 0: fragments of a record begun earlier are skipped silently.
    resyncing: bool,
    flow: Flow,
    last_record: Option<Position>,
    valid_end: u64,
    incomplete_tail: bool,
    /// Where the incomplete tail begins, once `incomplete_tail` is set.
    tail_start: u64,
    /// What the end of the input means inside a record.
    input: LogInput,
    /// The `log` label of damage reports (`LogDecoderBuilder::name`).
    name: Arc<str>,
    /// The file read, for damage reports, when the decoder's reader knows it.
    file: Option<Arc<std::path::Path>>,
    /// Damage that zeros may explain, pending until the decoder sees what follows
    /// the zeros (see [`ZeroSuspect`]).
    zero_suspect: Option<ZeroSuspect>,
    stats: DecodeStats,
    /// Fragment mode ([`LogDecoder::decode_fragment`]): each fragment of a record is
    /// handed out as it is checked, and an open record keeps only its length.
    fragments: bool,
    /// In fragment mode, where the fragment last handed out sits in its record.
    mark: FragmentMark,
    /// In fragment mode, the start of the last open record that was dropped, and
    /// why: the first reason it met, whatever the chunking of the input.
    cut_short: Option<(u64, CorruptionKind)>,
    /// Pebble: an invalid chunk whose meaning (the log's end, or corruption) waits
    /// on what the rest of the log promises.
    read_ahead: Option<pebble::ReadAhead>,
    /// Just past the last metadata record read: a follower that goes back to where
    /// the log's unwritten part may begin (`follow.rs`) never reads it twice.
    settled: u64,
    /// Read by a follower of a live log (`follow.rs`): what zeros or an earlier
    /// log's fragments cut is held as a possible write in progress, never reported
    /// at once, even in `SkipCorrupted`.
    live: bool,
    /// A live decoder in a mode that skips damage: what it holds back (`follow.rs`).
    live_damage: follow::LiveDamage,
}

/// Where a fragment handed out in fragment mode sits in its record. Every other rule
/// (checksums, skips, damage, recovery) is the record mode's: the two modes differ
/// only in whether an open record's payload is kept or handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FragmentMark {
    /// A FULL fragment: a whole record starting at `start`.
    Whole { start: u64 },
    /// A FIRST fragment: a record starting at `start` goes on.
    Begin { start: u64 },
    /// A MIDDLE fragment of the open record.
    Middle,
    /// The LAST fragment of the open record.
    End,
}

impl fmt::Debug for LogDecoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogDecoder")
            .field("recovery", &self.recovery)
            .field("input", &self.input)
            .field("checksums", &self.checksums)
            .field("max_record_bytes", &self.max_record_bytes)
            .field("offset", &self.offset)
            .field("last_record", &self.last_record)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Default for LogDecoder {
    fn default() -> Self {
        LogDecoder::new()
    }
}

impl LogDecoder {
    /// The default bound on a record's size
    /// ([`LogDecoderBuilder::max_record_bytes`], and the writers' and readers' built on
    /// it): 64 MiB.
    pub const DEFAULT_MAX_RECORD_BYTES: usize = 64 * 1024 * 1024;

    /// A decoder with the defaults: [`Recovery::TolerateTail`], reading a
    /// [`LogInput::Stream`] (its end inside a record is an error), checksums on,
    /// records up to 64 MiB, reading from offset 0.
    pub fn new() -> LogDecoder {
        LogDecoderBuilder::default().build()
    }

    /// A builder to configure a decoder.
    pub fn builder() -> LogDecoderBuilder {
        LogDecoderBuilder::default()
    }

    /// The log offset of the next byte the decoder expects: everything before it has
    /// been consumed.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Where the record last returned sits in the log: `start` is LevelDB's
    /// `LastRecordOffset`, `end` a checkpoint to resume reading from. `None` before
    /// any record.
    pub fn last_record(&self) -> Option<Position> {
        self.last_record
    }

    /// The end of the last complete record returned (or the start offset before any):
    /// the length to truncate a log to before appending to it.
    pub fn valid_prefix_len(&self) -> u64 {
        self.valid_end
    }

    /// Whether the input ended inside a record (a torn tail, or a stream cut). Known
    /// once the decoder has seen EOF (`decode_eof`).
    pub fn has_incomplete_tail(&self) -> bool {
        self.incomplete_tail
    }

    /// What the decoder reads: a stream or a file ([`LogDecoderBuilder::input`]).
    pub fn input(&self) -> LogInput {
        self.input
    }

    /// Reads `input` from here on: the readers of files by path, which take any
    /// decoder, read as [`LogInput::File`].
    pub(crate) fn set_input(&mut self, input: LogInput) {
        self.input = input;
    }

    /// Where `PointInTime` stopped, or where a split ended: `Some(offset)` of the
    /// fragment at which the decoder stopped returning records.
    pub fn halted_at(&self) -> Option<u64> {
        match self.flow {
            Flow::Halted { at } => Some(at),
            _ => None,
        }
    }

    /// Whether the decoder will return no more records (end of its split, a
    /// `PointInTime` stop, or an error returned) and needs no more input: a Pebble
    /// log still reading ahead after an invalid chunk (to tell its end from
    /// corruption) is not finished until it knows.
    pub fn is_finished(&self) -> bool {
        self.flow != Flow::Reading && self.read_ahead.is_none()
    }

    /// Whether fragment checksums are verified from here on (the builder's
    /// [`checksums`](LogDecoderBuilder::checksums) setting, changed mid-read).
    ///
    /// For a reader that has already checked the checksums of the bytes it is about
    /// to hand over (a tool that walks each block's physical layout first, say): it
    /// turns them off for blocks whose every fragment it found intact, so that each
    /// fragment is checked once. A decoder that skips the check of an intact
    /// fragment decides exactly as one that makes it.
    pub fn set_checksums(&mut self, verify: bool) {
        // Both the plain-FULL fast paths (`self.checksums`) and the fragment layer
        // (`rules`) check checksums: keep them in step.
        self.checksums = verify;
        self.rules = self.rules.verify_checksums(verify);
    }

    /// The recovery mode in force.
    pub fn recovery(&self) -> Recovery {
        self.recovery
    }

    /// What the decoder has seen so far.
    pub fn stats(&self) -> DecodeStats {
        self.stats
    }

    /// The dialect the log is read in.
    pub fn dialect(&self) -> Dialect {
        self.rules.dialect()
    }

    /// RocksDB: whether the log is a recycled WAL (its first fragments have
    /// recyclable headers), known once the decoder has read one.
    pub fn is_recycled(&self) -> bool {
        self.state.is_recycled()
    }

    /// RocksDB: where a recycled WAL's own records ended: the offset of the first
    /// fragment left from the file's earlier use (another log number), or, in
    /// `TolerateTail`, of the first bad checksum or length. The decoder returns
    /// nothing after it, in every mode but `SkipCorrupted`.
    ///
    /// Pebble: where the log ended before its bytes did: its EOF trailer
    /// ([`has_eof_trailer`](Self::has_eof_trailer)), or an invalid chunk that no
    /// later WAL-sync fragment proves damaged (known once the decoder has read to
    /// EOF; see the table in [`Recovery`]).
    pub fn recycled_end(&self) -> Option<u64> {
        self.state.recycled_end
    }

    /// Pebble: whether the log ended at its EOF trailer (a clean close), which
    /// [`recycled_end`](Self::recycled_end) then gives.
    pub fn has_eof_trailer(&self) -> bool {
        self.state.eof_trailer
    }

    /// RocksDB: the compression of the log's data records, as its type-9 record (or
    /// [`LogDecoderBuilder::wal_compression`]) said; `None` before any.
    pub fn wal_compression(&self) -> Option<WalCompressionType> {
        self.state.compression
    }

    /// RocksDB: the user-defined timestamp sizes recorded so far, the latest per
    /// column family, in the order the column families first appeared.
    pub fn timestamp_sizes(&self) -> &[TimestampSize] {
        &self.state.timestamp_sizes
    }

    /// RocksDB: what the log's predecessor WAL record said, if it had one.
    pub fn predecessor_wal(&self) -> Option<PredecessorWalInfo> {
        self.state.predecessor
    }

    /// Fragment mode: the next checked fragment payload of a record and where it
    /// sits in its record, instead of whole records. `max_record_bytes` stands in
    /// for the configured limit while it runs (the streaming path has its own).
    ///
    /// Switch modes only between records: a record opened in one mode must be
    /// finished (or abandoned) in it.
    pub(crate) fn decode_fragment(
        &mut self,
        src: &mut BytesMut,
        eof: bool,
        max_record_bytes: usize,
    ) -> Result<Option<(FragmentMark, Bytes)>, CodecError> {
        let whole_limit = std::mem::replace(&mut self.max_record_bytes, max_record_bytes);
        self.fragments = true;
        // A FULL record is returned by paths shared with record mode, which leave
        // the mark alone: it is marked here, and its start read below.
        self.mark = FragmentMark::Whole { start: 0 };
        let decoded = match self.decode_plain_full(src) {
            Some(record) => Ok(Some(record)),
            None => self.decode_inner(src, eof),
        };
        self.fragments = false;
        self.max_record_bytes = whole_limit;
        let decoded = self.hand_out(decoded?)?;
        let mark = match self.mark {
            FragmentMark::Whole { .. } => FragmentMark::Whole {
                start: self.last_record.map_or(0, |p| p.start),
            },
            other => other,
        };
        Ok(decoded.map(|payload| (mark, payload)))
    }

    /// What the decoder hands out: `decoded`, unless it comes after damage a live
    /// decoder holds (`follow.rs`), which is then the error instead.
    #[inline(always)]
    fn hand_out(&mut self, decoded: Option<Bytes>) -> Result<Option<Bytes>, CodecError> {
        if decoded.is_some() {
            if let Some(doubt) = self.take_doubt() {
                return Err(doubt);
            }
        }
        Ok(decoded)
    }

    /// The start of the record open in the decoder, if one is (a FIRST seen, its
    /// LAST not yet, and not dropped for its size).
    pub(crate) fn open_record(&self) -> Option<u64> {
        match self.assembly {
            Assembly::Idle => None,
            // A record past the limit is dropped as it comes: for a reader of its
            // fragments it is over.
            Assembly::Discarding { .. } => None,
            Assembly::Collecting { start, .. } => Some(start),
        }
    }

    /// Takes back into record mode a record opened in fragment mode whose only
    /// fragment so far, its FIRST, is `first`: a whole-record read goes on with it.
    pub(crate) fn reopen_with(&mut self, first: Bytes) {
        if let Assembly::Collecting { parts, .. } = &mut self.assembly {
            *parts = Parts::default();
            parts.push(first);
        }
    }

    /// Why the open record that started at `start` was dropped, if it was.
    pub(crate) fn cut_short(&self, start: u64) -> Option<CorruptionKind> {
        self.cut_short
            .filter(|&(at, _)| at == start)
            .map(|(_, kind)| kind)
    }

    #[inline(never)]
    fn decode_inner(&mut self, src: &mut BytesMut, eof: bool) -> Result<Option<Bytes>, CodecError> {
        loop {
            if self.read_ahead.is_some() {
                self.run_read_ahead(src, eof)?;
                if self.read_ahead.is_some() {
                    return Ok(None);
                }
                continue;
            }
            if self.flow != Flow::Reading {
                // Nothing more will be returned; let the bytes go so a reader can
                // drain its source without buffering it.
                let n = src.len();
                self.consume(src, n);
                return Ok(None);
            }
            if self.skip.is_some() {
                if !self.run_skip(src, eof)? {
                    return self.need_more(src, eof);
                }
                if self.flow != Flow::Reading {
                    continue;
                }
            }

            let block_left = BLOCK_SIZE - (self.offset % BLOCK_SIZE as u64) as usize;
            if block_left >= HEADER_SIZE
                && src.len() >= HEADER_SIZE
                && self.zeros_only(&src[..HEADER_SIZE])?
            {
                // A header after the zeros: what they cut was damage after all.
                continue;
            }
            let fragment_offset = self.offset;
            let parsed = self.rules.parse(src, block_left);
            if let Some(header) = parsed.fragment_header() {
                if header.log_number.is_some() && !self.legacy_data() {
                    self.state.set_recycled(header.synced_offset.is_some());
                }
            }
            let pebble = self.rules.dialect() == Dialect::Pebble;
            // Pebble's own rule for how a log ends, in every mode but SkipCorrupted
            // (see `pebble`).
            let pebble_ends = pebble && self.recovery != Recovery::SkipCorrupted;
            match parsed {
                Parsed::ZeroFill { len }
                    if pebble && (len < WAL_SYNC_HEADER_SIZE || pebble_ends) =>
                {
                    // Pebble's writers leave up to 18 zero bytes where no header
                    // fits; anything else in them is an invalid chunk, and so is a
                    // zeroed header with room for one. As Pebble's reader, count
                    // the room in the bytes the block holds (fewer at EOF).
                    if src.len() < len && !eof {
                        src.reserve(len - src.len());
                        return self.need_more(src, eof);
                    }
                    let rest = &src[..len.min(src.len())];
                    let room = rest.len();
                    if room < RECYCLABLE_HEADER_SIZE
                        || (room < WAL_SYNC_HEADER_SIZE && all_zero(rest))
                    {
                        self.skip = Some(Skip {
                            until: fragment_offset + len as u64,
                            why: SkipReason::Trailer,
                        });
                    } else if pebble_ends {
                        let covered = (room, len);
                        let kind = CorruptionKind::ZeroedChunk;
                        self.pebble_invalid(fragment_offset, fragment_offset, kind, covered)?;
                    } else {
                        self.zero_fill(src, fragment_offset, len)?;
                    }
                }
                Parsed::Defect(Defect::BadLength { header, block_left }) if pebble_ends => {
                    // Pebble measures a length past the block from the payload, a
                    // header the block cannot hold from the header.
                    let invalid_offset =
                        if header_size_of(header.type_byte, Dialect::Pebble) > block_left {
                            fragment_offset
                        } else {
                            fragment_offset + header.len() as u64
                        };
                    let kind = CorruptionKind::BadRecordLength;
                    let covered = (block_left, block_left);
                    self.pebble_invalid(fragment_offset, invalid_offset, kind, covered)?;
                }
                Parsed::Defect(Defect::OldLogNumber { fragment })
                    if self.rules.is_eof_trailer(&fragment.header())
                        && matches!(self.assembly, Assembly::Idle) =>
                {
                    self.pebble_eof_trailer(fragment_offset);
                }
                Parsed::Defect(Defect::OldLogNumber { fragment }) if pebble_ends => {
                    let kind = CorruptionKind::OldRecord;
                    let covered = (fragment.len(), block_left);
                    self.pebble_invalid(fragment_offset, fragment_offset, kind, covered)?;
                }
                Parsed::Defect(Defect::ChecksumMismatch {
                    fragment,
                    block_left,
                }) if pebble_ends => {
                    if src.len() < block_left && !eof {
                        // What the damage covers is known once its block is.
                        return self.need_more(src, eof);
                    }
                    let invalid_offset = fragment_offset + fragment.header_len() as u64;
                    let kind = CorruptionKind::ChecksumMismatch;
                    let covered = (block_left.min(src.len()), block_left);
                    self.pebble_invalid(fragment_offset, invalid_offset, kind, covered)?;
                }
                Parsed::Fragment(fragment) if pebble_ends && fragment.part().is_none() => {
                    let kind = CorruptionKind::UnknownRecordType(fragment.type_byte());
                    let covered = (fragment.len(), block_left);
                    self.pebble_invalid(fragment_offset, fragment_offset, kind, covered)?;
                }
                Parsed::Trailer { len } => {
                    self.skip = Some(Skip {
                        until: fragment_offset + len as u64,
                        why: SkipReason::Trailer,
                    });
                }
                Parsed::ZeroFill { len }
                    if self.rules.dialect() == Dialect::RocksDb && len < RECYCLABLE_HEADER_SIZE =>
                {
                    // The 7–10 zero bytes a recyclable writer leaves where its header
                    // does not fit: a trailer, even inside a record (RocksDB's writer
                    // leaves one between the chunks of a compressed record).
                    self.skip = Some(Skip {
                        until: fragment_offset + len as u64,
                        why: SkipReason::Trailer,
                    });
                }
                Parsed::ZeroFill { len } => self.zero_fill(src, fragment_offset, len)?,
                Parsed::Incomplete {
                    header: Some(header),
                    ..
                } if eof
                    && self.rules.is_eof_trailer(&header)
                    && matches!(self.assembly, Assembly::Idle) =>
                {
                    // Pebble reads a recyclable header's log number before it
                    // measures the payload: the next log's number where a record
                    // would start ends the log cleanly, however short the input after
                    // it (RocksDB measures first, and its dialect never matches here).
                    self.pebble_eof_trailer(fragment_offset);
                }
                Parsed::Incomplete { needed, header } => {
                    if !eof && header.is_some() && needed > src.len() {
                        // Room for the whole fragment (at most a block) at once: a
                        // reader such as `FramedRead` asks for one more byte of room per
                        // read, and would otherwise grow its buffer, copying what it
                        // holds, several times over for one large fragment.
                        src.reserve(needed - src.len());
                    }
                    return self.need_more(src, eof);
                }
                Parsed::Defect(Defect::BadLength { block_left, .. }) => {
                    if self.ends_recycled_log(fragment_offset) {
                        continue;
                    }
                    self.consume(src, block_left);
                    self.corrupt(Corruption::new(
                        fragment_offset,
                        block_left as u64,
                        CorruptionKind::BadRecordLength,
                    ))?;
                    if let Some(cut) = self.abandon_assembly() {
                        self.corrupt(cut)?;
                    }
                }
                Parsed::Defect(Defect::OldLogNumber { fragment }) => {
                    self.old_fragment(src, fragment_offset, fragment)?;
                }
                Parsed::Defect(Defect::ChecksumMismatch {
                    fragment,
                    block_left,
                }) => {
                    if self.recovery != Recovery::SkipCorrupted && src.len() < block_left && !eof {
                        // The error says what the damage covers: the rest of the
                        // block, or of the log if it ends first. Wait to know which.
                        return self.need_more(src, eof);
                    }
                    if self.ends_recycled_log(fragment_offset) {
                        continue;
                    }
                    self.checksum_mismatch(src, fragment_offset, fragment.len(), block_left)?;
                }
                Parsed::Fragment(fragment) => {
                    if let Some(record) = self.fragment(src, fragment_offset, fragment)? {
                        return Ok(Some(record));
                    }
                }
            }
        }
    }

    /// RocksDB: whether a legacy data fragment was read. The plain-FULL path does not
    /// note it (it stays lean for LevelDB): the records it returned in a log not
    /// recycled were all legacy.
    fn legacy_data(&self) -> bool {
        self.state.legacy_data || (!self.state.is_recycled() && self.stats.records > 0)
    }

    /// RocksDB: whether a data fragment was read (records returned included).
    fn data_seen(&self) -> bool {
        self.state.data_seen || self.stats.records > 0
    }
}

impl Decoder for LogDecoder {
    type Item = Bytes;
    type Error = CodecError;

    // The common case first, so that it does not pay for the general loop's stack
    // frame.
    #[inline]
    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Bytes>, CodecError> {
        let decoded = match self.decode_plain_full(src) {
            Some(record) => Some(record),
            None => self.decode_slow(src, false)?,
        };
        self.hand_out(decoded)
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Bytes>, CodecError> {
        let decoded = match self.decode_plain_full(src) {
            Some(record) => Some(record),
            None => self.decode_slow(src, true)?,
        };
        if decoded.is_none() {
            self.cut_stream(src)?;
        }
        self.hand_out(decoded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::encoder::LogEncoder;
    use assembly::COPY_ALIGN;

    /// A joined record starts where its largest part is copied in step with its
    /// source (same offset within a cache line), whatever the sources' offsets.
    #[test]
    fn a_joined_record_is_placed_in_step_with_its_largest_part() {
        let source = Bytes::from((0..70_000u32).map(|i| i as u8).collect::<Vec<_>>());
        for (small_at, large_at) in [(3, 20_011), (0, 40_000), (17, 33), (60, 5_000)] {
            let small = source.slice(small_at..small_at + 1000);
            let large = source.slice(large_at..large_at + 20_000);
            let mut parts = Parts::default();
            parts.push(small.clone());
            parts.push(large.clone());
            let record = parts.join();
            assert_eq!(&record[..1000], &small[..]);
            assert_eq!(&record[1000..], &large[..]);
            let copied_to = record.as_ptr() as usize + 1000;
            assert_eq!(
                copied_to % COPY_ALIGN,
                large.as_ptr() as usize % COPY_ALIGN,
                "parts at {small_at} and {large_at}"
            );
        }
    }

    /// A FULL record is a view of the read buffer; a fragmented one is one new buffer.
    #[test]
    fn full_records_are_not_copied() {
        let mut log = BytesMut::new();
        let mut encoder = LogEncoder::new();
        encoder.encode_record(&[1u8; 1000], &mut log);
        encoder.encode_record(&[2u8; 40_000], &mut log);
        let base = log.as_ptr() as usize;
        let end = base + log.len();
        let mut decoder = LogDecoder::new();
        let full = decoder.decode(&mut log).unwrap().unwrap();
        let at = full.as_ptr() as usize;
        assert!(
            at >= base && at + full.len() <= end,
            "FULL record was copied"
        );
        let fragmented = decoder.decode(&mut log).unwrap().unwrap();
        let at = fragmented.as_ptr() as usize;
        assert!(at + fragmented.len() <= base || at >= end);
        assert_eq!(fragmented.len(), 40_000);
    }

    /// The decoder never asks for more than a block to make progress.
    /// Once a fragment's header is in, the buffer gets room for the whole fragment, so
    /// a reader filling it in small reads does not regrow (and recopy) it.
    #[test]
    fn makes_room_for_the_fragment_it_waits_for() {
        let mut log = BytesMut::new();
        LogEncoder::new().encode_record(&[7u8; 30_000], &mut log);
        let mut decoder = LogDecoder::new();
        let mut src = BytesMut::from(&log[..100]);
        assert_eq!(decoder.decode(&mut src).unwrap(), None);
        assert!(src.capacity() >= HEADER_SIZE + 30_000, "{}", src.capacity());
        let room = src.as_ptr();
        src.extend_from_slice(&log[100..]);
        assert_eq!(src.as_ptr(), room, "filled in place");
        assert_eq!(decoder.decode(&mut src).unwrap().unwrap().len(), 30_000);
    }

    /// Checksums turned off only for bytes known intact decide as they would with
    /// them on; turned back on, damage is seen again.
    #[test]
    fn checksums_can_be_turned_off_and_on_between_blocks() {
        let mut log = BytesMut::new();
        let mut encoder = LogEncoder::new();
        encoder.encode_record(&[1u8; 40_000], &mut log);
        encoder.encode_record(b"damaged", &mut log);
        let damaged_at = log.len() - 1;
        log[damaged_at] ^= 0x40;
        let mut decoder = LogDecoder::builder()
            .recovery(Recovery::SkipCorrupted)
            .build();
        decoder.set_checksums(false);
        let mut first = log.split_to(BLOCK_SIZE);
        assert_eq!(decoder.decode(&mut first).unwrap(), None);
        decoder.set_checksums(true);
        assert_eq!(decoder.decode_eof(&mut log).unwrap().unwrap().len(), 40_000);
        assert_eq!(decoder.decode_eof(&mut log).unwrap(), None);
        assert_eq!(decoder.stats().corruptions, 1);
    }

    #[test]
    fn waits_with_less_than_a_block() {
        let mut log = BytesMut::new();
        LogEncoder::new().encode_record(&[9u8; 100_000], &mut log);
        let mut decoder = LogDecoder::new();
        let mut src = BytesMut::new();
        let mut records = 0;
        for chunk in log.chunks(1000) {
            src.extend_from_slice(chunk);
            while let Some(record) = decoder.decode(&mut src).unwrap() {
                assert_eq!(record.len(), 100_000);
                records += 1;
            }
            assert!(src.len() < BLOCK_SIZE);
        }
        assert_eq!(records, 1);
    }
}
