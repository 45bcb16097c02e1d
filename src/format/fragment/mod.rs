//! The one fragment layer: what lies at a position of a log, by every header rule of
//! the LevelDB format and of RocksDB's dialect.
//!
//! Record assembly, recovery policy and decompression sit above this module; it only
//! says what the bytes at the current offset are. [`FragmentRules::parse`] is pure and
//! allocation-free: given the bytes available at the current offset and how many are
//! left in the block, it returns a [`Parsed`]:
//!
//! | outcome                         | consumes                  | a reader                 |
//! |---------------------------------|---------------------------|--------------------------|
//! | [`Parsed::Fragment`]            | `fragment.len()`          | uses it                  |
//! | [`Parsed::Trailer`]             | the rest of the block     | skips it silently        |
//! | [`Parsed::ZeroFill`]            | the rest of the block     | skips it silently        |
//! | [`Parsed::Incomplete`]          | nothing yet               | waits; at EOF a torn tail |
//! | [`Parsed::Defect`]              | [`Defect::len`]           | reports or ends the log  |
//!
//! The checks run in the order RocksDB's `ReadPhysicalRecord` runs them (LevelDB's
//! is the same without the recyclable steps), so every reader built on this layer
//! draws the same line between data, padding and damage:
//!
//! 1. fewer than 7 bytes left in the block: a trailer;
//! 2. a recyclable type (RocksDB): 11 bytes needed; fewer left in the block is a
//!    trailer too (RocksDB's reader reads on into the next block);
//! 3. type 0, length 0: zero fill;
//! 4. header + length past the block: a bad length (once the block is complete);
//! 5. recyclable with another log number: an old fragment, before the checksum;
//! 6. checksum mismatch (when verified);
//! 7. a fragment.
//!
//! A reader keeps one [`FragmentRules`] per log and, at each position, hands
//! `parse` what it has buffered:
//!
//! - `Fragment`: the payload is `bytes[fragment.payload_range()]`; consume
//!   `fragment.len()`; [`Fragment::part`] drives record assembly, a metadata
//!   [`FragmentType`] goes to [`crate::format::metadata`], no type is "unknown record type"
//!   unless [`Fragment::is_ignorable`];
//! - `Trailer`, `ZeroFill`: skip `len` bytes (a RocksDB recyclable writer leaves
//!   7–10 zero bytes, which read as `ZeroFill` with `len` < 11; RocksDB's reader
//!   reports them as "error in middle of record" when a record is open);
//! - `Incomplete`: read more (reserve `needed`); at EOF a torn tail, with the header
//!   when it was whole (RocksDB: "truncated record body", else "truncated header");
//! - `Defect`: drop [`Defect::len`] bytes and apply the recovery policy.
//!
//! ```
//! use walcodec::fragment::{FragmentRules, FragmentType, Parsed};
//! use walcodec::{Dialect, LogEncoder, BLOCK_SIZE};
//!
//! let mut log = bytes::BytesMut::new();
//! LogEncoder::builder().recyclable(12).build().encode_record(b"hello", &mut log);
//!
//! let rules = FragmentRules::new(Dialect::RocksDb).log_number(12);
//! match rules.parse(&log, BLOCK_SIZE) {
//!     Parsed::Fragment(fragment) => {
//!         assert_eq!(fragment.fragment_type(), Some(FragmentType::RecyclableFull));
//!         assert_eq!(fragment.header_len(), 11);
//!         assert_eq!(&log[fragment.payload_range()], b"hello");
//!     }
//!     other => panic!("{other:?}"),
//! }
//! ```

// Why one file: every dialect's header rules are here together, so that each rule is
// written once and the pure `FragmentRules::parse` reads top to bottom; about 900 lines of
// code, the rest unit tests.

use std::ops::Range;

pub use build::{legacy_header, recyclable_header, wal_sync_header};

use crate::format::{fragment_crc_in_place, unmask, BLOCK_SIZE};

