//! Short reads are not EOF (google/leveldb#1285): a source that returns fewer bytes
//! than asked, or one byte at a time with `Pending` in between, reads the same log.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::BytesMut;
use futures::TryStreamExt;
use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::codec::FramedRead;
use walcodec::{LogDecoder, LogEncoder, LogReader, BLOCK_SIZE};

/// Hands out at most `pattern[i]` bytes per read, cycling, and returns `Pending`
/// (waking itself) before every read when `pending` is set.
struct Trickle {
    data: Vec<u8>,
    at: usize,
    pattern: Vec<usize>,
    turn: usize,
    pending: bool,
    yielded: bool,
}

impl Trickle {
    fn new(data: Vec<u8>, pattern: Vec<usize>, pending: bool) -> Trickle {
        Trickle {
            data,
            at: 0,
            pattern,
            turn: 0,
            pending,
            yielded: false,
        }
    }
}

impl AsyncRead for Trickle {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.pending && !self.yielded {
            self.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.yielded = false;
        let limit = self.pattern[self.turn % self.pattern.len()];
        self.turn += 1;
        let n = limit.min(buf.remaining()).min(self.data.len() - self.at);
        let at = self.at;
        buf.put_slice(&self.data[at..at + n]);
        self.at += n;
        Poll::Ready(Ok(()))
    }
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

async fn check(pattern: Vec<usize>, pending: bool) {
    let (log, records) = sample_log();
    let via_framed: Vec<_> = FramedRead::new(
        Trickle::new(log.clone(), pattern.clone(), pending),
        LogDecoder::new(),
    )
    .try_collect()
    .await
    .unwrap();
    assert_eq!(via_framed.len(), records.len(), "pattern {pattern:?}");
    for (got, want) in via_framed.iter().zip(&records) {
        assert_eq!(&got[..], &want[..]);
    }

    let mut reader = LogReader::new(
        Trickle::new(log.clone(), pattern, pending),
        LogDecoder::new(),
    );
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
    check(vec![1], true).await;
}

#[tokio::test]
async fn reads_shorter_than_a_block() {
    check(vec![BLOCK_SIZE - 1, 7, 3, BLOCK_SIZE / 2, 1], false).await;
    check(vec![6, 1, 5], true).await;
}

#[tokio::test]
async fn reads_that_end_just_before_a_block_end() {
    // Each read stops a few bytes short of a block boundary, where LevelDB's reader
    // would take the short block for the end of the file.
    check(vec![BLOCK_SIZE - 3, 3], false).await;
    check(vec![BLOCK_SIZE - 6, 6], true).await;
}
