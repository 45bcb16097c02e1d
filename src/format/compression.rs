//! RocksDB's WAL compression (feature `zstd`): each logical record is one zstd frame
//! spread over the record's fragments.
//!
//! Writing: RocksDB resets the context per record, hands it the whole record with
//! `ZSTD_e_end` (so the frame header declares the content size) and turns the frame
//! checksum on; level and everything else are zstd's defaults
//! (`util/compression.h`, `ZSTDStreamingCompress`). The output is taken in chunks
//! of at most one block's payload; [`LogEncoder`](crate::LogEncoder) does that.
//!
//! Reading: [`RecordInflater`] inflates a record's fragments as they come, within a
//! size limit that it checks against the frame's declared content size before it
//! inflates anything; a frame without one stops at the limit.
//!
//! ```
//! use bytes::BytesMut;
//! use walcodec::compression::RecordInflater;
//! use walcodec::fragment::{FragmentRules, Parsed};
//! use walcodec::{Dialect, LogEncoder, BLOCK_SIZE};
//!
//! let mut log = BytesMut::new();
//! let mut encoder = LogEncoder::builder().zstd().build();
//! encoder.encode_record(&[b'z'; 5000], &mut log);
//!
//! // The type-9 record (11 bytes), then one FULL fragment holding the frame.
//! let rules = FragmentRules::new(Dialect::RocksDb);
//! let Parsed::Fragment(fragment) = rules.parse(&log[11..], BLOCK_SIZE - 11) else {
//!     panic!("a fragment");
//! };
//! let mut inflater = RecordInflater::new(1 << 20);
//! let mut record = Vec::new();
//! inflater.push(&log[11..][fragment.payload_range()], &mut record).unwrap();
//! inflater.finish().unwrap();
//! assert_eq!(record, vec![b'z'; 5000]);
//! ```

use zstd::zstd_safe::{
    self, CCtx, CParameter, DCtx, DParameter, InBuffer, OutBuffer, ResetDirective,
};

use crate::format::BLOCK_SIZE;

/// Compresses one record at a time into chunks, as RocksDB's `StreamingCompress`.
pub(crate) struct RecordCompressor {
    context: CCtx<'static>,
    /// One chunk of output: `BLOCK_SIZE - header_size` bytes, as RocksDB's
    /// `compressed_buffer_`.
    chunk: Box<[u8]>,
    /// How much of the record the context has taken.
    input_pos: usize,
}

impl RecordCompressor {
    /// A compressor whose chunks fill one fragment after a header of `header_size`.
    pub(crate) fn new(header_size: usize) -> RecordCompressor {
        let mut context = CCtx::create();
        // Setting a valid parameter on a fresh context cannot fail.
        let _ = context.set_parameter(CParameter::ChecksumFlag(true));
        RecordCompressor {
            context,
            chunk: vec![0; BLOCK_SIZE - header_size].into_boxed_slice(),
            input_pos: 0,
        }
    }

    /// Starts a new record (a new frame).
    pub(crate) fn start(&mut self) {
        // Only the session: the checksum flag stays.
        let _ = self.context.reset(ResetDirective::SessionOnly);
        self.input_pos = 0;
    }

    /// The next chunk of the frame for `record` (the record given to
    /// [`start`](Self::start)): its length in [`chunk`](Self::chunk), and how many
    /// bytes zstd still has to flush after it (0 when the frame is complete). An empty
    /// record gives no frame at all, as in RocksDB.
    pub(crate) fn next_chunk(&mut self, record: &[u8]) -> (usize, usize) {
        if record.is_empty() {
            return (0, 0);
        }
        let mut input = InBuffer::around(record);
        input.set_pos(self.input_pos.min(record.len()));
        let mut output = OutBuffer::around(&mut self.chunk[..]);
        let pending = self
            .context
            .compress_stream2(
                &mut output,
                &mut input,
                zstd_safe::zstd_sys::ZSTD_EndDirective::ZSTD_e_end,
            )
            // zstd fails only on invalid parameters (ours are fixed and valid) or
            // when it cannot allocate, where Rust aborts anyway.
            .unwrap_or_else(|code| {
                panic!(
                    "zstd compression failed: {}",
                    zstd_safe::get_error_name(code)
                )
            });
        let written = output.pos();
        self.input_pos = input.pos();
        (written, pending)
    }