/// Size of a legacy fragment header (LevelDB's, and RocksDB's types 0–4, 9, 10, 130).
pub const LEGACY_HEADER_SIZE: usize = 7;

/// Size of a recyclable fragment header (RocksDB's types 5–8, 11, 131): the legacy
/// header followed by the low 32 bits of the log number, LE.
pub const RECYCLABLE_HEADER_SIZE: usize = 11;

/// Size of a Pebble WAL-sync fragment header (types 9–12): the recyclable header
/// followed by the synced offset, a u64 LE: the writer's promise that the log was
/// durable up to that offset when the fragment was written.
pub const WAL_SYNC_HEADER_SIZE: usize = 19;

/// Which engine's log format a log is read or written in.
///
/// The type byte alone cannot tell the dialects apart (RocksDB and Pebble give types
/// 9–11 different meanings), so readers are told, or ask [`detect`](crate::format::detect::detect).
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Dialect {
    /// LevelDB's format: types 0–4, 7-byte headers; any other type is unknown.
    #[default]
    LevelDb,
    /// RocksDB's WAL: LevelDB's types plus recyclable fragments (types 5–8, 11-byte
    /// headers carrying the log number), the compression-type record (9), metadata
    /// records (10, 11, 130, 131), and unknown types with bit 7 set ignorable.
    RocksDb,
    /// Pebble's WAL (CockroachDB): LevelDB's types, recyclable fragments (5–8,
    /// 11-byte headers) and WAL-sync fragments (9–12, 19-byte headers carrying the
    /// log number and a synced offset). A recyclable header of the next log number
    /// (crc 0, length 0, type 5) where a record would start is the EOF trailer a
    /// clean close leaves; every other type is unknown.
    Pebble,
}

/// The type byte of a fragment header, as the [`Dialect`] it is read in defines it
/// (LevelDB's 0–4 and, by dialect, RocksDB's recyclable and metadata types or Pebble's
/// recyclable and WAL-sync ones): the one name for the type byte.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FragmentType {
    /// 0: preallocated space; a type-0 fragment with a payload is unknown.
    Zero,
    /// 1: a whole record.
    Full,
    /// 2: the first fragment of a record.
    First,
    /// 3: an interior fragment of a record.
    Middle,
    /// 4: the last fragment of a record.
    Last,
    /// 5: a whole record, recyclable header.
    RecyclableFull,
    /// 6: the first fragment of a record, recyclable header.
    RecyclableFirst,
    /// 7: an interior fragment of a record, recyclable header.
    RecyclableMiddle,
    /// 8: the last fragment of a record, recyclable header.
    RecyclableLast,
    /// 9: RocksDB's `kSetCompressionType`: the WAL's compression (always a legacy
    /// header); see [`crate::format::metadata::WalCompressionType`].
    SetCompressionType,
    /// 10: RocksDB's user-defined timestamp sizes; see
    /// [`crate::format::metadata::TimestampSizes`].
    UserDefinedTimestampSize,
    /// 11: the same, recyclable header.
    RecyclableUserDefinedTimestampSize,
    /// 130: RocksDB's predecessor WAL info; see [`crate::format::metadata::PredecessorWalInfo`].
    PredecessorWalInfo,
    /// 131: the same, recyclable header.
    RecyclablePredecessorWalInfo,
    /// 9 (Pebble): a whole record, WAL-sync header.
    WalSyncFull,
    /// 10 (Pebble): the first fragment of a record, WAL-sync header.
    WalSyncFirst,
    /// 11 (Pebble): an interior fragment of a record, WAL-sync header.
    WalSyncMiddle,
    /// 12 (Pebble): the last fragment of a record, WAL-sync header.
    WalSyncLast,
}

/// The record-assembly role of a data fragment, whatever its header layout: the
/// [`FragmentType`]s FULL, R-FULL and WAL-sync FULL are all [`Part::Full`], and so on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Part {
    /// A whole record.
    Full,
    /// Begins a record.
    First,
    /// Continues a record.
    Middle,
    /// Ends a record.
    Last,
}

