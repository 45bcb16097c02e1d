//! Telling the three dialects apart by a log's first bytes: [`detect`].
//!
//! The type byte alone cannot (RocksDB and Pebble give 9–11 different meanings), so
//! the first fragment is tried with each header size a dialect gives its type, and
//! the size whose checksum holds decides:
//!
//! | first bytes                                        | verdict                      |
//! |----------------------------------------------------|------------------------------|
//! | crc 0, length 0, type 5, log number L (11 bytes)   | Pebble, log L − 1, closed empty (the EOF trailer; any bytes after it are the file's earlier use) |
//! | type 9–12, checksum valid over a 19-byte header    | Pebble (WAL-sync), its log number |
//! | type 5–8, checksum valid over an 11-byte header    | RocksDB, its log number; Pebble if an EOF trailer follows the records |
//! | type 9, 10 or 130 valid over 7 bytes; 11 or 131 over 11 | RocksDB (metadata records) |
//! | type 1–4 valid over 7 bytes                        | LevelDB (all three read it alike) |
//! | nothing but zeros, or nothing                      | LevelDB (every dialect reads no record) |
//! | anything else                                      | [`Detected::Undecided`]      |
//!
//! A recyclable log (types 5–8) without an EOF trailer reads the same records in
//! RocksDB's dialect and in Pebble's, and only its batches (Pebble's range-key
//! kinds) tell them apart: it is taken as RocksDB's, as before Pebble was known.

use crate::format::fragment::{
    header_size_of, Dialect, FragmentRules, FragmentType, Parsed, LEGACY_HEADER_SIZE,
    RECYCLABLE_HEADER_SIZE,
};
use crate::format::{fragment_crc_in_place, unmask, BLOCK_SIZE};

/// What [`detect`] makes of a log's first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Detected {
    /// The log is in `dialect`.
    Dialect {
        /// The dialect to read it in.
        dialect: Dialect,
        /// The log number (low 32 bits) its first recyclable or WAL-sync fragment
        /// carries, or that its EOF trailer gives (the trailer holds it plus one).
        log_number: Option<u32>,
        /// RocksDB: the log starts with a compression-type record (type 9).
        compressed: bool,
        /// Pebble: the log is only an EOF trailer (it was closed empty); the bytes
        /// after it, if any, are the file's earlier use.
        closed_empty: bool,
    },
    /// The first fragment is valid under no dialect's header: damaged, or not a log
    /// of this format. No guess is made; the reader must be told the dialect.
    Undecided,
}

impl Detected {
    /// The dialect, when decided.
    pub const fn dialect(&self) -> Option<Dialect> {
        match *self {
            Detected::Dialect { dialect, .. } => Some(dialect),
            Detected::Undecided => None,
        }
    }

    /// The log number found, when one was.
    pub const fn log_number(&self) -> Option<u32> {
        match *self {
            Detected::Dialect { log_number, .. } => log_number,
            Detected::Undecided => None,
        }
    }

    fn of(dialect: Dialect, log_number: Option<u32>) -> Detected {
        Detected::Dialect {
            dialect,
            log_number,
            compressed: false,
            closed_empty: false,
        }
    }
}

/// Whether `bytes` begin with Pebble's EOF trailer: crc 0, length 0, type 5. Returns
/// the log number it carries (the closed log's plus one).
pub fn eof_trailer(bytes: &[u8]) -> Option<u32> {
    let header = bytes.get(..RECYCLABLE_HEADER_SIZE)?;
    if header[..7] != [0, 0, 0, 0, 0, 0, FragmentType::RecyclableFull.as_u8()] {
        return None;
    }
    Some(u32::from_le_bytes([
        header[7], header[8], header[9], header[10],
    ]))
}

/// The header size (7, 11 or 19) under which the fragment at the start of `bytes`
/// has a valid checksum, trying every size some dialect gives its type byte.
fn valid_header_size(bytes: &[u8]) -> Option<usize> {
    let type_byte = *bytes.get(LEGACY_HEADER_SIZE - 1)?;
    let length = usize::from(u16::from_le_bytes([*bytes.get(4)?, *bytes.get(5)?]));
    let stored = unmask(u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?));
    let mut sizes = [
        LEGACY_HEADER_SIZE,
        header_size_of(type_byte, Dialect::RocksDb),
        header_size_of(type_byte, Dialect::Pebble),
    ];
    sizes.sort_unstable();
    sizes.into_iter().find(|&size| {
        size + length <= BLOCK_SIZE
            && bytes
                .get(LEGACY_HEADER_SIZE - 1..size + length)
                .is_some_and(|covered| fragment_crc_in_place(covered) == stored)
    })
}

