//! Reading RocksDB WALs with `LogDecoder` in RocksDB's dialect: every shared vector
//! written by RocksDB 7.8.3 decodes to its expected records under any chunking, in
//! every recovery mode, and each rule of the dialect (ROCKSDB.md) holds on logs
//! built for it.

mod common;
mod rocksdb_support;

use std::fs;
use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use common::{read_every_way, Config, Outcome};
use rocksdb_support::{data_path, expected_records, log_number};
use tokio_util::codec::Decoder;
use walcodec::fragment::{legacy_header, recyclable_header};
use walcodec::metadata::{MetadataRecord, PredecessorWalInfo, TimestampSize, WalCompressionType};
use walcodec::{CodecError, CorruptionKind, Dialect, LogDecoder, LogEncoder, Recovery, BLOCK_SIZE};

/// A RocksDB WAL of the shared vectors.
#[cfg_attr(not(feature = "zstd"), allow(dead_code))] // Some fields serve zstd tests.
struct Vector {
    name: &'static str,
    compressed: bool,
    /// Where the live records end; a file longer than this holds stale bytes of its
    /// earlier use after them.
    live_len: u64,
    /// Whether the stale bytes begin with a whole header of an older log (rather
    /// than the middle of an old payload).
    stale_header: bool,
}

const VECTORS: [Vector; 10] = [
    Vector {
        name: "default/000004.log",
        compressed: false,
        live_len: 264_660,
        stale_header: false,
    },
    Vector {
        name: "recycle/000012.log",
        compressed: false,
        live_len: 67_120,
        stale_header: false,
    },
    Vector {
        name: "recycle/000014.log",
        compressed: false,
        live_len: 101_014,
        stale_header: true,
    },
    Vector {
        name: "recycle-torn/000008.log",
        compressed: false,
        live_len: 133,
        stale_header: false,
    },
    Vector {
        name: "recycle-torn/000010.log",
        compressed: false,
        live_len: 2_107,
        stale_header: false,
    },
    Vector {
        name: "zstd/000008.log",
        compressed: true,
        live_len: 71_622,
        stale_header: false,
    },
    Vector {
        name: "recycle-zstd/000008.log",
        compressed: true,
        live_len: 401,
        stale_header: false,
    },
    Vector {
        name: "recycle-zstd/000010.log",
        compressed: true,
        live_len: 34_815,
        stale_header: true,
    },
    Vector {
        name: "recycle-zstd-torn/000008.log",
        compressed: true,
        live_len: 170,
        stale_header: false,
    },
    Vector {
        name: "recycle-zstd-torn/000010.log",
        compressed: true,
        live_len: 2_160,
        stale_header: false,
    },
];

fn read_vector(vector: &Vector, recovery: Recovery) -> (Vec<u8>, Outcome) {
    let log = fs::read(data_path(vector.name)).unwrap();
    let config = Config::rocksdb(recovery, log_number(vector.name));
    let outcome = read_every_way(&log, config);
    (log, outcome)
}

/// Every vector, every mode, every chunking: the records RocksDB wrote, nothing of
/// the file's earlier use. Where the file is clean for the mode, nothing else.
#[cfg(feature = "zstd")]
#[test]
fn every_vector_reads_its_records_in_every_mode() {
    for vector in &VECTORS {
        let expected = expected_records(vector.name);
        for recovery in Recovery::ALL {
            let (log, outcome) = read_vector(vector, recovery);
            let what = format!("{} in {recovery}", vector.name);
            assert_eq!(outcome.record_vecs(), expected, "{what}");
            let stale = log.len() as u64 > vector.live_len;
            // What follows the live records of a reused file: a whole old header
            // ends the log silently in every mode but SkipCorrupted; old payload
            // bytes do in TolerateTail (the file is recycled), and are damage in the
            // strict and point-in-time modes, as in RocksDB.
            let clean = match recovery {
                Recovery::TolerateTail => true,
                Recovery::AbsoluteConsistency | Recovery::PointInTime => {
                    !stale || vector.stale_header
                }
                _ => !stale,
            };
            if clean {
                assert_eq!(outcome.reports, [], "{what}");
                assert_eq!(outcome.error, None, "{what}");
            }
        }
    }
}