impl Part {
    /// The part a writer gives a fragment, by whether it begins and/or ends its record.
    #[inline]
    pub const fn for_fragment(begins_record: bool, ends_record: bool) -> Part {
        match (begins_record, ends_record) {
            (true, true) => Part::Full,
            (true, false) => Part::First,
            (false, false) => Part::Middle,
            (false, true) => Part::Last,
        }
    }

    /// The data type byte for this part: 1–4 (LevelDB's FULL, FIRST, MIDDLE, LAST),
    /// or 5–8 when `recyclable`.
    #[inline]
    pub const fn type_byte(self, recyclable: bool) -> u8 {
        let legacy = match self {
            Part::Full => 1,
            Part::First => 2,
            Part::Middle => 3,
            Part::Last => 4,
        };
        if recyclable {
            legacy + 4
        } else {
            legacy
        }
    }

    /// Pebble's WAL-sync type byte for this part: 9–12.
    #[inline]
    pub const fn wal_sync_type_byte(self) -> u8 {
        self.type_byte(false) + 8
    }
}

impl FragmentType {
    /// The type for `byte` in `dialect`, or `None` for a byte the dialect does not
    /// define (an unknown type).
    #[inline]
    pub const fn from_u8(byte: u8, dialect: Dialect) -> Option<FragmentType> {
        let fragment_type = match byte {
            0 => FragmentType::Zero,
            1 => FragmentType::Full,
            2 => FragmentType::First,
            3 => FragmentType::Middle,
            4 => FragmentType::Last,
            5 if matches!(dialect, Dialect::Pebble) => FragmentType::RecyclableFull,
            6 if matches!(dialect, Dialect::Pebble) => FragmentType::RecyclableFirst,
            7 if matches!(dialect, Dialect::Pebble) => FragmentType::RecyclableMiddle,
            8 if matches!(dialect, Dialect::Pebble) => FragmentType::RecyclableLast,
            9 if matches!(dialect, Dialect::Pebble) => FragmentType::WalSyncFull,
            10 if matches!(dialect, Dialect::Pebble) => FragmentType::WalSyncFirst,
            11 if matches!(dialect, Dialect::Pebble) => FragmentType::WalSyncMiddle,
            12 if matches!(dialect, Dialect::Pebble) => FragmentType::WalSyncLast,
            _ => {
                if !matches!(dialect, Dialect::RocksDb) {
                    return None;
                }
                match byte {
                    5 => FragmentType::RecyclableFull,
                    6 => FragmentType::RecyclableFirst,
                    7 => FragmentType::RecyclableMiddle,
                    8 => FragmentType::RecyclableLast,
                    9 => FragmentType::SetCompressionType,
                    10 => FragmentType::UserDefinedTimestampSize,
                    11 => FragmentType::RecyclableUserDefinedTimestampSize,
                    130 => FragmentType::PredecessorWalInfo,
                    131 => FragmentType::RecyclablePredecessorWalInfo,
                    _ => return None,
                }
            }
        };
        Some(fragment_type)
    }

    /// The type byte as written in a header.
    #[inline]
    pub const fn as_u8(self) -> u8 {
        match self {
            FragmentType::Zero => 0,
            FragmentType::Full => 1,
            FragmentType::First => 2,
            FragmentType::Middle => 3,
            FragmentType::Last => 4,
            FragmentType::RecyclableFull => 5,
            FragmentType::RecyclableFirst => 6,
            FragmentType::RecyclableMiddle => 7,
            FragmentType::RecyclableLast => 8,
            FragmentType::SetCompressionType => 9,
            FragmentType::UserDefinedTimestampSize => 10,
            FragmentType::RecyclableUserDefinedTimestampSize => 11,
            FragmentType::PredecessorWalInfo => 130,
            FragmentType::RecyclablePredecessorWalInfo => 131,
            FragmentType::WalSyncFull => 9,
            FragmentType::WalSyncFirst => 10,
            FragmentType::WalSyncMiddle => 11,
            FragmentType::WalSyncLast => 12,
        }
    }

