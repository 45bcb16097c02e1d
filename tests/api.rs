//! The API a new user touches first: builders that can be reused, the common write
//! path without type annotations, positions from `FramedRead`, errors that print
//! once, and recovery modes by name.

use std::error::Error as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::BytesMut;
use futures::{SinkExt, TryStreamExt};
use tokio_util::codec::{FramedRead, FramedWrite};
use walcodec::{
    AsyncLogWriter, Error, LogDecoder, LogEncoder, LogReader, LogRecordDecoder, Recovery,
};

fn write_log(dir: &std::path::Path, records: usize) -> (std::path::PathBuf, Vec<u8>) {
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    for i in 0..records {
        encoder.encode_record(format!("record {i}").as_bytes(), &mut log);
    }
    let path = dir.join("000001.log");
    std::fs::write(&path, &log).unwrap();
    (path, log.to_vec())
}

async fn count(mut reader: LogReader<walcodec::ReadAhead>) -> usize {
    let mut n = 0;
    while let Some(record) = reader.next_record().await {
        record.unwrap();
        n += 1;
    }
    n
}

/// A split read does not leave its end offset in the builder: the next reader built
/// from it reads the whole log.
#[tokio::test]
async fn a_builder_is_unchanged_by_the_readers_it_opens() {
    let dir = tempfile::tempdir().unwrap();
    let (path, log) = write_log(dir.path(), 10_000);
    let builder = LogDecoder::builder();
    let half = LogReader::open_range(&path, 0..log.len() as u64 / 2, &builder)
        .await
        .unwrap();
    let first_half = count(half).await;
    assert!(first_half > 4_000 && first_half < 6_000, "{first_half}");
    let whole = LogReader::open_at(&path, 0, &builder).await.unwrap();
    assert_eq!(count(whole).await, 10_000);
    assert_eq!(count(LogReader::open(&path).await.unwrap()).await, 10_000);
}

/// Every decoder a builder builds reports to the one callback.
#[test]
fn every_built_decoder_keeps_the_reporter() {
    let reports = Arc::new(AtomicUsize::new(0));
    let sink = reports.clone();
    let mut builder = LogDecoder::builder();
    builder
        .recovery(Recovery::SkipCorrupted)
        .on_corruption(move |_| {
            sink.fetch_add(1, Ordering::Relaxed);
        });
    let mut damaged = BytesMut::new();
    LogEncoder::new().encode_record(b"damaged", &mut damaged);
    damaged[9] ^= 1;
    for _ in 0..3 {
        let mut decoder = builder.build();
        let mut src = damaged.clone();
        use tokio_util::codec::Decoder;
        assert_eq!(decoder.decode_eof(&mut src).unwrap(), None);
    }
    assert_eq!(reports.load(Ordering::Relaxed), 3);
}

/// The common write path compiles and works without naming the sink's item type.
#[tokio::test]
async fn the_common_write_path_needs_no_annotation() {
    let mut log = Vec::new();
    let mut sink = FramedWrite::new(&mut log, LogEncoder::new());
    let owned = b"owned".to_vec();
    sink.send(&owned[..]).await.unwrap();
    sink.send(b"literal".as_slice()).await.unwrap();
    sink.flush().await.unwrap();
    sink.close().await.unwrap();
    let records: Vec<_> = FramedRead::new(&log[..], LogDecoder::new())
        .try_collect()
        .await
        .unwrap();
    assert_eq!(records, [&b"owned"[..], b"literal"]);
}

#[tokio::test]
async fn framed_read_can_carry_positions() {
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    let positions: Vec<_> = (0..100)
        .map(|i| encoder.encode_record(&vec![i as u8; i * 700], &mut log))
        .collect();
    let records: Vec<_> = FramedRead::new(&log[..], LogRecordDecoder::new())
        .try_collect()
        .await
        .unwrap();
    assert_eq!(records.len(), 100);
    for (i, record) in records.iter().enumerate() {
        assert_eq!(record.position, positions[i]);
        assert_eq!(record.data.len(), i * 700);
    }
    // A configured decoder converts.
    let strict = LogDecoder::builder()
        .recovery(Recovery::AbsoluteConsistency)
        .build();
    let decoder = LogRecordDecoder::from(strict);
    assert_eq!(decoder.decoder().recovery(), Recovery::AbsoluteConsistency);
}