/// Where a recycled WAL's own records end, and what the decoder keeps of it.
#[cfg(feature = "zstd")]
#[test]
fn the_decoder_tells_where_a_recycled_log_ended() {
    for vector in &VECTORS {
        let log = fs::read(data_path(vector.name)).unwrap();
        let mut decoder = LogDecoder::builder()
            .dialect(Dialect::RocksDb)
            .log_number(log_number(vector.name))
            .build();
        let mut src = BytesMut::from(&log[..]);
        let mut records = 0;
        while let Some(_record) = decoder.decode_eof(&mut src).unwrap() {
            records += 1;
        }
        assert_eq!(
            records,
            expected_records(vector.name).len(),
            "{}",
            vector.name
        );
        assert_eq!(
            decoder.valid_prefix_len(),
            vector.live_len,
            "{}",
            vector.name
        );
        let stale = log.len() as u64 > vector.live_len;
        let recycled = !vector.name.starts_with("default") && !vector.name.starts_with("zstd");
        assert_eq!(decoder.is_recycled(), recycled, "{}", vector.name);
        assert_eq!(
            decoder.recycled_end(),
            stale.then_some(vector.live_len),
            "{}",
            vector.name
        );
        let compression = vector.compressed.then_some(WalCompressionType::Zstd);
        assert_eq!(decoder.wal_compression(), compression, "{}", vector.name);
        assert_eq!(
            decoder.stats().metadata_records,
            u64::from(vector.compressed)
        );
    }
}

/// Without the `zstd` feature a compressed WAL is refused with a typed error that
/// names the feature, never handed out as zstd frames.
#[cfg(not(feature = "zstd"))]
#[test]
fn compressed_vectors_need_the_zstd_feature() {
    for vector in VECTORS.iter().filter(|v| v.compressed) {
        let (_, outcome) = read_vector(vector, Recovery::TolerateTail);
        assert_eq!(
            outcome.records,
            Vec::<bytes::Bytes>::new(),
            "{}",
            vector.name
        );
        let error = outcome.error.unwrap();
        assert!(error.contains("zstd"), "{error}");
    }
}

/// The plain vectors need no feature.
#[test]
fn uncompressed_vectors_read_without_features() {
    for vector in VECTORS.iter().filter(|v| !v.compressed) {
        let (_, outcome) = read_vector(vector, Recovery::TolerateTail);
        assert_eq!(
            outcome.record_vecs(),
            expected_records(vector.name),
            "{}",
            vector.name
        );
        assert_eq!(
            (outcome.reports, outcome.error),
            (vec![], None),
            "{}",
            vector.name
        );
    }
}

/// In LevelDB's dialect (the default) a recycled WAL stays what it is to LevelDB:
/// damage, reported, never records.
#[test]
fn leveldb_dialect_reads_no_record_of_a_recycled_wal() {
    let vector = &VECTORS[2];
    let log = fs::read(data_path(vector.name)).unwrap();
    let outcome = read_every_way(&log, Config::LEVELDB);
    assert!(outcome.records.is_empty());
    assert!(!outcome.reports.is_empty());
}

// ---------------------------------------------------------------------------------
// Logs built for one rule each.

/// Log `log_number`'s records in the recyclable format.
fn recyclable_log(log_number: u64, records: &[&[u8]]) -> BytesMut {
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::builder().recyclable(log_number).build();
    for record in records {
        encoder.encode_record(record, &mut log);
    }
    log
}

fn read(log: &[u8], recovery: Recovery, log_number: u64) -> Outcome {
    read_every_way(log, Config::rocksdb(recovery, log_number))
}

