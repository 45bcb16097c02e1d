//! Records written by `LogEncoder` read back through `LogDecoder`: LevelDB's
//! `db/log_test.cc` scenarios that write and read from offset 0 without damage, and
//! property tests over any list of records, any chunking and any prefix of a log.
//!
//! Every read goes through a whole-buffer decode, `FramedRead` over several chunkings
//! (random sizes, single bytes, `Pending` in between) and the reference reader; all
//! must agree (see `common::read_like_leveldb`).

mod common;

use bytes::BytesMut;
use common::*;
use futures::{SinkExt, StreamExt};
use proptest::prelude::*;
use tokio_util::codec::{Decoder, FramedRead, FramedWrite};
use walcodec::{LogDecoder, LogEncoder, LogInput, Position, Recovery, BLOCK_SIZE, HEADER_SIZE};

/// Reads a log that has no damage, the LevelDB way and with the default decoder, and
/// returns its records: nothing may be reported and no error returned.
fn read_clean(log: &[u8]) -> Vec<Vec<u8>> {
    let leveldb = read_like_leveldb(log);
    assert_eq!(leveldb.reports, [], "an undamaged log reported damage");
    assert_eq!(leveldb.dropped(), 0);
    assert_eq!(leveldb.message(), "");
    assert_eq!(leveldb.error, None);
    for recovery in [
        Recovery::TolerateTail,
        Recovery::AbsoluteConsistency,
        Recovery::PointInTime,
    ] {
        let outcome = read_every_way(log, Config::with_recovery(recovery));
        assert_eq!(
            outcome, leveldb,
            "{recovery:?} reads an undamaged log differently"
        );
    }
    leveldb.record_vecs()
}

/// LevelDB `Empty`.
#[test]
fn empty_log_has_no_records() {
    assert!(read_clean(&[]).is_empty());
}

/// LevelDB `ReadWrite`; the reader returning EOF again after EOF is checked by every
/// `FramedRead` read (`common::decode_framed`).
#[test]
fn records_read_back_in_order() {
    let mut t = LogTest::new();
    for record in ["foo", "bar", "", "xxxx"] {
        t.write(record.as_bytes());
    }
    assert_eq!(
        read_clean(&t.dest),
        [&b"foo"[..], b"bar", b"", b"xxxx"].map(<[u8]>::to_vec)
    );
}

/// LevelDB `ManyBlocks`.
#[test]
fn hundred_thousand_small_records_span_many_blocks() {
    let mut t = LogTest::new();
    for i in 0..100_000 {
        t.write(&number_string(i));
    }
    assert!(t.written_bytes() > 30 * BLOCK_SIZE);
    let records = read_clean(&t.dest);
    assert_eq!(records.len(), 100_000);
    for (i, record) in records.iter().enumerate() {
        assert_eq!(*record, number_string(i), "record {i}");
    }
}

/// LevelDB `Fragmentation`.
#[test]
fn records_larger_than_a_block_are_fragmented_and_rejoined() {
    let mut t = LogTest::new();
    let records = [
        b"small".to_vec(),
        big_string("medium", 50_000),
        big_string("large", 100_000),
    ];
    for record in &records {
        t.write(record);
    }
    assert_eq!(read_clean(&t.dest), records);
}

/// LevelDB `MarginalTrailer`: a record leaves exactly 7 bytes, the length of an empty
/// record, which then fills the block as a zero-length FULL.
#[test]
fn empty_record_fills_a_seven_byte_gap() {
    let n = BLOCK_SIZE - 2 * HEADER_SIZE;
    let mut t = LogTest::new();
    t.write(&big_string("foo", n));
    assert_eq!(t.written_bytes(), BLOCK_SIZE - HEADER_SIZE);
    t.write(b"");
    t.write(b"bar");
    assert_eq!(t.dest[BLOCK_SIZE - 1], 1, "the empty record is a FULL");
    assert_eq!(
        read_clean(&t.dest),
        [big_string("foo", n), b"".to_vec(), b"bar".to_vec()]
    );
}

