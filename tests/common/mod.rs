//! Shared machinery of the integration tests: LevelDB's test helpers (its `Random`,
//! `BigString`, `NumberString`, the `LogTest` fixture), a reader that hands bytes out
//! in random-sized chunks with `Pending` in between, a whole-buffer reference reader
//! that follows LevelDB's algorithm literally, and the ways of running the decoder.
//!
//! Every test binary uses a different subset of this module.
#![allow(dead_code)]

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::codec::{Decoder, FramedRead};
use walcodec::{Dialect, LogDecoder, LogEncoder, LogInput, Recovery, BLOCK_SIZE, HEADER_SIZE};

// ---------------------------------------------------------------------------------
// LevelDB's test helpers.

/// LevelDB's `util/random.h`: a Park–Miller "minimal standard" generator, ported so
/// that `RandomRead` writes the very records LevelDB's own test writes.
#[derive(Debug, Clone)]
pub struct LevelDbRandom {
    seed: u32,
}

impl LevelDbRandom {
    pub fn new(seed: u32) -> LevelDbRandom {
        let mut seed = seed & 0x7fff_ffff;
        // Both would make the generator stick at a fixed point.
        if seed == 0 || seed == 2_147_483_647 {
            seed = 1;
        }
        LevelDbRandom { seed }
    }

    pub fn next(&mut self) -> u32 {
        const M: u32 = 2_147_483_647;
        const A: u64 = 16_807;
        // seed * A mod M without a division: (product >> 31) + (product & M) is
        // congruent to product mod M because 2^31 = 1 (mod M).
        let product = u64::from(self.seed) * A;
        let mut seed = ((product >> 31) + (product & u64::from(M))) as u32;
        if seed > M {
            seed -= M;
        }
        self.seed = seed;
        seed
    }

    pub fn uniform(&mut self, n: u32) -> u32 {
        self.next() % n
    }

    pub fn one_in(&mut self, n: u32) -> bool {
        self.next() % n == 0
    }

    /// A number in `[0, 2^max_log)`, skewed towards small numbers.
    pub fn skewed(&mut self, max_log: u32) -> u32 {
        let bits = self.uniform(max_log + 1);
        self.uniform(1 << bits)
    }
}

/// LevelDB's `BigString`: `partial` repeated and cut to `n` bytes.
pub fn big_string(partial: &str, n: usize) -> Vec<u8> {
    partial.bytes().cycle().take(n).collect()
}

/// LevelDB's `NumberString`: `"<n>."`.
pub fn number_string(n: usize) -> Vec<u8> {
    format!("{n}.").into_bytes()
}

/// LevelDB's `RandomSkewedString`.
pub fn random_skewed_string(i: usize, rnd: &mut LevelDbRandom) -> Vec<u8> {
    let len = rnd.skewed(17) as usize;
    big_string(&format!("{i}."), len)
}

