//! Logs written by other implementations (`tests/data/`, copied from the shared
//! vectors; see `tests/data/README.md`): golang/leveldb's `record.Writer` (byte-for-byte
//! what LevelDB's C++ writer produces) and a database written by LevelDB 1.23 itself.
//!
//! Each log decodes, through `FramedRead` over readers that hand out random-sized
//! chunks with `Pending` in between, to the records of its `expected.hex`, at the
//! places its `chunks.txt` gives; each `expected.hex` encodes, through `FramedWrite`
//! over a writer that takes partial writes, to the log byte for byte.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use common::*;
use futures::{SinkExt, StreamExt};
use tokio_util::codec::{FramedRead, FramedWrite};
use walcodec::{LogEncoder, Position, HEADER_SIZE};

/// Chunkings each vector is read through: (seed, largest chunk).
const READ_CHUNKINGS: [(u64, usize); 3] = [(11, 13), (12, 5_000), (13, 70_000)];

/// Writer chunkings: (seed, largest write accepted).
const WRITE_CHUNKINGS: [(u64, usize); 2] = [(21, 100), (22, 40_000)];

fn writer_cases() -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = fs::read_dir(data_path("writers"))
        .expect("tests/data/writers")
        .map(|entry| entry.expect("dir entry").path())
        .collect();
    cases.sort();
    assert_eq!(
        cases.len(),
        21,
        "every writer case is in tests/data/writers"
    );
    cases
}

fn case_name(dir: &Path) -> String {
    dir.file_name().unwrap().to_string_lossy().into_owned()
}

/// The physical layout a `chunks.txt` describes.
#[derive(Debug, Default)]
struct Layout {
    /// Where each record sits: its first fragment's header to its last byte.
    records: Vec<Position>,
    fragments: u64,
    trailer_bytes: u64,
    size: u64,
}

fn parse_chunks(text: &str) -> Layout {
    let mut layout = Layout::default();
    let mut open: Option<u64> = None;
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields[..] {
            ["size", n] => layout.size = n.parse().unwrap(),
            ["pad", _, n] => layout.trailer_bytes += n.parse::<u64>().unwrap(),
            [offset, _block, kind, len, "crc=ok"] => {
                let offset: u64 = offset.parse().unwrap();
                let len: u64 = len.strip_prefix("len=").unwrap().parse().unwrap();
                let end = offset + HEADER_SIZE as u64 + len;
                layout.fragments += 1;
                match kind.split('(').next().unwrap() {
                    "type=1" => layout.records.push(Position { start: offset, end }),
                    "type=2" => open = Some(offset),
                    "type=3" => assert!(open.is_some()),
                    "type=4" => layout.records.push(Position {
                        start: open.take().expect("LAST after FIRST"),
                        end,
                    }),
                    other => panic!("unexpected fragment type {other}"),
                }
            }
            _ => panic!("unexpected chunks.txt line {line:?}"),
        }
    }
    layout
}

/// What reading a log through `FramedRead` gave, with where each record was.
struct Read {
    outcome: Outcome,
    positions: Vec<Position>,
    fragments: u64,
    trailer_bytes: u64,
    offset: u64,
}

fn read_chunked(log: &[u8], seed: u64, max_chunk: usize) -> Read {
    let (decoder, reports) = Config::LEVELDB.build();
    let reader = ChunkedReader::new(Bytes::copy_from_slice(log), seed, max_chunk);
    let mut framed = FramedRead::new(reader, decoder);
    let mut records = Vec::new();
    let mut positions = Vec::new();
    let mut error = None;
    futures::executor::block_on(async {
        while let Some(item) = framed.next().await {
            match item {
                Ok(record) => {
                    records.push(record);
                    positions.push(framed.decoder().last_record().unwrap());
                }
                Err(e) => error = Some(e.to_string()),
            }
        }
    });
    let decoder = framed.decoder();
    let reports = std::mem::take(&mut *reports.lock().unwrap());
    Read {
        outcome: Outcome {
            records,
            reports,
            error,
        },
        positions,
        fragments: decoder.stats().fragments,
        trailer_bytes: decoder.stats().trailer_bytes,
        offset: decoder.offset(),
    }
}

/// Encodes `records` through `FramedWrite` over a writer that takes partial writes.
fn write_chunked(records: &[Vec<u8>], seed: u64, max_chunk: usize) -> Vec<u8> {
    let mut sink = FramedWrite::new(ChunkedWriter::new(seed, max_chunk), LogEncoder::new());
    futures::executor::block_on(async {
        for record in records {
            sink.send(&record[..]).await.expect("write");
        }
        sink.close().await.expect("close");
    });
    sink.into_inner().written
}

