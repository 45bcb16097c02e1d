//! LevelDB's `db/log_test.cc` error-path scenarios (reading from offset 0), ported
//! with the same record and dropped-byte assertions.
//!
//! Each log is read with `Recovery::SkipCorrupted` and a reporter that collects what
//! LevelDB's `ReportCollector` does (the sum of `bytes()`, the concatenated
//! `reason()`s), whole and through `FramedRead` over several chunkings, and checked
//! against the reference reader (`common::read_like_leveldb`). Each is then read in
//! the other recovery modes, which must agree with what LevelDB reported.

use crate::common;

use common::*;
use walcodec::{Recovery, BLOCK_SIZE, HEADER_SIZE};

const FIRST: u8 = 2;
const MIDDLE: u8 = 3;
const LAST: u8 = 4;

/// The other recovery modes on a log LevelDB read as `leveldb`, with `torn_tail`
/// telling whether the log ends inside a record.
///
/// - `TolerateTail` and `PointInTime` return what LevelDB returned if it reported
///   nothing; otherwise the records before the first damage, then an error at that
///   damage (`TolerateTail`) or a quiet stop with the damage reported (`PointInTime`).
/// - `AbsoluteConsistency` is `TolerateTail` that also fails on a torn tail.
fn check_other_modes(log: &[u8], leveldb: &Outcome, torn_tail: bool) {
    let tolerate = read_every_way(log, Config::with_recovery(Recovery::TolerateTail));
    let point_in_time = read_every_way(log, Config::with_recovery(Recovery::PointInTime));
    let absolute = read_every_way(log, Config::with_recovery(Recovery::AbsoluteConsistency));
    match leveldb.reports.first() {
        None => {
            assert_eq!(tolerate, *leveldb);
            assert_eq!(point_in_time, *leveldb);
            if torn_tail {
                assert_eq!(absolute.records, leveldb.records);
                let error = absolute
                    .error
                    .expect("a torn tail fails AbsoluteConsistency");
                assert!(error.contains("truncated record at end of log"), "{error}");
            } else {
                assert_eq!(absolute, *leveldb);
            }
        }
        Some(first) => {
            let error = tolerate
                .error
                .as_deref()
                .expect("damage fails TolerateTail");
            assert!(
                error.contains(&format!("at offset {}: {}", first.offset, first.reason)),
                "TolerateTail error {error:?}, LevelDB's first report {first:?}"
            );
            assert!(leveldb.records.starts_with(&tolerate.records));
            assert_eq!(tolerate.reports, [], "an error is not also reported");
            assert_eq!(absolute.records, tolerate.records);
            assert_eq!(absolute.error, tolerate.error);

            assert_eq!(point_in_time.error, None);
            assert_eq!(point_in_time.records, tolerate.records);
            assert_eq!(
                point_in_time.reports.len(),
                1,
                "PointInTime reports its stop"
            );
            assert_eq!(point_in_time.reports[0].offset, first.offset);
            assert_eq!(point_in_time.reports[0].reason, first.reason);
        }
    }
}

/// LevelDB `BadRecordType`.
#[test]
fn unknown_record_type_with_valid_checksum_is_dropped() {
    let mut t = LogTest::new();
    t.write(b"foo");
    t.increment_byte(6, 100);
    t.fix_checksum(0, 3);
    let out = read_like_leveldb(&t.dest);
    assert_eq!(out.records, Vec::<Vec<u8>>::new());
    assert_eq!(out.dropped(), 3);
    assert_eq!(out.message(), "unknown record type 101");
    check_other_modes(&t.dest, &out, false);
}

/// LevelDB `TruncatedTrailingRecordIsIgnored`.
#[test]
fn header_cut_by_eof_is_a_silent_end() {
    let mut t = LogTest::new();
    t.write(b"foo");
    t.shrink_size(4); // all the payload and a header byte
    let out = read_like_leveldb(&t.dest);
    assert_eq!(out.records, Vec::<Vec<u8>>::new());
    assert_eq!(out.dropped(), 0);
    assert_eq!(out.message(), "");
    check_other_modes(&t.dest, &out, true);
}

/// LevelDB `BadLength`.
#[test]
fn length_past_the_block_drops_the_block() {
    let mut t = LogTest::new();
    t.write(&big_string("bar", BLOCK_SIZE - HEADER_SIZE));
    t.write(b"foo");
    t.increment_byte(4, 1); // the length's low byte
    let out = read_like_leveldb(&t.dest);
    assert_eq!(out.record_vecs(), [b"foo".to_vec()]);
    assert_eq!(out.dropped(), BLOCK_SIZE as u64);
    assert_eq!(out.message(), "bad record length");
    check_other_modes(&t.dest, &out, false);
}

