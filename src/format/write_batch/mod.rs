//! WriteBatch decoding: the payload of every record in a LevelDB or RocksDB
//! write-ahead log.
//!
//! A WriteBatch is a 12-byte header (fixed64 LE sequence number, fixed32 LE count)
//! followed by operations, each a tag byte and its fields. Strings are varint32
//! length-prefixed; a column-family tag puts a varint32 column family id first.
//!
//! | operation      | tag  | CF tag | fields                         | counted |
//! |----------------|------|--------|--------------------------------|---------|
//! | Put            | 0x01 | 0x05   | key, value                     | yes     |
//! | Delete         | 0x00 | 0x04   | key                            | yes     |
//! | SingleDelete   | 0x07 | 0x08   | key                            | yes     |
//! | DeleteRange    | 0x0F | 0x0E   | begin, end                     | yes     |
//! | Merge          | 0x02 | 0x06   | key, value                     | yes     |
//! | BlobIndex      | 0x11 | 0x10   | key, blob index                | yes     |
//! | PutEntity      | 0x16 | 0x17   | key, wide columns              | yes     |
//! | TimedPut       | 0x18 | 0x19   | key, value ‖ fixed64 time      | yes     |
//! | LogData        | 0x03 |        | blob                           | no      |
//! | BeginPrepare   | 0x09, 0x12, 0x13 | | —                         | no      |
//! | EndPrepare, Commit, Rollback | 0x0A, 0x0B, 0x0C | | xid          | no      |
//! | Noop           | 0x0D |        | —                              | no      |
//! | CommitWithTimestamp | 0x15 |   | timestamp, xid                 | no      |
//!
//! LevelDB knows only Put (1) and Delete (0); RocksDB's tags are a superset with the
//! same meaning for those two. Pebble ([`Dialect::Pebble`]) shares 0–3, 7 and 0x0F
//! and gives the tags above 0x0F its own kinds, never with a column family:
//!
//! | Pebble kind        | tag  | fields        | as                                  |
//! |--------------------|------|---------------|-------------------------------------|
//! | SETWITHDEL         | 0x12 | key           | [`Operation::PebbleKey`]            |
//! | RANGEKEYDEL        | 0x13 | start, end    | [`Operation::RangeKeyDelete`]       |
//! | RANGEKEYUNSET      | 0x14 | start, value  | [`Operation::RangeKeyUnset`]        |
//! | RANGEKEYSET        | 0x15 | start, value  | [`Operation::RangeKeySet`]          |
//! | INGESTSST          | 0x16 | key           | [`Operation::PebbleKey`]            |
//! | DELETESIZED        | 0x17 | key, value    | [`Operation::PebbleKey`]            |
//! | EXCISE             | 0x18 | start, end    | [`Operation::PebbleKey`]            |
//! | INGESTSSTWITHBLOBS | 0x1A | key, value    | [`Operation::PebbleKey`]            |
//!
//! (as Pebble's `batchrepr.Read` decodes them); any other tag above 0x0F is unknown. An unknown tag ends the walk (its fields' length is
//! unknown) and is handed over with the rest of the batch as raw bytes.
//!
//! Decoding borrows from the record, allocates nothing, and never panics: damage is a
//! [`WriteBatchError`].
//!
//! ```
//! use walcodec::write_batch::{Operation, WriteBatch};
//! use walcodec::Dialect;
//!
//! // Sequence 7, two operations: Put("k", "v") and Delete("old").
//! let record = b"\x07\0\0\0\0\0\0\0\x02\0\0\0\x01\x01k\x01v\x00\x03old";
//! let batch = WriteBatch::parse(record, Dialect::LevelDb).unwrap();
//! assert_eq!((batch.sequence(), batch.count()), (7, 2));
//! let operations: Vec<_> = batch.operations().collect::<Result<_, _>>().unwrap();
//! assert_eq!(
//!     operations,
//!     [
//!         Operation::Put { column_family: 0, key: b"k", value: b"v" },
//!         Operation::Delete { column_family: 0, key: b"old" },
//!     ]
//! );
//! assert_eq!(batch.to_ldb_string(true), "PUT(0) : 0x6B : 0x76 DELETE(0) : 0x6F6C64 ");
//! ```

// Why one file: one parser for one payload format (LevelDB's and RocksDB's tags); about
// 750 lines of code, the rest unit tests.

use std::fmt::{self, Write as _};

