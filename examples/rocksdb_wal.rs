//! Writes RocksDB WALs with walcodec's writers, for `scripts/rocksdb-check.sh` to
//! read back with RocksDB's own `ldb dump_wal`.
//!
//! ```text
//! cargo run --release --features zstd --example rocksdb_wal -- OUT_DIR
//! ```
//!
//! Writes, in `OUT_DIR`, one WAL per format (`legacy/000005.log`,
//! `recycle/000042.log`, `zstd/000007.log`, `recycle-zstd/000043.log`, the last two
//! with the `zstd` feature, and `operations/000009.log`: RocksDB's other WriteBatch
//! operations, to check their rendering) and beside each `NNNNNN.log.expected.txt`: the lines
//! `ldb dump_wal --header --print_value` must print for it. The records are
//! WriteBatches of puts and deletes in several column families, sized so that
//! records end at every distance from a block end (trailers of 1 to 10 bytes, empty
//! FIRST fragments) and some span blocks.

use std::fmt::Write as _;
use std::path::Path;

use bytes::BytesMut;
use walcodec::write_batch::WriteBatch;
use walcodec::{AsyncLogWriter, Dialect, LogEncoder, LogFormat, BLOCK_SIZE};

/// A 32-bit xorshift, so the records are the same on every run.
struct XorShift(u32);

impl XorShift {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        self.0
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| (self.next() >> 24) as u8).collect()
    }
}