/// LevelDB `MarginalTrailer2`: after a 7-byte gap the next record starts with an
/// empty FIRST, which must not be reported.
#[test]
fn empty_first_fragment_in_a_seven_byte_gap_is_not_damage() {
    let n = BLOCK_SIZE - 2 * HEADER_SIZE;
    let mut t = LogTest::new();
    t.write(&big_string("foo", n));
    assert_eq!(t.written_bytes(), BLOCK_SIZE - HEADER_SIZE);
    t.write(b"bar");
    assert_eq!(t.dest[BLOCK_SIZE - 1], 2, "bar starts with an empty FIRST");
    assert_eq!(read_clean(&t.dest), [big_string("foo", n), b"bar".to_vec()]);
}

/// LevelDB `ShortTrailer`: a record leaves 3 bytes, which become a zero trailer.
#[test]
fn short_trailer_is_skipped() {
    let n = BLOCK_SIZE - 2 * HEADER_SIZE + 4;
    let mut t = LogTest::new();
    t.write(&big_string("foo", n));
    assert_eq!(t.written_bytes(), BLOCK_SIZE - HEADER_SIZE + 4);
    t.write(b"");
    t.write(b"bar");
    assert_eq!(&t.dest[BLOCK_SIZE - 3..BLOCK_SIZE], [0, 0, 0]);
    assert_eq!(
        read_clean(&t.dest),
        [big_string("foo", n), b"".to_vec(), b"bar".to_vec()]
    );
}

/// LevelDB `AlignedEof`: the log ends 3 bytes short of a block (no trailer written).
#[test]
fn log_ending_where_a_trailer_would_start() {
    let n = BLOCK_SIZE - 2 * HEADER_SIZE + 4;
    let mut t = LogTest::new();
    t.write(&big_string("foo", n));
    assert_eq!(t.written_bytes(), BLOCK_SIZE - HEADER_SIZE + 4);
    assert_eq!(read_clean(&t.dest), [big_string("foo", n)]);
}

/// LevelDB `OpenForAppend`.
#[test]
fn reopened_writer_continues_the_log() {
    let mut t = LogTest::new();
    t.write(b"hello");
    t.reopen_for_append();
    t.write(b"world");
    assert_eq!(read_clean(&t.dest), [b"hello".to_vec(), b"world".to_vec()]);
}

/// LevelDB `OpenForAppend`, at every block offset a reopened writer can meet.
#[test]
fn reopened_writer_matches_one_that_never_stopped() {
    for first_len in [
        0,
        1,
        BLOCK_SIZE - 15,
        BLOCK_SIZE - 14,
        BLOCK_SIZE - 13,
        40_000,
    ] {
        for second_len in [0, 1, 100, BLOCK_SIZE] {
            let first = patterned(first_len, 1);
            let second = patterned(second_len, 2);
            let mut reopened = LogTest::new();
            reopened.write(&first);
            reopened.reopen_for_append();
            reopened.write(&second);
            assert_eq!(reopened.dest, encode_all(&[&first, &second]));
            assert_eq!(read_clean(&reopened.dest), [first, second]);
        }
    }
}

/// LevelDB `RandomRead`: 500 records of skewed random lengths (up to 128 KiB), the
/// same ones LevelDB's test writes.
#[test]
fn skewed_random_records_round_trip() {
    let mut write_rnd = LevelDbRandom::new(301);
    let mut t = LogTest::new();
    for i in 0..500 {
        t.write(&random_skewed_string(i, &mut write_rnd));
    }
    let records = read_clean(&t.dest);
    let mut read_rnd = LevelDbRandom::new(301);
    assert_eq!(records.len(), 500);
    for (i, record) in records.iter().enumerate() {
        assert_eq!(
            *record,
            random_skewed_string(i, &mut read_rnd),
            "record {i}"
        );
    }
}

#[test]
fn leveldb_random_matches_its_reference_sequence() {
    // Park–Miller with seed 1: the first outputs are 16807, 16807^2 mod (2^31 - 1)...
    let mut rnd = LevelDbRandom::new(1);
    assert_eq!(rnd.next(), 16_807);
    assert_eq!(rnd.next(), 282_475_249);
    assert_eq!(rnd.next(), 1_622_650_073);
    // The 10,000th output from seed 1 is the generator's published check value.
    let mut rnd = LevelDbRandom::new(1);
    let mut last = 0;
    for _ in 0..10_000 {
        last = rnd.next();
    }
    assert_eq!(last, 1_043_618_065);
    // Seeds that would stick are replaced by 1.
    assert_eq!(LevelDbRandom::new(0).next(), 16_807);
    assert_eq!(LevelDbRandom::new(0x7fff_ffff).next(), 16_807);
    assert_eq!(LevelDbRandom::new(0x8000_0001).next(), 16_807);
}