use crate::format::fragment::Dialect;

/// Size of a WriteBatch header: fixed64 sequence, fixed32 count.
pub const WRITE_BATCH_HEADER_SIZE: usize = 12;

/// A WriteBatch that does not decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum WriteBatchError {
    /// The record is shorter than the 12-byte header ("log record too small").
    #[error("write batch too small ({len} < 12 bytes)")]
    TooSmall {
        /// The record's length.
        len: usize,
    },
    /// An operation's fields run past the end of the batch, or a varint is malformed.
    #[error("malformed write batch operation with tag {tag:#04x} at byte {at}")]
    Malformed {
        /// The operation's tag.
        tag: u8,
        /// Offset of the tag in the record.
        at: usize,
    },
    /// The header's count differs from the counted operations.
    #[error("write batch has wrong count ({declared} declared, {found} found)")]
    WrongCount {
        /// The header's count.
        declared: u32,
        /// Operations found.
        found: u32,
    },
}

/// One operation of a WriteBatch. Byte strings borrow from the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Operation<'a> {
    /// Put `key` = `value`.
    Put {
        /// Column family id (0 = default, and always 0 for a tag without a CF).
        column_family: u32,
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
    },
    /// Delete `key`.
    Delete {
        /// Column family id.
        column_family: u32,
        /// The key.
        key: &'a [u8],
    },
    /// Delete `key`, which was put at most once.
    SingleDelete {
        /// Column family id.
        column_family: u32,
        /// The key.
        key: &'a [u8],
    },
    /// Delete the keys in `begin..end`.
    DeleteRange {
        /// Column family id.
        column_family: u32,
        /// First key deleted.
        begin: &'a [u8],
        /// First key kept.
        end: &'a [u8],
    },
    /// Merge `value` into `key`.
    Merge {
        /// Column family id.
        column_family: u32,
        /// The key.
        key: &'a [u8],
        /// The operand.
        value: &'a [u8],
    },
    /// A reference to a value in a blob file.
    BlobIndex {
        /// Column family id.
        column_family: u32,
        /// The key.
        key: &'a [u8],
        /// The encoded blob index.
        blob_index: &'a [u8],
    },
    /// Put a wide-column entity.
    PutEntity {
        /// Column family id.
        column_family: u32,
        /// The key.
        key: &'a [u8],
        /// The serialized columns.
        columns: &'a [u8],
    },
    /// Put with a write time (RocksDB's `TimedPut`).
    TimedPut {
        /// Column family id.
        column_family: u32,
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
        /// The write time (or preferred sequence number) packed after the value.
        write_time: u64,
    },
    /// A blob stored in the WAL only, not applied to the database.
    LogData {
        /// The blob.
        blob: &'a [u8],
    },
    /// Begins a prepared section (tags 0x09, 0x12 persisted, 0x13 unprepared).
    BeginPrepare {
        /// The tag: which kind of begin.
        tag: u8,
    },
    /// Ends a prepared section.
    EndPrepare {
        /// The transaction id.
        xid: &'a [u8],
    },
    /// Commits a prepared transaction.
    Commit {
        /// The transaction id.
        xid: &'a [u8],
    },
    /// Commits a prepared transaction with a commit timestamp.
    CommitWithTimestamp {
        /// The commit timestamp.
        timestamp: &'a [u8],
        /// The transaction id.
        xid: &'a [u8],
    },
    /// Rolls back a prepared transaction.
    Rollback {
        /// The transaction id.
        xid: &'a [u8],
    },
    /// A placeholder.
    Noop,
    /// Pebble: delete the range keys in `start..end` (RANGEKEYDEL, 0x13).
    RangeKeyDelete {
        /// First key of the span.
        start: &'a [u8],
        /// First key after it.
        end: &'a [u8],
    },
    /// Pebble: remove range keys of some suffixes (RANGEKEYUNSET, 0x14).
    RangeKeyUnset {
        /// First key of the span.
        start: &'a [u8],
        /// The span's end key and the suffixes, as Pebble's `rangekey` encodes them.
        value: &'a [u8],
    },
    /// Pebble: set range keys (RANGEKEYSET, 0x15).
    RangeKeySet {
        /// First key of the span.
        start: &'a [u8],
        /// The span's end key and the suffix/value pairs, as Pebble's `rangekey`
        /// encodes them.
        value: &'a [u8],
    },
    /// Pebble: another of its kinds (SETWITHDEL, INGESTSST, DELETESIZED, EXCISE,
    /// INGESTSSTWITHBLOBS): its tag, key and value (for the kinds that have one).
    PebbleKey {
        /// The kind (`InternalKeyKind`).
        kind: u8,
        /// The key.
        key: &'a [u8],
        /// The value, for the kinds that carry one.
        value: Option<&'a [u8]>,
    },
    /// A tag this dialect does not know: the tag and every byte after it. The walk
    /// ends here.
    Unknown {
        /// The tag.
        tag: u8,
        /// The bytes after the tag, to the end of the batch.
        rest: &'a [u8],
    },
}

