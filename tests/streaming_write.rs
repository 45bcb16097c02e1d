//! Records written as streams: `LogWriter`'s `RecordWriter` and
//! `AsyncLogWriter::append_stream` give the bytes `LogEncoder` gives, under any
//! chunking; other appends wait behind a streamed record; a stalled or failing
//! source is bounded and leaves a log that reopens clean.

use crate::common;

use std::io;
use std::time::Duration;

use bytes::BytesMut;
use common::*;
use proptest::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use walcodec::{
    AsyncLogWriter, Error, LogDecoder, LogEncoder, LogReader, LogWriter, WriterOptions, BLOCK_SIZE,
};

/// Writes `records` through a `LogWriter` starting at `offset`, each in chunks cut
/// at random (`seed`), and returns the bytes and positions.
async fn write_streamed(records: &[Vec<u8>], offset: u64, seed: u64) -> (Vec<u8>, Vec<(u64, u64)>) {
    let mut rng = SplitMix64::new(seed);
    let mut writer = LogWriter::with_offset(Vec::new(), offset);
    let mut positions = Vec::new();
    for record in records {
        let mut out = writer.record_writer().unwrap();
        let mut rest = &record[..];
        while !rest.is_empty() {
            let n = match rng.next_u64() % 3 {
                0 => rng.range(1, 16),
                1 => rng.range(1, 5000),
                _ => rng.range(1, 3 * BLOCK_SIZE),
            }
            .min(rest.len());
            out.write_all(&rest[..n]).await.unwrap();
            if rng.next_u64() % 5 == 0 {
                out.flush().await.unwrap();
            }
            rest = &rest[n..];
        }
        let position = out.finish().await.unwrap();
        positions.push((position.start, position.end));
    }
    (writer.into_inner(), positions)
}

fn encode_at(records: &[Vec<u8>], offset: u64) -> (Vec<u8>, Vec<(u64, u64)>) {
    let mut encoder = LogEncoder::with_offset(offset);
    let mut out = BytesMut::new();
    let positions = records
        .iter()
        .map(|r| {
            let p = encoder.encode_record(r, &mut out);
            (p.start, p.end)
        })
        .collect();
    (out.to_vec(), positions)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Byte identity with `LogEncoder`, from any starting offset (near a block's end
    /// included: trailers, an empty FIRST), under any chunking.
    #[test]
    fn record_writer_is_byte_identical_to_the_encoder(
        lens in proptest::collection::vec(
            prop_oneof![0usize..20, 32_740usize..32_770, 0usize..150_000],
            1..6,
        ),
        offset in prop_oneof![
            0u64..100,
            (BLOCK_SIZE as u64 - 20)..(BLOCK_SIZE as u64 + 1),
            0u64..(3 * BLOCK_SIZE as u64),
        ],
        seed in any::<u64>(),
    ) {
        let records: Vec<Vec<u8>> =
            lens.iter().enumerate().map(|(i, &len)| patterned(len, i as u64 ^ seed)).collect();
        let streamed = futures::executor::block_on(write_streamed(&records, offset, seed));
        let encoded = encode_at(&records, offset);
        prop_assert_eq!(streamed.1, encoded.1);
        prop_assert!(streamed.0 == encoded.0, "bytes differ");
    }
}

#[tokio::test]
async fn golden_bytes_with_seven_left() {
    // Exactly 7 bytes left in the block: an empty FIRST, then the LAST.
    let mut writer = LogWriter::with_offset(Vec::new(), (BLOCK_SIZE - 7) as u64);
    let position = writer.append(b"y").await.unwrap();
    assert_eq!(position.start, (BLOCK_SIZE - 7) as u64);
    let hex: String = writer
        .get_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(hex, "6451d0e90000025b5822d601000479");
}

#[tokio::test]
async fn append_stream_of_a_log_writer_reads_any_source() {
    let record = patterned(300_000, 7);
    let mut writer = LogWriter::new(Vec::new());
    let source = ChunkedReader::new(record.clone().into(), 3, 5000);
    writer.append_stream(source).await.unwrap();
    writer.append(b"after").await.unwrap();
    let (log, _) = encode_at(&[record, b"after".to_vec()], 0);
    assert!(writer.into_inner() == log);
}

#[tokio::test]
async fn record_writer_dropped_part_way() {
    let mut writer = LogWriter::new(Vec::new());
    // Nothing of it reached the sink: the record never was.
    let mut record = writer.record_writer().unwrap();
    record.write_all(&[1u8; 1000]).await.unwrap();
    drop(record);
    assert!(writer.get_ref().is_empty());
    writer.append(b"kept").await.unwrap();

    // A fragment of it reached the sink: the log ends torn, no more records.
    let mut record = writer.record_writer().unwrap();
    record.write_all(&[2u8; 100_000]).await.unwrap();
    drop(record);
    assert!(matches!(
        writer.record_writer(),
        Err(Error::Poisoned { .. })
    ));
    let records: Vec<_> = read_all(writer.get_ref()).await;
    assert_eq!(records, [b"kept".to_vec()]);
}

async fn read_all(log: &[u8]) -> Vec<Vec<u8>> {
    // The sink's bytes, as a file holds them: a torn tail is the log's end.
    let decoder = LogDecoder::builder()
        .input(walcodec::LogInput::File)
        .build();
    let mut reader = LogReader::new(log, decoder);
    let mut records = Vec::new();
    while let Some(record) = reader.next_record().await {
        records.push(record.unwrap().data.to_vec());
    }
    records
}

#[tokio::test]
async fn append_stream_writes_the_bytes_append_writes() {
    let dir = tempfile::tempdir().unwrap();
    let streamed_path = dir.path().join("streamed.log");
    let whole_path = dir.path().join("whole.log");
    let records: Vec<Vec<u8>> = [10usize, 100_000, 0, 32_755, 1_000_000, 5]
        .iter()
        .enumerate()
        .map(|(i, &len)| patterned(len, i as u64))
        .collect();

    let streamed = AsyncLogWriter::create(&streamed_path).await.unwrap();
    let whole = AsyncLogWriter::create(&whole_path).await.unwrap();
    for (i, record) in records.iter().enumerate() {
        let source = ChunkedReader::new(record.clone().into(), i as u64, 40_000);
        let a = streamed.append_stream(source).await.unwrap();
        let b = whole.append(record).await.unwrap();
        assert_eq!(a, b);
    }
    streamed.close().await.unwrap();
    whole.close().await.unwrap();
    let a = std::fs::read(&streamed_path).unwrap();
    let b = std::fs::read(&whole_path).unwrap();
    assert!(a == b, "streamed log differs from the whole-record log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_appends_wait_behind_a_streamed_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let writer = AsyncLogWriter::create(&path).await.unwrap();
    let big = patterned(2_000_000, 1);
    // A slow source: small chunks, pending in between.
    let source = ChunkedReader::new(big.clone().into(), 2, 3000);
    let streaming = {
        let writer = writer.clone();
        tokio::spawn(async move { writer.append_stream(source).await })
    };
    let mut small = Vec::new();
    for i in 0..50u32 {
        let writer = writer.clone();
        small.push(tokio::spawn(async move {
            writer.append(i.to_le_bytes()).await.unwrap()
        }));
    }
    let big_position = streaming.await.unwrap().unwrap();
    for task in small {
        let p = task.await.unwrap();
        // No record lands inside the streamed one.
        assert!(p.end <= big_position.start || p.start >= big_position.end);
    }
    writer.close().await.unwrap();
    let log = std::fs::read(&path).unwrap();
    let records = read_all(&log).await;
    assert_eq!(records.len(), 51);
    assert!(records.contains(&big));
}

/// A source that gives `bytes`, then neither data nor EOF.
fn stalling_source(bytes: Vec<u8>) -> impl tokio::io::AsyncRead + Unpin + Send {
    let (mut tx, rx) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        tx.write_all(&bytes).await.unwrap();
        // Held open, never written again.
        tokio::time::sleep(Duration::from_secs(3600)).await;
        drop(tx);
    });
    rx
}

