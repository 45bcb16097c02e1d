//! WALs written by RocksDB 7.8.3 (`tests/data/rocksdb-wal/`, copied from the shared
//! vectors; see its README): the fragment layer walks each to its expected records,
//! and the encoder writes each one's records back byte for byte.
//!
//! Byte identity is checked over each file's live records: a live recycled WAL goes
//! on with an earlier log's stale bytes, which no writer of these records produces.

use crate::rocksdb_support;

use std::fs;
use std::path::PathBuf;

use bytes::BytesMut;
use rocksdb_support::{data_path, expected_records, log_number};
use walcodec::fragment::{Defect, FragmentRules, FragmentType, Parsed, Part};
use walcodec::{Dialect, LogEncoder, LogFormat, BLOCK_SIZE};

/// One RocksDB WAL of the shared vectors.
struct Vector {
    /// `case/NNNNNN.log`.
    name: &'static str,
    recyclable: bool,
    compressed: bool,
    /// Where the live records end (the file size for a closed WAL).
    live_len: usize,
}

const VECTORS: [Vector; 10] = [
    Vector {
        name: "default/000004.log",
        recyclable: false,
        compressed: false,
        live_len: 264_660,
    },
    Vector {
        name: "recycle/000012.log",
        recyclable: true,
        compressed: false,
        live_len: 67_120,
    },
    Vector {
        name: "recycle/000014.log",
        recyclable: true,
        compressed: false,
        live_len: 101_014,
    },
    Vector {
        name: "recycle-torn/000008.log",
        recyclable: true,
        compressed: false,
        live_len: 133,
    },
    Vector {
        name: "recycle-torn/000010.log",
        recyclable: true,
        compressed: false,
        live_len: 2_107,
    },
    Vector {
        name: "zstd/000008.log",
        recyclable: false,
        compressed: true,
        live_len: 71_622,
    },
    Vector {
        name: "recycle-zstd/000008.log",
        recyclable: true,
        compressed: true,
        live_len: 401,
    },
    Vector {
        name: "recycle-zstd/000010.log",
        recyclable: true,
        compressed: true,
        live_len: 34_815,
    },
    Vector {
        name: "recycle-zstd-torn/000008.log",
        recyclable: true,
        compressed: true,
        live_len: 170,
    },
    Vector {
        name: "recycle-zstd-torn/000010.log",
        recyclable: true,
        compressed: true,
        live_len: 2_160,
    },
];

/// What a walk of a whole WAL with the fragment layer found.
struct Walk {
    /// Each logical record's payload as stored (compressed in a compressed WAL).
    records: Vec<Vec<u8>>,
    /// Offsets of the records' first fragments.
    offsets: Vec<usize>,
    /// Where the walk stopped, and why.
    end: usize,
    stop: &'static str,
    compression: Option<u32>,
}

/// A plain whole-buffer walk over the fragment layer, as RocksDB's reader in
/// TolerateTail on a recycled file: a fragment of another log, or a bad checksum or
/// length, ends the log.
fn walk(log: &[u8], dialect: Dialect, log_number: u64) -> Walk {
    let rules = FragmentRules::new(dialect).log_number(log_number);
    let mut walk = Walk {
        records: Vec::new(),
        offsets: Vec::new(),
        end: 0,
        stop: "eof",
        compression: None,
    };
    let mut pos = 0;
    let mut partial: Option<(usize, Vec<u8>)> = None;
    while pos < log.len() {
        let block_left = BLOCK_SIZE - pos % BLOCK_SIZE;
        match rules.parse(&log[pos..], block_left) {
            Parsed::Trailer { len } | Parsed::ZeroFill { len } => pos += len,
            Parsed::Incomplete { .. } => {
                walk.stop = "torn";
                break;
            }
            Parsed::Defect(Defect::OldLogNumber { .. }) => {
                walk.stop = "old";
                break;
            }
            Parsed::Defect(_) => {
                walk.stop = "damage";
                break;
            }
            Parsed::Fragment(fragment) => {
                let payload = &log[pos..][fragment.payload_range()];
                match (fragment.fragment_type(), fragment.part()) {
                    (Some(FragmentType::SetCompressionType), _) => {
                        let value = u32::from_le_bytes(payload.try_into().unwrap());
                        walk.compression = Some(value);
                    }
                    (_, Some(Part::Full)) => {
                        assert!(partial.is_none());
                        walk.records.push(payload.to_vec());
                        walk.offsets.push(pos);
                    }
                    (_, Some(Part::First)) => {
                        assert!(partial.is_none());
                        partial = Some((pos, payload.to_vec()));
                    }
                    (_, Some(Part::Middle)) => {
                        partial.as_mut().unwrap().1.extend_from_slice(payload)
                    }
                    (_, Some(Part::Last)) => {
                        let (start, mut record) = partial.take().unwrap();
                        record.extend_from_slice(payload);
                        walk.records.push(record);
                        walk.offsets.push(start);
                    }
                    other => panic!("unexpected fragment {other:?} at {pos}"),
                }
                pos += fragment.len();
            }
        }
    }
    walk.end = pos;
    walk
}