    /// The chunk written by the last [`next_chunk`](Self::next_chunk).
    pub(crate) fn chunk(&self) -> &[u8] {
        &self.chunk
    }
}

impl Clone for RecordCompressor {
    /// A fresh context: contexts are reset per record, so a clone compresses the same.
    fn clone(&self) -> Self {
        let mut context = CCtx::create();
        let _ = context.set_parameter(CParameter::ChecksumFlag(true));
        RecordCompressor {
            context,
            chunk: vec![0; self.chunk.len()].into_boxed_slice(),
            input_pos: 0,
        }
    }
}

impl std::fmt::Debug for RecordCompressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordCompressor")
            .field("chunk_len", &self.chunk.len())
            .finish_non_exhaustive()
    }
}

/// A compressed record that does not inflate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum InflateError {
    /// The record is larger than the limit: its frame declares `declared` bytes
    /// (checked before inflating), or, without a declared size, inflating crossed
    /// the limit (`declared` is `None`).
    #[error("compressed record larger than the limit ({max} bytes)")]
    TooLarge {
        /// The frame's declared content size, if it has one.
        declared: Option<u64>,
        /// The limit.
        max: usize,
    },
    /// The record does not start with a zstd frame header.
    #[error("compressed record is not a zstd frame")]
    NotZstd,
    /// zstd rejects the frame (a damaged frame, a checksum mismatch, a window
    /// larger than the limit allows).
    #[error("corrupted compressed record: {reason}")]
    Corrupt {
        /// zstd's error name.
        reason: &'static str,
    },
    /// Bytes after the end of the frame.
    #[error("bytes after the end of the compressed record's frame")]
    TrailingData,
    /// The record ended before its frame did.
    #[error("compressed record ends inside its frame")]
    Truncated,
}

/// The zstd frame magic number, as it starts a frame (LE `0xFD2FB528`).
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// The largest zstd frame header: magic, descriptor, window, 4-byte dictionary id,
/// 8-byte content size.
const MAX_FRAME_HEADER: usize = 18;

/// Output is produced at most this much at a time, so a record never holds more
/// than the limit plus this.
const INFLATE_STEP: usize = 32 * 1024;

/// Inflates one compressed record at a time, fragment by fragment, within a limit.
///
/// Call [`push`](Self::push) with each fragment's payload in order (an empty one
/// adds nothing), then [`finish`](Self::finish) at the record's last fragment; a
/// record with no bytes at all is an empty record (RocksDB writes no frame for it).
/// After an error, or to drop a partial record, call [`reset`](Self::reset).
///
/// Bounded: the frame header is held back (at most 18 bytes) until its declared
/// content size can be checked against the limit; output grows at most 32 KiB past
/// the limit before [`InflateError::TooLarge`]; zstd's window is capped to the
/// limit rounded up to a power of two (at least 1 KiB), so a frame without a
/// declared size whose window is larger is refused as too large too. RocksDB always
/// declares the size, and its single-segment frames need no more window than that.
pub struct RecordInflater {
    context: DCtx<'static>,
    max_record_bytes: usize,
    /// The frame header, until it is whole and checked.
    header: [u8; MAX_FRAME_HEADER],
    header_len: usize,
    /// The header has been checked and handed to zstd.
    header_done: bool,
    /// zstd said the frame is complete.
    frame_done: bool,
    produced: usize,
    /// The content size the frame header declares (checked against the limit).
    declared: Option<u64>,
}

