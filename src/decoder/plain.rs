//! The decoder's plain path: the common case of every log, an intact FULL fragment
//! read with nothing skipped or open, taken without the general loop.
//!
//! Which fragments it takes depends on the log: a legacy FULL (type 1) in a log that
//! is not recycled, a recyclable FULL (type 5) carrying this log's number in a
//! recycled one, nothing in a compressed one (those go to their own path, which
//! inflates). That choice is data, not code: a [`FullShape`] is a mask and the value
//! the header must show under it, kept up to date by [`LogState`](super::dialect)
//! whenever what it knows of the log changes. One body then serves every dialect,
//! with no branch on the dialect and no second attempt: a recycled log's records
//! cost what a LevelDB log's do, plus the 4 more header bytes each one checks.
//!
//! Anything the plain path declines (another type, a damaged fragment, a fragment
//! cut by the buffer, a decoder skipping or collecting) goes to the general loop,
//! which is where every rule is decided; the plain path only ever agrees with it.

use bytes::{Buf, Bytes, BytesMut};

use super::{Assembly, Flow, LogDecoder};
use crate::decoder::error::CodecError;
use crate::format::fragment::{FragmentType, RECYCLABLE_HEADER_SIZE, WAL_SYNC_HEADER_SIZE};
use crate::format::{fragment_crc_in_place, unmask, BLOCK_SIZE, HEADER_SIZE};

/// Where a header's checksum ends: the plain path reads the 8 bytes after it (length,
/// type and, in a recyclable header, the log number) as one word.
const WORD_START: usize = 4;
/// Bytes the plain path needs in the buffer to look at a header: the checksum and
/// the word, whichever header the log has.
const PLAIN_HEADER_VIEW: usize = WORD_START + 8;

/// The FULL fragment a log's plain path takes, as a mask over the header's bytes 4
/// to 11 (read as a little-endian `u64`) and the value they must show under it.
///
/// Bytes 4 and 5 are the length (never masked); byte 6 is the type; bytes 7 to 10
/// are a recyclable header's log number (masked only for recyclable shapes, so a
/// legacy header's payload bytes there do not matter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FullShape {
    mask: u64,
    expected: u64,
    header_len: usize,
}

impl FullShape {
    /// A legacy FULL fragment: type 1 and a 7-byte header.
    pub(super) const LEGACY: FullShape = FullShape {
        mask: 0xff << 16,
        expected: (FragmentType::Full.as_u8() as u64) << 16,
        header_len: HEADER_SIZE,
    };

    /// No fragment at all: a mask of nothing can never show a set bit.
    pub(super) const NONE: FullShape = FullShape {
        mask: 0,
        expected: 1,
        header_len: HEADER_SIZE,
    };

    /// A recyclable FULL fragment of the log whose number's low 32 bits (all a
    /// header stores) are `log_number`: type 5, the number, an 11-byte header.
    pub(super) const fn recyclable(log_number: u32) -> FullShape {
        FullShape {
            mask: 0xff_ffff_ffff << 16,
            expected: ((FragmentType::RecyclableFull.as_u8() as u64) | (log_number as u64) << 8)
                << 16,
            header_len: RECYCLABLE_HEADER_SIZE,
        }
    }

    /// A Pebble WAL-sync FULL fragment of the log whose number's low 32 bits are
    /// `log_number`: type 9, the number, a 19-byte header (the synced offset after
    /// the number is the payload's business here: it is checked by the checksum).
    pub(super) const fn wal_sync(log_number: u32) -> FullShape {
        FullShape {
            mask: 0xff_ffff_ffff << 16,
            expected: ((FragmentType::WalSyncFull.as_u8() as u64) | (log_number as u64) << 8) << 16,
            header_len: WAL_SYNC_HEADER_SIZE,
        }
    }

    /// The payload's length, if `view` (the first [`PLAIN_HEADER_VIEW`] bytes of a
    /// fragment) begins with a header of this shape.
    #[inline(always)]
    fn payload_len(self, view: &[u8; PLAIN_HEADER_VIEW]) -> Option<usize> {
        let word: [u8; 8] = view[WORD_START..].try_into().expect("12 - 4 bytes");
        let word = u64::from_le_bytes(word);
        (word & self.mask == self.expected).then_some((word & 0xffff) as usize)
    }
}

impl LogDecoder {
    /// The common case, kept small so that it is cheap: an intact FULL fragment of
    /// the log's shape in a log read from the start with nothing skipped or open.
    /// Anything else (or a damaged fragment) is left to [`LogDecoder::decode_slow`].
    #[inline(always)]
    pub(super) fn decode_plain_full(&mut self, src: &mut BytesMut) -> Option<Bytes> {
        let shape = self.state.plain_shape();
        let fragment_len = self.intact_full(src, shape, self.max_record_bytes)?;
        let fragment_offset = self.offset;
        // Advancing the frozen view is a pointer bump; advancing the BytesMut is
        // not inlined.
        let mut record = src.split_to(fragment_len).freeze();
        record.advance(shape.header_len);
        self.offset += fragment_len as u64;
        self.stats.fragments += 1;
        Some(self.finish_record(fragment_offset, record))
    }

    /// Everything but the plain path: a compressed WAL's common case (an intact
    /// FULL whose frame inflates), then the general loop. Out of line: a call in
    /// `decode_plain_full` would cost the common case its inlining.
    #[inline(never)]
    pub(super) fn decode_slow(
        &mut self,
        src: &mut BytesMut,
        eof: bool,
    ) -> Result<Option<Bytes>, CodecError> {
        if self.state.is_compressed() {
            if let Some(record) = self.plain_compressed_full(src) {
                return Ok(Some(record));
            }
        }
        self.decode_general(src, eof)
    }