/// A small, seedable generator for chunk sizes and test data (splitmix64).
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `[lo, hi]`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }

    pub fn fill(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(8) {
            let word = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

/// A record of `len` bytes whose content depends on `seed` (cheap to build, and two
/// records of the same length differ).
pub fn patterned(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = SplitMix64::new(seed ^ (len as u64).rotate_left(32));
    let mut record = vec![0; len];
    rng.fill(&mut record);
    record
}

// ---------------------------------------------------------------------------------
// Logs as LevelDB's `LogTest` builds and damages them.

/// The checksum a header stores, computed here from FORMAT.md rather than taken from
/// the crate under test: crc32c of the type byte and the payload, masked.
pub fn masked_crc(type_byte: u8, payload: &[u8]) -> u32 {
    let crc = crc32c::crc32c_append(crc32c::crc32c(&[type_byte]), payload);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// LevelDB's `LogTest` fixture: a writer into memory and the byte surgery its tests do.
#[derive(Debug, Default)]
pub struct LogTest {
    pub dest: Vec<u8>,
    encoder: LogEncoder,
}

impl LogTest {
    pub fn new() -> LogTest {
        LogTest::default()
    }

    pub fn write(&mut self, record: &[u8]) {
        let mut out = BytesMut::new();
        self.encoder.encode_record(record, &mut out);
        self.dest.extend_from_slice(&out);
    }

    /// LevelDB's `ReopenForAppend`: a new writer that continues the log.
    pub fn reopen_for_append(&mut self) {
        self.encoder = LogEncoder::with_offset(self.dest.len() as u64);
    }

    pub fn written_bytes(&self) -> usize {
        self.dest.len()
    }

    pub fn increment_byte(&mut self, offset: usize, delta: u8) {
        self.dest[offset] = self.dest[offset].wrapping_add(delta);
    }

    pub fn set_byte(&mut self, offset: usize, byte: u8) {
        self.dest[offset] = byte;
    }

    pub fn shrink_size(&mut self, bytes: usize) {
        self.dest.truncate(self.dest.len() - bytes);
    }

    /// Recomputes the checksum of the fragment at `header_offset` with `len` payload
    /// bytes, so that a changed type byte is all that is wrong with it.
    pub fn fix_checksum(&mut self, header_offset: usize, len: usize) {
        let type_byte = self.dest[header_offset + 6];
        let payload = &self.dest[header_offset + HEADER_SIZE..header_offset + HEADER_SIZE + len];
        let checksum = masked_crc(type_byte, payload).to_le_bytes();
        self.dest[header_offset..header_offset + 4].copy_from_slice(&checksum);
    }
}

/// Encodes `records` into one log with a fresh encoder.
pub fn encode_all<R: AsRef<[u8]>>(records: &[R]) -> Vec<u8> {
    let mut encoder = LogEncoder::new();
    let mut out = BytesMut::new();
    for record in records {
        encoder.encode_record(record.as_ref(), &mut out);
    }
    out.to_vec()
}

// ---------------------------------------------------------------------------------
// What a read returns.

/// One dropped piece, as the decoder's reporter (or the reference reader) gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub offset: u64,
    pub bytes: u64,
    pub reason: String,
}

/// Everything a read of a whole log produced.
#[derive(Clone, PartialEq, Eq)]
pub struct Outcome {
    pub records: Vec<Bytes>,
    pub reports: Vec<Report>,
    /// The error that ended the stream, as displayed.
    pub error: Option<String>,
}

impl Outcome {
    /// LevelDB's `DroppedBytes()`: the sum of the reports' byte counts.
    pub fn dropped(&self) -> u64 {
        self.reports.iter().map(|r| r.bytes).sum()
    }

    /// LevelDB's `ReportMessage()`: the reasons, concatenated.
    pub fn message(&self) -> String {
        self.reports.iter().map(|r| r.reason.as_str()).collect()
    }

    /// The records, as owned vectors (to compare with expected ones).
    pub fn record_vecs(&self) -> Vec<Vec<u8>> {
        self.records.iter().map(|r| r.to_vec()).collect()
    }
}

/// Records print as length and crc: a failing comparison of megabyte records stays
/// readable.
impl fmt::Debug for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let records: Vec<String> = self
            .records
            .iter()
            .map(|r| format!("{}B/{:08x}", r.len(), crc32c::crc32c(r)))
            .collect();
        f.debug_struct("Outcome")
            .field("records", &records)
            .field("reports", &self.reports)
            .field("error", &self.error)
            .finish()
    }
}

/// How a test configures the decoder under test.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub recovery: Recovery,
    pub max_record_bytes: Option<usize>,
    /// The dialect and the log number its recyclable headers carry.
    pub dialect: Dialect,
    pub log_number: u64,
}

impl Config {
    /// LevelDB's reader: report and skip damage.
    pub const LEVELDB: Config = Config {
        recovery: Recovery::SkipCorrupted,
        max_record_bytes: None,
        dialect: Dialect::LevelDb,
        log_number: 0,
    };

