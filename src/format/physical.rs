//! The physical layout of a log: its fragments, trailers, zero fill and damage, as
//! they sit in the bytes.
//!
//! [`LogDecoder`](crate::LogDecoder) hands out logical records. A tool that inspects,
//! verifies or repairs a log also needs to see how those records are laid out, and why
//! a reader drops what it drops. Two walkers cut a slice of a log into pieces that
//! tile it exactly (every byte belongs to one piece), both standing on the one
//! fragment parser, [`FragmentRules::parse`], so they read the bytes the way the
//! decoder does:
//!
//! - [`Chunks`] yields [`Chunk`]s: LevelDB's view (7-byte headers, types 0–4).
//! - [`Pieces`] yields [`Piece`]s in any [`Dialect`]: in RocksDB's it also shows
//!   recyclable (11-byte) headers and their log numbers, fragments of an older log
//!   ([`Piece::Old`]), the compression-type and other metadata records, parsed
//!   ([`Piece::Metadata`]), and the 7–10-byte trailers a recyclable writer leaves.
//!
//! | chunk       | covers                                              | a reader            |
//! |-------------|-----------------------------------------------------|---------------------|
//! | `Fragment`  | a header and its payload                            | uses it if `checksum_ok` |
//! | `Trailer`   | the last 1 to 6 bytes of a block                    | skips them          |
//! | `ZeroFill`  | a type-0, length-0 header up to the block's end     | skips them silently |
//! | `BadLength` | a header whose length runs past the block, to its end | reports "bad record length" |
//! | `Skipped`   | the rest of a block after a checksum mismatch       | drops it with the fragment |
//! | `Torn`      | a fragment cut by the end of the input              | a torn tail         |
//!
//! The end of the slice is taken as the end of the log, so feed whole blocks (or the
//! whole log): a fragment never crosses a block boundary, so a complete block never
//! yields a `Torn` chunk.
//!
//! ```
//! use bytes::BytesMut;
//! use walcodec::fragment::FragmentType;
//! use walcodec::physical::{Chunk, Chunks};
//! use walcodec::{Dialect, LogEncoder};
//!
//! let mut log = BytesMut::new();
//! let mut encoder = LogEncoder::new();
//! encoder.encode_record(b"hello", &mut log);
//! encoder.encode_record(&[7u8; 40_000], &mut log);
//!
//! let types: Vec<_> = Chunks::new(&log, 0)
//!     .filter_map(|chunk| match chunk {
//!         Chunk::Fragment { offset, header, checksum_ok: true, .. } => {
//!             Some((offset, FragmentType::from_u8(header.type_byte, Dialect::LevelDb)))
//!         }
//!         _ => None,
//!     })
//!     .collect();
//! assert_eq!(
//!     types,
//!     [
//!         (0, Some(FragmentType::Full)),
//!         (12, Some(FragmentType::First)),
//!         (32768, Some(FragmentType::Last)),
//!     ]
//! );
//! ```
//!
//! A recycled RocksDB WAL, log 12 written over the start of log 8:
//!
//! ```
//! use bytes::BytesMut;
//! use walcodec::fragment::FragmentRules;
//! use walcodec::physical::{Piece, Pieces};
//! use walcodec::{Dialect, LogEncoder};
//!
//! let mut old = BytesMut::new();
//! let mut log8 = LogEncoder::builder().recyclable(8).build();
//! for record in [&b"one"[..], b"two", b"three"] {
//!     log8.encode_record(record, &mut old);
//! }
//! let mut log = BytesMut::new();
//! LogEncoder::builder().recyclable(12).build().encode_record(b"new", &mut log);
//! // The file is reused: log 12's record covers log 8's first one, exactly.
//! log.extend_from_slice(&old[log.len()..]);
//!
//! let rules = FragmentRules::new(Dialect::RocksDb).log_number(12);
//! let seen: Vec<String> = Pieces::new(&log, 0, rules)
//!     .map(|piece| match piece {
//!         Piece::Fragment { offset, fragment, .. } => {
//!             format!("{offset}: log {:?}, {}-byte header", fragment.log_number(), fragment.header_len())
//!         }
//!         Piece::Old { offset, fragment, .. } => {
//!             format!("{offset}: old log {:?}", fragment.log_number())
//!         }
//!         other => format!("{other:?}"),
//!     })
//!     .collect();
//! assert_eq!(seen, ["0: log Some(12), 11-byte header", "14: old log Some(8)", "28: old log Some(8)"]);
//! ```

// Why one file: its walker and its unit tests share private helpers; the code is about 700
// lines, the rest are tests of those helpers.

use crate::format::fragment::{
    Defect, Dialect, Fragment, FragmentHeader, FragmentRules, FragmentType, Parsed,
    RECYCLABLE_HEADER_SIZE,
};
use crate::format::metadata::{
    MetadataError, PredecessorWalInfo, TimestampSizes, WalCompressionType,
};
use crate::format::{BLOCK_SIZE, HEADER_SIZE};