    /// The general loop, marked cold so that the compressed path in `decode_slow`
    /// is what the compiler optimizes for.
    #[cold]
    #[inline(never)]
    fn decode_general(
        &mut self,
        src: &mut BytesMut,
        eof: bool,
    ) -> Result<Option<Bytes>, CodecError> {
        self.decode_inner(src, eof)
    }

    /// A compressed log's common case: an intact FULL fragment of the log's shape
    /// with nothing skipped or open, whose frame inflates within the limit.
    /// Anything else, an empty record or a frame that fails included, is left to the
    /// general loop, which says why.
    #[inline(always)]
    fn plain_compressed_full(&mut self, src: &mut BytesMut) -> Option<Bytes> {
        let compression = self.state.compression?;
        let limit = self.raw_record_limit();
        let shape = self.state.full_shape();
        let fragment_len = self.intact_full(src, shape, limit)?;
        if fragment_len == shape.header_len {
            return None;
        }
        let record = self
            .state
            .inflater
            .inflate(
                compression,
                &src[shape.header_len..fragment_len],
                self.max_record_bytes,
            )
            .ok()?;
        let fragment_offset = self.offset;
        self.consume(src, fragment_len);
        self.stats.fragments += 1;
        Some(self.finish_record(fragment_offset, Bytes::from(record)))
    }

    /// The length of the intact FULL fragment of `shape` at the start of `src`, of
    /// at most `max_payload` bytes, when the decoder reads with nothing skipped or
    /// open. `None` for anything else, which the general loop decides.
    #[inline(always)]
    fn intact_full(&self, src: &BytesMut, shape: FullShape, max_payload: usize) -> Option<usize> {
        if self.flow != Flow::Reading
            || self.skip.is_some()
            || !matches!(self.assembly, Assembly::Idle)
            || self.zero_suspect.is_some()
            || self.resyncing
        {
            return None;
        }
        let block_left = BLOCK_SIZE - (self.offset % BLOCK_SIZE as u64) as usize;
        let view: &[u8; PLAIN_HEADER_VIEW] = src.get(..PLAIN_HEADER_VIEW)?.try_into().ok()?;
        let length = shape.payload_len(view)?;
        let fragment_len = shape.header_len + length;
        if fragment_len > block_left
            || fragment_len > src.len()
            || length > max_payload
            || self.offset < self.start_offset
            || self.offset >= self.end_offset
        {
            return None;
        }
        let stored_checksum = u32::from_le_bytes([view[0], view[1], view[2], view[3]]);
        // The checksum covers the type byte and what follows it: the payload, and
        // in a recyclable header the log number before it.
        if self.checksums
            && fragment_crc_in_place(&src[HEADER_SIZE - 1..fragment_len]) != unmask(stored_checksum)
        {
            return None;
        }
        Some(fragment_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::fragment::legacy_header;

    fn view(bytes: &[u8]) -> [u8; PLAIN_HEADER_VIEW] {
        let mut view = [0xa5; PLAIN_HEADER_VIEW];
        view[..bytes.len()].copy_from_slice(bytes);
        view
    }

    #[test]
    fn the_legacy_shape_takes_full_fragments_of_any_payload() {
        let header = legacy_header(FragmentType::Full.as_u8(), &[7; 300]);
        assert_eq!(FullShape::LEGACY.payload_len(&view(&header)), Some(300));
        for other in [
            FragmentType::First,
            FragmentType::Middle,
            FragmentType::Last,
            FragmentType::Zero,
        ] {
            let header = legacy_header(other.as_u8(), &[7; 300]);
            assert_eq!(FullShape::LEGACY.payload_len(&view(&header)), None);
        }
        // A recyclable FULL is not a legacy one.
        let mut recyclable = header;
        recyclable[6] = FragmentType::RecyclableFull.as_u8();
        assert_eq!(FullShape::LEGACY.payload_len(&view(&recyclable)), None);
    }

    #[test]
    fn the_recyclable_shape_takes_its_own_log_number_only() {
        let shape = FullShape::recyclable(0x0102_0304);
        let mut header = [0u8; RECYCLABLE_HEADER_SIZE];
        header[4..6].copy_from_slice(&65_000u16.to_le_bytes());
        header[6] = FragmentType::RecyclableFull.as_u8();
        header[7..11].copy_from_slice(&0x0102_0304u32.to_le_bytes());
        assert_eq!(shape.payload_len(&view(&header)), Some(65_000));
        for byte in 6..11 {
            let mut other = header;
            other[byte] ^= 0x10;
            assert_eq!(shape.payload_len(&view(&other)), None, "byte {byte}");
        }
        // The byte after the header is payload, whatever it holds.
        let mut next = view(&header);
        next[11] = 0;
        assert_eq!(shape.payload_len(&next), Some(65_000));
        // A legacy FULL is not a recyclable one.
        let legacy = legacy_header(FragmentType::Full.as_u8(), &[0; 4]);
        assert_eq!(shape.payload_len(&view(&legacy)), None);
    }

    #[test]
    fn the_empty_shape_takes_nothing() {
        for type_byte in 0..=u8::MAX {
            for fill in [0x00, 0xff] {
                let mut bytes = [fill; PLAIN_HEADER_VIEW];
                bytes[6] = type_byte;
                assert_eq!(FullShape::NONE.payload_len(&bytes), None);
            }
        }
    }
}
