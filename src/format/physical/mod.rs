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
mod tests;

#[cfg(test)]
mod piece_tests;