/// LevelDB `BadLengthAtEndIsIgnored`.
#[test]
fn payload_cut_by_eof_is_a_silent_end() {
    let mut t = LogTest::new();
    t.write(b"foo");
    t.shrink_size(1);
    let out = read_like_leveldb(&t.dest);
    assert_eq!(out.records, Vec::<Vec<u8>>::new());
    assert_eq!(out.dropped(), 0);
    assert_eq!(out.message(), "");
    check_other_modes(&t.dest, &out, true);
}

/// LevelDB `ChecksumMismatch`: at EOF only the bytes the block holds are dropped.
#[test]
fn checksum_mismatch_drops_the_rest_of_the_block() {
    let mut t = LogTest::new();
    t.write(b"foo");
    t.increment_byte(0, 10);
    let out = read_like_leveldb(&t.dest);
    assert_eq!(out.records, Vec::<Vec<u8>>::new());
    assert_eq!(out.dropped(), 10);
    assert_eq!(out.message(), "checksum mismatch");
    check_other_modes(&t.dest, &out, false);
}

/// `ChecksumMismatch` in a full block: all of the block's remaining bytes go, and the
/// next block is read.
#[test]
fn checksum_mismatch_in_a_full_block_drops_to_the_block_end() {
    let mut t = LogTest::new();
    t.write(b"foo");
    t.write(&big_string("pad", BLOCK_SIZE - 2 * HEADER_SIZE - 3));
    t.write(b"next block");
    t.increment_byte(0, 10);
    let out = read_like_leveldb(&t.dest);
    assert_eq!(out.record_vecs(), [b"next block".to_vec()]);
    assert_eq!(out.dropped(), BLOCK_SIZE as u64);
    assert_eq!(out.message(), "checksum mismatch");
    check_other_modes(&t.dest, &out, false);
}

/// LevelDB `UnexpectedMiddleType`.
#[test]
fn middle_fragment_without_first_is_dropped() {
    let mut t = LogTest::new();
    t.write(b"foo");
    t.set_byte(6, MIDDLE);
    t.fix_checksum(0, 3);
    let out = read_like_leveldb(&t.dest);
    assert_eq!(out.records, Vec::<Vec<u8>>::new());
    assert_eq!(out.dropped(), 3);
    assert_eq!(out.message(), "missing start of fragmented record");
    check_other_modes(&t.dest, &out, false);
}

/// LevelDB `UnexpectedLastType`.
#[test]
fn last_fragment_without_first_is_dropped() {
    let mut t = LogTest::new();
    t.write(b"foo");
    t.set_byte(6, LAST);
    t.fix_checksum(0, 3);
    let out = read_like_leveldb(&t.dest);
    assert_eq!(out.records, Vec::<Vec<u8>>::new());
    assert_eq!(out.dropped(), 3);
    assert_eq!(out.message(), "missing start of fragmented record");
    check_other_modes(&t.dest, &out, false);
}

/// LevelDB `UnexpectedFullType`.
#[test]
fn full_fragment_after_an_open_first_drops_the_partial_record() {
    let mut t = LogTest::new();
    t.write(b"foo");
    t.write(b"bar");
    t.set_byte(6, FIRST);
    t.fix_checksum(0, 3);
    let out = read_like_leveldb(&t.dest);
    assert_eq!(out.record_vecs(), [b"bar".to_vec()]);
    assert_eq!(out.dropped(), 3);
    assert_eq!(out.message(), "partial record without end");
    check_other_modes(&t.dest, &out, false);
}

/// LevelDB `UnexpectedFirstType`.
#[test]
fn first_fragment_after_an_open_first_drops_the_partial_record() {
    let mut t = LogTest::new();
    t.write(b"foo");
    t.write(&big_string("bar", 100_000));
    t.set_byte(6, FIRST);
    t.fix_checksum(0, 3);
    let out = read_like_leveldb(&t.dest);
    assert_eq!(out.record_vecs(), [big_string("bar", 100_000)]);
    assert_eq!(out.dropped(), 3);
    assert_eq!(out.message(), "partial record without end");
    check_other_modes(&t.dest, &out, false);
}