    /// Whether the header carries the log number (11 bytes instead of 7; 19 for
    /// Pebble's WAL-sync types, see [`FragmentType::is_wal_sync`]).
    #[inline]
    pub const fn is_recyclable(self) -> bool {
        self.is_wal_sync() || self.is_recyclable_only()
    }

    /// Whether this is one of Pebble's WAL-sync types (9–12): a 19-byte header
    /// carrying the log number and the synced offset.
    #[inline]
    pub const fn is_wal_sync(self) -> bool {
        matches!(
            self,
            FragmentType::WalSyncFull
                | FragmentType::WalSyncFirst
                | FragmentType::WalSyncMiddle
                | FragmentType::WalSyncLast
        )
    }

    /// An 11-byte header exactly.
    #[inline]
    const fn is_recyclable_only(self) -> bool {
        matches!(
            self,
            FragmentType::RecyclableFull
                | FragmentType::RecyclableFirst
                | FragmentType::RecyclableMiddle
                | FragmentType::RecyclableLast
                | FragmentType::RecyclableUserDefinedTimestampSize
                | FragmentType::RecyclablePredecessorWalInfo
        )
    }

    /// The header size of a fragment of this type.
    #[inline]
    pub const fn header_size(self) -> usize {
        if self.is_wal_sync() {
            WAL_SYNC_HEADER_SIZE
        } else if self.is_recyclable() {
            RECYCLABLE_HEADER_SIZE
        } else {
            LEGACY_HEADER_SIZE
        }
    }

    /// The record-assembly role of a data fragment (types 1–8); `None` for zero and
    /// metadata types.
    #[inline]
    pub const fn part(self) -> Option<Part> {
        match self {
            FragmentType::Full | FragmentType::RecyclableFull | FragmentType::WalSyncFull => {
                Some(Part::Full)
            }
            FragmentType::First | FragmentType::RecyclableFirst | FragmentType::WalSyncFirst => {
                Some(Part::First)
            }
            FragmentType::Middle | FragmentType::RecyclableMiddle | FragmentType::WalSyncMiddle => {
                Some(Part::Middle)
            }
            FragmentType::Last | FragmentType::RecyclableLast | FragmentType::WalSyncLast => {
                Some(Part::Last)
            }
            _ => None,
        }
    }

    /// Whether this is a metadata record (types 9, 10, 11, 130, 131): never part of a
    /// logical record, and never fragmented.
    #[inline]
    pub const fn is_metadata(self) -> bool {
        matches!(
            self,
            FragmentType::SetCompressionType
                | FragmentType::UserDefinedTimestampSize
                | FragmentType::RecyclableUserDefinedTimestampSize
                | FragmentType::PredecessorWalInfo
                | FragmentType::RecyclablePredecessorWalInfo
        )
    }
}

/// Whether `type_byte` takes a header carrying the log number in `dialect`:
/// RocksDB's 5–8, 11 and 131 (as its current reader decides; 7.8.3's knew only
/// 5–8), Pebble's 5–8 and its WAL-sync 9–12 (19 bytes: see [`header_size_of`]).
#[inline]
pub const fn is_recyclable_type(type_byte: u8, dialect: Dialect) -> bool {
    match dialect {
        Dialect::RocksDb => matches!(type_byte, 5..=8 | 11 | 131),
        Dialect::Pebble => matches!(type_byte, 5..=12),
        Dialect::LevelDb => false,
    }
}

/// The header size `type_byte` takes in `dialect`: 7, 11 (recyclable) or 19
/// (Pebble's WAL-sync types 9–12).
#[inline]
pub const fn header_size_of(type_byte: u8, dialect: Dialect) -> usize {
    if matches!(dialect, Dialect::Pebble) && matches!(type_byte, 9..=12) {
        WAL_SYNC_HEADER_SIZE
    } else if is_recyclable_type(type_byte, dialect) {
        RECYCLABLE_HEADER_SIZE
    } else {
        LEGACY_HEADER_SIZE
    }
}