fn format_of(vector: &Vector) -> LogFormat {
    let mut format = LogFormat::leveldb();
    if vector.recyclable {
        format = format.recyclable(log_number(vector.name));
    }
    #[cfg(feature = "zstd")]
    if vector.compressed {
        format = format.zstd();
    }
    format
}

#[test]
fn the_fragment_layer_walks_every_vector_to_its_live_end() {
    for vector in &VECTORS {
        let log = fs::read(data_path(vector.name)).unwrap();
        let walk = walk(&log, Dialect::RocksDb, log_number(vector.name));
        assert_eq!(walk.end, vector.live_len, "{}", vector.name);
        let stop = if vector.live_len == log.len() {
            "eof"
        } else {
            "old or damage"
        };
        assert!(
            stop.contains(walk.stop),
            "{}: stopped by {}",
            vector.name,
            walk.stop
        );
        assert_eq!(
            walk.compression,
            vector.compressed.then_some(7),
            "{}",
            vector.name
        );
        let expected = expected_records(vector.name);
        assert_eq!(walk.records.len(), expected.len(), "{}", vector.name);
        if !vector.compressed {
            assert!(walk.records == expected, "{}", vector.name);
        }
        #[cfg(feature = "zstd")]
        if vector.compressed {
            for (frame, record) in walk.records.iter().zip(&expected) {
                assert_eq!(&zstd::stream::decode_all(&frame[..]).unwrap(), record);
            }
        }
    }
}

#[test]
fn leveldb_rules_find_no_record_in_a_recycled_wal() {
    let log = fs::read(data_path("recycle/000012.log")).unwrap();
    let walk = walk(&log, Dialect::LevelDb, 12);
    assert_eq!((walk.records.len(), walk.stop), (0, "damage"));
}

#[test]
fn a_wrong_log_number_ends_a_recycled_wal_at_once() {
    let log = fs::read(data_path("recycle/000014.log")).unwrap();
    let walk = walk(&log, Dialect::RocksDb, 10);
    assert_eq!((walk.records.len(), walk.end, walk.stop), (0, 0, "old"));
}

/// The trailers and the empty R-FIRST of `recycle/000014.log`, as `chunks.txt` lists
/// them: recyclable trailers of 9 and 10 bytes, and an empty FIRST with 11 left.
#[test]
fn recyclable_trailers_and_the_empty_first() {
    let log = fs::read(data_path("recycle/000014.log")).unwrap();
    let rules = FragmentRules::new(Dialect::RocksDb).log_number(14);
    assert_eq!(rules.parse(&log[32_759..], 9), Parsed::ZeroFill { len: 9 });
    assert_eq!(
        rules.parse(&log[65_526..], 10),
        Parsed::ZeroFill { len: 10 }
    );
    match rules.parse(&log[98_293..], 11) {
        Parsed::Fragment(f) => {
            assert_eq!(f.fragment_type(), Some(FragmentType::RecyclableFirst));
            assert_eq!((f.len(), f.log_number()), (11, Some(14)));
        }
        other => panic!("{other:?}"),
    }
}