/// One piece of a log's physical layout. See the [module documentation](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunk<'a> {
    /// A complete fragment: header and payload.
    Fragment {
        /// Log offset of the header.
        offset: u64,
        /// The header.
        header: FragmentHeader,
        /// The payload (`header.length` bytes).
        payload: &'a [u8],
        /// Whether the stored checksum matches. A reader drops a fragment whose
        /// checksum does not match, and the rest of its block (the next chunk,
        /// [`Chunk::Skipped`], unless the fragment ends the block).
        checksum_ok: bool,
    },
    /// Bytes at the end of a block too few to hold a header (1 to 6). Writers fill
    /// them with zeros.
    Trailer {
        /// Log offset of the first trailer byte.
        offset: u64,
        /// The trailer bytes present.
        bytes: &'a [u8],
    },
    /// A type-0, length-0 header (what preallocated space reads as) and everything
    /// after it up to the end of the block, which readers skip without a report.
    ZeroFill {
        /// Log offset of the zero header.
        offset: u64,
        /// The header and the rest of the block. Anything but zeros here is data a
        /// reader silently loses.
        bytes: &'a [u8],
    },
    /// A header whose length runs past the end of its (complete) block, and the rest
    /// of the block, which readers drop as "bad record length".
    BadLength {
        /// Log offset of the header.
        offset: u64,
        /// The header.
        header: FragmentHeader,
        /// The header and the rest of the block.
        bytes: &'a [u8],
    },
    /// The rest of a block after a fragment whose checksum did not match: readers
    /// drop it with that fragment.
    Skipped {
        /// Log offset of the first byte after the damaged fragment.
        offset: u64,
        /// The bytes up to the end of the block (or of the input).
        bytes: &'a [u8],
    },
    /// A fragment cut by the end of the input: a header shorter than
    /// [`HEADER_SIZE`], or a payload shorter than the header says. In a log on disk
    /// this is a torn tail: the writer stopped mid-write.
    Torn {
        /// Log offset of the incomplete fragment.
        offset: u64,
        /// Its header, when all of it is there.
        header: Option<FragmentHeader>,
        /// The bytes present.
        bytes: &'a [u8],
    },
}

impl Chunk<'_> {
    /// Log offset of the chunk's first byte.
    pub fn offset(&self) -> u64 {
        match *self {
            Chunk::Fragment { offset, .. }
            | Chunk::Trailer { offset, .. }
            | Chunk::ZeroFill { offset, .. }
            | Chunk::BadLength { offset, .. }
            | Chunk::Skipped { offset, .. }
            | Chunk::Torn { offset, .. } => offset,
        }
    }

    /// How many bytes of the log the chunk covers (a fragment's header included).
    pub fn len(&self) -> u64 {
        let len = match *self {
            Chunk::Fragment { payload, .. } => HEADER_SIZE + payload.len(),
            Chunk::Trailer { bytes, .. }
            | Chunk::ZeroFill { bytes, .. }
            | Chunk::BadLength { bytes, .. }
            | Chunk::Skipped { bytes, .. }
            | Chunk::Torn { bytes, .. } => bytes.len(),
        };
        len as u64
    }

    /// Whether the chunk covers no bytes; never true of a chunk [`Chunks`] yields.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Log offset just past the chunk.
    pub fn end(&self) -> u64 {
        self.offset() + self.len()
    }
}

/// Cuts a slice of a log into [`Chunk`]s, LevelDB's view. See the
/// [module documentation](self).
///
/// The same walk as [`Pieces`] in [`Dialect::LevelDb`], each piece as a chunk.
#[derive(Debug, Clone)]
pub struct Chunks<'a> {
    pieces: Pieces<'a>,
}

impl<'a> Chunks<'a> {
    /// Walks `bytes`, which sit at log offset `offset`: a block start, or any offset
    /// where a fragment or a trailer begins. The end of `bytes` is taken as the end
    /// of the log.
    pub fn new(bytes: &'a [u8], offset: u64) -> Chunks<'a> {
        Chunks {
            pieces: Pieces::new(bytes, offset, FragmentRules::new(Dialect::LevelDb)),
        }
    }

    /// Log offset of the next chunk: how far the walk has gone.
    pub fn offset(&self) -> u64 {
        self.pieces.offset()
    }
}

impl<'a> Iterator for Chunks<'a> {
    type Item = Chunk<'a>;

    fn next(&mut self) -> Option<Chunk<'a>> {
        self.pieces.next().map(|piece| piece.to_chunk())
    }
}

impl<'a> Piece<'a> {
    /// The piece as LevelDB's view has it, the chunk [`Chunks`] yields for it: a
    /// metadata record or an old fragment is a fragment (of a type LevelDB does not
    /// know), a 7-to-10-byte recyclable trailer a trailer.
    pub fn to_chunk(&self) -> Chunk<'a> {
        match *self {
            Piece::Fragment {
                offset,
                fragment,
                payload,
                checksum_ok,
            }
            | Piece::Old {
                offset,
                fragment,
                payload,
                checksum_ok,
            } => Chunk::Fragment {
                offset,
                header: fragment.header(),
                payload,
                checksum_ok,
            },
            Piece::Metadata {
                offset,
                fragment,
                payload,
                ..
            } => Chunk::Fragment {
                offset,
                header: fragment.header(),
                payload,
                checksum_ok: true,
            },
            Piece::Trailer { offset, bytes } => Chunk::Trailer { offset, bytes },
            Piece::ZeroFill { offset, bytes } => Chunk::ZeroFill { offset, bytes },
            Piece::BadLength {
                offset,
                header,
                bytes,
            } => Chunk::BadLength {
                offset,
                header,
                bytes,
            },
            Piece::Skipped { offset, bytes } => Chunk::Skipped { offset, bytes },
            Piece::Torn {
                offset,
                header,
                bytes,
            } => Chunk::Torn {
                offset,
                header,
                bytes,
            },
        }
    }

    /// Whether only RocksDB's dialect has this piece: an old fragment, or a fragment
    /// with an 11-byte header (LevelDB's walk would cut such bytes differently).
    ///
    /// ```
    /// use walcodec::fragment::FragmentRules;
    /// use walcodec::physical::Pieces;
    /// use walcodec::{Dialect, LogEncoder};
    ///
    /// let mut log = bytes::BytesMut::new();
    /// LogEncoder::new().encode_record(b"legacy", &mut log);
    /// let rules = FragmentRules::new(Dialect::RocksDb).log_number(5);
    /// assert!(!Pieces::new(&log, 0, rules).next().unwrap().is_rocksdb_only());
    ///
    /// let mut log = bytes::BytesMut::new();
    /// LogEncoder::builder().recyclable(5).build().encode_record(b"recyclable", &mut log);
    /// assert!(Pieces::new(&log, 0, rules).next().unwrap().is_rocksdb_only());
    /// // An older log's fragment too.
    /// let rules = rules.log_number(6);
    /// assert!(Pieces::new(&log, 0, rules).next().unwrap().is_rocksdb_only());
    /// ```
    pub fn is_rocksdb_only(&self) -> bool {
        match self {
            Piece::Old { .. } => true,
            Piece::Fragment { fragment, .. } | Piece::Metadata { fragment, .. } => {
                fragment.log_number().is_some()
            }
            _ => false,
        }
    }
}