fn read_expected(dir: &Path) -> Vec<Vec<u8>> {
    parse_expected_hex(&fs::read_to_string(dir.join("expected.hex")).expect("expected.hex"))
}

#[test]
fn golang_leveldb_logs_decode_to_their_records_at_their_offsets() {
    for dir in writer_cases() {
        let name = case_name(&dir);
        let log = fs::read(dir.join("000001.log")).unwrap();
        let expected = read_expected(&dir);
        let layout = parse_chunks(&fs::read_to_string(dir.join("chunks.txt")).unwrap());
        assert_eq!(layout.size, log.len() as u64, "{name}: chunks.txt size");
        assert_eq!(
            layout.records.len(),
            expected.len(),
            "{name}: chunks.txt records"
        );
        for (seed, max_chunk) in READ_CHUNKINGS {
            let read = read_chunked(&log, seed, max_chunk);
            let context = format!("{name}, chunks up to {max_chunk} (seed {seed})");
            assert!(
                read.outcome.record_vecs() == expected,
                "{context}: {:?}",
                read.outcome
            );
            assert_eq!(read.outcome.reports, [], "{context}");
            assert_eq!(read.outcome.error, None, "{context}");
            assert_eq!(
                read.positions, layout.records,
                "{context}: record positions"
            );
            assert_eq!(read.fragments, layout.fragments, "{context}: fragments");
            assert_eq!(
                read.trailer_bytes, layout.trailer_bytes,
                "{context}: trailers"
            );
            assert_eq!(read.offset, log.len() as u64, "{context}: bytes consumed");
        }
        // The default decoder, whole buffer and LevelDB-style, must agree.
        let default = read_every_way(&log, Config::DEFAULT);
        assert!(default.record_vecs() == expected, "{name}: default decoder");
        assert_eq!(
            reference_read(&log).record_vecs(),
            expected,
            "{name}: reference"
        );
    }
}

#[test]
fn encoding_the_records_reproduces_golang_leveldb_logs_byte_for_byte() {
    for dir in writer_cases() {
        let name = case_name(&dir);
        let log = fs::read(dir.join("000001.log")).unwrap();
        let expected = read_expected(&dir);
        let layout = parse_chunks(&fs::read_to_string(dir.join("chunks.txt")).unwrap());
        for (seed, max_chunk) in WRITE_CHUNKINGS {
            let written = write_chunked(&expected, seed, max_chunk);
            assert!(
                written == log,
                "{name}: FramedWrite (writes up to {max_chunk}) differs at byte {:?} (lengths {} / {})",
                written.iter().zip(&log).position(|(a, b)| a != b),
                written.len(),
                log.len()
            );
        }
        let mut encoder = LogEncoder::new();
        let mut out = bytes::BytesMut::new();
        let positions: Vec<Position> = expected
            .iter()
            .map(|record| encoder.encode_record(record, &mut out))
            .collect();
        assert_eq!(positions, layout.records, "{name}: encode_record positions");
    }
}

/// The LevelDB-written WAL, read through several chunkings.
fn leveldb_wal_records() -> (Vec<u8>, Vec<Vec<u8>>) {
    let dir = data_path("leveldb-db/wal");
    let log = fs::read(dir.join("000003.log")).unwrap();
    let expected = read_expected(&dir);
    assert_eq!(expected.len(), 219);
    for (seed, max_chunk) in READ_CHUNKINGS {
        let read = read_chunked(&log, seed, max_chunk);
        assert!(
            read.outcome.record_vecs() == expected,
            "chunks up to {max_chunk}: {:?}",
            read.outcome
        );
        assert_eq!(read.outcome.reports, []);
        assert_eq!(read.outcome.error, None);
        assert_eq!(read.offset, log.len() as u64);
    }
    (log, expected)
}

#[test]
fn leveldb_wal_decodes_to_its_records() {
    let (log, expected) = leveldb_wal_records();
    assert_eq!(reference_read(&log).record_vecs(), expected);
}

#[test]
fn encoding_the_wal_records_reproduces_leveldbs_wal() {
    let (log, expected) = leveldb_wal_records();
    for (seed, max_chunk) in WRITE_CHUNKINGS {
        assert!(write_chunked(&expected, seed, max_chunk) == log);
    }
}

/// LevelDB's `GetVarint32`/`GetVarint64`.
fn varint(input: &mut &[u8]) -> u64 {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = input.split_first().expect("varint cut short");
        *input = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return value;
        }
    }
    panic!("varint too long");
}

/// LevelDB's `GetLengthPrefixedSlice`.
fn length_prefixed<'a>(input: &mut &'a [u8]) -> &'a [u8] {
    let len = varint(input) as usize;
    let (slice, rest) = input.split_at(len);
    *input = rest;
    slice
}