impl RecordInflater {
    /// An inflater for records of at most `max_record_bytes` bytes.
    pub fn new(max_record_bytes: usize) -> RecordInflater {
        let mut context = DCtx::create();
        // zstd's window need not exceed the record: a window log of
        // ceil(log2(limit)), within zstd's 10..=31.
        let window_log =
            (usize::BITS - max_record_bytes.saturating_sub(1).leading_zeros()).clamp(10, 31);
        let _ = context.set_parameter(DParameter::WindowLogMax(window_log));
        RecordInflater {
            context,
            max_record_bytes,
            header: [0; MAX_FRAME_HEADER],
            header_len: 0,
            header_done: false,
            frame_done: false,
            produced: 0,
            declared: None,
        }
    }

    /// Forgets the record in progress; the next [`push`](Self::push) starts a new one.
    pub fn reset(&mut self) {
        let _ = self.context.reset(ResetDirective::SessionOnly);
        self.header_len = 0;
        self.header_done = false;
        self.frame_done = false;
        self.produced = 0;
        self.declared = None;
    }

    /// Bytes inflated for the record so far.
    pub fn produced(&self) -> usize {
        self.produced
    }

    /// Inflates a whole record's frame, all of it in `frame`, appending to `out`; the
    /// same checks and errors as [`push`](Self::push) then [`finish`](Self::finish),
    /// faster: a frame that declares its size (RocksDB's always do) is inflated in
    /// one pass straight into room of that size. Resets for the next record.
    pub fn inflate_whole(&mut self, frame: &[u8], out: &mut Vec<u8>) -> Result<(), InflateError> {
        self.reset();
        let single_pass = frame.starts_with(&ZSTD_MAGIC)
            && matches!(zstd_safe::find_frame_compressed_size(frame), Ok(len) if len == frame.len());
        let declared = match zstd_safe::get_frame_content_size(frame) {
            Ok(Some(declared)) if single_pass => declared,
            // No declared size, bytes after the frame, a frame cut short or no frame
            // at all: the streaming path, which bounds and names each.
            _ => {
                let pushed = self.push(frame, out).and_then(|()| self.finish());
                self.reset();
                return pushed;
            }
        };
        if declared > self.max_record_bytes as u64 {
            return Err(InflateError::TooLarge {
                declared: Some(declared),
                max: self.max_record_bytes,
            });
        }
        out.reserve_exact(declared as usize);
        // zstd checks the content against the declared size and the frame checksum.
        let inflated = self.context.decompress(out, frame);
        let _ = self.context.reset(ResetDirective::SessionOnly);
        inflated.map(drop).map_err(|code| self.zstd_error(code))
    }

    /// Inflates the next fragment of the record, appending to `out`.
    pub fn push(&mut self, fragment: &[u8], out: &mut Vec<u8>) -> Result<(), InflateError> {
        let mut input = fragment;
        if !self.header_done {
            let Some(rest) = self.take_header(input)? else {
                return Ok(());
            };
            input = rest;
            let header = self.header;
            self.inflate(&header[..self.header_len], out)?;
        }
        self.inflate(input, out)
    }

    /// Ends the record: its frame must be complete. Resets for the next record.
    pub fn finish(&mut self) -> Result<(), InflateError> {
        let empty_record = !self.header_done && self.header_len == 0;
        let complete = self.frame_done;
        self.reset();
        if empty_record || complete {
            Ok(())
        } else {
            Err(InflateError::Truncated)
        }
    }