/// A metadata record's payload, parsed (RocksDB's types 9, 10/11 and 130/131; see
/// [`crate::format::metadata`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Metadata<'a> {
    /// Type 9: how the WAL's data fragments are compressed.
    Compression(WalCompressionType),
    /// Types 10 and 11: user-defined timestamp sizes of column families.
    TimestampSizes(TimestampSizes<'a>),
    /// Types 130 and 131: what the WAL before this one held.
    PredecessorWal(PredecessorWalInfo),
}

impl<'a> Metadata<'a> {
    /// Parses the payload of a fragment of type `fragment_type`; `None` when the type
    /// is not a metadata type.
    pub fn parse(
        fragment_type: FragmentType,
        payload: &'a [u8],
    ) -> Option<Result<Metadata<'a>, MetadataError>> {
        Some(match fragment_type {
            FragmentType::SetCompressionType => {
                WalCompressionType::parse(payload).map(Metadata::Compression)
            }
            FragmentType::UserDefinedTimestampSize
            | FragmentType::RecyclableUserDefinedTimestampSize => {
                TimestampSizes::parse(payload).map(Metadata::TimestampSizes)
            }
            FragmentType::PredecessorWalInfo | FragmentType::RecyclablePredecessorWalInfo => {
                PredecessorWalInfo::parse(payload).map(Metadata::PredecessorWal)
            }
            _ => return None,
        })
    }
}

/// One piece of a log's physical layout in a [`Dialect`]: what [`Pieces`] yields.
///
/// | piece       | covers                                                | a reader                  |
/// |-------------|-------------------------------------------------------|---------------------------|
/// | `Fragment`  | a data fragment (7- or 11-byte header, payload), or one of a type the dialect does not define | uses it if `checksum_ok` |
/// | `Metadata`  | an intact metadata record (RocksDB's 9, 10/11, 130/131) | applies it, returns no record |
/// | `Old`       | a recyclable fragment with another log number         | ends the log (RocksDB)    |
/// | `Trailer`   | 1–6 bytes at a block's end; RocksDB: up to 10 before a recyclable header | skips them |
/// | `ZeroFill`  | a type-0, length-0 header up to the block's end       | skips them silently       |
/// | `BadLength` | a header whose length runs past its block, to its end | "bad record length"       |
/// | `Skipped`   | the rest of a block after a checksum mismatch         | drops it                  |
/// | `Torn`      | a fragment cut by the end of the input                | a torn tail               |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Piece<'a> {
    /// A complete fragment that is not an intact metadata record: a data fragment
    /// (types 1–8), a type-0 fragment with a payload, a type the dialect does not
    /// define ([`Fragment::is_ignorable`] says whether RocksDB skips it silently), or
    /// a metadata record whose checksum does not match.
    Fragment {
        /// Log offset of the header.
        offset: u64,
        /// The fragment: its header, type, header size and log number.
        fragment: Fragment,
        /// The payload.
        payload: &'a [u8],
        /// Whether the stored checksum matches. A reader drops a fragment whose
        /// checksum does not match, and the rest of its block (the next piece,
        /// [`Piece::Skipped`], unless the fragment ends the block).
        checksum_ok: bool,
    },
    /// An intact metadata record, never part of a logical record.
    Metadata {
        /// Log offset of the header.
        offset: u64,
        /// The fragment (its type says which record).
        fragment: Fragment,
        /// The payload.
        payload: &'a [u8],
        /// The payload parsed, or why it does not parse.
        record: Result<Metadata<'a>, MetadataError>,
    },
    /// A recyclable fragment whose log number is not the log's: left by an earlier
    /// use of the file. RocksDB's reader ends the log at the first one (before
    /// looking at its checksum); the walk goes on after it, to show what follows.
    Old {
        /// Log offset of the header.
        offset: u64,
        /// The fragment; [`Fragment::log_number`] is the old log's number.
        fragment: Fragment,
        /// The payload.
        payload: &'a [u8],
        /// Whether the checksum matches for the fragment's own log number: an intact
        /// record of the old log rather than old bytes that only look like a header.
        checksum_ok: bool,
    },
    /// Bytes at the end of a block too few to hold a header: 1 to 6, or in RocksDB's
    /// dialect up to 10 before where a recyclable header would not fit (a recyclable
    /// writer fills them with zeros). Readers skip them.
    Trailer {
        /// Log offset of the first trailer byte.
        offset: u64,
        /// The trailer bytes present.
        bytes: &'a [u8],
    },
    /// A type-0, length-0 header (what preallocated space reads as) and everything
    /// after it up to the end of the block, which readers skip without a report.
    ZeroFill {
        /// Log offset of the zero header.
        offset: u64,
        /// The header and the rest of the block. Anything but zeros here is data a
        /// reader silently loses.
        bytes: &'a [u8],
    },
    /// A header whose length runs past the end of its (complete) block, and the rest
    /// of the block, which readers drop as "bad record length".
    BadLength {
        /// Log offset of the header.
        offset: u64,
        /// The header.
        header: FragmentHeader,
        /// The header and the rest of the block.
        bytes: &'a [u8],
    },
    /// The rest of a block after a fragment whose checksum did not match: readers
    /// drop it with that fragment.
    Skipped {
        /// Log offset of the first byte after the damaged fragment.
        offset: u64,
        /// The bytes up to the end of the block (or of the input).
        bytes: &'a [u8],
    },
    /// A fragment cut by the end of the input: a header cut short, or a payload
    /// shorter than the header says. In a log on disk this is a torn tail.
    Torn {
        /// Log offset of the incomplete fragment.
        offset: u64,
        /// Its header, when all of it is there.
        header: Option<FragmentHeader>,
        /// The bytes present.
        bytes: &'a [u8],
    },
}

