//! The LevelDB log format: block and header geometry, fragment types and the masked
//! crc32c that protects every fragment.
//!
//! A log is a sequence of 32 KiB blocks. Each logical record is cut into one or more
//! *fragments* (LevelDB calls them physical records), each with a 7-byte header:
//!
//! | bytes | field                                              |
//! |-------|----------------------------------------------------|
//! | 0..4  | masked crc32c of the type byte and the payload, LE |
//! | 4..6  | payload length, u16 LE                              |
//! | 6     | type ([`FragmentType`](fragment::FragmentType))     |
//!
//! A fragment never starts in the last 6 bytes of a block: those bytes are a zero
//! trailer and the next fragment starts at the next block.

/// The type byte under the name the format module was first specified with:
/// [`FragmentType`](fragment::FragmentType) (`RecordType::Full`, `RecordType::First`, ...).
pub use fragment::FragmentType as RecordType;

#[cfg(feature = "zstd")]
pub mod compression;
pub mod detect;
pub mod fragment;
pub mod metadata;
pub mod physical;
pub mod write_batch;
pub(crate) mod zeros;

/// Size of one block of the log, in bytes.
pub const BLOCK_SIZE: usize = 32 * 1024;

/// Size of a fragment header, in bytes.
pub const HEADER_SIZE: usize = 7;

/// The largest payload a single fragment can carry (a fragment that fills a block).
pub const MAX_FRAGMENT_PAYLOAD: usize = BLOCK_SIZE - HEADER_SIZE;

/// The constant LevelDB adds to a rotated crc to mask it.
const MASK_DELTA: u32 = 0xa282_ead8;

/// Masks a crc the way LevelDB does before storing it.
///
/// Computing the crc of a string that itself contains embedded crcs is problematic,
/// so stored crcs are rotated and offset.
#[inline]
pub const fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Inverts [`mask`].
#[inline]
pub const fn unmask(masked: u32) -> u32 {
    let rotated = masked.wrapping_sub(MASK_DELTA);
    rotated.rotate_left(15)
}

/// crc32c of one byte, evaluated at compile time to build [`TYPE_CRC_SEEDS`].
const fn crc32c_of_byte(byte: u8) -> u32 {
    const POLY_REFLECTED: u32 = 0x82f6_3b78;
    let mut crc = !0u32 ^ byte as u32;
    let mut bit = 0;
    while bit < 8 {
        crc = if crc & 1 == 1 {
            (crc >> 1) ^ POLY_REFLECTED
        } else {
            crc >> 1
        };
        bit += 1;
    }
    !crc
}

/// crc32c of each possible type byte: every fragment checksum starts with its type
/// byte, so starting from these saves one crc call per fragment.
const TYPE_CRC_SEEDS: [u32; 256] = {
    let mut seeds = [0u32; 256];
    let mut byte = 0;
    while byte < 256 {
        seeds[byte] = crc32c_of_byte(byte as u8);
        byte += 1;
    }
    seeds
};

/// The unmasked crc32c of a fragment: its type byte followed by its payload.
#[cfg(not(feature = "crc-fast"))]
#[inline]
pub fn fragment_crc(type_byte: u8, payload: &[u8]) -> u32 {
    crc32c::crc32c_append(TYPE_CRC_SEEDS[type_byte as usize], payload)
}

/// The unmasked crc32c of a fragment: its type byte followed by its payload.
///
/// With the `crc-fast` feature the payload goes through the `crc-fast` crate, which
/// folds with carry-less multiplication as well as the crc32 instruction.
#[cfg(feature = "crc-fast")]
#[inline]
pub fn fragment_crc(type_byte: u8, payload: &[u8]) -> u32 {
    // A digest's state is the crc register before the final inversion, so continuing
    // from a finished crc means starting from its complement.
    let mut digest = crc_fast::Digest::new_with_init_state(
        crc_fast::CrcAlgorithm::Crc32Iscsi,
        u64::from(!TYPE_CRC_SEEDS[type_byte as usize]),
    );
    digest.update(payload);
    digest.finalize() as u32
}

/// The unmasked crc32c of a recyclable (RocksDB) fragment: its type byte, the low 32
/// bits of its log number (LE, as stored in the header), then its payload.
#[cfg(not(feature = "crc-fast"))]
#[inline]
pub fn fragment_crc_recyclable(type_byte: u8, log_number: [u8; 4], payload: &[u8]) -> u32 {
    let prefix = crc32c::crc32c_append(TYPE_CRC_SEEDS[type_byte as usize], &log_number);
    crc32c::crc32c_append(prefix, payload)
}

/// The unmasked crc32c of a recyclable (RocksDB) fragment: its type byte, the low 32
/// bits of its log number (LE, as stored in the header), then its payload.
#[cfg(feature = "crc-fast")]
#[inline]
pub fn fragment_crc_recyclable(type_byte: u8, log_number: [u8; 4], payload: &[u8]) -> u32 {
    let prefix = crc32c::crc32c_append(TYPE_CRC_SEEDS[type_byte as usize], &log_number);
    let mut digest = crc_fast::Digest::new_with_init_state(
        crc_fast::CrcAlgorithm::Crc32Iscsi,
        u64::from(!prefix),
    );
    digest.update(payload);
    digest.finalize() as u32
}

