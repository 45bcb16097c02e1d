//! Reading from an arbitrary byte offset: LevelDB's initial-offset tests (log_test.cc,
//! ReadStart .. ReadPastEnd), with the stricter promise that no corruption is reported.

use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use walcodec::{
    block_start, Corruption, LogDecoder, LogEncoder, LogReader, BLOCK_SIZE, HEADER_SIZE,
};

const B: u64 = BLOCK_SIZE as u64;
const H: u64 = HEADER_SIZE as u64;

/// LevelDB's initial-offset log: six records of these sizes, record i filled with 'a' + i.
const SIZES: [usize; 6] = [
    10000,
    10000,
    2 * BLOCK_SIZE - 1000,
    1,
    13716,
    BLOCK_SIZE - HEADER_SIZE,
];

/// Where each record's first header sits, as LevelDB's test spells them out.
fn expected_offsets() -> [u64; 6] {
    let fourth = 2 * (H + 10000) + (2 * B - 1000) + 3 * H;
    [0, H + 10000, 2 * (H + 10000), fourth, fourth + H + 1, 3 * B]
}

fn initial_offset_log() -> BytesMut {
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    for (i, size) in SIZES.iter().enumerate() {
        let position = encoder.encode_record(&vec![b'a' + i as u8; *size], &mut log);
        assert_eq!(position.start, expected_offsets()[i]);
    }
    log
}

async fn read_from(log: &[u8], start: u64) -> (Vec<(usize, u64, u8)>, Vec<Corruption>) {
    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink = reports.clone();
    let decoder = LogDecoder::builder()
        .start_offset(start)
        .on_corruption(move |c| sink.lock().unwrap().push(c.clone()))
        .build();
    let from = (block_start(start) as usize).min(log.len());
    let mut reader = LogReader::new(&log[from..], decoder);
    let mut records = Vec::new();
    while let Some(record) = reader.next_record().await {
        let record = record.expect("no error from a clean log");
        assert_eq!(
            reader.decoder().last_record().unwrap().start,
            record.position.start
        );
        records.push((record.data.len(), record.position.start, record.data[0]));
    }
    let reports = reports.lock().unwrap().clone();
    (records, reports)
}

async fn check_initial_offset_record(start: u64, first_index: usize) {
    let log = initial_offset_log();
    let (records, reports) = read_from(&log, start).await;
    let expected: Vec<_> = (first_index..SIZES.len())
        .map(|i| (SIZES[i], expected_offsets()[i], b'a' + i as u8))
        .collect();
    assert_eq!(records, expected, "start offset {start}");
    assert!(
        reports.is_empty(),
        "start offset {start}: false corruption {reports:?}"
    );
}

async fn check_offset_past_end_returns_no_records(past_end: u64) {
    let log = initial_offset_log();
    let (records, reports) = read_from(&log, log.len() as u64 + past_end).await;
    assert!(records.is_empty());
    assert!(reports.is_empty());
}

#[tokio::test]
async fn read_start() {
    check_initial_offset_record(0, 0).await;
}

#[tokio::test]
async fn read_second_one_off() {
    check_initial_offset_record(1, 1).await;
}

#[tokio::test]
async fn read_second_ten_thousand() {
    check_initial_offset_record(10000, 1).await;
}

#[tokio::test]
async fn read_second_start() {
    check_initial_offset_record(10007, 1).await;
}

#[tokio::test]
async fn read_third_one_off() {
    check_initial_offset_record(10008, 2).await;
}

#[tokio::test]
async fn read_third_start() {
    check_initial_offset_record(20014, 2).await;
}

#[tokio::test]
async fn read_fourth_one_off() {
    check_initial_offset_record(20015, 3).await;
}

#[tokio::test]
async fn read_fourth_first_block_trailer() {
    check_initial_offset_record(B - 4, 3).await;
}

#[tokio::test]
async fn read_fourth_middle_block() {
    check_initial_offset_record(B + 1, 3).await;
}

#[tokio::test]
async fn read_fourth_last_block() {
    check_initial_offset_record(2 * B + 1, 3).await;
}

#[tokio::test]
async fn read_fourth_start() {
    check_initial_offset_record(2 * (H + 1000) + (2 * B - 1000) + 3 * H, 3).await;
}

#[tokio::test]
async fn read_initial_offset_into_block_padding() {
    check_initial_offset_record(3 * B - 3, 5).await;
}

#[tokio::test]
async fn read_end() {
    check_offset_past_end_returns_no_records(0).await;
}

#[tokio::test]
async fn read_past_end() {
    check_offset_past_end_returns_no_records(5).await;
}

/// LevelDB's SkipIntoMultiRecord: starting inside a fragmented record skips its
/// remaining fragments without a report.
#[tokio::test]
async fn skip_into_multi_record() {
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    encoder.encode_record(&vec![b'f'; 3 * BLOCK_SIZE], &mut log);
    encoder.encode_record(b"correct", &mut log);
    let (records, reports) = read_from(&log, B).await;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].0, 7);
    assert!(reports.is_empty());
}

/// Every start offset from 0 to past the end: the first record returned is the first
/// one starting at or after it, and nothing is reported.
#[tokio::test]
async fn every_start_offset_finds_the_next_record() {
    let log = initial_offset_log();
    let offsets = expected_offsets();
    let mut starts: Vec<u64> = (0..log.len() as u64 + 10).step_by(997).collect();
    for offset in offsets {
        starts.extend([offset.saturating_sub(1), offset, offset + 1]);
    }
    for start in starts {
        let (records, reports) = read_from(&log, start).await;
        let first = offsets
            .iter()
            .position(|&o| o >= start)
            .unwrap_or(SIZES.len());
        assert_eq!(records.len(), SIZES.len() - first, "start {start}");
        assert!(reports.is_empty(), "start {start}: {reports:?}");
    }
}

/// A record's end offset is a checkpoint: starting there resumes with the next record.
#[tokio::test]
async fn positions_round_trip_as_checkpoints() {
    let log = initial_offset_log();
    let (all, _) = read_from(&log, 0).await;
    let mut reader = LogReader::new(&log[..], LogDecoder::new());
    let mut index = 0;
    while let Some(record) = reader.next_record().await {
        let record = record.unwrap();
        let (rest, reports) = read_from(&log, record.position.end).await;
        assert_eq!(rest, all[index + 1..].to_vec());
        assert!(reports.is_empty());
        let (same, _) = read_from(&log, record.position.start).await;
        assert_eq!(same, all[index..].to_vec());
        index += 1;
    }
}