impl Piece<'_> {
    /// Log offset of the piece's first byte.
    pub fn offset(&self) -> u64 {
        match *self {
            Piece::Fragment { offset, .. }
            | Piece::Metadata { offset, .. }
            | Piece::Old { offset, .. }
            | Piece::Trailer { offset, .. }
            | Piece::ZeroFill { offset, .. }
            | Piece::BadLength { offset, .. }
            | Piece::Skipped { offset, .. }
            | Piece::Torn { offset, .. } => offset,
        }
    }

    /// How many bytes of the log the piece covers (a fragment's header included).
    pub fn len(&self) -> u64 {
        let len = match *self {
            Piece::Fragment { fragment, .. }
            | Piece::Metadata { fragment, .. }
            | Piece::Old { fragment, .. } => fragment.len(),
            Piece::Trailer { bytes, .. }
            | Piece::ZeroFill { bytes, .. }
            | Piece::BadLength { bytes, .. }
            | Piece::Skipped { bytes, .. }
            | Piece::Torn { bytes, .. } => bytes.len(),
        };
        len as u64
    }

    /// Whether the piece covers no bytes; never true of a piece [`Pieces`] yields.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Log offset just past the piece.
    pub fn end(&self) -> u64 {
        self.offset() + self.len()
    }

    /// The complete fragment of a `Fragment`, `Metadata` or `Old` piece.
    pub fn fragment(&self) -> Option<Fragment> {
        match *self {
            Piece::Fragment { fragment, .. }
            | Piece::Metadata { fragment, .. }
            | Piece::Old { fragment, .. } => Some(fragment),
            _ => None,
        }
    }
}

/// Cuts a slice of a log into [`Piece`]s by the header rules of a [`FragmentRules`]:
/// its dialect, and the log number recyclable fragments must carry. See the
/// [module documentation](self).
///
/// In [`Dialect::LevelDb`] this is the walk of [`Chunks`], piece for chunk.
#[derive(Debug, Clone)]
pub struct Pieces<'a> {
    bytes: &'a [u8],
    offset: u64,
    rules: FragmentRules,
    /// The previous fragment failed its checksum: the rest of its block is dropped.
    skip_rest_of_block: bool,
}

impl<'a> Pieces<'a> {
    /// Walks `bytes`, which sit at log offset `offset` (a block start, or any offset
    /// where a fragment or a trailer begins), by `rules`. The end of `bytes` is taken
    /// as the end of the log. Whether checksums are verified is the rules' choice:
    /// without, every complete fragment has `checksum_ok`.
    pub fn new(bytes: &'a [u8], offset: u64, rules: FragmentRules) -> Pieces<'a> {
        Pieces {
            bytes,
            offset,
            rules,
            skip_rest_of_block: false,
        }
    }

    /// Log offset of the next piece: how far the walk has gone.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The rules the walk reads headers by.
    pub fn rules(&self) -> FragmentRules {
        self.rules
    }

    fn take(&mut self, n: usize) -> &'a [u8] {
        let (taken, rest) = self.bytes.split_at(n.min(self.bytes.len()));
        self.bytes = rest;
        self.offset += taken.len() as u64;
        taken
    }

    /// Takes a complete fragment; returns its payload.
    fn take_fragment(&mut self, fragment: &Fragment) -> &'a [u8] {
        let bytes = self.take(fragment.len());
        &bytes[fragment.payload_range()]
    }
}

impl<'a> Iterator for Pieces<'a> {
    type Item = Piece<'a>;

    fn next(&mut self) -> Option<Piece<'a>> {
        if self.bytes.is_empty() {
            return None;
        }
        let offset = self.offset;
        let block_left = BLOCK_SIZE - (offset % BLOCK_SIZE as u64) as usize;
        let in_block = block_left.min(self.bytes.len());

