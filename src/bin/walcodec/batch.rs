//! `dump --format batch` and `batch-json`: each record decoded as the WriteBatch that
//! LevelDB and RocksDB store in their WAL records.
//!
//! | format       | line                                                                   |
//! |--------------|------------------------------------------------------------------------|
//! | `batch`      | `SEQUENCE,COUNT,BYTES,OFFSET,OPERATIONS`, as `ldb dump_wal --print_value` |
//! | `batch-json` | `{"offset":O,"end":E,"sequence":S,"count":C,"byte_size":B,"operations":[…]}` |
//!
//! Operations print as ldb prints them: `PUT(CF) : 0xKEY : 0xVALUE `,
//! `DELETE(CF) : 0xKEY `, `SINGLE_DELETE`, `DELETE_RANGE(CF) : 0xBEGIN 0xEND `,
//! `MERGE`, `BLOB_INDEX`, `PUT_ENTITY`, `TIMED_PUT … @ TIME `, `BEGIN_PREPARE(bool)`,
//! `END_PREPARE(0xXID)`, `COMMIT(0xXID)`, `ROLLBACK(0xXID)`, `NOOP`, and a tag the
//! dialect does not know as `UNKNOWN(0xTAG) : 0xREST ` (the walk ends there). OFFSET
//! is where the record's first header starts; ldb prints a trailer's offset instead
//! when the record follows a 1-to-6-byte trailer. In JSON each operation is an
//! object: `{"op":"put","cf":0,"key":"HEX","value":"HEX"}`, … (lowercase hex).
//!
//! A batch that does not decode (shorter than its 12-byte header, a malformed
//! operation, a count that does not match) is reported on stderr; the operations
//! before the fault are still printed, then `ERROR: …` (JSON: `"error":"…"`).

use walcodec::write_batch::{Operation, WriteBatch, WriteBatchError};
use walcodec::{Dialect, LogRecord};

use crate::common::hex_into;
use crate::json::JsonObject;

/// Appends the line of `record` (with its newline) decoded as a WriteBatch with the
/// tags of `dialect`, as JSON when `json`. Nothing is appended for a record too short
/// for a batch header.
pub(crate) fn format_batch(
    record: &LogRecord,
    dialect: Dialect,
    json: bool,
    line: &mut Vec<u8>,
) -> Result<(), WriteBatchError> {
    let batch = WriteBatch::parse(&record.data, dialect)?;
    let mut error = None;
    if json {
        let mut operations = Vec::new();
        for operation in batch.operations() {
            match operation {
                Ok(operation) => operations.push(operation_json(&operation)),
                Err(e) => error = Some(e),
            }
        }
        let mut object = JsonObject::new();
        object
            .number("offset", record.position.start)
            .number("end", record.position.end)
            .number("sequence", batch.sequence())
            .number("count", u64::from(batch.count()))
            .number("byte_size", batch.byte_size() as u64)
            .objects("operations", operations);
        if let Some(e) = &error {
            object.string("error", &e.to_string());
        }
        line.extend_from_slice(object.finish().as_bytes());
    } else {
        let mut text = format!(
            "{},{},{},{},",
            batch.sequence(),
            batch.count(),
            batch.byte_size(),
            record.position.start
        );
        for operation in batch.operations() {
            // Writing to a String cannot fail.
            let _ = match operation {
                Ok(operation) => operation.write_ldb(&mut text, true),
                Err(e) => {
                    error = Some(e);
                    std::fmt::Write::write_fmt(&mut text, format_args!("ERROR: {e}"))
                }
            };
        }
        line.extend_from_slice(text.as_bytes());
    }
    line.push(b'\n');
    match error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut out = Vec::with_capacity(bytes.len() * 2);
    hex_into(bytes, &mut out);
    String::from_utf8(out).expect("hex is ASCII")
}