fn fixed<const N: usize>(input: &mut &[u8]) -> [u8; N] {
    let (bytes, rest) = input.split_at(N);
    *input = rest;
    bytes.try_into().unwrap()
}

/// One operation of a WriteBatch: a put (key, value length) or a delete.
#[derive(Debug, PartialEq, Eq)]
enum Op {
    Put(Vec<u8>, usize),
    Delete(Vec<u8>),
}

/// Parses a WriteBatch: fixed64 sequence, fixed32 count, then the entries.
fn parse_write_batch(mut input: &[u8]) -> (u64, Vec<Op>) {
    let sequence = u64::from_le_bytes(fixed(&mut input));
    let count = u32::from_le_bytes(fixed(&mut input));
    let mut ops = Vec::new();
    while !input.is_empty() {
        let (&tag, rest) = input.split_first().unwrap();
        input = rest;
        let key = length_prefixed(&mut input).to_vec();
        match tag {
            1 => ops.push(Op::Put(key, length_prefixed(&mut input).len())),
            0 => ops.push(Op::Delete(key)),
            other => panic!("unknown WriteBatch tag {other}"),
        }
    }
    assert_eq!(ops.len(), count as usize, "WriteBatch count");
    (sequence, ops)
}

/// Parses `ops.txt` into batches: one per line, except `batch N`, which groups the
/// next N operations.
fn parse_ops(text: &str) -> Vec<Vec<Op>> {
    let mut batches = Vec::new();
    let mut grouping: Option<(usize, Vec<Op>)> = None;
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let op = match fields[..] {
            ["batch", n] => {
                grouping = Some((n.parse().unwrap(), Vec::new()));
                continue;
            }
            ["putlen", key, len, _seed] => Op::Put(unhex(key), len.parse().unwrap()),
            ["del", key] => Op::Delete(unhex(key)),
            _ => panic!("unexpected ops.txt line {line:?}"),
        };
        match &mut grouping {
            Some((n, ops)) => {
                ops.push(op);
                if ops.len() == *n {
                    batches.push(grouping.take().unwrap().1);
                }
            }
            None => batches.push(vec![op]),
        }
    }
    assert!(grouping.is_none(), "ops.txt ends inside a batch");
    batches
}

#[test]
fn leveldb_wal_records_are_the_write_batches_of_its_operations() {
    let (_, records) = leveldb_wal_records();
    let batches = parse_ops(&fs::read_to_string(data_path("leveldb-db/wal/ops.txt")).unwrap());
    assert_eq!(records.len(), batches.len());
    let mut next_sequence = 1;
    for (i, (record, batch)) in records.iter().zip(batches).enumerate() {
        let (sequence, ops) = parse_write_batch(record);
        assert_eq!(sequence, next_sequence, "batch {i}: sequence");
        next_sequence += ops.len() as u64;
        assert_eq!(ops, batch, "batch {i}");
    }
    // The 1 MiB value went through the log as FIRST, MIDDLEs and LAST.
    assert!(records.iter().any(|r| r.len() > 1 << 20));
}

#[test]
fn leveldb_manifest_decodes_to_its_version_edits() {
    let dir = data_path("leveldb-db/manifest");
    let log = fs::read(dir.join("MANIFEST-000002")).unwrap();
    let expected = read_expected(&dir);
    for (seed, max_chunk) in READ_CHUNKINGS.into_iter().chain([(14, 1)]) {
        let read = read_chunked(&log, seed, max_chunk);
        assert!(read.outcome.record_vecs() == expected, "{:?}", read.outcome);
        assert_eq!(read.outcome.reports, []);
        assert_eq!(read.offset, log.len() as u64);
    }
    assert!(write_chunked(&expected, 1, 5) == log);

    // VersionEdit tags: 1 comparator, 2 log number, 3 next file, 4 last sequence,
    // 9 previous log number.
    let mut fields = Vec::new();
    for record in &expected {
        let mut input = &record[..];
        while !input.is_empty() {
            match varint(&mut input) {
                1 => fields.push((
                    1,
                    String::from_utf8(length_prefixed(&mut input).to_vec()).unwrap(),
                )),
                tag @ (2 | 3 | 4 | 9) => fields.push((tag, varint(&mut input).to_string())),
                tag => panic!("unexpected VersionEdit tag {tag}"),
            }
        }
    }
    let fields: Vec<(u64, &str)> = fields.iter().map(|(t, v)| (*t, v.as_str())).collect();
    assert_eq!(
        fields,
        [
            (1, "leveldb.BytewiseComparator"),
            (2, "3"), // the WAL is 000003.log
            (9, "0"),
            (3, "4"),
            (4, "0"),
        ]
    );
}