/// A file recycled on purpose: log 8 wrote it, then log 12 wrote over its start.
/// No record of log 8 comes back in any mode, whatever lies where log 12 stopped.
#[test]
fn no_record_of_the_old_log_is_ever_returned() {
    let old: Vec<Vec<u8>> = (0..200u32)
        .map(|i| {
            format!("log 8 record {i} ")
                .repeat(1 + (i as usize * 37) % 400)
                .into_bytes()
        })
        .collect();
    let old_refs: Vec<&[u8]> = old.iter().map(|r| &r[..]).collect();
    let old_log = recyclable_log(8, &old_refs);
    for new_count in [0usize, 1, 3, 17, 60] {
        let new: Vec<Vec<u8>> = (0..new_count)
            .map(|i| {
                format!("log 12 record {i} ")
                    .repeat(1 + (i * 53) % 700)
                    .into_bytes()
            })
            .collect();
        let new_refs: Vec<&[u8]> = new.iter().map(|r| &r[..]).collect();
        let new_log = recyclable_log(12, &new_refs);
        let mut file = old_log.to_vec();
        file[..new_log.len()].copy_from_slice(&new_log);
        for recovery in Recovery::ALL {
            let outcome = read(&file, recovery, 12);
            for record in &outcome.records {
                assert!(
                    !old.iter().any(|o| o == record),
                    "{recovery}: a record of log 8 came back"
                );
            }
            if recovery != Recovery::AbsoluteConsistency {
                assert_eq!(outcome.record_vecs(), new, "{recovery}, {new_count} new");
            }
        }
    }
}

/// An old fragment (another log number) ends the log; what each mode says about a
/// record it cuts is RocksDB's.
#[test]
fn an_old_fragment_ends_the_log_as_rocksdb_does() {
    // Log 5 wrote a big record; log 9 writes a record that spans a block, and its
    // LAST is replaced by log 5's bytes (the new writer died before writing it).
    let old = recyclable_log(5, &[&[b'o'; 100_000]]);
    let new = recyclable_log(9, &[b"kept", &[b'n'; 40_000]]);
    let mut file = old.to_vec();
    file[..BLOCK_SIZE].copy_from_slice(&new[..BLOCK_SIZE]);
    for recovery in Recovery::ALL {
        let outcome = read(&file, recovery, 9);
        assert_eq!(outcome.record_vecs(), [b"kept".to_vec()], "{recovery}");
        match recovery {
            Recovery::TolerateTail => assert_eq!((outcome.reports, outcome.error), (vec![], None)),
            Recovery::AbsoluteConsistency => {
                let error = outcome.error.expect("an error");
                assert!(error.contains("encountering old record"), "{error}");
            }
            Recovery::PointInTime => {
                assert_eq!(outcome.reports.len(), 1);
                assert!(outcome.reports[0]
                    .reason
                    .contains("encountering old record"));
                assert_eq!(outcome.reports[0].offset, 15);
            }
            _ => {
                assert_eq!(outcome.reports[0].reason, "error in middle of record");
                // Then log 5's fragments are passed over without a word.
                assert_eq!(outcome.reports.len(), 1, "{:?}", outcome.reports);
            }
        }
    }
}

/// Between records an old fragment is a silent end, even in AbsoluteConsistency.
#[test]
fn an_old_fragment_between_records_is_a_clean_end() {
    let old = recyclable_log(5, &[&[b'o'; 3000], &[b'p'; 3000]]);
    let new = recyclable_log(6, &[&[b'n'; 3000]]);
    let mut file = old.to_vec();
    file[..new.len()].copy_from_slice(&new);
    for recovery in [
        Recovery::TolerateTail,
        Recovery::AbsoluteConsistency,
        Recovery::PointInTime,
    ] {
        let outcome = read(&file, recovery, 6);
        assert_eq!(outcome.record_vecs(), [vec![b'n'; 3000]], "{recovery}");
        assert_eq!(
            (outcome.reports, outcome.error),
            (vec![], None),
            "{recovery}"
        );
    }
}

/// Only the low 32 bits of the log number are stored, so only those are compared:
/// log 2^32 + 7 reads as log 7 (RocksDB would take every fragment as old).
#[test]
fn log_numbers_compare_on_their_low_32_bits() {
    let log = recyclable_log((1 << 32) + 7, &[b"high"]);
    let outcome = read(&log, Recovery::AbsoluteConsistency, 7);
    assert_eq!(outcome.record_vecs(), [b"high".to_vec()]);
}