fn encode(vector: &Vector, records: &[Vec<u8>]) -> BytesMut {
    let mut encoder = LogEncoder::builder().format(format_of(vector)).build();
    let mut log = BytesMut::new();
    for record in records {
        encoder.encode_record(record, &mut log);
    }
    assert_eq!(encoder.offset(), log.len() as u64);
    log
}

fn assert_byte_identical(vector: &Vector) {
    let log = fs::read(data_path(vector.name)).unwrap();
    let ours = encode(vector, &expected_records(vector.name));
    assert_eq!(ours.len(), vector.live_len, "{}: length", vector.name);
    if let Some(at) = ours.iter().zip(&log).position(|(a, b)| a != b) {
        panic!("{}: first difference at offset {at}", vector.name);
    }
}

#[test]
fn the_legacy_writer_is_byte_identical_to_rocksdb() {
    assert_byte_identical(&VECTORS[0]);
}

#[test]
fn the_recyclable_writer_is_byte_identical_to_rocksdb() {
    for vector in VECTORS.iter().filter(|v| v.recyclable && !v.compressed) {
        assert_byte_identical(vector);
    }
}

#[cfg(feature = "zstd")]
#[test]
fn the_compressed_writer_is_byte_identical_to_rocksdb() {
    for vector in VECTORS.iter().filter(|v| v.compressed) {
        assert_byte_identical(vector);
    }
}

#[cfg(feature = "zstd")]
#[test]
fn record_offsets_match_ldb() {
    // ldb's physical offset of the first record after the type-9 record is 11.
    let vector = &VECTORS[6];
    let log = fs::read(data_path(vector.name)).unwrap();
    let walk = walk(&log, Dialect::RocksDb, 8);
    assert_eq!(walk.offsets[0], 11);
    let mut encoder = LogEncoder::builder().format(format_of(vector)).build();
    let mut out = BytesMut::new();
    let position = encoder.encode_record(&expected_records(vector.name)[0], &mut out);
    assert_eq!(position.start, 11);
}

/// `AsyncLogWriter` with a RocksDB format writes the same file as RocksDB.
#[tokio::test]
async fn the_async_writer_writes_rocksdb_formats() {
    let names = if cfg!(feature = "zstd") {
        &["recycle/000012.log", "zstd/000008.log"][..]
    } else {
        &["recycle/000012.log"][..]
    };
    for name in names {
        let vector = VECTORS.iter().find(|v| v.name == *name).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000012.log");
        let writer = walcodec::AsyncLogWriter::options()
            .format(format_of(vector))
            .create(&path)
            .await
            .unwrap();
        for record in expected_records(name) {
            writer.append(&record).await.unwrap();
        }
        writer.close().await.unwrap();
        let ours = fs::read(&path).unwrap();
        let theirs = fs::read(data_path(name)).unwrap();
        assert!(ours == theirs, "{name}");
    }
}

/// Every record of every vector decodes as a WriteBatch to what `ldb dump_wal
/// --print_value` prints for it: sequence, count, byte size and each operation.
#[test]
fn write_batches_decode_as_ldb_prints_them() {
    use walcodec::write_batch::WriteBatch;
    for vector in &VECTORS {
        let log = fs::read(data_path(vector.name)).unwrap();
        let offsets = walk(&log, Dialect::RocksDb, log_number(vector.name)).offsets;
        let text = fs::read_to_string(data_path(&format!("{}.ldb.txt", vector.name))).unwrap();
        let lines: Vec<&str> = text
            .lines()
            .filter(|line| line.starts_with(|c: char| c.is_ascii_digit()))
            .collect();
        let records = expected_records(vector.name);
        assert_eq!(lines.len(), records.len(), "{}", vector.name);
        for ((record, line), offset) in records.iter().zip(&lines).zip(&offsets) {
            let batch = WriteBatch::parse(record, Dialect::RocksDb).unwrap();
            let fields: Vec<&str> = line.splitn(5, ',').collect();
            let ours = format!(
                "{},{},{},{}",
                batch.sequence(),
                batch.count(),
                batch.byte_size(),
                batch.to_ldb_string(true)
            );
            let theirs = format!("{},{},{},{}", fields[0], fields[1], fields[2], fields[4]);
            assert!(ours == theirs, "{}: record at {offset}", vector.name);
            // ldb's offset is the record's first header, or the trailer before it.
            let ldb_offset: usize = fields[3].parse().unwrap();
            assert!(
                (offset.saturating_sub(10)..=*offset).contains(&ldb_offset),
                "{}: {ldb_offset} vs {offset}",
                vector.name
            );
        }
    }
}

