//! Pebble's WALs: the vectors Pebble wrote, our WAL-sync writer's output, and damage
//! placed around synced offsets, read by the decoder in Pebble's dialect and checked
//! against the reference reader of `pebble_support` (Pebble's reading rules).

use crate::common;
use crate::pebble_support;

use std::fs;

use bytes::BytesMut;
use common::{read_every_way, Config, Outcome};
use pebble_support::{
    data_path, expected_records, log_number, reference_read_pebble, PebbleEnd, PebbleRead, VECTORS,
};
use walcodec::{Dialect, LogEncoder, Recovery, BLOCK_SIZE};

fn pebble(recovery: Recovery, log_number: u64) -> Config {
    Config {
        recovery,
        dialect: Dialect::Pebble,
        log_number,
        ..Config::DEFAULT
    }
}

fn read(log: &[u8], recovery: Recovery, log_number: u64) -> Outcome {
    read_every_way(log, pebble(recovery, log_number))
}

/// Every vector gives Pebble's records, cleanly, in every mode and chunking, and the
/// reference reader agrees.
#[test]
fn every_vector_reads_its_records_in_every_mode() {
    for name in VECTORS {
        let log = fs::read(data_path(name)).unwrap();
        let number = log_number(name);
        let expected = expected_records(name);
        for recovery in Recovery::ALL {
            let outcome = read(&log, recovery, number);
            assert_eq!(outcome.record_vecs(), expected, "{name} {recovery}");
            assert_eq!(outcome.error, None, "{name} {recovery}");
            assert!(outcome.reports.is_empty(), "{name} {recovery}: {outcome:?}");
        }
        let reference = reference_read_pebble(&log, number);
        assert_eq!(reference.records, expected, "{name}: reference");
        assert!(
            matches!(reference.end, PebbleEnd::Eof | PebbleEnd::UnexpectedEof),
            "{name}: {reference:?}"
        );
    }
}

/// The next log's number in a whole recyclable header where a record would start
/// is Pebble's EOF trailer, a clean end in every mode, even when the log ends before
/// the payload the header claims: Pebble reads the log number before it measures
/// the payload. (Found by `damaged_logs_end_as_pebble_says`: absolute consistency
/// called this a truncated record.)
#[test]
fn an_eof_trailer_cut_short_is_a_clean_end_in_every_mode() {
    let log = wal_sync_log(1, &[Vec::new()], false);
    assert_eq!(log.len(), 19, "one empty record, a WAL-sync header alone");
    let mut log = log.to_vec();
    // A recyclable FULL header of log 2 claiming one byte, and no byte after it.
    log.extend_from_slice(&[0, 0, 0, 0, 1, 0, 5, 2, 0, 0, 0]);
    let reference = reference_read_pebble(&log, 1);
    assert_eq!(reference.records, vec![Vec::<u8>::new()]);
    assert_eq!(reference.end, PebbleEnd::Eof);
    for recovery in Recovery::ALL {
        let outcome = read(&log, recovery, 1);
        assert_eq!(outcome.record_vecs(), vec![Vec::<u8>::new()], "{recovery}");
        assert_eq!(outcome.error, None, "{recovery}: {outcome:?}");
        assert!(outcome.reports.is_empty(), "{recovery}: {outcome:?}");
    }
}

/// A WAL-sync log of `records` for log `number`, each fragment promising the log
/// synced up to the end of the record before it (what a writer syncing after
/// every record promises), closed with the EOF trailer when `close`.
fn wal_sync_log(number: u64, records: &[Vec<u8>], close: bool) -> Vec<u8> {
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::builder().pebble(number).build();
    for record in records {
        encoder.set_synced_offset(encoder.offset());
        encoder.encode_record(record, &mut log);
    }
    if close {
        encoder.encode_eof_trailer(&mut log);
    }
    log.to_vec()
}

/// Records of every size class: tiny, a block's worth, several blocks.
fn records(seed: u64, count: usize) -> Vec<Vec<u8>> {
    let mut rng = common::SplitMix64::new(seed);
    (0..count)
        .map(|i| {
            let len = match i % 4 {
                0 => rng.range(0, 100),
                1 => rng.range(1000, 5000),
                2 => rng.range(32_700, 32_800),
                _ => rng.range(60_000, 100_000),
            };
            common::patterned(len, seed + i as u64)
        })
        .collect()
}