impl Operation<'_> {
    /// Whether the operation counts toward the header's count.
    pub fn is_counted(&self) -> bool {
        matches!(
            self,
            Operation::Put { .. }
                | Operation::Delete { .. }
                | Operation::SingleDelete { .. }
                | Operation::DeleteRange { .. }
                | Operation::Merge { .. }
                | Operation::BlobIndex { .. }
                | Operation::PutEntity { .. }
                | Operation::TimedPut { .. }
                | Operation::RangeKeyDelete { .. }
                | Operation::RangeKeyUnset { .. }
                | Operation::RangeKeySet { .. }
                | Operation::PebbleKey { .. }
        )
    }

    /// Writes the operation as `ldb dump_wal` does (hex in upper case, `0x` for an
    /// empty string, a space after each operation); values only with `print_value`.
    ///
    /// Checked against RocksDB 7.8.3's ldb for Put, Delete, SingleDelete,
    /// DeleteRange, Merge (with and without column families), Noop, LogData (which
    /// ldb does not print), BeginPrepare, EndPrepare and Commit
    /// (`scripts/rocksdb-check.sh`); the others follow ldb's source.
    pub fn write_ldb(&self, out: &mut impl fmt::Write, print_value: bool) -> fmt::Result {
        let key_value =
            |out: &mut dyn fmt::Write, name: &str, cf: u32, key: &[u8], value: &[u8]| {
                write!(out, "{name}({cf}) : {}", Hex(key))?;
                if print_value {
                    write!(out, " : {}", Hex(value))?;
                }
                out.write_char(' ')
            };
        match *self {
            Operation::Put {
                column_family,
                key,
                value,
            } => key_value(out, "PUT", column_family, key, value),
            Operation::Merge {
                column_family,
                key,
                value,
            } => key_value(out, "MERGE", column_family, key, value),
            Operation::PutEntity {
                column_family,
                key,
                columns,
            } => key_value(out, "PUT_ENTITY", column_family, key, columns),
            Operation::BlobIndex {
                column_family,
                key,
                blob_index,
            } => key_value(out, "BLOB_INDEX", column_family, key, blob_index),
            Operation::TimedPut {
                column_family,
                key,
                value,
                write_time,
            } => {
                key_value(out, "TIMED_PUT", column_family, key, value)?;
                write!(out, "@ {write_time} ")
            }
            Operation::Delete { column_family, key } => {
                write!(out, "DELETE({column_family}) : {} ", Hex(key))
            }
            Operation::SingleDelete { column_family, key } => {
                write!(out, "SINGLE_DELETE({column_family}) : {} ", Hex(key))
            }
            Operation::DeleteRange {
                column_family,
                begin,
                end,
            } => write!(
                out,
                "DELETE_RANGE({column_family}) : {} {} ",
                Hex(begin),
                Hex(end)
            ),
            // ldb prints nothing for a blob that is not applied.
            Operation::LogData { .. } => Ok(()),
            Operation::BeginPrepare { tag } => {
                let unprepared = tag == tag::BEGIN_UNPREPARE;
                write!(out, "BEGIN_PREPARE({unprepared}) ")
            }
            Operation::EndPrepare { xid } => write!(out, "END_PREPARE({}) ", Hex(xid)),
            Operation::Commit { xid } => write!(out, "COMMIT({}) ", Hex(xid)),
            Operation::CommitWithTimestamp { timestamp, xid } => write!(
                out,
                "COMMIT_WITH_TIMESTAMP({}, {}) ",
                Hex(xid),
                Hex(timestamp)
            ),
            Operation::Rollback { xid } => write!(out, "ROLLBACK({}) ", Hex(xid)),
            Operation::Noop => out.write_str("NOOP "),
            Operation::RangeKeyDelete { start, end } => {
                write!(out, "RANGEKEYDEL : {} {} ", Hex(start), Hex(end))
            }
            Operation::RangeKeyUnset { start, value } => {
                key_value(out, "RANGEKEYUNSET", 0, start, value)
            }
            Operation::RangeKeySet { start, value } => {
                key_value(out, "RANGEKEYSET", 0, start, value)
            }
            Operation::PebbleKey { kind, key, value } => {
                let name = pebble_kind_name(kind);
                key_value(out, name, 0, key, value.unwrap_or_default())
            }
            Operation::Unknown { tag, rest } => {
                write!(out, "UNKNOWN({tag:#04x}) : {} ", Hex(rest))
            }
        }
    }
}