/// In a recycled file, TolerateTail takes a bad checksum as the end of the log; in
/// a legacy file it is damage.
#[test]
fn a_bad_checksum_ends_a_recycled_log_in_tolerate_tail_only() {
    let mut recycled = recyclable_log(3, &[b"one", b"two", b"three"]);
    let second = 11 + 3;
    recycled[second + 11] ^= 0x20; // "two" → "Two": its checksum fails
    let outcome = read(&recycled, Recovery::TolerateTail, 3);
    assert_eq!(outcome.record_vecs(), [b"one".to_vec()]);
    assert_eq!((outcome.reports, outcome.error), (vec![], None));
    let skip = read(&recycled, Recovery::SkipCorrupted, 3);
    assert_eq!(skip.record_vecs(), [b"one".to_vec()]);
    assert_eq!(skip.reports[0].reason, "checksum mismatch");

    let mut legacy = BytesMut::new();
    let mut encoder = LogEncoder::new();
    for record in [&b"one"[..], b"two", b"three"] {
        encoder.encode_record(record, &mut legacy);
    }
    legacy[7 + 3 + 7] ^= 0x20;
    let outcome = read(&legacy, Recovery::TolerateTail, 3);
    assert!(outcome.error.unwrap().contains("checksum mismatch"));
}

/// A recyclable fragment after legacy data records is damage, reported once and
/// consumed (RocksDB's current reader would spin on it).
#[test]
fn a_recyclable_fragment_after_legacy_data_is_damage() {
    let mut log = BytesMut::new();
    LogEncoder::new().encode_record(b"legacy", &mut log);
    let at = log.len() as u64;
    let payload = b"recyclable";
    log.extend_from_slice(&recyclable_header(5, 1, payload));
    log.extend_from_slice(payload);
    LogEncoder::with_offset(log.len() as u64).encode_record(b"after", &mut log);
    let outcome = read(&log, Recovery::SkipCorrupted, 1);
    assert_eq!(
        outcome.record_vecs(),
        [b"legacy".to_vec(), b"after".to_vec()]
    );
    assert_eq!(outcome.reports.len(), 1);
    assert_eq!(outcome.reports[0].offset, at);
    assert_eq!(outcome.reports[0].bytes, 11 + payload.len() as u64);
    let strict = read(&log, Recovery::TolerateTail, 1);
    assert!(strict.error.unwrap().contains("not recycled"));
}

/// Metadata records are never returned; the decoder keeps what they say and hands
/// each to the callback with its offset.
#[test]
fn metadata_records_are_kept_not_returned() {
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::builder().recyclable(4).build();
    encoder.encode_record(b"first", &mut log);
    let sizes = [TimestampSize {
        column_family: 2,
        timestamp_size: 8,
    }];
    encoder.encode_timestamp_sizes(&sizes, &mut log).unwrap();
    encoder.encode_record(b"second", &mut log);
    let info = PredecessorWalInfo {
        log_number: 3,
        size_bytes: 4096,
        last_sequence: 77,
    };
    encoder.encode_predecessor_wal_info(&info, &mut log);
    encoder.encode_record(b"third", &mut log);

    let outcome = read(&log, Recovery::AbsoluteConsistency, 4);
    assert_eq!(
        outcome.record_vecs(),
        [b"first".to_vec(), b"second".to_vec(), b"third".to_vec()]
    );
    assert_eq!((outcome.reports, outcome.error), (vec![], None));

    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let mut decoder = LogDecoder::builder()
        .dialect(Dialect::RocksDb)
        .log_number(4)
        .on_metadata(move |offset, record| sink.lock().unwrap().push((offset, record.clone())))
        .build();
    let mut src = log.clone();
    while decoder.decode_eof(&mut src).unwrap().is_some() {}
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].1, MetadataRecord::TimestampSizes(sizes.to_vec()));
    assert_eq!(seen[1].1, MetadataRecord::PredecessorWal(info));
    assert_eq!(decoder.timestamp_sizes(), sizes);
    assert_eq!(decoder.predecessor_wal(), Some(info));
    assert_eq!(decoder.stats().metadata_records, 2);
}