#[test]
fn single_fragment_records_are_views_of_the_read_buffer() {
    let log = encode_all(&[b"alpha".to_vec(), patterned(20_000, 3), b"".to_vec()]);
    let mut src = BytesMut::from(&log[..]);
    let buffer = src.as_ptr() as usize..src.as_ptr() as usize + src.len();
    let mut decoder = LogDecoder::new();
    let mut records = Vec::new();
    while let Some(record) = decoder.decode(&mut src).unwrap() {
        records.push(record);
    }
    assert_eq!(records.len(), 3);
    for record in records.iter().filter(|r| !r.is_empty()) {
        assert!(
            buffer.contains(&(record.as_ptr() as usize)),
            "a FULL record was copied out of the read buffer"
        );
    }
}

/// A multi-block log with every kind of fragment: FULL, FIRST/MIDDLE/LAST, an empty
/// FIRST in a 7-byte gap, trailers, empty records.
fn multi_block_log() -> (Vec<Vec<u8>>, Vec<u8>, Vec<Position>) {
    let records = vec![
        patterned(100, 1),
        Vec::new(),
        patterned(BLOCK_SIZE - 2 * HEADER_SIZE - 100 - HEADER_SIZE, 2), // leaves 7 bytes
        patterned(50, 3),                                               // empty FIRST + LAST
        patterned(BLOCK_SIZE - 2 * HEADER_SIZE - 50 - 3, 4),            // leaves 3 bytes
        patterned(2 * BLOCK_SIZE + 10, 5),                              // FIRST, MIDDLE, LAST
        Vec::new(),
        patterned(1, 6),
    ];
    let mut encoder = LogEncoder::new();
    let mut log = BytesMut::new();
    let positions = records
        .iter()
        .map(|r| encoder.encode_record(r, &mut log))
        .collect();
    (records, log.to_vec(), positions)
}

/// Decodes `log` whole in `recovery` mode and returns the records with what the
/// decoder says about the end of the log.
fn decode_prefix(log: &[u8], recovery: Recovery) -> (Vec<Vec<u8>>, u64, bool) {
    // A prefix of a file, as a writer that died leaves it.
    let mut decoder = LogDecoder::builder()
        .recovery(recovery)
        .input(LogInput::File)
        .build();
    let mut src = BytesMut::from(log);
    let mut records = Vec::new();
    while let Some(record) = decoder.decode(&mut src).expect("decode") {
        records.push(record.to_vec());
    }
    while let Some(record) = decoder.decode_eof(&mut src).expect("decode_eof") {
        records.push(record.to_vec());
    }
    (
        records,
        decoder.valid_prefix_len(),
        decoder.has_incomplete_tail(),
    )
}

/// Whether the bytes of `log[from..to]` are only a trailer (the zero padding of a
/// block's last 1..=6 bytes), or nothing.
fn only_trailer(from: usize, to: usize) -> bool {
    let block_end = (from / BLOCK_SIZE + 1) * BLOCK_SIZE;
    to == from || (block_end - from < HEADER_SIZE && to <= block_end)
}

#[test]
fn every_prefix_of_a_log_reads_the_records_it_completes() {
    let (records, log, positions) = multi_block_log();
    assert!(log.len() > 3 * BLOCK_SIZE);
    for len in 0..=log.len() {
        let complete = positions.iter().filter(|p| p.end <= len as u64).count();
        let valid_end = positions[..complete].last().map_or(0, |p| p.end as usize);
        for recovery in [Recovery::TolerateTail, Recovery::SkipCorrupted] {
            let (got, valid_prefix_len, incomplete) = decode_prefix(&log[..len], recovery);
            assert_eq!(got, records[..complete], "prefix of {len} bytes");
            assert_eq!(valid_prefix_len, valid_end as u64, "prefix of {len} bytes");
            assert_eq!(
                incomplete,
                !only_trailer(valid_end, len),
                "has_incomplete_tail for a prefix of {len} bytes"
            );
        }
    }
}

/// Record sizes around the edges that matter: empty, one byte, around a block's
/// payload (32754..32768), and several blocks.
fn record_len() -> impl Strategy<Value = usize> {
    prop_oneof![
        0usize..=2,
        3usize..=300,
        (BLOCK_SIZE - 14)..=BLOCK_SIZE,
        (BLOCK_SIZE + 1)..=(3 * BLOCK_SIZE + 100),
    ]
}

