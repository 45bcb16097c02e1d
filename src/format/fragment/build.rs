//! Building fragment headers: one function per header size, each laying out the
//! fields every header starts with (masked checksum, payload length, type) the same
//! way, then its own.

use super::{LEGACY_HEADER_SIZE, RECYCLABLE_HEADER_SIZE, WAL_SYNC_HEADER_SIZE};
use crate::format::{fragment_crc, fragment_crc_recyclable, mask, BLOCK_SIZE};

/// A header of `N` bytes with its first fields set: the masked `crc`, the payload's
/// length and the type byte; the rest zero.
#[inline(always)]
fn header<const N: usize>(crc: u32, payload: &[u8], type_byte: u8) -> [u8; N] {
    debug_assert!(payload.len() <= BLOCK_SIZE - N);
    let mut header = [0; N];
    header[..4].copy_from_slice(&mask(crc).to_le_bytes());
    header[4..6].copy_from_slice(&(payload.len() as u16).to_le_bytes());
    header[6] = type_byte;
    header
}

/// Builds a legacy (7-byte) header for a fragment of type `type_byte`: LevelDB's
/// header, and RocksDB's for its legacy types.
///
/// ```
/// use walcodec::fragment::{legacy_header, Part};
/// assert_eq!(legacy_header(Part::Full.type_byte(false), b"foo"), *b"\xdd\x5f\xb3\x7a\x03\x00\x01");
/// ```
#[inline]
pub fn legacy_header(type_byte: u8, payload: &[u8]) -> [u8; LEGACY_HEADER_SIZE] {
    header(fragment_crc(type_byte, payload), payload, type_byte)
}

/// Builds a recyclable (11-byte) header for a fragment of type `type_byte` in log
/// `log_number` (its low 32 bits are stored and checksummed).
#[inline]
pub fn recyclable_header(
    type_byte: u8,
    log_number: u64,
    payload: &[u8],
) -> [u8; RECYCLABLE_HEADER_SIZE] {
    let number = (log_number as u32).to_le_bytes();
    let crc = fragment_crc_recyclable(type_byte, number, payload);
    let mut header = header(crc, payload, type_byte);
    header[7..11].copy_from_slice(&number);
    header
}

/// Builds Pebble's WAL-sync (19-byte) header for a fragment of type `type_byte`
/// (9–12) in log `log_number` (its low 32 bits are stored), promising the log
/// synced up to `synced_offset`. The checksum covers type, log number, synced
/// offset and payload.
#[inline]
pub fn wal_sync_header(
    type_byte: u8,
    log_number: u64,
    synced_offset: u64,
    payload: &[u8],
) -> [u8; WAL_SYNC_HEADER_SIZE] {
    let mut header: [u8; WAL_SYNC_HEADER_SIZE] = header(0, payload, type_byte);
    header[7..11].copy_from_slice(&(log_number as u32).to_le_bytes());
    header[11..19].copy_from_slice(&synced_offset.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&header[6..]), payload);
    header[..4].copy_from_slice(&mask(crc).to_le_bytes());
    header
}