/// A metadata record between a record's fragments cuts it: reported.
#[test]
fn a_metadata_record_inside_a_record_cuts_it() {
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    encoder.encode_record(&[b'a'; 40_000], &mut log);
    // Put a timestamp-size record in place of the start of block 1 (the LAST), then
    // the rest as zero fill: the LAST is gone.
    let payload = TimestampSize {
        column_family: 1,
        timestamp_size: 4,
    }
    .to_bytes();
    let mut meta = legacy_header(10, &payload).to_vec();
    meta.extend_from_slice(&payload);
    log[BLOCK_SIZE..BLOCK_SIZE + meta.len()].copy_from_slice(&meta);
    let last_len = log.len() - BLOCK_SIZE;
    log[BLOCK_SIZE + meta.len()..].fill(0);
    assert!(last_len > meta.len());
    let outcome = read(&log, Recovery::SkipCorrupted, 0);
    assert!(outcome.records.is_empty());
    assert_eq!(
        outcome.reports[0].reason,
        "metadata record interspersed partial record"
    );
    assert_eq!(outcome.reports[0].offset, 0);
}

/// Unknown types with bit 7 set are skipped silently; without it they are damage.
#[test]
fn unknown_types_with_bit_7_are_skipped() {
    for (type_byte, ignorable) in [(0x99u8, true), (0x19, false)] {
        let mut log = BytesMut::new();
        LogEncoder::new().encode_record(b"before", &mut log);
        let payload = b"from a newer writer";
        log.extend_from_slice(&legacy_header(type_byte, payload));
        log.extend_from_slice(payload);
        LogEncoder::with_offset(log.len() as u64).encode_record(b"after", &mut log);
        let outcome = read(&log, Recovery::TolerateTail, 0);
        if ignorable {
            assert_eq!(
                outcome.record_vecs(),
                [b"before".to_vec(), b"after".to_vec()]
            );
            assert_eq!((outcome.reports, outcome.error), (vec![], None));
        } else {
            let error = outcome.error.unwrap();
            assert!(
                error.contains(&format!("unknown record type {type_byte}")),
                "{error}"
            );
        }
    }
}

/// A second or late type-9 record is reported (and applied, as RocksDB does); a
/// compression type RocksDB cannot read is reported.
#[test]
fn compression_records_out_of_place_are_reported() {
    let none = WalCompressionType::None.to_payload();
    let mut log = BytesMut::new();
    log.extend_from_slice(&legacy_header(9, &none));
    log.extend_from_slice(&none);
    LogEncoder::with_offset(log.len() as u64).encode_record(b"data", &mut log);
    let late = log.len() as u64;
    log.extend_from_slice(&legacy_header(9, &none));
    log.extend_from_slice(&none);
    let outcome = read(&log, Recovery::SkipCorrupted, 0);
    assert_eq!(outcome.record_vecs(), [b"data".to_vec()]);
    assert_eq!(outcome.reports.len(), 1);
    assert_eq!(outcome.reports[0].offset, late);
    assert_eq!(
        outcome.reports[0].reason,
        "SetCompressionType not the first record"
    );

    let snappy = WalCompressionType::Other(1).to_payload();
    let mut log = BytesMut::new();
    log.extend_from_slice(&legacy_header(9, &snappy));
    log.extend_from_slice(&snappy);
    LogEncoder::with_offset(log.len() as u64).encode_record(b"data", &mut log);
    let outcome = read(&log, Recovery::SkipCorrupted, 0);
    assert!(outcome.records.is_empty());
    assert!(outcome
        .reports
        .iter()
        .all(|r| r.reason.contains("compression type 1")));
    assert_eq!(outcome.reports.len(), 2, "the type-9 record and the record");
}

/// A type-9 payload too short to parse is a bad metadata record.
#[test]
fn a_short_compression_record_is_reported() {
    let mut log = BytesMut::new();
    log.extend_from_slice(&legacy_header(9, &[7]));
    log.extend_from_slice(&[7]);
    let mut decoder = LogDecoder::builder().dialect(Dialect::RocksDb).build();
    match decoder.decode_eof(&mut log) {
        Err(CodecError::Corruption { kind, .. }) => {
            assert_eq!(kind, CorruptionKind::BadMetadataRecord(9))
        }
        other => panic!("{other:?}"),
    }
}