/// Upper-case hex with a `0x` prefix, as ldb prints strings.
struct Hex<'a>(&'a [u8]);

impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("0x")?;
        for byte in self.0 {
            write!(f, "{byte:02X}")?;
        }
        Ok(())
    }
}

/// The tags of WriteBatch operations (RocksDB's `ValueType`s valid in a batch).
pub mod tag {
    /// Delete, default column family.
    pub const DELETE: u8 = 0x00;
    /// Put, default column family.
    pub const PUT: u8 = 0x01;
    /// Merge, default column family.
    pub const MERGE: u8 = 0x02;
    /// LogData.
    pub const LOG_DATA: u8 = 0x03;
    /// Delete with a column family.
    pub const CF_DELETE: u8 = 0x04;
    /// Put with a column family.
    pub const CF_PUT: u8 = 0x05;
    /// Merge with a column family.
    pub const CF_MERGE: u8 = 0x06;
    /// SingleDelete, default column family.
    pub const SINGLE_DELETE: u8 = 0x07;
    /// SingleDelete with a column family.
    pub const CF_SINGLE_DELETE: u8 = 0x08;
    /// Begin prepare.
    pub const BEGIN_PREPARE: u8 = 0x09;
    /// End prepare.
    pub const END_PREPARE: u8 = 0x0A;
    /// Commit.
    pub const COMMIT: u8 = 0x0B;
    /// Rollback.
    pub const ROLLBACK: u8 = 0x0C;
    /// Noop.
    pub const NOOP: u8 = 0x0D;
    /// DeleteRange with a column family.
    pub const CF_DELETE_RANGE: u8 = 0x0E;
    /// DeleteRange, default column family.
    pub const DELETE_RANGE: u8 = 0x0F;
    /// BlobIndex with a column family.
    pub const CF_BLOB_INDEX: u8 = 0x10;
    /// BlobIndex, default column family.
    pub const BLOB_INDEX: u8 = 0x11;
    /// Begin persisted prepare.
    pub const BEGIN_PERSISTED_PREPARE: u8 = 0x12;
    /// Begin unprepare.
    pub const BEGIN_UNPREPARE: u8 = 0x13;
    /// Commit with timestamp.
    pub const COMMIT_WITH_TIMESTAMP: u8 = 0x15;
    /// PutEntity, default column family.
    pub const PUT_ENTITY: u8 = 0x16;
    /// PutEntity with a column family.
    pub const CF_PUT_ENTITY: u8 = 0x17;
    /// TimedPut, default column family.
    pub const TIMED_PUT: u8 = 0x18;
    /// TimedPut with a column family.
    pub const CF_TIMED_PUT: u8 = 0x19;
}

/// A WriteBatch: its header, and its operations to walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WriteBatch<'a> {
    sequence: u64,
    count: u32,
    record: &'a [u8],
    dialect: Dialect,
}

impl<'a> WriteBatch<'a> {
    /// Reads the header of `record`; the operations are decoded as they are walked.
    /// In [`Dialect::LevelDb`] only Put and Delete are known tags.
    pub fn parse(record: &'a [u8], dialect: Dialect) -> Result<WriteBatch<'a>, WriteBatchError> {
        let Some(header) = record.get(..WRITE_BATCH_HEADER_SIZE) else {
            return Err(WriteBatchError::TooSmall { len: record.len() });
        };
        let mut sequence = [0; 8];
        sequence.copy_from_slice(&header[..8]);
        let mut count = [0; 4];
        count.copy_from_slice(&header[8..]);
        Ok(WriteBatch {
            sequence: u64::from_le_bytes(sequence),
            count: u32::from_le_bytes(count),
            record,
            dialect,
        })
    }

    /// The sequence number of the first operation.
    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    /// The header's count of operations (those that [`Operation::is_counted`]).
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The record's size in bytes (ldb's "ByteSize").
    pub fn byte_size(&self) -> usize {
        self.record.len()
    }