fn records_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec((record_len(), any::<u64>()), 0..10).prop_map(|specs| {
        specs
            .into_iter()
            .map(|(len, seed)| patterned(len, seed))
            .collect()
    })
}

/// Largest chunk a reader hands out: single bytes through several blocks.
fn max_chunk() -> impl Strategy<Value = usize> {
    prop_oneof![1usize..=16, 17usize..=5_000, 5_000usize..=(3 * BLOCK_SIZE)]
}

/// Single-byte chunking of a big log is slow and adds nothing over a moderate one.
fn affordable(max_chunk: usize, log_len: usize) -> usize {
    if log_len > 64 * 1024 {
        max_chunk.max(512)
    } else {
        max_chunk
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn any_records_round_trip_under_any_chunking(
        records in records_strategy(),
        seed in any::<u64>(),
        max_chunk in max_chunk(),
    ) {
        let mut encoder = LogEncoder::new();
        let mut log = BytesMut::new();
        let positions: Vec<Position> =
            records.iter().map(|r| encoder.encode_record(r, &mut log)).collect();
        prop_assert_eq!(encoder.offset(), log.len() as u64);

        let reader = ChunkedReader::new(log.clone().freeze(), seed, affordable(max_chunk, log.len()));
        let mut framed = FramedRead::new(reader, LogDecoder::new());
        let got = futures::executor::block_on(async {
            let mut got = Vec::new();
            while let Some(record) = framed.next().await {
                let record = record.expect("an undamaged log decodes");
                prop_assert_eq!(framed.decoder().last_record(), Some(positions[got.len()]));
                got.push(record);
            }
            Ok::<_, TestCaseError>(got)
        })?;
        prop_assert_eq!(got.len(), records.len());
        for (got, want) in got.iter().zip(&records) {
            prop_assert!(got[..] == want[..]);
        }
        let decoder = framed.decoder();
        prop_assert_eq!(decoder.offset(), log.len() as u64);
        prop_assert_eq!(decoder.valid_prefix_len(), log.len() as u64);
        prop_assert!(!decoder.has_incomplete_tail());
        let stats = decoder.stats();
        prop_assert_eq!(stats.records, records.len() as u64);
        prop_assert_eq!(stats.record_bytes, records.iter().map(|r| r.len() as u64).sum::<u64>());
        prop_assert_eq!(stats.corruptions + stats.dropped_bytes + stats.zero_fill_bytes, 0);
        prop_assert_eq!(stats.fragments as usize, fragment_offsets(&log).len());
    }

    #[test]
    fn framed_write_produces_the_encoder_bytes_under_any_partial_writes(
        records in records_strategy(),
        seed in any::<u64>(),
        max_chunk in 1usize..=(2 * BLOCK_SIZE),
    ) {
        let expected = encode_all(&records);
        let mut sink = FramedWrite::new(ChunkedWriter::new(seed, max_chunk), LogEncoder::new());
        futures::executor::block_on(async {
            for record in &records {
                sink.send(&record[..]).await.expect("write");
            }
            sink.close().await.expect("close");
        });
        prop_assert_eq!(sink.encoder().offset(), expected.len() as u64);
        prop_assert!(sink.get_ref().written == expected);
    }

    #[test]
    fn any_prefix_reads_the_records_it_completes_under_any_chunking(
        records in records_strategy(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 1..8),
        seed in any::<u64>(),
        max_chunk in max_chunk(),
    ) {
        let mut encoder = LogEncoder::new();
        let mut log = BytesMut::new();
        let positions: Vec<Position> =
            records.iter().map(|r| encoder.encode_record(r, &mut log)).collect();
        for cut in cuts {
            let len = cut.index(log.len() + 1);
            let complete = positions.iter().filter(|p| p.end <= len as u64).count();
            for config in [Config::DEFAULT, Config::LEVELDB] {
                let outcome =
                    decode_framed(&log[..len], config, seed, affordable(max_chunk, len));
                prop_assert_eq!(&outcome.error, &None);
                prop_assert_eq!(&outcome.reports, &[]);
                prop_assert_eq!(outcome.records.len(), complete);
                for (got, want) in outcome.records.iter().zip(&records) {
                    prop_assert!(got[..] == want[..]);
                }
            }
        }
    }
}