        if std::mem::take(&mut self.skip_rest_of_block) {
            let bytes = self.take(in_block);
            return Some(Piece::Skipped { offset, bytes });
        }
        let rocksdb = self.rules.dialect() == Dialect::RocksDb;
        Some(match self.rules.parse(self.bytes, block_left) {
            Parsed::Trailer { .. } => Piece::Trailer {
                offset,
                bytes: self.take(in_block),
            },
            // The 7 to 10 zero bytes a recyclable writer leaves where its 11-byte
            // header does not fit: a trailer, not preallocated space.
            Parsed::ZeroFill { len } if rocksdb && len < RECYCLABLE_HEADER_SIZE => Piece::Trailer {
                offset,
                bytes: self.take(in_block),
            },
            Parsed::ZeroFill { .. } => Piece::ZeroFill {
                offset,
                bytes: self.take(in_block),
            },
            Parsed::Incomplete { header, .. } => Piece::Torn {
                offset,
                header,
                bytes: self.take(self.bytes.len()),
            },
            Parsed::Defect(Defect::BadLength { header, block_left }) => Piece::BadLength {
                offset,
                header,
                bytes: self.take(block_left),
            },
            Parsed::Defect(Defect::OldLogNumber { fragment }) => {
                let old_rules = self
                    .rules
                    .log_number(u64::from(fragment.log_number().unwrap_or_default()));
                let checksum_ok =
                    matches!(old_rules.parse(self.bytes, block_left), Parsed::Fragment(_));
                Piece::Old {
                    offset,
                    fragment,
                    payload: self.take_fragment(&fragment),
                    checksum_ok,
                }
            }
            Parsed::Defect(Defect::ChecksumMismatch { fragment, .. }) => {
                let payload = self.take_fragment(&fragment);
                self.skip_rest_of_block = self.offset % BLOCK_SIZE as u64 != 0;
                Piece::Fragment {
                    offset,
                    fragment,
                    payload,
                    checksum_ok: false,
                }
            }
            Parsed::Fragment(fragment) => {
                let payload = self.take_fragment(&fragment);
                let metadata = fragment
                    .fragment_type()
                    .and_then(|fragment_type| Metadata::parse(fragment_type, payload));
                match metadata {
                    Some(record) => Piece::Metadata {
                        offset,
                        fragment,
                        payload,
                        record,
                    },
                    None => Piece::Fragment {
                        offset,
                        fragment,
                        payload,
                        checksum_ok: true,
                    },
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::encoder::LogEncoder;
    use bytes::BytesMut;
    use proptest::prelude::*;

    fn encode(records: &[Vec<u8>]) -> BytesMut {
        let mut log = BytesMut::new();
        let mut encoder = LogEncoder::new();
        for record in records {
            encoder.encode_record(record, &mut log);
        }
        log
    }

    /// A compact rendering of a walk, to compare layouts at a glance.
    fn layout(bytes: &[u8], offset: u64) -> Vec<String> {
        Chunks::new(bytes, offset)
            .map(|chunk| match chunk {
                Chunk::Fragment {
                    offset,
                    header,
                    payload,
                    checksum_ok,
                } => format!(
                    "{offset} t{} {} {}",
                    header.type_byte,
                    payload.len(),
                    if checksum_ok { "ok" } else { "bad" }
                ),
                Chunk::Trailer { offset, bytes } => format!("pad {offset} {}", bytes.len()),
                Chunk::ZeroFill { offset, bytes } => format!("zero {offset} {}", bytes.len()),
                Chunk::BadLength {
                    offset,
                    header,
                    bytes,
                } => format!("badlen {offset} {} {}", header.length, bytes.len()),
                Chunk::Skipped { offset, bytes } => format!("skip {offset} {}", bytes.len()),
                Chunk::Torn {
                    offset,
                    header,
                    bytes,
                } => format!("torn {offset} {} {}", header.is_some(), bytes.len()),
            })
            .collect()
    }

    fn assert_tiles(bytes: &[u8], offset: u64) {
        let mut at = offset;
        for chunk in Chunks::new(bytes, offset) {
            assert_eq!(chunk.offset(), at);
            assert!(!chunk.is_empty());
            at = chunk.end();
        }
        assert_eq!(at, offset + bytes.len() as u64);
    }

    #[test]
    fn layout_of_the_format_documents_example() {
        let log = encode(&[vec![b'a'; 1000], vec![b'b'; 97270], vec![b'c'; 8000]]);
        assert_eq!(
            layout(&log, 0),
            [
                "0 t1 1000 ok",
                "1007 t2 31754 ok",
                "32768 t3 32761 ok",
                "65536 t4 32755 ok",
                "pad 98298 6",
                "98304 t1 8000 ok",
            ]
        );
    }

    #[test]
    fn fragments_reassemble_into_the_records() {
        let records: Vec<Vec<u8>> = [0usize, 1, 32754, 0, 32761, 100_000, 6, 7]
            .iter()
            .enumerate()
            .map(|(i, &len)| vec![i as u8; len])
            .collect();
        let log = encode(&records);
        let mut rebuilt = Vec::new();
        let mut open = Vec::new();
        for chunk in Chunks::new(&log, 0) {
            match chunk {
                Chunk::Fragment {
                    header,
                    payload,
                    checksum_ok: true,
                    ..
                } => {
                    open.extend_from_slice(payload);
                    match FragmentType::from_u8(header.type_byte, Dialect::LevelDb) {
                        Some(FragmentType::Full) | Some(FragmentType::Last) => {
                            rebuilt.push(std::mem::take(&mut open))
                        }
                        Some(FragmentType::First) | Some(FragmentType::Middle) => {}
                        other => panic!("unexpected type {other:?}"),
                    }
                }
                Chunk::Trailer { bytes, .. } => assert!(bytes.iter().all(|&b| b == 0)),
                other => panic!("unexpected chunk {other:?}"),
            }
        }
        assert_eq!(rebuilt, records);
    }

    #[test]
    fn block_by_block_walk_equals_whole_walk() {
        let log = encode(&[
            vec![1; 50_000],
            vec![2; 32_755],
            vec![3; 10],
            vec![4; 70_000],
        ]);
        let whole = layout(&log, 0);
        let mut by_block = Vec::new();
        for (i, block) in log.chunks(BLOCK_SIZE).enumerate() {
            by_block.extend(layout(block, (i * BLOCK_SIZE) as u64));
        }
        assert_eq!(by_block, whole);
    }

    #[test]
    fn checksum_mismatch_drops_the_rest_of_the_block() {
        let mut log = encode(&[b"foo".to_vec(), b"bar".to_vec(), vec![9; 40_000]]);
        log[8] ^= 1; // a payload byte of "foo"
        assert_eq!(
            layout(&log, 0),
            [
                "0 t1 3 bad",
                "skip 10 32758",
                "32768 t4 7259 ok", // the LAST of the 40,000-byte record
            ]
        );
    }

    #[test]
    fn bad_checksum_that_ends_a_block_skips_nothing() {
        let mut log = encode(&[vec![5; BLOCK_SIZE - HEADER_SIZE], b"x".to_vec()]);
        log[100] ^= 0x80;
        assert_eq!(layout(&log, 0), ["0 t1 32761 bad", "32768 t1 1 ok"]);
    }

    #[test]
    fn length_past_a_complete_block_is_bad_length() {
        let mut log = encode(&[b"foo".to_vec(), vec![1; 40_000]]);
        log[4..6].copy_from_slice(&60_000u16.to_le_bytes());
        assert_eq!(
            layout(&log, 0),
            ["badlen 0 60000 32768", "32768 t4 7249 ok"]
        );
    }

    #[test]
    fn length_past_the_end_of_a_partial_block_is_torn() {
        let mut log = encode(&[b"foo".to_vec()]);
        log[4..6].copy_from_slice(&60_000u16.to_le_bytes());
        assert_eq!(layout(&log, 0), ["torn 0 true 10"]);
    }

    #[test]
    fn torn_header_and_torn_payload() {
        let log = encode(&[b"foo".to_vec(), b"barbaz".to_vec()]);
        assert_eq!(layout(&log[..14], 0), ["0 t1 3 ok", "torn 10 false 4"]);
        assert_eq!(layout(&log[..20], 0), ["0 t1 3 ok", "torn 10 true 10"]);
    }

    #[test]
    fn zero_fill_runs_to_the_block_end() {
        let mut log = encode(&[b"foo".to_vec()]);
        log.resize(BLOCK_SIZE, 0);
        let tail = encode(&[b"next".to_vec()]);
        log.extend_from_slice(&tail);
        assert_eq!(
            layout(&log, 0),
            ["0 t1 3 ok", "zero 10 32758", "32768 t1 4 ok"]
        );
        // At EOF the zero fill ends with the input.
        assert_eq!(layout(&log[..1000], 0), ["0 t1 3 ok", "zero 10 990"]);
    }

    #[test]
    fn trailer_cut_by_eof() {
        let mut log = encode(&[vec![0; BLOCK_SIZE - HEADER_SIZE - 4]]);
        assert_eq!(log.len(), BLOCK_SIZE - 4);
        assert_eq!(layout(&log, 0), ["0 t1 32757 ok"]);
        log.extend_from_slice(&[0, 0]);
        assert_eq!(layout(&log, 0), ["0 t1 32757 ok", "pad 32764 2"]);
        log.extend_from_slice(&[0, 0]);
        assert_eq!(layout(&log, 0), ["0 t1 32757 ok", "pad 32764 4"]);
    }

    #[test]
    fn walk_from_a_later_block() {
        let log = encode(&[vec![1; 40_000], b"z".to_vec()]);
        let from = BLOCK_SIZE;
        assert_eq!(
            layout(&log[from..], from as u64),
            ["32768 t4 7239 ok", "40014 t1 1 ok"]
        );
    }

    /// What the decoder counts, from the walk: the two must read bytes alike. The
    /// last value is whether the walk ends torn (the decoder then has an incomplete
    /// tail; it may also have one the walk cannot see, a FIRST with no LAST).
    fn decoder_counts_from_walk(log: &[u8]) -> (u64, u64, u64, bool) {
        let (mut fragments, mut trailer, mut zero_fill, mut torn) = (0, 0, 0, false);
        for chunk in Chunks::new(log, 0) {
            match chunk {
                Chunk::Fragment {
                    checksum_ok: true, ..
                } => fragments += 1,
                Chunk::Trailer { .. } => trailer += chunk.len(),
                Chunk::ZeroFill { .. } => zero_fill += chunk.len(),
                Chunk::Torn { .. } => torn = true,
                _ => {}
            }
        }
        (fragments, trailer, zero_fill, torn)
    }

    fn decoder_counts(log: &[u8]) -> (u64, u64, u64, bool) {
        use tokio_util::codec::Decoder;
        let mut decoder = crate::decoder::LogDecoder::builder()
            .recovery(crate::decoder::Recovery::SkipCorrupted)
            .input(crate::decoder::LogInput::File)
            .build();
        let mut buffer = BytesMut::from(log);
        while let Some(_record) = decoder.decode_eof(&mut buffer).unwrap() {}
        let stats = decoder.stats();
        (
            stats.fragments,
            stats.trailer_bytes,
            stats.zero_fill_bytes,
            decoder.has_incomplete_tail(),
        )
    }

    fn assert_walk_agrees_with_decoder(log: &[u8]) {
        let (walk, decoded) = (decoder_counts_from_walk(log), decoder_counts(log));
        assert_eq!((walk.0, walk.1, walk.2), (decoded.0, decoded.1, decoded.2));
        assert!(!walk.3 || decoded.3, "a torn walk is an incomplete tail");
    }

    /// Preallocated zeros that end a few bytes into a block: those bytes are a
    /// header cut short for both (found by the property test below).
    #[test]
    fn zeros_ending_a_few_bytes_into_a_block_are_torn_for_both() {
        let records: Vec<Vec<u8>> = [7044usize, 36978, 14813, 21889]
            .iter()
            .map(|&n| vec![n as u8 | 1; n])
            .collect();
        let mut log = encode(&records);
        for spill in 1..HEADER_SIZE {
            log.resize(4 * BLOCK_SIZE + spill, 0);
            assert!(decoder_counts_from_walk(&log).3, "{spill} bytes: torn walk");
            assert_walk_agrees_with_decoder(&log);
        }
    }

    proptest! {
        #[test]
        fn any_bytes_are_tiled_without_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..3 * BLOCK_SIZE),
            start_block in 0u64..4,
        ) {
            assert_tiles(&bytes, start_block * BLOCK_SIZE as u64);
        }

        #[test]
        fn damaged_logs_are_tiled_and_agree_block_by_block(
            lens in proptest::collection::vec(0usize..50_000, 1..8),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
            cut in any::<prop::sample::Index>(),
        ) {
            let records: Vec<Vec<u8>> = lens.iter().map(|&n| vec![n as u8; n]).collect();
            let mut log = encode(&records);
            for (at, value) in flips {
                let at = at.index(log.len());
                log[at] = value;
            }
            let log = &log[..cut.index(log.len() + 1)];
            assert_tiles(log, 0);
            let mut by_block = Vec::new();
            for (i, block) in log.chunks(BLOCK_SIZE).enumerate() {
                by_block.extend(layout(block, (i * BLOCK_SIZE) as u64));
            }
            prop_assert_eq!(by_block, layout(log, 0));
            assert_walk_agrees_with_decoder(log);
        }

        #[test]
        fn walk_and_decoder_agree_on_zero_filled_and_trailing_logs(
            lens in proptest::collection::vec(0usize..40_000, 1..6),
            zeros in proptest::collection::vec((any::<prop::sample::Index>(), 1usize..40_000), 0..3),
            tail_zeros in 0usize..70_000,
        ) {
            let records: Vec<Vec<u8>> = lens.iter().map(|&n| vec![n as u8 | 1; n]).collect();
            let mut log = encode(&records);
            for (at, len) in zeros {
                let at = at.index(log.len());
                let end = (at + len).min(log.len());
                log[at..end].fill(0);
            }
            log.resize(log.len() + tail_zeros, 0);
            assert_tiles(&log, 0);
            assert_walk_agrees_with_decoder(&log);
        }
    }
}

#[cfg(test)]
mod piece_tests {
    use super::*;
    use crate::codec::encoder::LogEncoder;
    use crate::format::fragment::{legacy_header, recyclable_header, Part};
    use crate::format::metadata::TimestampSize;
    use bytes::BytesMut;
    use proptest::prelude::*;

    fn rocksdb(log_number: u64) -> FragmentRules {
        FragmentRules::new(Dialect::RocksDb).log_number(log_number)
    }

    /// A compact rendering of a walk in RocksDB's dialect.
    fn layout(bytes: &[u8], offset: u64, rules: FragmentRules) -> Vec<String> {
        Pieces::new(bytes, offset, rules)
            .map(|piece| match piece {
                Piece::Fragment {
                    offset,
                    fragment,
                    payload,
                    checksum_ok,
                } => format!(
                    "{offset} t{} h{} {}{} {}{}",
                    fragment.type_byte(),
                    fragment.header_len(),
                    payload.len(),
                    fragment
                        .log_number()
                        .map(|n| format!(" log{n}"))
                        .unwrap_or_default(),
                    if checksum_ok { "ok" } else { "bad" },
                    if fragment.is_ignorable() {
                        " ignorable"
                    } else {
                        ""
                    }
                ),
                Piece::Metadata { offset, record, .. } => format!("{offset} meta {record:?}"),
                Piece::Old {
                    offset,
                    fragment,
                    checksum_ok,
                    ..
                } => format!(
                    "{offset} old log{} {}",
                    fragment.log_number().unwrap(),
                    if checksum_ok { "ok" } else { "bad" }
                ),
                Piece::Trailer { offset, bytes } => format!("pad {offset} {}", bytes.len()),
                Piece::ZeroFill { offset, bytes } => format!("zero {offset} {}", bytes.len()),
                Piece::BadLength { offset, bytes, .. } => {
                    format!("badlen {offset} {}", bytes.len())
                }
                Piece::Skipped { offset, bytes } => format!("skip {offset} {}", bytes.len()),
                Piece::Torn { offset, bytes, .. } => format!("torn {offset} {}", bytes.len()),
            })
            .collect()
    }

    fn assert_tiles(bytes: &[u8], offset: u64, rules: FragmentRules) {
        let mut at = offset;
        for piece in Pieces::new(bytes, offset, rules) {
            assert_eq!(piece.offset(), at);
            assert!(!piece.is_empty());
            at = piece.end();
        }
        assert_eq!(at, offset + bytes.len() as u64);
    }

    fn recyclable_log(log_number: u64, sizes: &[usize]) -> BytesMut {
        let mut encoder = LogEncoder::builder().recyclable(log_number).build();
        let mut log = BytesMut::new();
        for &size in sizes {
            encoder.encode_record(&vec![size as u8; size], &mut log);
        }
        log
    }

    #[test]
    fn leveldb_pieces_are_the_chunks() {
        let mut log = recyclable_log(3, &[10, 40_000]);
        log[20] ^= 1;
        let pieces: Vec<_> = Pieces::new(&log, 0, FragmentRules::new(Dialect::LevelDb))
            .map(|piece| (piece.offset(), piece.len()))
            .collect();
        let chunks: Vec<_> = Chunks::new(&log, 0)
            .map(|chunk| (chunk.offset(), chunk.len()))
            .collect();
        assert_eq!(pieces, chunks);
    }

    #[test]
    fn recyclable_fragments_show_their_header_size_and_log_number() {
        // 32,768 - 11 - 32,750 = 7 bytes left: a 7-byte recyclable trailer.
        let log = recyclable_log(14, &[32_750, 5]);
        assert_eq!(
            layout(&log, 0, rocksdb(14)),
            [
                "0 t5 h11 32750 log14 ok",
                "pad 32761 7",
                "32768 t5 h11 5 log14 ok"
            ]
        );
        for trailer in 7..=10 {
            let log = recyclable_log(14, &[BLOCK_SIZE - 11 - trailer, 1]);
            assert_eq!(
                layout(&log, 0, rocksdb(14))[1],
                format!("pad {} {trailer}", BLOCK_SIZE - trailer)
            );
        }
        // Exactly 11 bytes left: an empty R-FIRST, then the rest in the next block.
        let log = recyclable_log(14, &[BLOCK_SIZE - 22, 100]);
        assert_eq!(
            layout(&log, 0, rocksdb(14))[1..],
            ["32757 t6 h11 0 log14 ok", "32768 t8 h11 100 log14 ok"]
        );
        let first = Pieces::new(&log, 0, rocksdb(14)).nth(1).unwrap();
        assert_eq!(first.fragment().unwrap().part(), Some(Part::First));
    }

    #[test]
    fn fragments_of_another_log_are_old_whatever_their_checksum() {
        let mut log = recyclable_log(12, &[3]);
        log.extend_from_slice(&recyclable_log(8, &[3, 3, 4])[14..]);
        let mut damaged = log.clone();
        damaged[14 + 12] ^= 1;
        assert_eq!(
            layout(&log, 0, rocksdb(12)),
            ["0 t5 h11 3 log12 ok", "14 old log8 ok", "28 old log8 ok"]
        );
        assert_eq!(
            layout(&damaged, 0, rocksdb(12)),
            ["0 t5 h11 3 log12 ok", "14 old log8 bad", "28 old log8 ok"]
        );
        // Read as log 8, it is log 12's fragment that is old.
        assert_eq!(layout(&log, 0, rocksdb(8))[0], "0 old log12 ok");
    }

    #[test]
    fn metadata_records_are_parsed() {
        let mut log = legacy_header(9, &[7, 0, 0, 0]).to_vec();
        log.extend_from_slice(&[7, 0, 0, 0]);
        let mut encoder = LogEncoder::builder().recyclable(5).offset(11).build();
        let mut rest = BytesMut::new();
        encoder
            .encode_timestamp_sizes(
                &[TimestampSize {
                    column_family: 2,
                    timestamp_size: 8,
                }],
                &mut rest,
            )
            .unwrap();
        let info = PredecessorWalInfo {
            log_number: 4,
            size_bytes: 4096,
            last_sequence: 99,
        };
        encoder.encode_predecessor_wal_info(&info, &mut rest);
        encoder.encode_record(b"data", &mut rest);
        log.extend_from_slice(&rest);

        let pieces: Vec<_> = Pieces::new(&log, 0, rocksdb(5)).collect();
        assert_eq!(pieces.len(), 4);
        match pieces[0] {
            Piece::Metadata {
                fragment, record, ..
            } => {
                assert_eq!(fragment.header_len(), 7);
                assert_eq!(record, Ok(Metadata::Compression(WalCompressionType::Zstd)));
            }
            other => panic!("{other:?}"),
        }
        match pieces[1] {
            Piece::Metadata {
                fragment,
                record: Ok(Metadata::TimestampSizes(sizes)),
                ..
            } => {
                assert_eq!(fragment.type_byte(), 11);
                assert_eq!(fragment.header_len(), 11);
                let entries: Vec<_> = sizes
                    .iter()
                    .map(|s| (s.column_family, s.timestamp_size))
                    .collect();
                assert_eq!(entries, [(2, 8)]);
            }
            other => panic!("{other:?}"),
        }
        match pieces[2] {
            Piece::Metadata {
                fragment, record, ..
            } => {
                assert_eq!(fragment.type_byte(), 131);
                assert_eq!(record, Ok(Metadata::PredecessorWal(info)));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            pieces[3],
            Piece::Fragment {
                checksum_ok: true,
                ..
            }
        ));
        // LevelDB knows none of them: type 9 is a fragment of an unknown type.
        let first = Pieces::new(&log, 0, FragmentRules::new(Dialect::LevelDb))
            .next()
            .unwrap();
        assert!(matches!(
            first,
            Piece::Fragment { fragment, checksum_ok: true, .. } if fragment.fragment_type().is_none()
        ));
    }

    #[test]
    fn a_malformed_metadata_payload_is_an_error_not_a_panic() {
        let mut log = legacy_header(130, &[1, 2, 3]).to_vec();
        log.extend_from_slice(&[1, 2, 3]);
        match Pieces::new(&log, 0, rocksdb(1)).next().unwrap() {
            Piece::Metadata { record, .. } => {
                assert_eq!(record, Err(MetadataError::TooShort { needed: 24, len: 3 }))
            }
            other => panic!("{other:?}"),
        }
        // With a bad checksum it is only a damaged fragment.
        log[7] ^= 1;
        assert_eq!(layout(&log, 0, rocksdb(1)), ["0 t130 h7 3 bad"]);
    }

    #[test]
    fn unknown_types_with_bit_7_are_ignorable() {
        let mut log = legacy_header(200, b"meta").to_vec();
        log.extend_from_slice(b"meta");
        let mut recyclable = recyclable_header(5, 1, b"x").to_vec();
        recyclable.push(b'x');
        log.extend_from_slice(&recyclable);
        assert_eq!(
            layout(&log, 0, rocksdb(1)),
            ["0 t200 h7 4 ok ignorable", "11 t5 h11 1 log1 ok"]
        );
    }

    proptest! {
        #[test]
        fn any_bytes_are_tiled_in_rocksdb_without_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..2 * BLOCK_SIZE),
            start_block in 0u64..3,
            log_number in 0u64..3,
        ) {
            assert_tiles(&bytes, start_block * BLOCK_SIZE as u64, rocksdb(log_number));
        }

        #[test]
        fn damaged_recycled_logs_are_tiled_and_agree_block_by_block(
            lens in proptest::collection::vec(0usize..40_000, 1..6),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut log = recyclable_log(9, &lens);
            for (at, value) in flips {
                let at = at.index(log.len());
                log[at] = value;
            }
            let log = &log[..cut.index(log.len() + 1)];
            assert_tiles(log, 0, rocksdb(9));
            let mut by_block = Vec::new();
            for (i, block) in log.chunks(BLOCK_SIZE).enumerate() {
                by_block.extend(layout(block, (i * BLOCK_SIZE) as u64, rocksdb(9)));
            }
            prop_assert_eq!(by_block, layout(log, 0, rocksdb(9)));
        }
    }
}