    /// The decoder's defaults.
    pub const DEFAULT: Config = Config {
        recovery: Recovery::TolerateTail,
        max_record_bytes: None,
        dialect: Dialect::LevelDb,
        log_number: 0,
    };

    pub fn with_recovery(recovery: Recovery) -> Config {
        Config {
            recovery,
            ..Config::DEFAULT
        }
    }

    /// RocksDB's dialect, for log `log_number`.
    pub fn rocksdb(recovery: Recovery, log_number: u64) -> Config {
        Config {
            recovery,
            dialect: Dialect::RocksDb,
            log_number,
            ..Config::DEFAULT
        }
    }

    /// A decoder with a reporter that collects into the returned list (LevelDB's
    /// `ReportCollector`).
    pub fn build(&self) -> (LogDecoder, Arc<Mutex<Vec<Report>>>) {
        let reports = Arc::new(Mutex::new(Vec::new()));
        let sink = reports.clone();
        let mut builder = LogDecoder::builder();
        // The reference readers read files: a record the end cuts is a torn tail.
        builder
            .recovery(self.recovery)
            .input(LogInput::File)
            .dialect(self.dialect)
            .log_number(self.log_number)
            .on_corruption(move |c| {
                sink.lock().unwrap().push(Report {
                    offset: c.offset(),
                    bytes: c.bytes(),
                    reason: c.reason().to_string(),
                })
            });
        if let Some(max) = self.max_record_bytes {
            builder.max_record_bytes(max);
        }
        (builder.build(), reports)
    }
}

fn take_reports(reports: &Arc<Mutex<Vec<Report>>>) -> Vec<Report> {
    std::mem::take(&mut *reports.lock().unwrap())
}

/// Runs a decoder over the whole log in one buffer: `decode` until it wants more,
/// then `decode_eof` until it is done (what `FramedRead` does with a single read).
pub fn decode_whole(log: &[u8], config: Config) -> Outcome {
    let (mut decoder, reports) = config.build();
    let mut src = BytesMut::from(log);
    let mut records = Vec::new();
    let mut error = None;
    let mut eof = false;
    loop {
        let step = if eof {
            decoder.decode_eof(&mut src)
        } else {
            decoder.decode(&mut src)
        };
        match step {
            Ok(Some(record)) => records.push(record),
            Ok(None) if !eof => eof = true,
            Ok(None) => break,
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        }
    }
    Outcome {
        records,
        reports: take_reports(&reports),
        error,
    }
}

/// Runs a decoder in a `FramedRead` over a [`ChunkedReader`] of the log.
pub fn decode_framed(log: &[u8], config: Config, seed: u64, max_chunk: usize) -> Outcome {
    let (decoder, reports) = config.build();
    let reader = ChunkedReader::new(Bytes::copy_from_slice(log), seed, max_chunk);
    let mut framed = FramedRead::new(reader, decoder);
    let mut records = Vec::new();
    let mut error = None;
    futures::executor::block_on(async {
        // Not stopping at an error: a record after it would show as a difference.
        while let Some(item) = framed.next().await {
            match item {
                Ok(record) => records.push(record),
                Err(e) => error = Some(e.to_string()),
            }
        }
        // Reads at EOF keep returning EOF.
        assert!(
            framed.next().await.is_none(),
            "stream resumed after its end"
        );
    });
    Outcome {
        records,
        reports: take_reports(&reports),
        error,
    }
}

/// Chunkings every scenario is read through: (seed, largest chunk). A largest chunk
/// of 1 is a byte at a time.
pub const CHUNKINGS: [(u64, usize); 5] = [
    (1, 7),
    (2, 300),
    (3, BLOCK_SIZE + 11),
    (4, 3 * BLOCK_SIZE),
    (5, 1),
];

/// Reads the log whole and through every chunking in [`CHUNKINGS`] (a byte at a time
/// only when the log is small enough for it to be quick), checks that all the reads
/// agree, and returns what they returned.
pub fn read_every_way(log: &[u8], config: Config) -> Outcome {
    let whole = decode_whole(log, config);
    for (seed, max_chunk) in CHUNKINGS {
        if max_chunk == 1 && log.len() > 256 * 1024 {
            continue;
        }
        let framed = decode_framed(log, config, seed, max_chunk);
        assert_eq!(
            framed, whole,
            "FramedRead with chunks up to {max_chunk} bytes (seed {seed}) differs from a whole-buffer read"
        );
    }
    whole
}