/// Whether the decoder's outcome in `recovery` is what Pebble's rule gives for
/// what the reference reader returned.
fn agrees(outcome: &Outcome, reference: &PebbleRead, recovery: Recovery) -> Result<(), String> {
    let same_records = outcome.record_vecs() == reference.records;
    let ok = match (recovery, reference.end) {
        (Recovery::TolerateTail, PebbleEnd::Corrupt { .. }) => {
            same_records && outcome.error.is_some()
        }
        (Recovery::TolerateTail, _) => same_records && outcome.error.is_none(),
        (Recovery::PointInTime, PebbleEnd::Corrupt { .. }) => {
            same_records && outcome.error.is_none() && outcome.reports.len() == 1
        }
        (Recovery::PointInTime, _) => {
            same_records && outcome.error.is_none() && outcome.reports.is_empty()
        }
        (Recovery::AbsoluteConsistency, PebbleEnd::Eof) => same_records && outcome.error.is_none(),
        (Recovery::AbsoluteConsistency, _) => {
            outcome.error.is_some() && reference.records.starts_with(&outcome.record_vecs())
        }
        // SkipCorrupted goes on past damage: it returns at least Pebble's records.
        _ => outcome.record_vecs().starts_with(&reference.records),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{recovery}: decoder {outcome:?}, reference {} records, {:?}",
            reference.records.len(),
            reference.end
        ))
    }
}

/// Our WAL-sync writer's logs read back whole by the decoder and by the reference
/// reader, closed (EOF trailer) or not.
#[test]
fn wal_sync_logs_read_back_by_both_readers() {
    for (seed, close) in [(1, true), (2, false), (3, true)] {
        let records = records(seed, 12);
        let log = wal_sync_log(7, &records, close);
        assert_eq!(log[6], 9, "a WAL-sync FULL or FIRST first");
        let reference = reference_read_pebble(&log, 7);
        assert_eq!(reference.records, records);
        assert_eq!(reference.end, PebbleEnd::Eof);
        for recovery in Recovery::ALL {
            let outcome = read(&log, recovery, 7);
            assert_eq!(outcome.record_vecs(), records, "{recovery}");
            assert_eq!(outcome.error, None);
            assert!(outcome.reports.is_empty());
        }
        // Another log number reads nothing: the whole file is another log's.
        let outcome = read(&log, Recovery::TolerateTail, 8);
        assert!(outcome.records.is_empty() && outcome.error.is_none());
    }
}

/// A flipped byte in a record the writer has since promised synced is corruption;
/// in the last record, which nothing after it promised, it is the torn tail.
#[test]
fn damage_before_a_synced_offset_is_corruption_after_it_the_end() {
    let records: Vec<Vec<u8>> = (0..6).map(|i| vec![i as u8 + 1; 20_000]).collect();
    let log = wal_sync_log(3, &records, false);
    // Record 1 starts in block 0; records after it live in later blocks and
    // promise it synced.
    let mut early = log.clone();
    early[25_000] ^= 0x20;
    let reference = reference_read_pebble(&early, 3);
    assert!(
        matches!(reference.end, PebbleEnd::Corrupt { .. }),
        "{reference:?}"
    );
    for recovery in Recovery::ALL {
        let outcome = read(&early, recovery, 3);
        agrees(&outcome, &reference, recovery).unwrap();
    }
    let outcome = read(&early, Recovery::TolerateTail, 3);
    let error = outcome.error.unwrap();
    assert!(error.contains("checksum mismatch"), "{error}");
    assert_eq!(outcome.records.len(), 1);

    // The last record: nothing after it promises anything.
    let mut late = log.clone();
    let at = log.len() - 100;
    late[at] ^= 0x20;
    let reference = reference_read_pebble(&late, 3);
    assert_eq!(reference.end, PebbleEnd::UnexpectedEof);
    assert_eq!(reference.records.len(), 5);
    for recovery in Recovery::ALL {
        let outcome = read(&late, recovery, 3);
        agrees(&outcome, &reference, recovery).unwrap();
    }
}

/// A log cut anywhere is a torn tail: a clean end in every mode but
/// AbsoluteConsistency, with every record before the cut.
#[test]
fn torn_tails_end_cleanly() {
    let records = records(4, 8);
    let log = wal_sync_log(5, &records, false);
    for cut in [1, 7, 18, 19, 100, BLOCK_SIZE + 3, log.len() - 1] {
        let torn = &log[..log.len() - cut];
        let reference = reference_read_pebble(torn, 5);
        assert_ne!(reference.end, PebbleEnd::Eof);
        assert!(!matches!(reference.end, PebbleEnd::Corrupt { .. }));
        for recovery in Recovery::ALL {
            let outcome = read(torn, recovery, 5);
            agrees(&outcome, &reference, recovery).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        }
    }
}