fn varint32(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn varstring(out: &mut Vec<u8>, bytes: &[u8]) {
    varint32(out, bytes.len() as u32);
    out.extend_from_slice(bytes);
}

/// A WriteBatch with `ops` operations starting at `sequence`, about `size` bytes.
fn batch(rng: &mut XorShift, sequence: u64, ops: u32, size: usize) -> Vec<u8> {
    let mut record = sequence.to_le_bytes().to_vec();
    record.extend_from_slice(&ops.to_le_bytes());
    for op in 0..ops {
        let key = format!("key:{sequence:06}:{op}").into_bytes();
        let column_family = rng.next() % 3;
        let delete = rng.next() % 5 == 0;
        let tag = match (delete, column_family) {
            (false, 0) => 0x01,
            (true, 0) => 0x00,
            (false, _) => 0x05,
            (true, _) => 0x04,
        };
        record.push(tag);
        if column_family != 0 {
            varint32(&mut record, column_family);
        }
        varstring(&mut record, &key);
        if !delete {
            let value_len = size.saturating_sub(record.len() + 5) / (ops - op) as usize;
            // Half the values compress (repeats), half do not.
            let value = if rng.next() % 2 == 0 {
                vec![b'v'; value_len]
            } else {
                rng.bytes(value_len)
            };
            varstring(&mut record, &value);
        }
    }
    record
}

/// Record sizes that end records at every distance from a block end in both header
/// sizes, plus records spanning blocks and tiny ones.
fn sizes(rng: &mut XorShift) -> Vec<usize> {
    let mut sizes = Vec::new();
    for left in 1..=12usize {
        // Fill the rest of the current block but `left` bytes: the planner below
        // turns these into exact sizes.
        sizes.push(usize::MAX - left);
    }
    for _ in 0..20 {
        sizes.push(20 + (rng.next() % 3000) as usize);
    }
    sizes.extend([100_000, 40_000, 32_757, 32_761, 13, 200]);
    sizes
}

/// The lines `ldb dump_wal --header --print_value` prints for `records` written by
/// `encoder` (which it advances).
fn write_log(records: &[Vec<u8>], encoder: &mut LogEncoder) -> (BytesMut, String, Vec<u64>) {
    let mut log = BytesMut::new();
    let mut trailers = Vec::new();
    let mut expected = String::from("Sequence,Count,ByteSize,Physical Offset,Key(s) : value \n");
    for record in records {
        let before = encoder.offset();
        let position = encoder.encode_record(record, &mut log);
        // RocksDB's reader reports a record after a trailer of 1 to 6 bytes at the
        // trailer (it skips it inside the read that returns the record).
        let gap = position.start - before;
        if gap > 0 && before > 0 {
            trailers.push(gap);
        }
        let offset = if (1..7).contains(&gap) {
            before
        } else {
            position.start
        };
        let batch = WriteBatch::parse(record, Dialect::RocksDb).expect("a valid batch");
        let _ = writeln!(
            expected,
            "{},{},{},{},{}",
            batch.sequence(),
            batch.count(),
            batch.byte_size(),
            offset,
            batch.to_ldb_string(true)
        );
    }
    (log, expected, trailers)
}

/// Plans records for `format`: a size of `usize::MAX - left` becomes the size that
/// leaves `left` bytes in the block after it.
fn records_for(format: LogFormat, seed: u32) -> Vec<Vec<u8>> {
    let mut rng = XorShift(seed);
    let mut encoder = LogEncoder::builder().format(format).build();
    let mut sink = BytesMut::new();
    let mut records = Vec::new();
    let mut sequence = 1u64;
    for size in sizes(&mut rng) {
        let record = if size > usize::MAX - 100 && !format.is_compressed() {
            let left = usize::MAX - size;
            let header = format.header_size();
            let mut block_left = BLOCK_SIZE - encoder.block_offset();
            if block_left < header {
                block_left = BLOCK_SIZE;
            }
            // Too little room: span into the next block, one more header.
            let target = if block_left < header + left + 40 {
                block_left + BLOCK_SIZE - left - 2 * header
            } else {
                block_left - left - header
            };
            // One put; adjust the value until the record is exactly `target` bytes
            // (and fits the block: the last fragment ends `left` before its end).
            let mut value_len = target.saturating_sub(40);
            loop {
                let mut record = sequence.to_le_bytes().to_vec();
                record.extend_from_slice(&1u32.to_le_bytes());
                record.push(0x01);
                varstring(&mut record, format!("fill:{left}").as_bytes());
                varstring(&mut record, &vec![b'f'; value_len]);
                if record.len() >= target || value_len > BLOCK_SIZE * 2 {
                    break record;
                }
                value_len += 1;
            }
        } else if size > usize::MAX - 100 {
            let size = 100 + (rng.next() % 500) as usize;
            batch(&mut rng, sequence, 1, size)
        } else {
            let ops = 1 + rng.next() % 4;
            batch(&mut rng, sequence, ops, size)
        };
        let count = u32::from_le_bytes(record[8..12].try_into().unwrap());
        sequence += u64::from(count);
        encoder.encode_record(&record, &mut sink);
        records.push(record);
    }
    records
}

fn write_case(dir: &Path, case: &str, log_number: u64, format: LogFormat, seed: u32) {
    let records = records_for(format, seed);
    let mut encoder = LogEncoder::builder().format(format).build();
    let (log, expected, mut trailers) = write_log(&records, &mut encoder);
    let case_dir = dir.join(case);
    std::fs::create_dir_all(&case_dir).expect("create the case directory");
    let name = format!("{log_number:06}.log");
    std::fs::write(case_dir.join(&name), &log).expect("write the log");
    std::fs::write(case_dir.join(format!("{name}.expected.txt")), expected)
        .expect("write the expected lines");

    // The same records through AsyncLogWriter, which must write the same bytes.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let async_path = case_dir.join(format!("async-{name}"));
    let _ = std::fs::remove_file(&async_path);
    runtime.block_on(async {
        let writer = AsyncLogWriter::options()
            .format(format)
            .create(&async_path)
            .await
            .expect("create the log");
        for record in &records {
            writer.append(record).await.expect("append");
        }
        writer.close().await.expect("close");
    });
    let async_bytes = std::fs::read(&async_path).expect("read the log back");
    assert!(
        async_bytes == log,
        "{case}: AsyncLogWriter wrote other bytes than LogEncoder"
    );
    std::fs::remove_file(&async_path).expect("remove the copy");
    trailers.sort_unstable();
    trailers.dedup();
    println!(
        "{case}/{name}: {} records, {} bytes, trailers of {trailers:?} bytes",
        records.len(),
        log.len()
    );
}

/// Batches with RocksDB's other operations (merge, single delete, range delete,
/// log data, no-op), to check how ldb prints them.
fn other_operations(dir: &Path) {
    let mut records = Vec::new();
    let ops: [&[u8]; 8] = [
        b"\x02\x01m\x03op1\x06\x02\x01m\x03op2",
        b"\x07\x02sd\x08\x01\x02sd",
        b"\x0f\x01a\x01z\x0e\x02\x01b\x01y",
        b"\x03\x04blob\x01\x01k\x01v",
        b"\x0d\x01\x01k\x00",
        b"\x05\x81\x01\x01k\x01v\x04\xff\x7f\x01k",
        b"\x09\x01\x01p\x01q\x0a\x03xid",
        b"\x0b\x03xid",
    ];
    let counts = [2u32, 2, 2, 1, 1, 2, 1, 0];
    let mut sequence = 100u64;
    for (body, count) in ops.iter().zip(counts) {
        let mut record = sequence.to_le_bytes().to_vec();
        record.extend_from_slice(&count.to_le_bytes());
        record.extend_from_slice(body);
        sequence += u64::from(count);
        records.push(record);
    }
    let mut encoder = LogEncoder::new();
    let (log, expected, _) = write_log(&records, &mut encoder);
    let case_dir = dir.join("operations");
    std::fs::create_dir_all(&case_dir).expect("create the case directory");
    std::fs::write(case_dir.join("000009.log"), &log).expect("write the log");
    std::fs::write(case_dir.join("000009.log.expected.txt"), expected)
        .expect("write the expected lines");
    println!("operations/000009.log: {} records", records.len());
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "rocksdb-wals".into());
    let dir = Path::new(&dir);
    write_case(dir, "legacy", 5, LogFormat::leveldb(), 1);
    other_operations(dir);
    write_case(dir, "recycle", 42, LogFormat::leveldb().recyclable(42), 2);
    #[cfg(feature = "zstd")]
    {
        write_case(dir, "zstd", 7, LogFormat::leveldb().zstd(), 3);
        write_case(
            dir,
            "recycle-zstd",
            43,
            LogFormat::leveldb().recyclable(43).zstd(),
            4,
        );
    }
}