/// Reads like LevelDB's `log::Reader` (reporting and skipping damage), checks that all
/// chunkings agree with each other and with the reference reader, and returns the
/// outcome.
pub fn read_like_leveldb(log: &[u8]) -> Outcome {
    let outcome = read_every_way(log, Config::LEVELDB);
    let reference = reference_read(log);
    assert_eq!(
        outcome, reference,
        "decoder differs from the reference reader"
    );
    outcome
}

// ---------------------------------------------------------------------------------
// An AsyncRead that chunks, and an AsyncWrite that does partial writes.

/// Hands out its bytes in chunks of random size (often a single byte), returning
/// `Pending` (after waking itself) between chunks at random.
#[derive(Debug)]
pub struct ChunkedReader {
    data: Bytes,
    pos: usize,
    rng: SplitMix64,
    max_chunk: usize,
    pending_next: bool,
}

impl ChunkedReader {
    pub fn new(data: Bytes, seed: u64, max_chunk: usize) -> ChunkedReader {
        ChunkedReader {
            data,
            pos: 0,
            rng: SplitMix64::new(seed),
            max_chunk: max_chunk.max(1),
            pending_next: seed % 2 == 0,
        }
    }

    /// Bytes handed out so far.
    pub fn delivered(&self) -> usize {
        self.pos
    }

    fn chunk_len(&mut self) -> usize {
        let max = self.max_chunk;
        match self.rng.next_u64() % 4 {
            0 => 1,
            1 => self.rng.range(1, max.min(16)),
            2 => self.rng.range(1, (max / 16).max(1)),
            _ => self.rng.range(1, max),
        }
    }
}

impl AsyncRead for ChunkedReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.pending_next {
            this.pending_next = false;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let n = this
            .chunk_len()
            .min(this.data.len() - this.pos)
            .min(buf.remaining());
        buf.put_slice(&this.data[this.pos..this.pos + n]);
        this.pos += n;
        this.pending_next = this.rng.next_u64() % 2 == 0;
        Poll::Ready(Ok(()))
    }
}

/// Hands out its bytes in the chunks it was given, with `Pending` before each one.
#[derive(Debug)]
pub struct ScriptedReader {
    chunks: std::collections::VecDeque<Bytes>,
    pending_next: bool,
}

impl ScriptedReader {
    /// A reader of `data` cut at `cuts` (ascending offsets into `data`).
    pub fn new(data: &[u8], cuts: &[usize]) -> ScriptedReader {
        let data = Bytes::copy_from_slice(data);
        let mut chunks = std::collections::VecDeque::new();
        let mut from = 0;
        for &cut in cuts.iter().chain(std::iter::once(&data.len())) {
            if cut > from {
                chunks.push_back(data.slice(from..cut));
                from = cut;
            }
        }
        ScriptedReader {
            chunks,
            pending_next: true,
        }
    }
}

