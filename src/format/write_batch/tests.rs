use super::*;

fn batch(sequence: u64, count: u32, body: &[u8]) -> Vec<u8> {
    let mut record = sequence.to_le_bytes().to_vec();
    record.extend_from_slice(&count.to_le_bytes());
    record.extend_from_slice(body);
    record
}

fn operations(record: &[u8], dialect: Dialect) -> Vec<Result<Operation<'_>, WriteBatchError>> {
    WriteBatch::parse(record, dialect)
        .unwrap()
        .operations()
        .collect()
}

#[test]
fn a_record_under_twelve_bytes_is_too_small() {
    for len in 0..12 {
        assert_eq!(
            WriteBatch::parse(&[0; 12][..len], Dialect::RocksDb),
            Err(WriteBatchError::TooSmall { len })
        );
    }
    let record = batch(u64::MAX, 0, b"");
    let empty = WriteBatch::parse(&record, Dialect::LevelDb).unwrap();
    assert_eq!((empty.sequence(), empty.count()), (u64::MAX, 0));
    assert_eq!(empty.operations().count(), 0);
}

#[test]
fn column_family_tags_put_the_id_first() {
    let record = batch(
        1,
        3,
        b"\x05\x83\x01\x01k\x01v\x04\x02\x01d\x0e\x03\x01a\x01z",
    );
    assert_eq!(
        operations(&record, Dialect::RocksDb),
        [
            Ok(Operation::Put {
                column_family: 131,
                key: b"k",
                value: b"v"
            }),
            Ok(Operation::Delete {
                column_family: 2,
                key: b"d"
            }),
            Ok(Operation::DeleteRange {
                column_family: 3,
                begin: b"a",
                end: b"z"
            }),
        ]
    );
}

#[test]
fn every_rocksdb_tag() {
    let body = b"\x02\x01k\x01m\x06\x01\x01k\x01m\x07\x01s\x08\x01\x01s\x0f\x01a\x01b\
        \x11\x01k\x01i\x10\x01\x01k\x01i\x16\x01k\x01c\x17\x01\x01k\x01c\
        \x18\x01k\x09v\x05\0\0\0\0\0\0\0\x19\x01\x01k\x08\x06\0\0\0\0\0\0\0\
        \x03\x01L\x09\x0a\x01x\x0b\x01x\x0c\x01x\x0d\x12\x13\x15\x01t\x01x";
    let record = batch(9, 11, body);
    let ops: Vec<_> = operations(&record, Dialect::RocksDb)
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(ops.len(), 20);
    assert_eq!(ops.iter().filter(|op| op.is_counted()).count(), 11);
    assert_eq!(
        ops[9],
        Operation::TimedPut {
            column_family: 0,
            key: b"k",
            value: b"v",
            write_time: 5
        }
    );
    assert_eq!(
        ops[10],
        Operation::TimedPut {
            column_family: 1,
            key: b"k",
            value: b"",
            write_time: 6
        }
    );
    assert_eq!(ops[12], Operation::BeginPrepare { tag: 0x09 });
    assert_eq!(
        ops[19],
        Operation::CommitWithTimestamp {
            timestamp: b"t",
            xid: b"x"
        }
    );
    let mut text = String::new();
    for op in &ops {
        op.write_ldb(&mut text, false).unwrap();
    }
    assert!(text.starts_with("MERGE(0) : 0x6B MERGE(1) : 0x6B SINGLE_DELETE(0) : 0x73 "));
    assert!(
        text.contains("BEGIN_PREPARE(false) END_PREPARE(0x78) COMMIT(0x78) ROLLBACK(0x78) NOOP ")
    );
}

#[test]
fn unknown_tags_keep_their_bytes_and_end_the_walk() {
    let record = batch(1, 1, b"\x01\x01k\x01v\x14\x01\x02\x03");
    assert_eq!(
        operations(&record, Dialect::RocksDb),
        [
            Ok(Operation::Put {
                column_family: 0,
                key: b"k",
                value: b"v"
            }),
            Ok(Operation::Unknown {
                tag: 0x14,
                rest: b"\x01\x02\x03"
            }),
        ]
    );
    // LevelDB knows only Put and Delete.
    let record = batch(1, 1, b"\x02\x01k\x01v");
    assert_eq!(
        operations(&record, Dialect::LevelDb),
        [Ok(Operation::Unknown {
            tag: 2,
            rest: b"\x01k\x01v"
        })]
    );
}

#[test]
fn fields_past_the_end_are_malformed() {
    let full = batch(1, 1, b"\x05\x01\x03key\x05value");
    for cut in 13..full.len() {
        assert_eq!(
            operations(&full[..cut], Dialect::RocksDb),
            [Err(WriteBatchError::Malformed { tag: 5, at: 12 })],
            "cut at {cut}"
        );
    }
    // A varint32 of more than 5 bytes, or past 32 bits.
    let record = batch(1, 1, b"\x00\xff\xff\xff\xff\x7f");
    assert_eq!(
        operations(&record, Dialect::RocksDb),
        [Err(WriteBatchError::Malformed { tag: 0, at: 12 })]
    );
    let record = batch(1, 1, b"\x00\xff\xff\xff\xff\x8f\x01");
    assert_eq!(
        operations(&record, Dialect::RocksDb)[0],
        Err(WriteBatchError::Malformed { tag: 0, at: 12 })
    );
}

#[test]
fn a_wrong_count_is_reported_after_the_operations() {
    let record = batch(1, 2, b"\x01\x01k\x01v\x09");
    let ops = operations(&record, Dialect::RocksDb);
    assert_eq!(ops.len(), 3);
    assert_eq!(
        ops[2],
        Err(WriteBatchError::WrongCount {
            declared: 2,
            found: 1
        })
    );
    assert_eq!(
        WriteBatchError::WrongCount {
            declared: 2,
            found: 1
        }
        .to_string(),
        "write batch has wrong count (2 declared, 1 found)"
    );
}

#[test]
fn never_panics_on_any_bytes() {
    let mut x = 0x2545_f491u32;
    for len in 0..300 {
        let mut record = vec![0u8; len];
        for byte in &mut record {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            *byte = (x % 27) as u8;
        }
        for dialect in [Dialect::LevelDb, Dialect::RocksDb] {
            if let Ok(batch) = WriteBatch::parse(&record, dialect) {
                let _ = batch.to_ldb_string(true);
            }
        }
    }
}