#[tokio::test]
async fn a_stalled_source_times_out_and_bounds_the_wait() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let writer = WriterOptions::new()
        .stream_stall_timeout(Duration::from_millis(200))
        .create(&path)
        .await
        .unwrap();
    writer.append(b"before").await.unwrap();

    // Stalls before its first fragment is full: nothing is written, the writer goes on.
    let started = std::time::Instant::now();
    let error = writer
        .append_stream(stalling_source(vec![1; 1000]))
        .await
        .unwrap_err();
    assert!(matches!(&error, Error::Io(e) if e.kind() == io::ErrorKind::TimedOut));
    assert!(started.elapsed() < Duration::from_secs(5));
    writer.append(b"middle").await.unwrap();

    // Stalls after a fragment was queued: the writer is poisoned, and reopening
    // repairs the torn record away.
    let error = writer
        .append_stream(stalling_source(vec![2; 100_000]))
        .await
        .unwrap_err();
    assert!(matches!(&error, Error::Io(e) if e.kind() == io::ErrorKind::TimedOut));
    assert!(matches!(
        writer.append(b"refused").await,
        Err(Error::Poisoned { .. })
    ));
    // The flusher thread holds the writer's state, the file with it, until it
    // exits: the durable end's sender goes then, which is the event to wait for
    // before another writer opens the file (a hang guard, not a measure).
    let mut durable = writer.durable_end();
    drop(writer);
    tokio::time::timeout(Duration::from_secs(60), async {
        while durable.changed().await.is_ok() {}
    })
    .await
    .expect("the flusher thread let go of the file");
    let reopened = AsyncLogWriter::open(&path).await.unwrap();
    reopened.append(b"after").await.unwrap();
    reopened.close().await.unwrap();
    let records = read_all(&std::fs::read(&path).unwrap()).await;
    assert_eq!(
        records,
        [b"before".to_vec(), b"middle".to_vec(), b"after".to_vec()]
    );
}

#[tokio::test]
async fn a_failing_source_fails_the_append() {
    struct Failing(usize);
    impl tokio::io::AsyncRead for Failing {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<io::Result<()>> {
            if self.0 == 0 {
                return std::task::Poll::Ready(Err(io::Error::other("source broke")));
            }
            let n = self.0.min(buf.remaining());
            buf.put_slice(&vec![3u8; n]);
            self.0 -= n;
            std::task::Poll::Ready(Ok(()))
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let writer = AsyncLogWriter::create(&path).await.unwrap();
    let error = writer.append_stream(Failing(10)).await.unwrap_err();
    assert!(error.to_string().contains("source broke"));
    writer.append(b"fine").await.unwrap();
    writer.close().await.unwrap();
    let mut data = Vec::new();
    let mut file = tokio::fs::File::open(&path).await.unwrap();
    file.read_to_end(&mut data).await.unwrap();
    assert_eq!(read_all(&data).await, [b"fine".to_vec()]);
}