/// A read of a compressed WAL from an offset past its first block still inflates:
/// `LogReader::open_at` reads the type-9 record at the file's start first.
#[cfg(feature = "zstd")]
#[tokio::test]
async fn reading_a_compressed_wal_from_an_offset_inflates() {
    let name = "zstd/000008.log";
    let path = data_path(name);
    let expected = expected_records(name);
    let mut builder = LogDecoder::builder();
    builder.dialect(Dialect::RocksDb).log_number(8);
    let mut starts = Vec::new();
    let mut whole = walcodec::LogReader::open_at(&path, 0, &builder)
        .await
        .unwrap();
    while let Some(record) = whole.next_record().await {
        starts.push(record.unwrap().position.start);
    }
    assert_eq!(starts.len(), expected.len());
    let (index, &start) = starts
        .iter()
        .enumerate()
        .find(|(_, &start)| start >= BLOCK_SIZE as u64)
        .expect("a record past the first block");
    let mut reader = walcodec::LogReader::open_at(&path, start, &builder)
        .await
        .unwrap();
    let mut records = Vec::new();
    while let Some(record) = reader.next_record().await {
        records.push(record.unwrap().data.to_vec());
    }
    assert_eq!(records, expected[index..]);
}

// ---------------------------------------------------------------------------------
// Round trips through RocksDB's writers.

mod round_trips {
    use super::*;
    use proptest::prelude::*;

    fn records() -> impl Strategy<Value = Vec<Vec<u8>>> {
        let size = prop_oneof![0usize..40, 40usize..2_000, 30_000usize..70_000];
        proptest::collection::vec(
            (size, any::<u8>(), any::<bool>()).prop_map(|(len, seed, runs)| {
                // Runs compress; a pattern with no runs barely does.
                (0..len)
                    .map(|i| {
                        if runs {
                            seed
                        } else {
                            (i as u8).wrapping_mul(seed | 1) ^ (i >> 8) as u8
                        }
                    })
                    .collect()
            }),
            0..12,
        )
    }

    fn encode(records: &[Vec<u8>], recyclable: Option<u64>, compressed: bool) -> BytesMut {
        let mut builder = LogEncoder::builder();
        if let Some(number) = recyclable {
            builder.recyclable(number);
        }
        if compressed {
            #[cfg(feature = "zstd")]
            builder.zstd();
        }
        let mut encoder = builder.build();
        let mut log = BytesMut::new();
        for record in records {
            encoder.encode_record(record, &mut log);
        }
        log
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Random records through the recyclable writer come back whole, in every
        /// mode, under every chunking.
        #[test]
        fn recyclable_records_round_trip(records in records(), number in any::<u32>()) {
            let log = encode(&records, Some(u64::from(number)), false);
            for recovery in Recovery::ALL {
                let outcome = read(&log, recovery, u64::from(number));
                prop_assert_eq!(outcome.record_vecs(), records.clone());
                prop_assert_eq!(outcome.reports, vec![]);
                prop_assert_eq!(outcome.error, None);
            }
        }

        /// The same through the compressed writers, legacy and recyclable.
        #[cfg(feature = "zstd")]
        #[test]
        fn compressed_records_round_trip(
            records in records(),
            recyclable in proptest::option::of(1u64..1000),
        ) {
            let log = encode(&records, recyclable, true);
            for recovery in [Recovery::TolerateTail, Recovery::SkipCorrupted] {
                let outcome = read(&log, recovery, recyclable.unwrap_or(0));
                prop_assert_eq!(outcome.record_vecs(), records.clone());
                prop_assert_eq!(outcome.reports, vec![]);
                prop_assert_eq!(outcome.error, None);
            }
        }

        /// Damaged RocksDB logs: never a panic, the same outcome under every
        /// chunking (`read_every_way` checks), and in a recycled log nothing but
        /// records that were written.
        #[test]
        fn damaged_recyclable_logs_read_the_same_every_way(
            records in records(),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        ) {
            let mut log = encode(&records, Some(77), false).to_vec();
            if log.is_empty() {
                return Ok(());
            }
            for (at, byte) in flips {
                let at = at.index(log.len());
                log[at] ^= byte | 1;
            }
            for recovery in Recovery::ALL {
                let outcome = read(&log, recovery, 77);
                for record in outcome.record_vecs() {
                    prop_assert!(records.contains(&record), "a record never written");
                }
            }
        }
    }
}