impl AsyncRead for ScriptedReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.pending_next {
            this.pending_next = false;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if let Some(chunk) = this.chunks.front_mut() {
            let n = chunk.len().min(buf.remaining());
            buf.put_slice(&chunk.split_to(n));
            if chunk.is_empty() {
                this.chunks.pop_front();
                this.pending_next = true;
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// Runs a decoder in a `FramedRead` over `reader`.
pub fn decode_reader<R: AsyncRead + Unpin>(reader: R, config: Config) -> Outcome {
    let (decoder, reports) = config.build();
    let mut framed = FramedRead::new(reader, decoder);
    let mut records = Vec::new();
    let mut error = None;
    futures::executor::block_on(async {
        while let Some(item) = framed.next().await {
            match item {
                Ok(record) => records.push(record),
                Err(e) => error = Some(e.to_string()),
            }
        }
    });
    Outcome {
        records,
        reports: take_reports(&reports),
        error,
    }
}

/// Accepts at most a random number of bytes per write, returning `Pending` between
/// writes at random.
#[derive(Debug)]
pub struct ChunkedWriter {
    pub written: Vec<u8>,
    rng: SplitMix64,
    max_chunk: usize,
    pending_next: bool,
}

impl ChunkedWriter {
    pub fn new(seed: u64, max_chunk: usize) -> ChunkedWriter {
        ChunkedWriter {
            written: Vec::new(),
            rng: SplitMix64::new(seed),
            max_chunk: max_chunk.max(1),
            pending_next: false,
        }
    }

    fn pending(&mut self, cx: &mut Context<'_>) -> bool {
        if self.pending_next {
            self.pending_next = false;
            cx.waker().wake_by_ref();
            return true;
        }
        self.pending_next = self.rng.next_u64() % 2 == 0;
        false
    }
}

impl AsyncWrite for ChunkedWriter {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.pending(cx) {
            return Poll::Pending;
        }
        let n = this.rng.range(1, this.max_chunk).min(buf.len());
        this.written.extend_from_slice(&buf[..n]);
        Poll::Ready(Ok(n))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.pending(cx) {
            return Poll::Pending;
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

// ---------------------------------------------------------------------------------
// The reference reader.

/// What LevelDB's `ReadPhysicalRecord` returns.
enum Physical<'a> {
    Fragment {
        type_byte: u8,
        offset: u64,
        payload: &'a [u8],
    },
    Eof,
    /// A damaged or skipped piece (already reported, if it is reported at all).
    Bad,
}

/// LevelDB's `log::Reader` (checksums on, initial offset 0) over a byte slice, written
/// as literally as possible: it reads the log one 32 KiB block at a time, and a block
/// shorter than 32 KiB means EOF.
///
/// Two departures, both from FORMAT.md: reasons carry no numeric suffix ("partial
/// record without end", not "...(1)"), and type bytes 5 and 6 are unknown types
/// (LevelDB's reader confuses them with its internal `kEof`/`kBadRecord` codes).
/// Reports also carry the offset the crate gives them: the damaged fragment's, or the
/// first fragment's of the record they abandon.
pub struct ReferenceReader<'a> {
    log: &'a [u8],
    /// Offset of the first unparsed byte of the current block.
    buffer_start: usize,
    /// Offset just past the last byte read (LevelDB's `end_of_buffer_offset_`).
    buffer_end: usize,
    eof: bool,
    reports: Vec<Report>,
    /// RocksDB's dialect: the log number its recyclable headers must carry.
    rocksdb: Option<u32>,
    /// RocksDB: a recyclable header came before any legacy data fragment.
    recycled: bool,
    /// RocksDB: a legacy data fragment was read.
    legacy_data: bool,
}

impl<'a> ReferenceReader<'a> {
    pub fn new(log: &'a [u8]) -> ReferenceReader<'a> {
        ReferenceReader {
            log,
            buffer_start: 0,
            buffer_end: 0,
            eof: false,
            reports: Vec::new(),
            rocksdb: None,
            recycled: false,
            legacy_data: false,
        }
    }

    /// RocksDB's `log::Reader` in `kSkipAnyCorruptedRecords` for log `log_number`,
    /// with the crate's departures (ROCKSDB.md): only the low 32 bits of the number
    /// are compared; a recyclable fragment after legacy data is consumed and
    /// reported; 7–10 zero bytes at a block's end are a trailer even inside a
    /// record; a type with bit 7 set cuts an open record with a report. Metadata
    /// records and compression are left to the decoder's own tests.
    pub fn rocksdb(log: &'a [u8], log_number: u64) -> ReferenceReader<'a> {
        ReferenceReader {
            rocksdb: Some(log_number as u32),
            ..ReferenceReader::new(log)
        }
    }

    fn report(&mut self, offset: u64, bytes: usize, reason: String) {
        self.reports.push(Report {
            offset,
            bytes: bytes as u64,
            reason,
        });
    }

    fn read_physical(&mut self) -> Physical<'a> {
        loop {
            let buffered = self.buffer_end - self.buffer_start;
            if buffered < HEADER_SIZE {
                if !self.eof {
                    // What is left of the block is a trailer: read the next block.
                    let n = BLOCK_SIZE.min(self.log.len() - self.buffer_end);
                    self.buffer_start = self.buffer_end;
                    self.buffer_end += n;
                    if n < BLOCK_SIZE {
                        self.eof = true;
                    }
                    continue;
                }
                // A header cut by EOF: the writer died mid-write.
                self.buffer_start = self.buffer_end;
                return Physical::Eof;
            }
            let log = self.log;
            let header = &log[self.buffer_start..self.buffer_end];
            let length = u16::from_le_bytes([header[4], header[5]]) as usize;
            let type_byte = header[6];
            let offset = self.buffer_start as u64;
            let recyclable = self.rocksdb.is_some() && matches!(type_byte, 5..=8 | 11 | 131);
            let header_size = if recyclable { 11 } else { HEADER_SIZE };
            let block_left = BLOCK_SIZE - self.buffer_start % BLOCK_SIZE;
            if recyclable {
                if buffered < 11 {
                    self.buffer_start = self.buffer_end;
                    if block_left < 11 {
                        // No room for this header in the block: a trailer.
                        continue;
                    }
                    // A header cut by EOF.
                    return Physical::Eof;
                }
                if !self.legacy_data {
                    self.recycled = true;
                }
            }
            if header_size + length > buffered {
                self.buffer_start = self.buffer_end;
                if !self.eof {
                    self.report(offset, buffered, "bad record length".into());
                    return Physical::Bad;
                }
                // A payload cut by EOF: the writer died mid-write.
                return Physical::Eof;
            }
            if recyclable {
                let number = u32::from_le_bytes([header[7], header[8], header[9], header[10]]);
                if Some(number) != self.rocksdb {
                    // Left from the file's earlier use: passed over.
                    self.buffer_start += header_size + length;
                    if self.legacy_data && !self.recycled {
                        self.report_unexpected(offset, header_size + length);
                    }
                    return Physical::Bad;
                }
            }
            if type_byte == 0 && length == 0 {
                // Preallocated space: the rest of the block goes, silently.
                self.buffer_start = self.buffer_end;
                if self.rocksdb.is_some() && block_left < 11 {
                    // A recyclable writer's trailer.
                    continue;
                }
                return Physical::Bad;
            }
            let payload = &header[header_size..header_size + length];
            let stored = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
            let crc = if recyclable {
                let mut covered = vec![type_byte];
                covered.extend_from_slice(&header[7..11]);
                covered.extend_from_slice(payload);
                let crc = crc32c::crc32c(&covered);
                crc.rotate_right(15).wrapping_add(0xa282_ead8)
            } else {
                masked_crc(type_byte, payload)
            };
            if stored != crc {
                // The length may be what is damaged: drop the whole rest of the block.
                self.buffer_start = self.buffer_end;
                self.report(offset, buffered, "checksum mismatch".into());
                return Physical::Bad;
            }
            self.buffer_start += header_size + length;
            if recyclable && self.legacy_data && !self.recycled {
                self.report_unexpected(offset, header_size + length);
                return Physical::Bad;
            }
            let type_byte = match type_byte {
                5..=8 if self.rocksdb.is_some() => type_byte - 4,
                1..=4 => {
                    self.legacy_data = true;
                    type_byte
                }
                _ => type_byte,
            };
            return Physical::Fragment {
                type_byte,
                offset,
                payload,
            };
        }
    }

    fn report_unexpected(&mut self, offset: u64, bytes: usize) {
        self.report(
            offset,
            bytes,
            "recyclable fragment in a log that is not recycled".into(),
        );
    }

    /// LevelDB's `ReadRecord`.
    pub fn read_record(&mut self) -> Option<Vec<u8>> {
        let mut scratch = Vec::new();
        let mut in_fragmented_record = false;
        let mut record_offset = 0;
        loop {
            match self.read_physical() {
                Physical::Fragment {
                    type_byte: 1,
                    payload,
                    ..
                } => {
                    // An empty FIRST then a FULL is an old writer's quirk, not damage.
                    if in_fragmented_record && !scratch.is_empty() {
                        self.report(
                            record_offset,
                            scratch.len(),
                            "partial record without end".into(),
                        );
                    }
                    return Some(payload.to_vec());
                }
                Physical::Fragment {
                    type_byte: 2,
                    offset,
                    payload,
                } => {
                    if in_fragmented_record && !scratch.is_empty() {
                        self.report(
                            record_offset,
                            scratch.len(),
                            "partial record without end".into(),
                        );
                    }
                    record_offset = offset;
                    scratch = payload.to_vec();
                    in_fragmented_record = true;
                }
                Physical::Fragment {
                    type_byte: type_byte @ (3 | 4),
                    offset,
                    payload,
                } => {
                    if !in_fragmented_record {
                        self.report(
                            offset,
                            payload.len(),
                            "missing start of fragmented record".into(),
                        );
                    } else {
                        scratch.extend_from_slice(payload);
                        if type_byte == 4 {
                            return Some(scratch);
                        }
                    }
                }
                Physical::Eof => return None,
                Physical::Bad => {
                    if in_fragmented_record {
                        self.report(
                            record_offset,
                            scratch.len(),
                            "error in middle of record".into(),
                        );
                        in_fragmented_record = false;
                        scratch.clear();
                    }
                }
                Physical::Fragment { type_byte, .. }
                    if self.rocksdb.is_some()
                        && type_byte & 0x80 != 0
                        && type_byte != 130
                        && type_byte != 131 =>
                {
                    // RocksDB: a type a newer writer may add, skipped; it cuts an
                    // open record.
                    if in_fragmented_record {
                        self.report(
                            record_offset,
                            scratch.len(),
                            "error in middle of record".into(),
                        );
                        in_fragmented_record = false;
                        scratch.clear();
                    }
                }
                Physical::Fragment {
                    type_byte,
                    offset,
                    payload,
                } => {
                    let held = if in_fragmented_record {
                        scratch.len()
                    } else {
                        0
                    };
                    self.report(
                        offset,
                        payload.len() + held,
                        format!("unknown record type {type_byte}"),
                    );
                    in_fragmented_record = false;
                    scratch.clear();
                }
            }
        }
    }
}

/// Reads a whole log with the [`ReferenceReader`].
pub fn reference_read(log: &[u8]) -> Outcome {
    read_with_reference(ReferenceReader::new(log))
}

/// Reads a whole log with the [`ReferenceReader`] in RocksDB's dialect.
#[allow(dead_code)] // Only the RocksDB tests read in its dialect.
pub fn reference_read_rocksdb(log: &[u8], log_number: u64) -> Outcome {
    read_with_reference(ReferenceReader::rocksdb(log, log_number))
}

fn read_with_reference(mut reader: ReferenceReader<'_>) -> Outcome {
    let mut records = Vec::new();
    while let Some(record) = reader.read_record() {
        records.push(Bytes::from(record));
    }
    Outcome {
        records,
        reports: reader.reports,
        error: None,
    }
}

// ---------------------------------------------------------------------------------
// Building logs fragment by fragment.

/// Appends one fragment (header and payload) with a valid checksum.
pub fn push_fragment(log: &mut Vec<u8>, type_byte: u8, payload: &[u8]) {
    assert!(payload.len() <= (BLOCK_SIZE - HEADER_SIZE));
    log.extend_from_slice(&masked_crc(type_byte, payload).to_le_bytes());
    log.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    log.push(type_byte);
    log.extend_from_slice(payload);
}

/// Pads the log with zeros to the next block when fewer than 7 bytes are left in the
/// current one (what a writer does before a fragment).
pub fn pad_trailer(log: &mut Vec<u8>) {
    let left = BLOCK_SIZE - log.len() % BLOCK_SIZE;
    if left < HEADER_SIZE {
        log.resize(log.len() + left, 0);
    }
}

/// The offsets of the fragment headers of a well-formed log (trailers skipped).
pub fn fragment_offsets(log: &[u8]) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut pos = 0;
    while pos < log.len() {
        let left = BLOCK_SIZE - pos % BLOCK_SIZE;
        if left < HEADER_SIZE {
            pos += left;
            continue;
        }
        if pos + HEADER_SIZE > log.len() {
            break;
        }
        offsets.push(pos);
        pos += HEADER_SIZE + u16::from_le_bytes([log[pos + 4], log[pos + 5]]) as usize;
    }
    offsets
}

// ---------------------------------------------------------------------------------
// Test data files.

/// `tests/data/<relative>`.
pub fn data_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(relative)
}

/// Parses an `expected.hex`: one record per line, lowercase hex, every line ended by
/// a newline.
pub fn parse_expected_hex(text: &str) -> Vec<Vec<u8>> {
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "expected.hex must end with a newline"
    );
    text.split_terminator('\n').map(unhex).collect()
}

pub fn unhex(line: &str) -> Vec<u8> {
    assert!(line.len() % 2 == 0, "odd hex length");
    (0..line.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&line[i..i + 2], 16).expect("hex digit"))
        .collect()
}