    /// The operations, in order. A malformed operation is an error and ends the
    /// walk; so does a count that does not match, reported after the last operation.
    pub fn operations(&self) -> Operations<'a> {
        Operations {
            record: self.record,
            at: WRITE_BATCH_HEADER_SIZE,
            dialect: self.dialect,
            declared: self.count,
            found: 0,
            done: false,
        }
    }

    /// The operations as `ldb dump_wal` prints them after `seq,count,size,offset,`
    /// (an error ends the text with `ERROR: …`).
    pub fn to_ldb_string(&self, print_value: bool) -> String {
        let mut out = String::new();
        for operation in self.operations() {
            let written = match operation {
                Ok(operation) => operation.write_ldb(&mut out, print_value),
                Err(error) => write!(out, "ERROR: {error}"),
            };
            // Writing to a String cannot fail.
            debug_assert!(written.is_ok());
        }
        out
    }
}

/// The operations of a [`WriteBatch`]; see [`WriteBatch::operations`].
#[derive(Debug, Clone)]
pub struct Operations<'a> {
    record: &'a [u8],
    at: usize,
    dialect: Dialect,
    declared: u32,
    found: u32,
    done: bool,
}

/// A cursor over an operation's fields; `None` when they run past the batch.
struct Fields<'a> {
    bytes: &'a [u8],
}

impl<'a> Fields<'a> {
    fn varint32(&mut self) -> Option<u32> {
        let mut value = 0u32;
        for (i, &byte) in self.bytes.iter().enumerate().take(5) {
            let bits = u32::from(byte & 0x7f);
            if i == 4 && bits > 0x0f {
                return None;
            }
            value |= bits << (7 * i);
            if byte & 0x80 == 0 {
                self.bytes = &self.bytes[i + 1..];
                return Some(value);
            }
        }
        None
    }

    fn string(&mut self) -> Option<&'a [u8]> {
        let len = self.varint32()? as usize;
        if len > self.bytes.len() {
            return None;
        }
        let (string, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        Some(string)
    }

    fn column_family(&mut self, with_cf: bool) -> Option<u32> {
        if with_cf {
            self.varint32()
        } else {
            Some(0)
        }
    }
}

/// Pebble's name of a kind (`InternalKeyKind.String`).
fn pebble_kind_name(kind: u8) -> &'static str {
    match kind {
        0x12 => "SETWITHDEL",
        0x16 => "INGESTSST",
        0x17 => "DELETESIZED",
        0x18 => "EXCISE",
        0x1a => "INGESTSSTWITHBLOBS",
        _ => "PEBBLE_KIND",
    }
}