/// A fragment header as stored; only the fields are read, nothing is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FragmentHeader {
    /// The stored (masked) checksum.
    pub checksum: u32,
    /// The payload length.
    pub length: u16,
    /// The type byte.
    pub type_byte: u8,
    /// The stored log number (its low 32 bits) of a recyclable header; `None` for a
    /// legacy one.
    pub log_number: Option<u32>,
    /// Pebble's WAL-sync header (types 9–12): the synced offset it promises.
    pub synced_offset: Option<u64>,
}

impl FragmentHeader {
    /// The header's size in bytes: 7, 11 with a log number, 19 with a synced
    /// offset too.
    #[inline]
    pub const fn len(&self) -> usize {
        if self.synced_offset.is_some() {
            WAL_SYNC_HEADER_SIZE
        } else if self.log_number.is_some() {
            RECYCLABLE_HEADER_SIZE
        } else {
            LEGACY_HEADER_SIZE
        }
    }

    /// Never true: a header has at least 7 bytes.
    #[inline]
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// Header and payload: the bytes the fragment occupies.
    #[inline]
    pub const fn fragment_len(&self) -> usize {
        self.len() + self.length as usize
    }

    /// Whether this is what preallocated (zero-filled) space reads as: type 0 and
    /// length 0.
    #[inline]
    pub const fn is_zero_fill(&self) -> bool {
        self.type_byte == 0 && self.length == 0
    }
}

/// A complete fragment at the start of the parsed bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fragment {
    header: FragmentHeader,
    fragment_type: Option<FragmentType>,
    /// An unknown type that the dialect lets readers skip silently.
    ignorable: bool,
}

impl Fragment {
    /// The header as stored.
    #[inline]
    pub const fn header(&self) -> FragmentHeader {
        self.header
    }

    /// The type, or `None` when the dialect does not define the type byte (the
    /// reader reports "unknown record type", unless [`Fragment::is_ignorable`]).
    #[inline]
    pub const fn fragment_type(&self) -> Option<FragmentType> {
        self.fragment_type
    }

    /// The record-assembly role of a data fragment.
    #[inline]
    pub const fn part(&self) -> Option<Part> {
        match self.fragment_type {
            Some(t) => t.part(),
            None => None,
        }
    }

    /// The type byte.
    #[inline]
    pub const fn type_byte(&self) -> u8 {
        self.header.type_byte
    }

    /// The stored log number of a recyclable fragment (low 32 bits).
    #[inline]
    pub const fn log_number(&self) -> Option<u32> {
        self.header.log_number
    }

    /// Pebble's WAL-sync fragment: the offset up to which its writer promised the
    /// log was synced when it wrote this fragment.
    #[inline]
    pub const fn synced_offset(&self) -> Option<u64> {
        self.header.synced_offset
    }

    /// Header size: 7, 11 or 19.
    #[inline]
    pub const fn header_len(&self) -> usize {
        self.header.len()
    }

    /// Bytes the fragment occupies (header and payload).
    #[inline]
    pub const fn len(&self) -> usize {
        self.header.fragment_len()
    }

    /// Never true: a fragment has a header.
    #[inline]
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// Where the payload lies in the parsed bytes.
    #[inline]
    pub const fn payload_range(&self) -> Range<usize> {
        self.header.len()..self.header.fragment_len()
    }

    /// Whether a RocksDB reader skips this unknown type silently: bit 7 set
    /// (RocksDB 9.11+, `kRecordTypeSafeIgnoreMask`). Always false for a known type
    /// and in the LevelDB dialect, which reports every unknown type.
    #[inline]
    pub const fn is_ignorable(&self) -> bool {
        self.ignorable
    }
}

