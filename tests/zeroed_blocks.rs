//! Zero fill that begins at a block's first byte. Up to EOF it is preallocated
//! space; followed by data it is lost data, since no writer of the format leaves a
//! zeroed block before more records: damage in the strict modes, a stop in
//! `PointInTime`, skipped silently (as LevelDB does) but counted in `SkipCorrupted`.
//! Zeros from the middle of a block to its end (how RocksDB pads before a metadata
//! record) stay harmless.

use crate::common;

use bytes::BytesMut;
use common::{read_every_way, Config};
use tokio_util::codec::Decoder;
use walcodec::{LogDecoder, LogEncoder, Recovery, BLOCK_SIZE, HEADER_SIZE};

const BLOCKS: usize = 8;
/// Records per block: each block holds exactly this many, so none crosses an edge.
const PER_BLOCK: usize = 16;
const RECORD_LEN: usize = BLOCK_SIZE / PER_BLOCK - HEADER_SIZE;

fn records() -> Vec<Vec<u8>> {
    (0..BLOCKS * PER_BLOCK)
        .map(|i| common::patterned(RECORD_LEN, i as u64))
        .collect()
}

/// An eight-block log in which no record crosses a block edge.
fn log() -> Vec<u8> {
    let log = common::encode_all(&records());
    assert_eq!(log.len(), BLOCKS * BLOCK_SIZE);
    log
}

fn zero_block(log: &mut [u8], block: usize) {
    log[block * BLOCK_SIZE..(block + 1) * BLOCK_SIZE].fill(0);
}

/// Records `range` of the log, as vectors.
fn expected(range: impl IntoIterator<Item = usize>) -> Vec<Vec<u8>> {
    let all = records();
    range.into_iter().map(|i| all[i].clone()).collect()
}

#[test]
fn a_zeroed_block_followed_by_data_is_damage_in_the_strict_modes() {
    let mut log = log();
    zero_block(&mut log, 3);
    for recovery in [Recovery::TolerateTail, Recovery::AbsoluteConsistency] {
        let out = read_every_way(&log, Config::with_recovery(recovery));
        assert_eq!(
            out.record_vecs(),
            expected(0..3 * PER_BLOCK),
            "{recovery:?}"
        );
        assert_eq!(
            out.error.as_deref(),
            Some("corrupt log at offset 98304: zeroed block followed by data (32768 bytes)"),
            "{recovery:?}"
        );
    }
}

#[test]
fn point_in_time_stops_at_a_zeroed_block() {
    let mut log = log();
    zero_block(&mut log, 3);
    let out = read_every_way(&log, Config::with_recovery(Recovery::PointInTime));
    assert_eq!(out.record_vecs(), expected(0..3 * PER_BLOCK));
    assert_eq!(out.error, None);
    assert_eq!(out.reports.len(), 1, "{out:?}");
    assert_eq!(out.reports[0].offset, 3 * BLOCK_SIZE as u64);
    assert_eq!(out.reports[0].reason, "zeroed block followed by data");

    let mut decoder = LogDecoder::builder()
        .recovery(Recovery::PointInTime)
        .build();
    let mut src = BytesMut::from(&log[..]);
    while decoder.decode_eof(&mut src).unwrap().is_some() {}
    assert_eq!(decoder.halted_at(), Some(3 * BLOCK_SIZE as u64));
}

#[test]
fn skip_corrupted_skips_a_zeroed_block_silently_and_counts_it() {
    let mut log = log();
    zero_block(&mut log, 3);
    zero_block(&mut log, 5);
    let out = read_every_way(&log, Config::LEVELDB);
    let mut want = expected(0..3 * PER_BLOCK);
    want.extend(expected(4 * PER_BLOCK..5 * PER_BLOCK));
    want.extend(expected(6 * PER_BLOCK..BLOCKS * PER_BLOCK));
    assert_eq!(out.record_vecs(), want);
    assert_eq!(out.reports, [], "silent, as LevelDB");

    let mut decoder = LogDecoder::builder()
        .recovery(Recovery::SkipCorrupted)
        .build();
    let mut src = BytesMut::from(&log[..]);
    while decoder.decode_eof(&mut src).unwrap().is_some() {}
    assert_eq!(decoder.stats().zeroed_blocks, 2);
    assert_eq!(decoder.stats().zero_fill_bytes, 2 * BLOCK_SIZE as u64);
}

/// Zeroed blocks up to EOF are space grown ahead of the writer: nothing was lost.
#[test]
fn zeroed_blocks_up_to_eof_are_preallocated_space() {
    let mut log = log();
    log.resize(log.len() + 3 * BLOCK_SIZE, 0);
    zero_block(&mut log, 7);
    for recovery in [
        Recovery::TolerateTail,
        Recovery::AbsoluteConsistency,
        Recovery::PointInTime,
        Recovery::SkipCorrupted,
    ] {
        let out = read_every_way(&log, Config::with_recovery(recovery));
        assert_eq!(
            out.record_vecs(),
            expected(0..7 * PER_BLOCK),
            "{recovery:?}"
        );
        assert_eq!(out.error, None, "{recovery:?}");
        assert_eq!(out.reports, [], "{recovery:?}");
    }
    // A file of nothing but zeros is an empty log.
    let zeros = vec![0u8; 2 * BLOCK_SIZE + 100];
    let out = read_every_way(&zeros, Config::with_recovery(Recovery::AbsoluteConsistency));
    assert_eq!((out.records.len(), out.error), (0, None));
}

/// Zeros from the middle of a block to its end, then data in the next block: the
/// padding RocksDB leaves before a metadata record. Not damage in any mode.
#[test]
fn zeros_from_mid_block_to_its_end_are_padding() {
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    encoder.encode_record(b"before", &mut log);
    log.resize(BLOCK_SIZE, 0);
    let mut encoder = LogEncoder::with_offset(BLOCK_SIZE as u64);
    encoder.encode_record(b"after", &mut log);
    for recovery in [
        Recovery::TolerateTail,
        Recovery::AbsoluteConsistency,
        Recovery::PointInTime,
        Recovery::SkipCorrupted,
    ] {
        let out = read_every_way(&log, Config::with_recovery(recovery));
        assert_eq!(
            out.record_vecs(),
            [b"before".to_vec(), b"after".to_vec()],
            "{recovery:?}"
        );
        assert_eq!((out.error, out.reports.len()), (None, 0), "{recovery:?}");
    }
}

/// A zeroed block whose first byte is reached inside the zero fill of the block
/// before (zeros from mid-block run on through the next block), then data: damage,
/// reported at the zeroed block.
#[test]
fn zeros_running_into_a_zeroed_block_then_data_are_damage() {
    let mut log = log();
    // From the start of block 2's last record on.
    log[3 * BLOCK_SIZE - BLOCK_SIZE / PER_BLOCK..5 * BLOCK_SIZE].fill(0);
    let out = read_every_way(&log, Config::DEFAULT);
    assert!(
        out.error
            .as_deref()
            .is_some_and(|e| e.contains("offset 98304: zeroed block")),
        "{out:?}"
    );
}