/// Pebble's writers leave up to 18 zero bytes where a WAL-sync header does not fit:
/// every leftover from 1 to 18, and the record after it, read back.
#[test]
fn eleven_to_eighteen_zero_bytes_at_a_block_end_are_padding() {
    for left in 1..=18usize {
        // A first record that leaves `left` bytes in block 0.
        let first = vec![1u8; BLOCK_SIZE - 19 - left];
        let records = vec![first, b"after the padding".to_vec()];
        let log = wal_sync_log(9, &records, true);
        assert!(log[BLOCK_SIZE - left..BLOCK_SIZE].iter().all(|&b| b == 0));
        assert_eq!(log[BLOCK_SIZE + 6], 9, "left {left}");
        let reference = reference_read_pebble(&log, 9);
        assert_eq!(reference.records, records, "left {left}");
        for recovery in Recovery::ALL {
            let outcome = read(&log, recovery, 9);
            assert_eq!(outcome.record_vecs(), records, "left {left} {recovery}");
            assert!(outcome.error.is_none() && outcome.reports.is_empty());
        }
        // Anything but zeros in 11 to 18 bytes of padding is an invalid chunk
        // (nothing after it promises past it: the end).
        if left >= 11 {
            let mut dirty = log.clone();
            dirty[BLOCK_SIZE - 1] = 1;
            let reference = reference_read_pebble(&dirty, 9);
            assert_eq!(reference.records.len(), 1);
            for recovery in Recovery::ALL {
                let outcome = read(&dirty, recovery, 9);
                agrees(&outcome, &reference, recovery).unwrap();
            }
        }
    }
}

/// A recycled file: a new log (number 21) written over an older one (20) whose
/// WAL-sync fragments, with synced offsets far past the new log's end, remain
/// after it. Their log number is not the new log's: they promise nothing, and the
/// new log ends cleanly where its own fragments end.
#[test]
fn stale_wal_sync_fragments_of_an_older_log_are_not_damage() {
    let old = wal_sync_log(20, &records(6, 16), true);
    let new_records = records(7, 3);
    let new = wal_sync_log(21, &new_records, false);
    assert!(new.len() + 1000 < old.len());
    let mut file = old.clone();
    file[..new.len()].copy_from_slice(&new);
    let reference = reference_read_pebble(&file, 21);
    assert_eq!(reference.records, new_records);
    assert_eq!(reference.end, PebbleEnd::UnexpectedEof);
    for recovery in [Recovery::TolerateTail, Recovery::PointInTime] {
        let outcome = read(&file, recovery, 21);
        agrees(&outcome, &reference, recovery).unwrap();
        assert!(outcome.reports.is_empty());
    }
    // Closed: the EOF trailer ends it in every mode, AbsoluteConsistency included.
    let closed = wal_sync_log(21, &new_records, true);
    let mut file = old.clone();
    file[..closed.len()].copy_from_slice(&closed);
    assert_eq!(reference_read_pebble(&file, 21).end, PebbleEnd::Eof);
    for recovery in Recovery::ALL {
        let outcome = read(&file, recovery, 21);
        assert_eq!(outcome.record_vecs(), new_records, "{recovery}");
        assert!(
            outcome.error.is_none() && outcome.reports.is_empty(),
            "{recovery}"
        );
    }
}

/// The decoder says where the log ended: the EOF trailer, or the invalid chunk
/// that nothing proved damage.
#[test]
fn the_decoder_tells_where_the_log_ended() {
    use tokio_util::codec::Decoder;
    let log = fs::read(data_path("broken-external-db/000006.log")).unwrap();
    let mut decoder = walcodec::LogDecoder::builder()
        .dialect(Dialect::Pebble)
        .log_number(6)
        .build();
    let mut src = BytesMut::from(&log[..]);
    assert_eq!(decoder.decode_eof(&mut src).unwrap(), None);
    assert_eq!(decoder.recycled_end(), Some(0));
    assert_eq!(decoder.halted_at(), Some(0));
}