/// Damage at the parsed position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Defect {
    /// The length field runs past the end of the block, which is complete. Readers
    /// drop the rest of the block ("bad record length").
    BadLength {
        /// The header.
        header: FragmentHeader,
        /// Bytes from the header to the end of the block.
        block_left: usize,
    },
    /// A recyclable fragment with another log number: left from an earlier use of
    /// the file. RocksDB checks this before the checksum and consumes the fragment;
    /// a recycled log ends here.
    OldLogNumber {
        /// The fragment (checksum not verified).
        fragment: Fragment,
    },
    /// The stored checksum does not match. Readers drop the rest of the block.
    ChecksumMismatch {
        /// The fragment as its header describes it.
        fragment: Fragment,
        /// Bytes from the header to the end of the block.
        block_left: usize,
    },
}

impl Defect {
    /// Bytes a reader drops for this defect: the rest of the block, or the old
    /// fragment.
    #[inline]
    pub const fn len(&self) -> usize {
        match *self {
            Defect::BadLength { block_left, .. } | Defect::ChecksumMismatch { block_left, .. } => {
                block_left
            }
            Defect::OldLogNumber { fragment } => fragment.len(),
        }
    }

    /// Never true: every defect covers at least a header.
    #[inline]
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// The header at the damaged position.
    #[inline]
    pub const fn header(&self) -> FragmentHeader {
        match *self {
            Defect::BadLength { header, .. } => header,
            Defect::OldLogNumber { fragment } | Defect::ChecksumMismatch { fragment, .. } => {
                fragment.header
            }
        }
    }
}

/// What lies at the parsed position. See the [module documentation](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Parsed {
    /// A complete fragment whose checksum matches (or is not verified).
    Fragment(Fragment),
    /// The end of a block too short for a header: `len` bytes (the rest of the
    /// block) that writers fill with zeros.
    Trailer {
        /// Bytes to the end of the block.
        len: usize,
    },
    /// A type-0, length-0 header: preallocated space, or (RocksDB, `len` < 11) the
    /// 7–10 zero bytes a recyclable writer leaves at a block's end. Readers skip the
    /// rest of the block silently.
    ZeroFill {
        /// Bytes to the end of the block, the header included.
        len: usize,
    },
    /// The bytes end before the answer: `needed` bytes from the position are
    /// needed. At the end of the log this is a torn tail: a header cut short
    /// (`header` is `None`), or a payload or block cut short.
    Incomplete {
        /// Bytes needed from the position.
        needed: usize,
        /// The header, when all of it is there.
        header: Option<FragmentHeader>,
    },
    /// Damage.
    Defect(Defect),
}

impl Parsed {
    /// The header at the position, when one was read whole.
    #[inline]
    pub const fn fragment_header(&self) -> Option<FragmentHeader> {
        match *self {
            Parsed::Fragment(fragment) => Some(fragment.header),
            Parsed::Incomplete { header, .. } => header,
            Parsed::Defect(defect) => Some(defect.header()),
            Parsed::Trailer { .. } | Parsed::ZeroFill { .. } => None,
        }
    }
}

/// The header rules of one log: its dialect, the log number recyclable fragments
/// must carry, and whether checksums are verified. Cheap to copy; build once per log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FragmentRules {
    dialect: Dialect,
    log_number: u32,
    verify_checksums: bool,
}

impl Default for FragmentRules {
    fn default() -> Self {
        FragmentRules::new(Dialect::LevelDb)
    }
}

impl FragmentRules {
    /// The rules of `dialect`, with checksums verified and log number 0.
    #[inline]
    pub const fn new(dialect: Dialect) -> FragmentRules {
        FragmentRules {
            dialect,
            log_number: 0,
            verify_checksums: true,
        }
    }