/// An I/O error says its message once in an error chain.
#[tokio::test]
async fn io_errors_print_once_in_a_chain() {
    let error = LogReader::open("/no/such/dir/000001.log")
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Io(_)));
    let mut chain = vec![error.to_string()];
    let mut source = error.source();
    while let Some(s) = source {
        chain.push(s.to_string());
        source = s.source();
    }
    let text = chain.join(": ");
    assert_eq!(
        text.matches("No such file or directory").count(),
        1,
        "{text}"
    );
}

#[test]
fn recovery_modes_parse_and_print_by_name() {
    for mode in Recovery::ALL {
        assert_eq!(mode.to_string().parse::<Recovery>(), Ok(mode));
        assert_eq!(mode.rocksdb_name().parse::<Recovery>(), Ok(mode));
    }
    assert_eq!("Skip_Corrupted".parse(), Ok(Recovery::SkipCorrupted));
    let error = "lenient".parse::<Recovery>().unwrap_err();
    assert!(error.to_string().contains("\"lenient\""), "{error}");
}

#[test]
fn decoders_and_readers_are_clone_send_and_sync() {
    fn clone_send_sync<T: Clone + Send + Sync>() {}
    fn send_sync<T: Send + Sync>() {}
    clone_send_sync::<LogDecoder>();
    clone_send_sync::<LogRecordDecoder>();
    clone_send_sync::<walcodec::LogDecoderBuilder>();
    send_sync::<LogReader<tokio::fs::File>>();
    send_sync::<LogReader<walcodec::ReadAhead>>();
}

/// A decoder's clone goes on from the same point, on its own.
#[test]
fn a_cloned_decoder_goes_on_from_the_same_point() {
    use tokio_util::codec::Decoder;
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    for record in [&b"one"[..], b"two", b"three"] {
        encoder.encode_record(record, &mut log);
    }
    let mut decoder = LogDecoder::new();
    let mut src = log.clone();
    assert_eq!(decoder.decode(&mut src).unwrap().unwrap(), &b"one"[..]);
    let mut twin = decoder.clone();
    let mut twin_src = src.clone();
    assert_eq!(decoder.decode(&mut src).unwrap().unwrap(), &b"two"[..]);
    assert_eq!(twin.decode(&mut twin_src).unwrap().unwrap(), &b"two"[..]);
    assert_eq!(twin.offset(), decoder.offset());
}

/// Appends above the writer's record limit are refused before anything is queued.
#[tokio::test]
async fn the_writer_takes_a_record_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let writer = AsyncLogWriter::options()
        .max_record_bytes(1000)
        .create(&path)
        .await
        .unwrap();
    writer.append(vec![1u8; 1000]).await.unwrap();
    let refused = writer.append(vec![2u8; 1001]).await;
    assert!(
        matches!(
            refused,
            Err(Error::RecordTooLarge {
                size: 1001,
                max: 1000,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(writer.close().await.unwrap(), 1007);
}

/// A relay written as the issue wrote it: the sink takes the `Bytes` the stream
/// yields, with no names.
#[tokio::test]
async fn framed_write_takes_what_framed_read_yields() {
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    for record in [&b"one"[..], &[2u8; 50_000], b"three"] {
        encoder.encode_record(record, &mut log);
    }
    let src = &log[..];
    let mut dst = Vec::new();
    {
        use futures::StreamExt;
        LogDecoder::framed_read(src)
            .forward(LogEncoder::framed_write(&mut dst))
            .await
            .unwrap();
    }
    assert_eq!(dst, &log[..]);
}

/// `encoded_len` on a new encoder needs no annotation.
#[test]
fn encoded_len_needs_no_annotation() {
    let n = 100;
    assert_eq!(LogEncoder::new().encoded_len(n), n + 7);
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::with_offset(32_760);
    let expected = encoder.encoded_len(n);
    encoder.encode_record(&[0; 100], &mut log);
    assert_eq!(log.len(), expected);
}
