//! `LogDir::append_batch`: several records, contiguous and in order in one
//! segment, durable together; rotation before a batch that does not fit.

use walcodec::{LogDir, LogPosition};

async fn read_all(log: &LogDir) -> Vec<(LogPosition, LogPosition, Vec<u8>)> {
    let mut reader = log.read_from(LogPosition::START).unwrap();
    let mut out = Vec::new();
    while let Some(record) = reader.next_record().await {
        let record = record.unwrap();
        out.push((record.start, record.end, record.data.to_vec()));
    }
    out
}

#[tokio::test]
async fn batch_records_are_contiguous_and_ranges_match_the_reader() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::open(dir.path()).await.unwrap();
    log.append(b"before").await.unwrap();
    let ranges = log
        .append_batch([&b"one"[..], b"two", &[7u8; 40_000][..]])
        .await
        .unwrap();
    assert_eq!(ranges.len(), 3);
    assert_eq!(ranges[1].start, ranges[0].end);
    assert_eq!(ranges[2].start, ranges[1].end);
    assert_eq!(log.end(), ranges[2].end, "durable end published");
    let records = read_all(&log).await;
    assert_eq!(records.len(), 4);
    for (range, (start, end, _)) in ranges.iter().zip(&records[1..]) {
        assert_eq!((range.start, range.end), (*start, *end));
    }
    assert_eq!(records[3].2, vec![7u8; 40_000]);
    assert!(log
        .append_batch(Vec::<Vec<u8>>::new())
        .await
        .unwrap()
        .is_empty());
    log.close().await.unwrap();
}

#[tokio::test]
async fn batch_that_does_not_fit_rotates_first_and_stays_in_one_segment() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .max_segment_bytes(1000)
        .open(dir.path())
        .await
        .unwrap();
    log.append([1u8; 600]).await.unwrap();
    let ranges = log.append_batch([[2u8; 300], [3u8; 300]]).await.unwrap();
    assert_eq!(
        ranges[0].start,
        LogPosition::new(2, 0),
        "rotated before the batch"
    );
    assert_eq!(ranges[1].end.segment, 2);
    // Larger than a segment: a segment of its own, never split.
    let big = log.append_batch([[4u8; 700], [5u8; 700]]).await.unwrap();
    assert_eq!(big[0].start, LogPosition::new(3, 0));
    assert_eq!(big[1].end.segment, 3);
    log.close().await.unwrap();

    let log = LogDir::open(dir.path()).await.unwrap();
    let data: Vec<u8> = read_all(&log).await.iter().map(|r| r.2[0]).collect();
    assert_eq!(data, [1, 2, 3, 4, 5]);
    log.close().await.unwrap();
}

#[tokio::test]
async fn oversized_record_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::open(dir.path()).await.unwrap();
    let huge = vec![0u8; walcodec::LogDecoder::DEFAULT_MAX_RECORD_BYTES + 1];
    let err = log
        .append_batch([&b"small"[..], &huge[..]])
        .await
        .unwrap_err();
    assert!(
        matches!(err, walcodec::Error::RecordTooLarge { .. }),
        "{err}"
    );
    assert_eq!(log.end(), LogPosition::new(1, 0));
    log.close().await.unwrap();
}