    /// The log's number, which its recyclable fragments carry. Only the low 32 bits
    /// are stored in a header, so only those are compared (as Pebble does; RocksDB
    /// compares all 64 and takes every fragment of a log numbered 2^32 or more as
    /// old).
    #[inline]
    #[must_use]
    pub const fn log_number(mut self, log_number: u64) -> FragmentRules {
        self.log_number = log_number as u32;
        self
    }

    /// Whether checksums are verified (default true).
    #[inline]
    #[must_use]
    pub const fn verify_checksums(mut self, verify: bool) -> FragmentRules {
        self.verify_checksums = verify;
        self
    }

    /// The dialect.
    #[inline]
    pub const fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// The low 32 bits of the log number, as headers store them.
    #[inline]
    pub const fn stored_log_number(&self) -> u32 {
        self.log_number
    }

    /// Pebble: whether `header` (an old log number's, [`Defect::OldLogNumber`])
    /// is the EOF trailer a clean close leaves: the next log's number. Where a
    /// record would start, the log ends cleanly there. Always false in the other
    /// dialects.
    #[inline]
    pub const fn is_eof_trailer(&self, header: &FragmentHeader) -> bool {
        matches!(self.dialect, Dialect::Pebble)
            && matches!(header.log_number, Some(n) if n == self.log_number.wrapping_add(1))
    }

    /// What lies at the start of `bytes`, the bytes available at a position with
    /// `block_left` bytes left in its block (1 to [`BLOCK_SIZE`]; `bytes` may hold
    /// more than the block). Pure: the caller consumes what the answer says.
    #[inline]
    pub fn parse(&self, bytes: &[u8], block_left: usize) -> Parsed {
        debug_assert!((1..=BLOCK_SIZE).contains(&block_left));
        if block_left < LEGACY_HEADER_SIZE {
            return Parsed::Trailer { len: block_left };
        }
        let Some(legacy) = bytes.get(..LEGACY_HEADER_SIZE) else {
            return Parsed::Incomplete {
                needed: LEGACY_HEADER_SIZE,
                header: None,
            };
        };
        let checksum = u32::from_le_bytes([legacy[0], legacy[1], legacy[2], legacy[3]]);
        let length = u16::from_le_bytes([legacy[4], legacy[5]]);
        let type_byte = legacy[6];

        let mut header = FragmentHeader {
            checksum,
            length,
            type_byte,
            log_number: None,
            synced_offset: None,
        };
        if is_recyclable_type(type_byte, self.dialect) {
            let header_size = header_size_of(type_byte, self.dialect);
            if block_left < header_size {
                if matches!(self.dialect, Dialect::Pebble) {
                    // Pebble's writer never starts a header it cannot finish in
                    // the block: its reader takes this as an invalid chunk.
                    return Parsed::Defect(Defect::BadLength { header, block_left });
                }
                // RocksDB's reader takes a block end too short for this header as
                // a trailer and reads on in the next block.
                return Parsed::Trailer { len: block_left };
            }
            let Some(number) = bytes.get(LEGACY_HEADER_SIZE..header_size) else {
                return Parsed::Incomplete {
                    needed: header_size,
                    header: None,
                };
            };
            header.log_number = Some(u32::from_le_bytes([
                number[0], number[1], number[2], number[3],
            ]));
            if let Some(offset) = number.get(4..12) {
                let mut synced = [0; 8];
                synced.copy_from_slice(offset);
                header.synced_offset = Some(u64::from_le_bytes(synced));
            }
        }

        if header.is_zero_fill() {
            return Parsed::ZeroFill { len: block_left };
        }
        let fragment_len = header.fragment_len();
        if fragment_len > block_left {
            if bytes.len() < block_left {
                // Perhaps a write torn at the end of the log: only a complete block
                // makes this a bad length.
                return Parsed::Incomplete {
                    needed: block_left,
                    header: Some(header),
                };
            }
            return Parsed::Defect(Defect::BadLength { header, block_left });
        }
        if bytes.len() < fragment_len {
            return Parsed::Incomplete {
                needed: fragment_len,
                header: Some(header),
            };
        }
        let fragment_type = FragmentType::from_u8(type_byte, self.dialect);
        let fragment = Fragment {
            header,
            fragment_type,
            ignorable: fragment_type.is_none()
                && type_byte & 0x80 != 0
                && matches!(self.dialect, Dialect::RocksDb),
        };
        if let Some(number) = header.log_number {
            if number != self.log_number {
                return Parsed::Defect(Defect::OldLogNumber { fragment });
            }
        }
        if self.verify_checksums
            // The stored checksum covers everything from the type byte on: type and
            // payload, with the log number between them in a recyclable header.
            && fragment_crc_in_place(&bytes[LEGACY_HEADER_SIZE - 1..fragment_len])
                != unmask(checksum)
        {
            return Parsed::Defect(Defect::ChecksumMismatch {
                fragment,
                block_left,
            });
        }
        Parsed::Fragment(fragment)
    }
}