/// LevelDB `MissingLastIsIgnored`.
#[test]
fn fragmented_record_cut_before_its_last_fragment_is_a_silent_end() {
    let mut t = LogTest::new();
    t.write(&big_string("bar", BLOCK_SIZE));
    t.shrink_size(14); // the whole LAST fragment, header included
    assert_eq!(t.written_bytes(), BLOCK_SIZE);
    let out = read_like_leveldb(&t.dest);
    assert_eq!(out.records, Vec::<Vec<u8>>::new());
    assert_eq!(out.message(), "");
    assert_eq!(out.dropped(), 0);
    check_other_modes(&t.dest, &out, true);
}

/// LevelDB `PartialLastIsIgnored`.
#[test]
fn fragmented_record_cut_inside_its_last_fragment_is_a_silent_end() {
    let mut t = LogTest::new();
    t.write(&big_string("bar", BLOCK_SIZE));
    t.shrink_size(1); // the LAST fragment's length now runs past EOF
    let out = read_like_leveldb(&t.dest);
    assert_eq!(out.records, Vec::<Vec<u8>>::new());
    assert_eq!(out.message(), "");
    assert_eq!(out.dropped(), 0);
    check_other_modes(&t.dest, &out, true);
}

/// LevelDB `ErrorJoinsRecords`: FIRST(R1) LAST(R1) FIRST(R2) LAST(R2) where the
/// middle two fragments are wiped: FIRST(R1) and LAST(R2) must not be joined.
#[test]
fn damage_between_fragmented_records_does_not_join_them() {
    let mut t = LogTest::new();
    t.write(&big_string("foo", BLOCK_SIZE));
    t.write(&big_string("bar", BLOCK_SIZE));
    t.write(b"correct");
    for offset in BLOCK_SIZE..2 * BLOCK_SIZE {
        t.set_byte(offset, b'x');
    }
    let out = read_like_leveldb(&t.dest);
    assert_eq!(out.record_vecs(), [b"correct".to_vec()]);
    let dropped = out.dropped();
    assert!(dropped <= 2 * BLOCK_SIZE as u64 + 100, "{dropped}");
    assert!(dropped >= 2 * BLOCK_SIZE as u64, "{dropped}");
    // What LevelDB's algorithm drops exactly: the wiped block (its "header" has a
    // length of 0x7878, inside the block, so the checksum is what fails), R1's FIRST
    // (32761 bytes) and R2's orphaned LAST (32768 - 14 - 7 - 32747 + 7 = 21 bytes).
    let reasons: Vec<(&str, u64)> = out
        .reports
        .iter()
        .map(|r| (r.reason.as_str(), r.bytes))
        .collect();
    assert_eq!(
        reasons,
        [
            ("checksum mismatch", BLOCK_SIZE as u64),
            (
                "error in middle of record",
                (BLOCK_SIZE - HEADER_SIZE) as u64
            ),
            ("missing start of fragmented record", 21),
        ]
    );
    check_other_modes(&t.dest, &out, false);
}

/// Preallocated (zero-filled) space is skipped without a report, as LevelDB does, but
/// the decoder counts it.
#[test]
fn zero_filled_tail_is_skipped_silently_but_counted() {
    let mut t = LogTest::new();
    t.write(b"foo");
    t.dest.resize(BLOCK_SIZE + 100, 0);
    let out = read_like_leveldb(&t.dest);
    assert_eq!(out.record_vecs(), [b"foo".to_vec()]);
    assert_eq!(out.reports, []);

    let (mut decoder, _) = Config::LEVELDB.build();
    let mut src = bytes::BytesMut::from(&t.dest[..]);
    use tokio_util::codec::Decoder;
    assert_eq!(
        decoder.decode(&mut src).unwrap().as_deref(),
        Some(&b"foo"[..])
    );
    while decoder.decode_eof(&mut src).unwrap().is_some() {}
    let stats = decoder.stats();
    // The rest of block 0 is zero fill; so is block 1 up to EOF.
    assert_eq!(stats.zero_fill_bytes, (BLOCK_SIZE - 10 + 100) as u64);
    assert_eq!(stats.dropped_bytes, 0);
}

/// Zero fill where a fragmented record should go on abandons the record, and LevelDB
/// says so ("error in middle of record").
#[test]
fn zero_fill_inside_a_fragmented_record_is_an_error_in_the_middle() {
    let mut t = LogTest::new();
    t.write(&big_string("foo", 2 * BLOCK_SIZE));
    t.write(b"after");
    t.dest[BLOCK_SIZE..2 * BLOCK_SIZE].fill(0);
    let out = read_like_leveldb(&t.dest);
    assert_eq!(
        out.message(),
        "error in middle of recordmissing start of fragmented record"
    );
    assert_eq!(out.record_vecs(), [b"after".to_vec()]);
    check_other_modes(&t.dest, &out, false);
}