/// A primary's identity message (protocol version 3), as a raw peer sends it
/// after its hello: log id `log_id`, one epoch (number 1, id 1) at the start of
/// segment 1, no record vouched for.
/// What a primary whose log has one epoch sends before the log: its hello (32 bytes)
/// and its identity ('I', log id, last-record flag and fields, the epoch count, one
/// epoch of four u64s).
pub const PRIMARY_HANDSHAKE: u64 = 32 + 1 + 16 + 1 + 20 + 4 + 32;

pub fn primary_identity(log_id: u128) -> Vec<u8> {
    let mut m = vec![b'I'];
    m.extend_from_slice(&log_id.to_le_bytes());
    m.push(0);
    m.extend_from_slice(&[0; 20]);
    m.extend_from_slice(&1u32.to_le_bytes());
    for field in [1u64, 1, 1, 0] {
        m.extend_from_slice(&field.to_le_bytes());
    }
    m
}

/// Syncs `replica` from a live `log` over an in-memory stream until its durable end
/// reaches `target`, then hangs up (the primary's end must have gone well).
pub async fn sync_until(
    log: &walcodec::LogDir,
    replica: &mut walcodec::Replica,
    target: walcodec::LogPosition,
) {
    let (a, b) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn({
        let log = log.clone();
        async move { log.serve_replica(a).await }
    });
    let mut end = replica.durable_end();
    tokio::select! {
        synced = replica.sync_from(b) => panic!("ended before {target}: {synced:?}"),
        reached = end.wait_for(|&end| end >= target) => { reached.unwrap(); }
    }
    serving.await.unwrap().unwrap();
}

/// Syncs `replica` from a live `log` until it holds all of it, then hangs up.
pub async fn catch_up(log: &walcodec::LogDir, replica: &mut walcodec::Replica) {
    let target = log.end();
    sync_until(log, replica, target).await;
    assert_eq!(replica.end(), target);
}

/// The two log directories hold the same segments, byte for byte.
pub fn assert_identical(a: &Path, b: &Path) {
    let segments = |dir: &Path| -> std::collections::BTreeMap<u64, Vec<u8>> {
        walcodec::LogDir::list(dir)
            .unwrap()
            .segments
            .into_iter()
            .map(|s| (s.number, std::fs::read(&s.path).unwrap()))
            .collect()
    };
    let (a, b) = (segments(a), segments(b));
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "other segments"
    );
    for (number, bytes) in &a {
        assert!(*bytes == b[number], "segment {number} differs");
    }
}