impl<'a> Operations<'a> {
    /// Pebble's kinds: a key, then a value for the kinds that carry one.
    fn decode_pebble(&self, tag: u8, fields: &mut Fields<'a>) -> Option<Operation<'a>> {
        use tag::*;
        let operation = match tag {
            PUT => Operation::Put {
                column_family: 0,
                key: fields.string()?,
                value: fields.string()?,
            },
            DELETE => Operation::Delete {
                column_family: 0,
                key: fields.string()?,
            },
            MERGE => Operation::Merge {
                column_family: 0,
                key: fields.string()?,
                value: fields.string()?,
            },
            LOG_DATA => Operation::LogData {
                blob: fields.string()?,
            },
            SINGLE_DELETE => Operation::SingleDelete {
                column_family: 0,
                key: fields.string()?,
            },
            DELETE_RANGE => Operation::DeleteRange {
                column_family: 0,
                begin: fields.string()?,
                end: fields.string()?,
            },
            0x13 => Operation::RangeKeyDelete {
                start: fields.string()?,
                end: fields.string()?,
            },
            0x14 => Operation::RangeKeyUnset {
                start: fields.string()?,
                value: fields.string()?,
            },
            0x15 => Operation::RangeKeySet {
                start: fields.string()?,
                value: fields.string()?,
            },
            0x12 | 0x16 => Operation::PebbleKey {
                kind: tag,
                key: fields.string()?,
                value: None,
            },
            0x17 | 0x18 | 0x1a => Operation::PebbleKey {
                kind: tag,
                key: fields.string()?,
                value: Some(fields.string()?),
            },
            _ => {
                return Some(Operation::Unknown {
                    tag,
                    rest: fields.bytes,
                })
            }
        };
        Some(operation)
    }

    fn decode(&self, tag: u8, fields: &mut Fields<'a>) -> Option<Operation<'a>> {
        use tag::*;
        if self.dialect == Dialect::Pebble {
            return self.decode_pebble(tag, fields);
        }
        let known_to_leveldb = matches!(tag, PUT | DELETE);
        if self.dialect == Dialect::LevelDb && !known_to_leveldb {
            return Some(Operation::Unknown {
                tag,
                rest: fields.bytes,
            });
        }
        let operation = match tag {
            PUT | CF_PUT => Operation::Put {
                column_family: fields.column_family(tag == CF_PUT)?,
                key: fields.string()?,
                value: fields.string()?,
            },
            DELETE | CF_DELETE => Operation::Delete {
                column_family: fields.column_family(tag == CF_DELETE)?,
                key: fields.string()?,
            },
            SINGLE_DELETE | CF_SINGLE_DELETE => Operation::SingleDelete {
                column_family: fields.column_family(tag == CF_SINGLE_DELETE)?,
                key: fields.string()?,
            },
            DELETE_RANGE | CF_DELETE_RANGE => Operation::DeleteRange {
                column_family: fields.column_family(tag == CF_DELETE_RANGE)?,
                begin: fields.string()?,
                end: fields.string()?,
            },
            MERGE | CF_MERGE => Operation::Merge {
                column_family: fields.column_family(tag == CF_MERGE)?,
                key: fields.string()?,
                value: fields.string()?,
            },
            BLOB_INDEX | CF_BLOB_INDEX => Operation::BlobIndex {
                column_family: fields.column_family(tag == CF_BLOB_INDEX)?,
                key: fields.string()?,
                blob_index: fields.string()?,
            },
            PUT_ENTITY | CF_PUT_ENTITY => Operation::PutEntity {
                column_family: fields.column_family(tag == CF_PUT_ENTITY)?,
                key: fields.string()?,
                columns: fields.string()?,
            },
            TIMED_PUT | CF_TIMED_PUT => {
                let column_family = fields.column_family(tag == CF_TIMED_PUT)?;
                let key = fields.string()?;
                let packed = fields.string()?;
                let split = packed.len().checked_sub(8)?;
                let (value, time) = packed.split_at(split);
                let mut write_time = [0; 8];
                write_time.copy_from_slice(time);
                Operation::TimedPut {
                    column_family,
                    key,
                    value,
                    write_time: u64::from_le_bytes(write_time),
                }
            }
            LOG_DATA => Operation::LogData {
                blob: fields.string()?,
            },
            BEGIN_PREPARE | BEGIN_PERSISTED_PREPARE | BEGIN_UNPREPARE => {
                Operation::BeginPrepare { tag }
            }
            END_PREPARE => Operation::EndPrepare {
                xid: fields.string()?,
            },
            COMMIT => Operation::Commit {
                xid: fields.string()?,
            },
            ROLLBACK => Operation::Rollback {
                xid: fields.string()?,
            },
            COMMIT_WITH_TIMESTAMP => Operation::CommitWithTimestamp {
                timestamp: fields.string()?,
                xid: fields.string()?,
            },
            NOOP => Operation::Noop,
            _ => Operation::Unknown {
                tag,
                rest: fields.bytes,
            },
        };
        Some(operation)
    }
}

impl<'a> Iterator for Operations<'a> {
    type Item = Result<Operation<'a>, WriteBatchError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let Some((&tag, after_tag)) = self.record.get(self.at..).and_then(<[u8]>::split_first)
        else {
            self.done = true;
            return (self.found != self.declared).then_some(Err(WriteBatchError::WrongCount {
                declared: self.declared,
                found: self.found,
            }));
        };
        let mut fields = Fields { bytes: after_tag };
        let Some(operation) = self.decode(tag, &mut fields) else {
            self.done = true;
            return Some(Err(WriteBatchError::Malformed { tag, at: self.at }));
        };
        if let Operation::Unknown { .. } = operation {
            // Its fields' length is unknown: nothing after it can be read.
            self.done = true;
        }
        self.found += u32::from(operation.is_counted());
        self.at = self.record.len() - fields.bytes.len();
        Some(Ok(operation))
    }
}

#[cfg(test)]
mod tests;