/// An unknown type inside a fragmented record drops the fragment and what was held.
#[test]
fn unknown_type_inside_a_fragmented_record_drops_what_was_held() {
    let mut t = LogTest::new();
    t.write(&big_string("foo", 3 * BLOCK_SIZE));
    t.write(b"after");
    // The MIDDLE fragment of block 1 becomes type 9 with a valid checksum.
    t.set_byte(BLOCK_SIZE + 6, 9);
    t.fix_checksum(BLOCK_SIZE, BLOCK_SIZE - HEADER_SIZE);
    let out = read_like_leveldb(&t.dest);
    let reasons: Vec<(&str, u64)> = out
        .reports
        .iter()
        .map(|r| (r.reason.as_str(), r.bytes))
        .collect();
    let fragment = (BLOCK_SIZE - HEADER_SIZE) as u64;
    assert_eq!(
        reasons,
        [
            ("unknown record type 9", 2 * fragment),
            ("missing start of fragmented record", fragment),
            (
                "missing start of fragmented record",
                3 * BLOCK_SIZE as u64 - 3 * fragment
            ),
        ]
    );
    assert_eq!(out.record_vecs(), [b"after".to_vec()]);
    check_other_modes(&t.dest, &out, false);
}

/// A bad length in the last block of a log that ends on a block boundary: LevelDB has
/// not seen EOF yet (its last read was a full block), so this is damage, not a torn
/// tail.
#[test]
fn bad_length_in_a_full_last_block_is_reported() {
    let mut t = LogTest::new();
    t.write(b"foo");
    t.write(&big_string("bar", BLOCK_SIZE - 10 - HEADER_SIZE));
    assert_eq!(t.written_bytes(), BLOCK_SIZE);
    t.increment_byte(10 + 4, 1);
    let out = read_like_leveldb(&t.dest);
    assert_eq!(out.record_vecs(), [b"foo".to_vec()]);
    assert_eq!(out.message(), "bad record length");
    assert_eq!(out.dropped(), (BLOCK_SIZE - 10) as u64);
    check_other_modes(&t.dest, &out, false);
}

/// The same bad length with one byte less of log: now the block is short, so it is
/// a torn tail.
#[test]
fn bad_length_in_a_short_last_block_is_a_torn_tail() {
    let mut t = LogTest::new();
    t.write(b"foo");
    t.write(&big_string("bar", BLOCK_SIZE - 10 - HEADER_SIZE));
    t.increment_byte(10 + 4, 1);
    t.shrink_size(1);
    let out = read_like_leveldb(&t.dest);
    assert_eq!(out.record_vecs(), [b"foo".to_vec()]);
    assert_eq!(out.reports, []);
    check_other_modes(&t.dest, &out, true);
}

/// A source that fails after handing out part of the log.
struct FailingReader {
    data: Vec<u8>,
    pos: usize,
}

impl tokio::io::AsyncRead for FailingReader {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if self.pos == self.data.len() {
            return std::task::Poll::Ready(Err(std::io::Error::other("disk on fire")));
        }
        let n = 5.min(self.data.len() - self.pos).min(buf.remaining());
        let pos = self.pos;
        buf.put_slice(&self.data[pos..pos + n]);
        self.pos += n;
        std::task::Poll::Ready(Ok(()))
    }
}

/// LevelDB `ReadError` has no equivalent in a stream of records: the read error ends
/// the stream as `Error::Io`, after every record read before it.
#[test]
fn read_error_ends_the_stream_after_the_records_before_it() {
    use futures::StreamExt;
    let mut t = LogTest::new();
    t.write(b"foo");
    t.write(b"bar");
    let data = t.dest[..t.dest.len() - 1].to_vec();
    let mut framed = tokio_util::codec::FramedRead::new(
        FailingReader { data, pos: 0 },
        walcodec::LogDecoder::new(),
    );
    futures::executor::block_on(async {
        assert_eq!(framed.next().await.unwrap().unwrap(), &b"foo"[..]);
        match framed.next().await {
            Some(Err(walcodec::CodecError::Io(e))) => assert_eq!(e.to_string(), "disk on fire"),
            other => panic!("expected an i/o error, got {other:?}"),
        }
        assert!(framed.next().await.is_none());
    });
}