/// What the first fragments of a log say about how it was written; see [`sniff`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sniffed {
    /// The dialect to read it in.
    pub dialect: Dialect,
    /// The log number (low 32 bits) of a recyclable first data fragment, intact.
    pub log_number: Option<u32>,
    /// Whether it starts with RocksDB's compression-type record (type 9).
    pub compressed: bool,
}

/// Tells a RocksDB WAL from a LevelDB log by its start (the first block, or as much
/// of it as there is): RocksDB's dialect when the log starts with an intact
/// recyclable fragment, or with an intact type-9 record (then the fragment after it
/// tells whether it is recyclable too). Checksums are verified whatever the log
/// number, which is reported.
///
/// ```
/// use walcodec::fragment::sniff;
/// use walcodec::{Dialect, LogEncoder};
///
/// let mut log = bytes::BytesMut::new();
/// LogEncoder::builder().recyclable(14).build().encode_record(b"x", &mut log);
/// let sniffed = sniff(&log);
/// assert_eq!((sniffed.dialect, sniffed.log_number), (Dialect::RocksDb, Some(14)));
///
/// let mut log = bytes::BytesMut::new();
/// LogEncoder::new().encode_record(b"x", &mut log);
/// assert_eq!(sniff(&log).dialect, Dialect::LevelDb);
/// ```
pub fn sniff(log_start: &[u8]) -> Sniffed {
    let mut sniffed = Sniffed {
        dialect: Dialect::LevelDb,
        log_number: None,
        compressed: false,
    };
    let mut at = 0;
    if let Some((FragmentType::SetCompressionType, len)) = intact_fragment(log_start) {
        sniffed.dialect = Dialect::RocksDb;
        sniffed.compressed = true;
        at = len;
    }
    if let Some(rest) = log_start.get(at..) {
        if let Some((fragment_type, _)) = intact_fragment(rest) {
            if fragment_type.is_recyclable() {
                sniffed.dialect = Dialect::RocksDb;
                sniffed.log_number =
                    Some(u32::from_le_bytes([rest[7], rest[8], rest[9], rest[10]]));
            }
        }
    }
    sniffed
}

/// The type and length of an intact RocksDB fragment at the start of `bytes`, its
/// checksum verified whatever its log number.
pub(crate) fn intact_fragment(bytes: &[u8]) -> Option<(FragmentType, usize)> {
    let type_byte = *bytes.get(LEGACY_HEADER_SIZE - 1)?;
    let fragment_type = FragmentType::from_u8(type_byte, Dialect::RocksDb)?;
    let length = usize::from(u16::from_le_bytes([*bytes.get(4)?, *bytes.get(5)?]));
    let fragment_len = fragment_type.header_size() + length;
    let stored = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?);
    let covered = bytes.get(LEGACY_HEADER_SIZE - 1..fragment_len)?;
    (fragment_type != FragmentType::Zero && fragment_crc_in_place(covered) == unmask(stored))
        .then_some((fragment_type, fragment_len))
}

mod build;
#[cfg(test)]
mod tests;