/// One operation as a JSON object.
fn operation_json(operation: &Operation<'_>) -> JsonObject {
    let mut object = JsonObject::new();
    let mut keyed = |name: &str, cf: u32, fields: &[(&str, &[u8])]| {
        object.string("op", name).number("cf", u64::from(cf));
        for (field, bytes) in fields {
            object.string(field, &hex(bytes));
        }
    };
    match *operation {
        Operation::Put {
            column_family,
            key,
            value,
        } => keyed("put", column_family, &[("key", key), ("value", value)]),
        Operation::Delete { column_family, key } => keyed("delete", column_family, &[("key", key)]),
        Operation::SingleDelete { column_family, key } => {
            keyed("single_delete", column_family, &[("key", key)])
        }
        Operation::DeleteRange {
            column_family,
            begin,
            end,
        } => keyed(
            "delete_range",
            column_family,
            &[("begin", begin), ("end", end)],
        ),
        Operation::Merge {
            column_family,
            key,
            value,
        } => keyed("merge", column_family, &[("key", key), ("value", value)]),
        Operation::BlobIndex {
            column_family,
            key,
            blob_index,
        } => keyed(
            "blob_index",
            column_family,
            &[("key", key), ("blob_index", blob_index)],
        ),
        Operation::PutEntity {
            column_family,
            key,
            columns,
        } => keyed(
            "put_entity",
            column_family,
            &[("key", key), ("columns", columns)],
        ),
        Operation::TimedPut {
            column_family,
            key,
            value,
            write_time,
        } => {
            keyed(
                "timed_put",
                column_family,
                &[("key", key), ("value", value)],
            );
            object.number("write_time", write_time);
        }
        Operation::LogData { blob } => {
            object.string("op", "log_data").string("blob", &hex(blob));
        }
        Operation::BeginPrepare { tag } => {
            object
                .string("op", "begin_prepare")
                .number("tag", u64::from(tag));
        }
        Operation::EndPrepare { xid } => {
            object.string("op", "end_prepare").string("xid", &hex(xid));
        }
        Operation::Commit { xid } => {
            object.string("op", "commit").string("xid", &hex(xid));
        }
        Operation::CommitWithTimestamp { timestamp, xid } => {
            object
                .string("op", "commit_with_timestamp")
                .string("timestamp", &hex(timestamp))
                .string("xid", &hex(xid));
        }
        Operation::Rollback { xid } => {
            object.string("op", "rollback").string("xid", &hex(xid));
        }
        Operation::Noop => {
            object.string("op", "noop");
        }
        Operation::RangeKeyDelete { start, end } => {
            object
                .string("op", "range_key_delete")
                .string("start", &hex(start))
                .string("end", &hex(end));
        }
        Operation::RangeKeyUnset { start, value } => {
            object
                .string("op", "range_key_unset")
                .string("start", &hex(start))
                .string("value", &hex(value));
        }
        Operation::RangeKeySet { start, value } => {
            object
                .string("op", "range_key_set")
                .string("start", &hex(start))
                .string("value", &hex(value));
        }
        Operation::PebbleKey { kind, key, value } => {
            object
                .string("op", "pebble_kind")
                .number("kind", u64::from(kind))
                .string("key", &hex(key));
            if let Some(value) = value {
                object.string("value", &hex(value));
            }
        }
        Operation::Unknown { tag, rest } => {
            object
                .string("op", "unknown")
                .number("tag", u64::from(tag))
                .string("rest", &hex(rest));
        }
        // An operation of a newer library than this tool knows.
        _ => {
            object.string("op", "unsupported");
        }
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use walcodec::Position;

    fn record(data: &'static [u8]) -> LogRecord {
        LogRecord {
            position: Position { start: 7, end: 40 },
            data: Bytes::from_static(data),
        }
    }

    fn line(data: &'static [u8], dialect: Dialect, json: bool) -> (String, bool) {
        let mut out = Vec::new();
        let ok = format_batch(&record(data), dialect, json, &mut out).is_ok();
        (String::from_utf8(out).unwrap(), ok)
    }

    // Sequence 7, count 2: Put("k", "v"), then Delete("old") in column family 3.
    const BATCH: &[u8] = b"\x07\0\0\0\0\0\0\0\x02\0\0\0\x01\x01k\x01v\x04\x03\x03old";

    #[test]
    fn batches_print_as_ldb_prints_them() {
        assert_eq!(
            line(BATCH, Dialect::RocksDb, false),
            (
                "7,2,23,7,PUT(0) : 0x6B : 0x76 DELETE(3) : 0x6F6C64 \n".to_string(),
                true
            )
        );
    }

    #[test]
    fn batches_as_json_lines() {
        let (text, ok) = line(BATCH, Dialect::RocksDb, true);
        assert!(ok);
        assert_eq!(
            text,
            "{\"offset\":7,\"end\":40,\"sequence\":7,\"count\":2,\"byte_size\":23,\"operations\":[\
             {\"op\":\"put\",\"cf\":0,\"key\":\"6b\",\"value\":\"76\"},\
             {\"op\":\"delete\",\"cf\":3,\"key\":\"6f6c64\"}]}\n"
        );
    }

    #[test]
    fn unknown_tags_end_the_walk_as_hex() {
        // LevelDB knows no column families: tag 4 is unknown, and the rest is hex.
        let (text, ok) = line(BATCH, Dialect::LevelDb, false);
        assert!(ok);
        assert_eq!(
            text,
            "7,2,23,7,PUT(0) : 0x6B : 0x76 UNKNOWN(0x04) : 0x03036F6C64 \n"
        );
        let (json, _) = line(BATCH, Dialect::LevelDb, true);
        assert!(json.contains("{\"op\":\"unknown\",\"tag\":4,\"rest\":\"03036f6c64\"}"));
    }

    #[test]
    fn a_wrong_count_is_an_error_after_the_operations() {
        let mut batch = BATCH.to_vec();
        batch[8] = 3;
        let batch: &'static [u8] = Box::leak(batch.into_boxed_slice());
        let (text, ok) = line(batch, Dialect::RocksDb, false);
        assert!(!ok);
        assert_eq!(
            text,
            "7,3,23,7,PUT(0) : 0x6B : 0x76 DELETE(3) : 0x6F6C64 \
             ERROR: write batch has wrong count (3 declared, 2 found)\n"
        );
        let (json, ok) = line(batch, Dialect::RocksDb, true);
        assert!(!ok);
        assert!(json.contains("\"error\":\"write batch has wrong count (3 declared, 2 found)\""));
    }

    #[test]
    fn a_record_too_short_for_a_batch_prints_nothing() {
        assert_eq!(
            line(b"short", Dialect::RocksDb, false),
            (String::new(), false)
        );
    }
}