    /// Collects the frame header from `input`; once it is whole, checks it and
    /// returns the bytes after it.
    fn take_header<'a>(&mut self, mut input: &'a [u8]) -> Result<Option<&'a [u8]>, InflateError> {
        loop {
            // Until the size is known, one byte past the 5 it is read from.
            let needed = self.header_size()?.unwrap_or(6);
            if self.header_len >= needed {
                break;
            }
            let Some((&byte, rest)) = input.split_first() else {
                return Ok(None);
            };
            self.header[self.header_len] = byte;
            self.header_len += 1;
            input = rest;
        }
        let header = &self.header[..self.header_len];
        let declared = match zstd_safe::get_frame_content_size(header) {
            Ok(declared) => declared,
            Err(_) => return Err(InflateError::NotZstd),
        };
        if let Some(size) = declared {
            if size > self.max_record_bytes as u64 {
                return Err(InflateError::TooLarge {
                    declared: Some(size),
                    max: self.max_record_bytes,
                });
            }
        }
        self.declared = declared;
        self.header_done = true;
        Ok(Some(input))
    }

    /// The frame header's size, once enough of it is there to tell.
    fn header_size(&self) -> Result<Option<usize>, InflateError> {
        let have = &self.header[..self.header_len];
        if have.len() < 5 {
            if have != &ZSTD_MAGIC[..have.len().min(4)] {
                return Err(InflateError::NotZstd);
            }
            return Ok(None);
        }
        let descriptor = have[4];
        let single_segment = descriptor & 0x20 != 0;
        let dictionary_id = [0, 1, 2, 4][usize::from(descriptor & 3)];
        let content_size = match descriptor >> 6 {
            0 => usize::from(single_segment),
            1 => 2,
            2 => 4,
            _ => 8,
        };
        Ok(Some(
            5 + usize::from(!single_segment) + dictionary_id + content_size,
        ))
    }

    fn inflate(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Result<(), InflateError> {
        if bytes.is_empty() {
            return Ok(());
        }
        if self.frame_done {
            return Err(InflateError::TrailingData);
        }
        let mut input = InBuffer::around(bytes);
        loop {
            // One byte past the limit (or past the declared size) is enough to know
            // it was crossed. With a declared size the record's room is taken at
            // once; without one it grows geometrically from a step, so a large
            // record is not copied over and over as it grows.
            let left = self.max_record_bytes - self.produced;
            let room = match self.declared {
                Some(declared) => (declared as usize).saturating_sub(self.produced),
                None => INFLATE_STEP.max(out.len()),
            }
            .min(left)
            .saturating_add(1);
            out.reserve_exact(room);
            let before = out.len();
            let mut output = OutBuffer::around_pos(out, before);
            let hint = self
                .context
                .decompress_stream(&mut output, &mut input)
                .map_err(|code| self.zstd_error(code))?;
            let written = output.pos() - before;
            self.produced += written;
            if self.produced > self.max_record_bytes {
                return Err(InflateError::TooLarge {
                    declared: None,
                    max: self.max_record_bytes,
                });
            }
            if hint == 0 {
                self.frame_done = true;
                if input.pos() < bytes.len() {
                    return Err(InflateError::TrailingData);
                }
                return Ok(());
            }
            if input.pos() == bytes.len() && written < room {
                // All input taken and the output not full: zstd waits for more.
                return Ok(());
            }
        }
    }
}

impl RecordInflater {
    fn zstd_error(&self, code: zstd_safe::ErrorCode) -> InflateError {
        let reason = zstd_safe::get_error_name(code);
        // zstd's `frameParameter_windowTooLarge`: the window the frame asks for is
        // over the cap set from the limit. Matched by name: its code is only
        // reachable through an unsafe call.
        if reason == "Frame requires too much memory for decoding" {
            InflateError::TooLarge {
                declared: None,
                max: self.max_record_bytes,
            }
        } else {
            InflateError::Corrupt { reason }
        }
    }
}