/// The unmasked crc32c of a fragment as it lies in a log: `type_and_payload` is the
/// header's last byte (the type) and the payload after it.
///
/// The same value as [`fragment_crc`], from one contiguous slice: a reader has the
/// type byte right before the payload, and one call over both is cheaper than
/// continuing from a seed (with `crc-fast`, a one-shot checksum instead of a digest).
///
/// ```
/// use walcodec::format::{fragment_crc, fragment_crc_in_place};
/// assert_eq!(fragment_crc_in_place(b"\x01foo"), fragment_crc(1, b"foo"));
/// ```
#[cfg(not(feature = "crc-fast"))]
#[inline]
pub fn fragment_crc_in_place(type_and_payload: &[u8]) -> u32 {
    crc32c::crc32c(type_and_payload)
}

/// The unmasked crc32c of a fragment as it lies in a log: `type_and_payload` is the
/// header's last byte (the type) and the payload after it.
///
/// The same value as [`fragment_crc`], from one contiguous slice: a reader has the
/// type byte right before the payload, and one call over both is cheaper than
/// continuing from a seed (with `crc-fast`, a one-shot checksum instead of a digest).
#[cfg(feature = "crc-fast")]
#[inline]
pub fn fragment_crc_in_place(type_and_payload: &[u8]) -> u32 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, type_and_payload) as u32
}

/// The masked checksum stored in the header of a fragment.
#[inline]
pub fn fragment_checksum(type_byte: u8, payload: &[u8]) -> u32 {
    mask(fragment_crc(type_byte, payload))
}

/// Where a reader must start to find the record at or after byte `offset`: the start
/// of the block holding `offset`, or of the next block when `offset` falls in a
/// block's last 6 bytes (where no fragment can start).
///
/// ```
/// use walcodec::{block_start, BLOCK_SIZE};
/// assert_eq!(block_start(0), 0);
/// assert_eq!(block_start(20_015), 0);
/// assert_eq!(block_start(BLOCK_SIZE as u64 + 1), BLOCK_SIZE as u64);
/// assert_eq!(block_start(3 * BLOCK_SIZE as u64 - 3), 3 * BLOCK_SIZE as u64);
/// ```
pub const fn block_start(offset: u64) -> u64 {
    let block = BLOCK_SIZE as u64;
    let in_block = offset % block;
    if block - in_block < HEADER_SIZE as u64 {
        // Saturating: an offset from a file or a flag may be anything.
        (offset - in_block).saturating_add(block)
    } else {
        offset - in_block
    }
}

/// Where a record sits in a log: `start` is the offset of its first fragment's header
/// (after any trailer padding that preceded it), `end` the offset just past its last
/// byte. Offsets are logical file offsets, usable as checkpoints.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Position {
    /// Offset of the record's first header.
    pub start: u64,
    /// Offset just past the record's last payload byte.
    pub end: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn crc32c_check_value() {
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
    }

    #[test]
    fn seeds_match_the_crc_crate() {
        for byte in 0..=255u8 {
            assert_eq!(TYPE_CRC_SEEDS[byte as usize], crc32c::crc32c(&[byte]));
            assert_eq!(
                fragment_crc(byte, b"abc"),
                crc32c::crc32c(&[byte, b'a', b'b', b'c'])
            );
        }
    }

    #[test]
    fn recyclable_crc_covers_type_log_number_and_payload() {
        let number = 0x0102_0304u32.to_le_bytes();
        assert_eq!(
            fragment_crc_recyclable(5, number, b"abc"),
            crc32c::crc32c(&[5, 4, 3, 2, 1, b'a', b'b', b'c'])
        );
        assert_eq!(
            fragment_crc_recyclable(7, [0; 4], b""),
            crc32c::crc32c(&[7, 0, 0, 0, 0])
        );
    }

    #[test]
    fn mask_round_trips_and_changes_value() {
        for crc in [0u32, 1, 0xe306_9283, u32::MAX, 0x8000_0000, 0x1234_5678] {
            assert_ne!(mask(crc), crc);
            assert_ne!(mask(mask(crc)), mask(crc));
            assert_eq!(unmask(mask(crc)), crc);
            assert_eq!(unmask(unmask(mask(mask(crc)))), crc);
        }
    }

    #[test]
    fn golden_headers() {
        use fragment::{legacy_header, FragmentType};
        let cases: [(&[u8], FragmentType, &str); 5] = [
            (b"foo", FragmentType::Full, "dd5fb37a030001"),
            (b"", FragmentType::Full, "052b2843000001"),
            (b"bar", FragmentType::Full, "baeaec44030001"),
            (b"", FragmentType::First, "6451d0e9000002"),
            (b"y", FragmentType::Last, "5b5822d6010004"),
        ];
        for (payload, fragment_type, expected) in cases {
            assert_eq!(
                hex(&legacy_header(fragment_type.as_u8(), payload)),
                expected
            );
        }
    }

    #[test]
    fn block_start_skips_trailer_zone() {
        let b = BLOCK_SIZE as u64;
        assert_eq!(block_start(b - 7), 0);
        assert_eq!(block_start(b - 6), b);
        assert_eq!(block_start(b - 1), b);
        assert_eq!(block_start(b), b);
        // An offset from a file or a flag may be anything: no overflow.
        assert_eq!(block_start(u64::MAX), u64::MAX);
        assert_eq!(block_start(u64::MAX - 7), u64::MAX - 7 - (u64::MAX - 7) % b);
    }
}
