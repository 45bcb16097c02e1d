//! Short reads are not EOF (google/leveldb#1285): a source that returns fewer bytes
//! than asked, or one byte at a time with `Pending` in between, reads the same log.

use bytes::BytesMut;
use futures::TryStreamExt;

use tokio_util::codec::FramedRead;
use walcodec::{LogDecoder, LogEncoder, LogReader, BLOCK_SIZE};

use crate::common;

use common::ScriptedReader;

/// A source that hands out the log in reads cut by `pattern` (sizes, cycling), with
/// `Pending` before each read.
fn trickle(data: &[u8], pattern: &[usize]) -> ScriptedReader {
    let mut cuts = Vec::new();
    let mut at = 0;
    for size in pattern.iter().cycle() {
        at += size;
        if at >= data.len() {
            break;
        }
        cuts.push(at);
    }
    ScriptedReader::new(data, &cuts)
}

fn sample_log() -> (Vec<u8>, Vec<Vec<u8>>) {
    let records: Vec<Vec<u8>> = [0usize, 1, 32754, 32761, 7, 100_000, 6, 12, 65522, 3]
        .iter()
        .enumerate()
        .map(|(i, &n)| (0..n).map(|j| (i + j) as u8).collect())
        .collect();
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    for record in &records {
        encoder.encode_record(record, &mut log);
    }
    (log.to_vec(), records)
}

async fn check(pattern: Vec<usize>) {
    let (log, records) = sample_log();
    let via_framed: Vec<_> = FramedRead::new(trickle(&log, &pattern), LogDecoder::new())
        .try_collect()
        .await
        .unwrap();
    assert_eq!(via_framed.len(), records.len(), "pattern {pattern:?}");
    for (got, want) in via_framed.iter().zip(&records) {
        assert_eq!(&got[..], &want[..]);
    }

    let mut reader = LogReader::new(trickle(&log, &pattern), LogDecoder::new());
    let mut count = 0;
    while let Some(record) = reader.next_record().await {
        assert_eq!(&record.unwrap().data[..], &records[count][..]);
        count += 1;
    }
    assert_eq!(count, records.len());
    assert!(!reader.decoder().has_incomplete_tail());
    assert_eq!(reader.decoder().valid_prefix_len(), log.len() as u64);
}

#[tokio::test]
async fn one_byte_at_a_time_with_pending() {
    check(vec![1]).await;
}

#[tokio::test]
async fn reads_shorter_than_a_block() {
    check(vec![BLOCK_SIZE - 1, 7, 3, BLOCK_SIZE / 2, 1]).await;
    check(vec![6, 1, 5]).await;
}

#[tokio::test]
async fn reads_that_end_just_before_a_block_end() {
    // Each read stops a few bytes short of a block boundary, where LevelDB's reader
    // would take the short block for the end of the file.
    check(vec![BLOCK_SIZE - 3, 3]).await;
    check(vec![BLOCK_SIZE - 6, 6]).await;
}