/// LevelDB's and RocksDB's log tests: a 14-byte log whose one record fails its
/// checksum reports 14 bytes in every mode, not the 32,768 of a whole block.
#[test]
fn an_error_counts_the_bytes_the_damage_covers() {
    let mut log = BytesMut::new();
    LogEncoder::new().encode_record(b"foo bar", &mut log);
    assert_eq!(log.len(), 14);
    log[10] ^= 1;
    for dialect in [Dialect::LevelDb, Dialect::RocksDb, Dialect::Pebble] {
        for recovery in Recovery::ALL {
            let config = Config {
                recovery,
                dialect,
                ..Config::DEFAULT
            };
            let outcome = read_every_way(&log, config);
            let claimed = match &outcome.error {
                Some(error) => error.clone(),
                None => outcome
                    .reports
                    .iter()
                    .map(|r| format!("{} bytes", r.bytes))
                    .collect(),
            };
            if dialect == Dialect::Pebble
                && recovery != Recovery::AbsoluteConsistency
                && recovery != Recovery::SkipCorrupted
            {
                // Nothing after it promises it synced: the end of the log.
                assert!(outcome.error.is_none() && outcome.reports.is_empty());
                continue;
            }
            assert!(
                claimed.contains("14 bytes"),
                "{dialect:?} {recovery}: {claimed}"
            );
        }
    }
}

mod against_the_reference {
    use super::*;
    use proptest::prelude::*;

    fn damaged_log() -> impl Strategy<Value = Vec<u8>> {
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
            proptest::collection::vec(damage, 0..3),
            any::<bool>(),
        )
            .prop_map(|(records, damage, close)| {
                let mut log = wal_sync_log(1, &records, close);
                for (at, xor, zeros) in damage {
                    let at = at.index(log.len());
                    if zeros == 0 {
                        log[at] ^= xor;
                    } else {
                        let end = (at + zeros).min(log.len());
                        log[at..end].fill(0);
                    }
                }
                log
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Damaged WAL-sync logs: records, and torn-versus-corrupt, as Pebble's
        /// rules say, in every mode and chunking.
        #[test]
        fn damaged_logs_end_as_pebble_says(log in damaged_log()) {
            let reference = reference_read_pebble(&log, 1);
            for recovery in Recovery::ALL {
                let outcome = read(&log, recovery, 1);
                prop_assert!(agrees(&outcome, &reference, recovery).is_ok(), "{}", agrees(&outcome, &reference, recovery).unwrap_err());
            }
        }

        /// Random bytes never panic, and TolerateTail agrees with the reference.
        #[test]
        fn random_bytes_end_as_pebble_says(
            log in proptest::collection::vec(any::<u8>(), 0..2 * BLOCK_SIZE),
        ) {
            let reference = reference_read_pebble(&log, 0);
            let outcome = read(&log, Recovery::TolerateTail, 0);
            prop_assert!(agrees(&outcome, &reference, Recovery::TolerateTail).is_ok());
        }
    }
}

/// The range-key batch of `mixed/000004.log` decodes in Pebble's dialect: its kinds
/// 0x14 and 0x15 are Pebble's RANGEKEYUNSET and RANGEKEYSET, not RocksDB's tags
/// that share the numbers.
#[test]
fn range_key_batches_decode_in_pebbles_dialect() {
    use walcodec::write_batch::{Operation, WriteBatch};
    let record = &expected_records("mixed/000004.log")[0];
    let batch = WriteBatch::parse(record, Dialect::Pebble).unwrap();
    assert_eq!((batch.sequence(), batch.count()), (39, 4));
    let operations: Vec<Operation<'_>> = batch.operations().collect::<Result<_, _>>().unwrap();
    assert_eq!(operations.len(), 4);
    assert!(matches!(operations[0], Operation::Put { key: b"a@2", .. }));
    assert!(matches!(
        operations[1],
        Operation::RangeKeySet { start: b"a", .. }
    ));
    assert!(matches!(
        operations[2],
        Operation::RangeKeyUnset { start: b"a", .. }
    ));
    assert!(matches!(
        operations[3],
        Operation::RangeKeyDelete {
            start: b"a",
            end: b"b"
        }
    ));
    // RocksDB's dialect reads 0x15 as its commit-with-timestamp and goes astray.
    let rocksdb = WriteBatch::parse(record, Dialect::RocksDb).unwrap();
    let ops: Vec<_> = rocksdb.operations().collect();
    assert!(
        ops.len() != 4
            || ops.iter().any(|op| op.is_err())
            || ops != operations.iter().map(|o| Ok(*o)).collect::<Vec<_>>()
    );
}