/// The compressed vectors inflate fragment by fragment within a limit of the
/// largest record, and not within one byte less.
#[cfg(feature = "zstd")]
#[test]
fn compressed_vectors_inflate_fragment_by_fragment() {
    use walcodec::compression::{InflateError, RecordInflater};
    for vector in VECTORS.iter().filter(|v| v.compressed) {
        let log = fs::read(data_path(vector.name)).unwrap();
        let expected = expected_records(vector.name);
        let largest = expected.iter().map(Vec::len).max().unwrap();
        let rules = FragmentRules::new(Dialect::RocksDb).log_number(log_number(vector.name));
        for (max, fits) in [(largest, true), (largest - 1, false)] {
            let mut inflater = RecordInflater::new(max);
            let mut records = Vec::new();
            let mut record = Vec::new();
            let mut too_large = 0;
            let mut skipping = false;
            let mut pos = 0;
            while pos < vector.live_len {
                let fragment = match rules.parse(&log[pos..], BLOCK_SIZE - pos % BLOCK_SIZE) {
                    Parsed::Fragment(fragment) => fragment,
                    Parsed::Trailer { len } | Parsed::ZeroFill { len } => {
                        pos += len;
                        continue;
                    }
                    other => panic!("{other:?}"),
                };
                let payload = &log[pos..][fragment.payload_range()];
                pos += fragment.len();
                let Some(part) = fragment.part() else {
                    continue;
                };
                if !skipping {
                    match inflater.push(payload, &mut record) {
                        Ok(()) => {}
                        Err(InflateError::TooLarge { .. }) => {
                            too_large += 1;
                            skipping = true;
                            inflater.reset();
                            record.clear();
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
                if matches!(part, Part::Full | Part::Last) {
                    if !skipping {
                        inflater.finish().unwrap();
                        records.push(std::mem::take(&mut record));
                    }
                    skipping = false;
                }
            }
            if fits {
                assert!(records == expected, "{}", vector.name);
            } else {
                let n = expected.iter().filter(|r| r.len() == largest).count();
                assert_eq!(too_large, n, "{}", vector.name);
                assert_eq!(records.len(), expected.len() - n);
            }
        }
    }
}

/// The records of a whole log, read strictly in RocksDB's dialect as log `number`.
fn read_strictly(log: &[u8], number: u64) -> Vec<Vec<u8>> {
    use tokio_util::codec::Decoder;
    let mut decoder = walcodec::LogDecoder::builder()
        .dialect(Dialect::RocksDb)
        .log_number(number)
        .recovery(walcodec::Recovery::AbsoluteConsistency)
        .build();
    let mut buf = BytesMut::from(log);
    let mut records = Vec::new();
    while let Some(record) = decoder.decode_eof(&mut buf).unwrap() {
        records.push(record.to_vec());
    }
    records
}

/// `AsyncLogWriter::open` appends to a RocksDB WAL in its own format: it reads the
/// log in RocksDB's dialect with the format's log number, cuts what follows the live
/// records (an earlier log's bytes in a recycled file, a torn tail), and appends
/// where RocksDB's writer would have gone on, byte for byte.
#[tokio::test]
async fn appending_to_each_rocksdb_wal_in_its_format() {
    for vector in &VECTORS {
        if vector.compressed && !cfg!(feature = "zstd") {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(vector.name.rsplit('/').next().unwrap());
        let original = fs::read(data_path(vector.name)).unwrap();
        fs::write(&path, &original).unwrap();
        let format = format_of(vector);
        let writer = walcodec::AsyncLogWriter::options()
            .format(format)
            .open(&path)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", vector.name));
        let live = vector.live_len;
        // What followed the live records is gone: zeros the writer preallocated
        // (a step at a time, by default) are all that follows them.
        let opened = fs::read(&path).unwrap();
        assert!(opened.len() >= live, "{}", vector.name);
        assert!(opened[..live] == original[..live], "{}", vector.name);
        assert!(
            opened[live..].iter().all(|&b| b == 0),
            "{}: bytes of the earlier log left after the live records",
            vector.name
        );
        let added = [b"appended".to_vec(), vec![7u8; 40_000], b"last".to_vec()];
        for record in &added {
            writer.append(record).await.unwrap();
        }
        writer.close().await.unwrap();

        let file = fs::read(&path).unwrap();
        assert!(file[..live] == original[..live], "{}", vector.name);
        let mut encoder = LogEncoder::builder()
            .format(format)
            .offset(live as u64)
            .build();
        let mut tail = BytesMut::new();
        for record in &added {
            encoder.encode_record(record, &mut tail);
        }
        assert!(file[live..] == tail[..], "{}", vector.name);
        let mut expected = expected_records(vector.name);
        expected.extend(added.iter().cloned());
        assert!(
            read_strictly(&file, log_number(vector.name)) == expected,
            "{}",
            vector.name
        );
    }
}

/// A log written in another format than the writer's is refused, and left as it
/// was: the new records would read as damage, or as the end of the log.
#[tokio::test]
async fn appending_in_another_format_is_refused() {
    #[cfg_attr(not(feature = "zstd"), allow(unused_mut))]
    let mut cases = vec![
        // Legacy headers, a recyclable writer.
        (
            "default/000004.log",
            LogFormat::leveldb().recyclable(4),
            "legacy headers",
        ),
        // Recyclable headers, a legacy writer (LevelDB's reader calls them damage).
        (
            "recycle/000012.log",
            LogFormat::leveldb(),
            "checksum mismatch",
        ),
        // A recycled file with no record of this log number: its earlier use's
        // records are not to be cut away on a guess.
        (
            "recycle/000012.log",
            LogFormat::leveldb().recyclable(13),
            "no record of log number 13",
        ),
    ];
    #[cfg(feature = "zstd")]
    cases.extend([
        (
            "zstd/000008.log",
            LogFormat::leveldb(),
            "unknown record type 9",
        ),
        (
            "recycle/000012.log",
            LogFormat::leveldb().recyclable(12).zstd(),
            "format is compressed",
        ),
        (
            "recycle-zstd/000010.log",
            LogFormat::leveldb().recyclable(10),
            "log is compressed",
        ),
    ]);
    for (name, format, why) in cases {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.log");
        let original = fs::read(data_path(name)).unwrap();
        fs::write(&path, &original).unwrap();
        let result = walcodec::AsyncLogWriter::options()
            .format(format)
            .open(&path)
            .await;
        let error = result.expect_err(name).to_string();
        assert!(error.contains(why), "{name} as {format:?}: {error}");
        assert!(fs::read(&path).unwrap() == original, "{name} was changed");
    }
    // A new (empty) file opens in any format.
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("000015.log");
    let writer = walcodec::AsyncLogWriter::options()
        .format(LogFormat::leveldb().recyclable(15))
        .open(&fresh)
        .await
        .unwrap();
    writer.append(b"x").await.unwrap();
    writer.close().await.unwrap();
    assert_eq!(fs::read(&fresh).unwrap().len(), 12);
}

/// Every RocksDB vector but the legacy one sniffs as RocksDB's dialect, with its
/// compression and the log number of its name.
#[test]
fn the_vectors_sniff_as_written() {
    for vector in &VECTORS {
        let log = fs::read(data_path(vector.name)).unwrap();
        let sniffed = walcodec::fragment::sniff(&log[..log.len().min(BLOCK_SIZE)]);
        let rocksdb = vector.recyclable || vector.compressed;
        assert_eq!(
            sniffed.dialect == Dialect::RocksDb,
            rocksdb,
            "{}",
            vector.name
        );
        assert_eq!(sniffed.compressed, vector.compressed, "{}", vector.name);
        let number = vector.recyclable.then(|| log_number(vector.name) as u32);
        assert_eq!(sniffed.log_number, number, "{}", vector.name);
    }
    let leveldb = fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/leveldb-db/wal/000003.log"),
    )
    .unwrap();
    assert_eq!(
        walcodec::fragment::sniff(&leveldb).dialect,
        Dialect::LevelDb
    );
}