impl std::fmt::Debug for RecordInflater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordInflater")
            .field("max_record_bytes", &self.max_record_bytes)
            .field("produced", &self.produced)
            .field("frame_done", &self.frame_done)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One record as RocksDB frames it: content size and checksum in the frame.
    fn frame(record: &[u8]) -> Vec<u8> {
        let mut compressor = RecordCompressor::new(7);
        compressor.start();
        let mut frame = Vec::new();
        loop {
            let (len, pending) = compressor.next_chunk(record);
            frame.extend_from_slice(&compressor.chunk()[..len]);
            if pending == 0 {
                return frame;
            }
        }
    }

    /// A frame with no content size: streamed without a pledged size.
    fn frame_without_size(record: &[u8], level: i32) -> Vec<u8> {
        let mut encoder = zstd::stream::Encoder::new(Vec::new(), level).unwrap();
        encoder.include_contentsize(false).unwrap();
        std::io::Write::write_all(&mut encoder, record).unwrap();
        let frame = encoder.finish().unwrap();
        assert!(matches!(
            zstd_safe::get_frame_content_size(&frame),
            Ok(None)
        ));
        frame
    }

    fn inflate(fragments: &[&[u8]], max: usize) -> Result<Vec<u8>, InflateError> {
        let mut inflater = RecordInflater::new(max);
        let mut out = Vec::new();
        for fragment in fragments {
            inflater.push(fragment, &mut out)?;
        }
        inflater.finish()?;
        Ok(out)
    }

    fn patterned(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i * 7 % 251) as u8 ^ (i >> 9) as u8)
            .collect()
    }

    #[test]
    fn a_frame_inflates_in_any_fragments() {
        let record = patterned(100_000);
        let frame = frame(&record);
        assert!(matches!(
            zstd_safe::get_frame_content_size(&frame),
            Ok(Some(100_000))
        ));
        assert_eq!(inflate(&[&frame], 100_000).unwrap(), record);
        for cut in [0, 1, 3, 4, 5, 6, 9, 17, 18, 100, frame.len()] {
            let (a, b) = frame.split_at(cut.min(frame.len()));
            assert_eq!(inflate(&[a, b"", b], 100_000).unwrap(), record, "{cut}");
        }
        // One byte per fragment.
        let bytes: Vec<&[u8]> = frame.chunks(1).collect();
        assert_eq!(inflate(&bytes, 100_000).unwrap(), record);
    }

    #[test]
    fn no_bytes_at_all_is_an_empty_record() {
        assert_eq!(inflate(&[], 10).unwrap(), b"");
        assert_eq!(inflate(&[b"", b""], 10).unwrap(), b"");
    }

    #[test]
    fn a_declared_size_over_the_limit_is_refused_before_inflating() {
        let frame = frame(&patterned(10_000));
        let mut inflater = RecordInflater::new(9_999);
        let mut out = Vec::new();
        assert_eq!(
            inflater.push(&frame, &mut out),
            Err(InflateError::TooLarge {
                declared: Some(10_000),
                max: 9_999
            })
        );
        assert!(out.is_empty());
        assert_eq!(out.capacity(), 0);
        // A forged header declaring 2^60 bytes, with nothing after it.
        let mut forged = ZSTD_MAGIC.to_vec();
        forged.push(0xe0); // 8-byte content size, single segment
        forged.extend_from_slice(&(1u64 << 60).to_le_bytes());
        let mut out = Vec::new();
        assert_eq!(
            RecordInflater::new(1 << 20).push(&forged, &mut out),
            Err(InflateError::TooLarge {
                declared: Some(1 << 60),
                max: 1 << 20
            })
        );
        assert_eq!(out.capacity(), 0);
    }

    #[test]
    fn a_frame_without_a_size_stops_at_the_limit() {
        // Level 1: a 512 KiB window, within the cap, so the output limit stops it.
        let bomb = frame_without_size(&vec![0u8; 10 << 20], 1);
        assert!(bomb.len() < 2000);
        let mut inflater = RecordInflater::new(1 << 20);
        let mut out = Vec::new();
        assert_eq!(
            inflater.push(&bomb, &mut out),
            Err(InflateError::TooLarge {
                declared: None,
                max: 1 << 20
            })
        );
        assert!(out.len() <= (1 << 20) + 1, "{}", out.len());
        assert!(
            out.capacity() <= (1 << 20) + INFLATE_STEP,
            "{}",
            out.capacity()
        );
        // Within the limit it inflates, if its window fits the limit too.
        let small = frame_without_size(b"no size here", 3);
        assert_eq!(inflate(&[&small], 4 << 20).unwrap(), b"no size here");
        assert_eq!(
            inflate(&[&small], 100),
            Err(InflateError::TooLarge {
                declared: None,
                max: 100
            })
        );
        // Level 3: a 2 MiB window, over the cap for a 1 MiB limit.
        let bomb = frame_without_size(&vec![0u8; 10 << 20], 3);
        let mut out = Vec::new();
        assert_eq!(
            RecordInflater::new(1 << 20).push(&bomb, &mut out),
            Err(InflateError::TooLarge {
                declared: None,
                max: 1 << 20
            })
        );
    }

    #[test]
    fn damage_is_a_typed_error() {
        assert_eq!(inflate(&[b"garbage!"], 100), Err(InflateError::NotZstd));
        assert_eq!(
            inflate(&[b"\x28\xb5\x2f"], 100),
            Err(InflateError::Truncated)
        );
        let record = patterned(5_000);
        let mut frame = frame(&record);
        assert_eq!(
            inflate(&[&frame[..frame.len() - 1]], 10_000),
            Err(InflateError::Truncated)
        );
        let mut trailing = frame.clone();
        trailing.push(0);
        assert_eq!(
            inflate(&[&trailing], 10_000),
            Err(InflateError::TrailingData)
        );
        assert_eq!(
            inflate(&[&frame, b"x"], 10_000),
            Err(InflateError::TrailingData)
        );
        // A flipped bit in the last byte (the frame checksum).
        let last = frame.len() - 1;
        frame[last] ^= 1;
        assert!(matches!(
            inflate(&[&frame], 10_000),
            Err(InflateError::Corrupt { .. })
        ));
    }

    #[test]
    fn never_panics_on_damaged_frames() {
        let frame = frame(&patterned(3_000));
        for i in 0..frame.len() {
            for flip in [1u8, 0x80, 0xff] {
                let mut damaged = frame.clone();
                damaged[i] ^= flip;
                let _ = inflate(&[&damaged[..i / 2], &damaged[i / 2..]], 3_000);
            }
        }
    }

    #[test]
    fn reset_drops_a_partial_record() {
        let first = frame(b"first record");
        let second = frame(b"second");
        let mut inflater = RecordInflater::new(100);
        let mut out = Vec::new();
        inflater.push(&first[..10], &mut out).unwrap();
        inflater.reset();
        out.clear();
        inflater.push(&second, &mut out).unwrap();
        inflater.finish().unwrap();
        assert_eq!(out, b"second");
    }

    /// The one-pass inflation of a whole frame says what fragment-by-fragment
    /// inflation says, on good, damaged, cut, padded and oversized frames.
    #[test]
    fn a_whole_frame_inflates_as_its_fragments_do() {
        let record = patterned(20_000);
        let good = frame(&record);
        let mut cases: Vec<(Vec<u8>, usize)> = vec![
            (good.clone(), 20_000),
            (good.clone(), 19_999),
            (good[..good.len() - 1].to_vec(), 20_000),
            ([&good[..], b"x"].concat(), 20_000),
            ([&good[..], &good[..]].concat(), 40_000),
            (b"garbage!".to_vec(), 100),
            (Vec::new(), 100),
            (good[..3].to_vec(), 100),
        ];
        for i in (0..good.len()).step_by(97) {
            let mut damaged = good.clone();
            damaged[i] ^= 0x10;
            cases.push((damaged, 20_000));
        }
        for (frame, limit) in cases {
            let mut whole = Vec::new();
            let one_pass = RecordInflater::new(limit).inflate_whole(&frame, &mut whole);
            let by_fragments = inflate(
                &[&frame[..frame.len() / 3], &frame[frame.len() / 3..]],
                limit,
            );
            match (&one_pass, &by_fragments) {
                (Ok(()), Ok(record)) => assert_eq!(&whole, record),
                // zstd may name a damaged frame's failure differently in one pass.
                (Err(InflateError::Corrupt { .. }), Err(_))
                | (Err(_), Err(InflateError::Corrupt { .. })) => {}
                (a, b) => assert_eq!(
                    a.map(|()| ()),
                    b.as_ref().map(|_| ()).map_err(|e| *e),
                    "limit {limit}"
                ),
            }
        }
    }
}