/// Every record of the vector `vector`, read through the streaming reader
/// (`next_record_reader`), which hands each out fragment by fragment.
async fn stream_vector(vector: &Vector) -> Vec<Vec<u8>> {
    use tokio::io::AsyncReadExt;

    let mut builder = LogDecoder::builder();
    builder
        .dialect(Dialect::RocksDb)
        .log_number(log_number(vector.name));
    let path = data_path(vector.name);
    let mut reader = walcodec::LogReader::open_at(&path, 0, &builder)
        .await
        .unwrap();
    let mut records = Vec::new();
    while let Some(record) = reader.next_record_reader().await {
        let mut record = record.unwrap();
        let mut bytes = Vec::new();
        record.read_to_end(&mut bytes).await.unwrap();
        assert!(record.is_complete());
        records.push(bytes);
    }
    records
}

/// The streaming reader reads the plain vectors, recycled ones included (whose
/// FULL records take the decoder's plain path in fragment mode too), as whole
/// reads do: no record of a file's earlier use comes out.
#[tokio::test]
async fn plain_records_stream() {
    for vector in VECTORS.iter().filter(|v| !v.compressed) {
        let records = stream_vector(vector).await;
        assert_eq!(records, expected_records(vector.name), "{}", vector.name);
    }
}

/// The streaming reader hands out a compressed record's inflated bytes fragment by
/// fragment (a zstd stream decoder over its frame), the same bytes as whole reads.
#[cfg(feature = "zstd")]
#[tokio::test]
async fn compressed_records_stream_inflated() {
    for vector in VECTORS.iter().filter(|v| v.compressed) {
        let records = stream_vector(vector).await;
        assert_eq!(records, expected_records(vector.name), "{}", vector.name);
    }
}

/// A compressed record spread over fragments, damaged in its middle fragment:
/// the streamed record fails as damaged (`InvalidData`), and the next one reads.
#[cfg(feature = "zstd")]
#[tokio::test]
async fn a_damaged_compressed_record_fails_its_stream() {
    use tokio::io::AsyncReadExt;

    // Incompressible bytes: the frame spans three blocks.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let big: Vec<u8> = (0..80_000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::builder().zstd().build();
    encoder.encode_record(&big, &mut log);
    encoder.encode_record(b"after", &mut log);
    // Flip a byte of the MIDDLE fragment's payload and fix its checksum: the
    // fragment is intact, the frame is not.
    let middle = BLOCK_SIZE;
    let payload_len = u16::from_le_bytes([log[middle + 4], log[middle + 5]]) as usize;
    log[middle + 7 + payload_len / 2] ^= 0x55;
    let header = legacy_header(log[middle + 6], &log[middle + 7..middle + 7 + payload_len]);
    log[middle..middle + 7].copy_from_slice(&header);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    fs::write(&path, &log).unwrap();
    let mut builder = LogDecoder::builder();
    builder
        .dialect(Dialect::RocksDb)
        .recovery(Recovery::SkipCorrupted);
    let mut reader = walcodec::LogReader::open_at(&path, 0, &builder)
        .await
        .unwrap();
    let mut record = reader.next_record_reader().await.unwrap().unwrap();
    let mut bytes = Vec::new();
    let error = record.read_to_end(&mut bytes).await.unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);
    assert!(!record.is_complete());
    drop(record);
    let mut next = reader.next_record_reader().await.unwrap().unwrap();
    let mut after = Vec::new();
    next.read_to_end(&mut after).await.unwrap();
    assert_eq!(after, b"after");
}

// ---------------------------------------------------------------------------------
// Against the reference reader, taught RocksDB's dialect.

mod against_the_reference {
    use super::*;
    use common::reference_read_rocksdb;
    use proptest::prelude::*;