/// Tells which dialect a log is in from its first bytes (its first block, or as
/// much as there is), as the [module documentation](self) says.
///
/// ```
/// use walcodec::detect::{detect, Detected};
/// use walcodec::{Dialect, LogEncoder, LogFormat};
///
/// let mut log = bytes::BytesMut::new();
/// LogEncoder::builder().format(LogFormat::pebble(7)).build().encode_record(b"x", &mut log);
/// assert_eq!(detect(&log).dialect(), Some(Dialect::Pebble));
/// assert_eq!(detect(&log).log_number(), Some(7));
///
/// assert_eq!(detect(b"\x01\x02\x03\x04\x05\x06\x07 not a log"), Detected::Undecided);
/// ```
pub fn detect(log_start: &[u8]) -> Detected {
    if log_start.iter().all(|&b| b == 0) {
        return Detected::of(Dialect::LevelDb, None);
    }
    if let Some(next) = eof_trailer(log_start) {
        return Detected::Dialect {
            dialect: Dialect::Pebble,
            log_number: Some(next.wrapping_sub(1)),
            compressed: false,
            closed_empty: true,
        };
    }
    let Some(size) = valid_header_size(log_start) else {
        return Detected::Undecided;
    };
    let type_byte = log_start[LEGACY_HEADER_SIZE - 1];
    let number = || {
        Some(u32::from_le_bytes([
            log_start[7],
            log_start[8],
            log_start[9],
            log_start[10],
        ]))
    };
    match (type_byte, size) {
        (9..=12, 19) => Detected::of(Dialect::Pebble, number()),
        (5..=8, 11) => {
            let log_number = number();
            let dialect = if trailer_after_records(log_start, log_number.unwrap_or(0)) {
                Dialect::Pebble
            } else {
                Dialect::RocksDb
            };
            Detected::of(dialect, log_number)
        }
        (9, 7) => {
            // RocksDB's compression-type record; the fragment after it says whether
            // the WAL is recyclable too.
            let at = size + usize::from(u16::from_le_bytes([log_start[4], log_start[5]]));
            let rest = &log_start[at..];
            let log_number = match (rest.get(6), valid_header_size(rest)) {
                (Some(5..=8), Some(11)) => {
                    Some(u32::from_le_bytes([rest[7], rest[8], rest[9], rest[10]]))
                }
                _ => None,
            };
            Detected::Dialect {
                dialect: Dialect::RocksDb,
                log_number,
                compressed: true,
                closed_empty: false,
            }
        }
        (10 | 130, 7) | (11 | 131, 11) => Detected::of(Dialect::RocksDb, None),
        (1..=4, 7) => Detected::of(Dialect::LevelDb, None),
        _ => Detected::Undecided,
    }
}

/// Whether, read in Pebble's dialect as log `log_number`, the intact fragments from
/// the start of `log_start` lead to an EOF trailer.
fn trailer_after_records(log_start: &[u8], log_number: u32) -> bool {
    let rules = FragmentRules::new(Dialect::Pebble).log_number(u64::from(log_number));
    let mut at = 0;
    while at < log_start.len() {
        let block_left = BLOCK_SIZE - at % BLOCK_SIZE;
        match rules.parse(&log_start[at..], block_left) {
            Parsed::Fragment(fragment) => at += fragment.len(),
            Parsed::Trailer { len } => at += len,
            Parsed::Defect(defect) => return rules.is_eof_trailer(&defect.header()),
            Parsed::ZeroFill { .. } | Parsed::Incomplete { .. } => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::fragment::{legacy_header, recyclable_header};

    #[test]
    fn each_header_size_is_told_by_its_checksum() {
        let mut legacy = legacy_header(1, b"abc").to_vec();
        legacy.extend_from_slice(b"abc");
        assert_eq!(detect(&legacy).dialect(), Some(Dialect::LevelDb));
        let mut recyclable = recyclable_header(5, 3, b"abc").to_vec();
        recyclable.extend_from_slice(b"abc");
        assert_eq!(detect(&recyclable), Detected::of(Dialect::RocksDb, Some(3)));
        let mut trailer = recyclable.clone();
        trailer.extend_from_slice(&[0, 0, 0, 0, 0, 0, 5, 4, 0, 0, 0]);
        assert_eq!(detect(&trailer), Detected::of(Dialect::Pebble, Some(3)));
        let mut damaged = legacy.clone();
        damaged[8] ^= 1;
        assert_eq!(detect(&damaged), Detected::Undecided);
        assert_eq!(detect(&[]).dialect(), Some(Dialect::LevelDb));
        assert_eq!(detect(&[0; 100]).dialect(), Some(Dialect::LevelDb));
    }

    #[test]
    fn a_trailer_alone_is_a_pebble_log_closed_empty() {
        let trailer = [0, 0, 0, 0, 0, 0, 5, 3, 0, 0, 0];
        assert_eq!(
            detect(&trailer),
            Detected::Dialect {
                dialect: Dialect::Pebble,
                log_number: Some(2),
                compressed: false,
                closed_empty: true
            }
        );
    }

    #[test]
    fn never_panics_on_short_input() {
        let mut bytes = recyclable_header(9, 3, b"abcdefgh").to_vec();
        bytes.extend_from_slice(b"abcdefgh");
        for cut in 0..bytes.len() {
            let _ = detect(&bytes[..cut]);
        }
    }
}