    fn damaged_log() -> impl Strategy<Value = (Vec<u8>, u32)> {
        let record = prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..50),
            proptest::collection::vec(any::<u8>(), 32_700..32_800),
            (1usize..70_000).prop_map(|len| vec![b'r'; len]),
        ];
        let damage = prop_oneof![
            (any::<prop::sample::Index>(), 1u8..=255).prop_map(|(at, x)| (at, x, 0usize)),
            (any::<prop::sample::Index>(), Just(0u8), 1usize..40_000),
        ];
        (
            proptest::collection::vec(record, 1..8),
            proptest::collection::vec(damage, 0..4),
            any::<bool>(),
            0u32..3,
        )
            .prop_map(|(records, damage, legacy_start, number)| {
                let mut log = BytesMut::new();
                if legacy_start {
                    LogEncoder::new().encode_record(b"a legacy record first", &mut log);
                }
                let mut encoder = LogEncoder::builder()
                    .recyclable(u64::from(number))
                    .offset(log.len() as u64)
                    .build();
                for record in &records {
                    encoder.encode_record(record, &mut log);
                }
                let mut log = log.to_vec();
                for (at, xor, zeros) in damage {
                    let at = at.index(log.len());
                    if zeros == 0 {
                        log[at] ^= xor;
                    } else {
                        let end = (at + zeros).min(log.len());
                        log[at..end].fill(0);
                    }
                }
                // Read as log 1: logs 0 and 2 are all old fragments.
                (log, 1)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        /// `SkipCorrupted` in RocksDB's dialect is RocksDB's `kSkipAnyCorruptedRecords`
        /// (with the crate's departures), report for report, under any chunking.
        #[test]
        fn damaged_logs_read_as_the_reference_reads_them((log, number) in damaged_log()) {
            let outcome = read(&log, Recovery::SkipCorrupted, u64::from(number));
            let reference = reference_read_rocksdb(&log, u64::from(number));
            prop_assert_eq!(outcome, reference);
        }

        /// Random bytes too.
        #[test]
        fn random_bytes_read_as_the_reference_reads_them(
            log in proptest::collection::vec(any::<u8>(), 0..3 * BLOCK_SIZE),
        ) {
            let outcome = read(&log, Recovery::SkipCorrupted, 0);
            let reference = reference_read_rocksdb(&log, 0);
            prop_assert_eq!(outcome, reference);
        }
    }

    /// Every RocksDB vector without compression, as the reference reads it.
    #[test]
    fn the_vectors_read_as_the_reference_reads_them() {
        for vector in VECTORS.iter().filter(|v| !v.compressed) {
            let log = fs::read(data_path(vector.name)).unwrap();
            let number = log_number(vector.name);
            let outcome = read(&log, Recovery::SkipCorrupted, number);
            assert_eq!(
                outcome,
                reference_read_rocksdb(&log, number),
                "{}",
                vector.name
            );
        }
    }
}

/// A bad length in a recycled file: the end of the log in TolerateTail, silently;
/// "bad record length" in the other modes (here SkipCorrupted goes on with the next
/// block).
#[test]
fn a_bad_length_ends_a_recycled_log_in_tolerate_tail_only() {
    let mut log = recyclable_log(3, &[b"one", b"two", &[b'x'; 40_000], b"after"]);
    let second = 11 + 3;
    // "two"'s length now runs past its block.
    log[second + 4..second + 6].copy_from_slice(&40_000u16.to_le_bytes());
    let outcome = read(&log, Recovery::TolerateTail, 3);
    assert_eq!(outcome.record_vecs(), [b"one".to_vec()]);
    assert_eq!((outcome.reports, outcome.error), (vec![], None));
    let strict = read(&log, Recovery::AbsoluteConsistency, 3);
    assert!(strict.error.unwrap().contains("bad record length"));
    let skip = read(&log, Recovery::SkipCorrupted, 3);
    assert_eq!(skip.reports[0].reason, "bad record length");
    assert_eq!(skip.reports[0].offset, second as u64);
    assert_eq!(skip.record_vecs().last().unwrap(), b"after");
}
