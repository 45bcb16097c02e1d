//! A follower over a file that is cut, replaced or rewritten under it: appends never
//! do that, so it fails with `Error::LogChanged` and never joins the start of an old
//! record to the end of a new one (or misses records after the change in silence).

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::BytesMut;
use futures::StreamExt;
use walcodec::{repair_log, AsyncLogWriter, Error, LogChange, LogEncoder, LogTailer};

fn line(i: usize) -> Vec<u8> {
    format!("line {i:02}").into_bytes()
}

/// 20 short lines, then one 40,000-byte line of `A`, cut at 32 KiB: what a crash in
/// the middle of the long line leaves.
fn cut_log(dir: &Path) -> PathBuf {
    let path = dir.join("000001.log");
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    for i in 0..20 {
        encoder.encode_record(&line(i), &mut log);
    }
    encoder.encode_record(&vec![b'A'; 40_000], &mut log);
    std::fs::write(&path, &log[..32_768]).unwrap();
    path
}

/// Follows `path` until the follower fails, handing each record to `seen`.
async fn follow_to_failure(
    path: PathBuf,
    seen: tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
) -> Error {
    let mut tail = LogTailer::open(&path)
        .await
        .unwrap()
        .with_poll_interval(Duration::from_millis(5));
    loop {
        match tokio::time::timeout(Duration::from_secs(20), tail.next()).await {
            Ok(Some(Ok(record))) => seen.send(record.data.to_vec()).unwrap(),
            Ok(Some(Err(e))) => return e,
            Ok(None) => panic!("a follower does not end"),
            Err(_) => panic!("the follower never noticed the change"),
        }
    }
}

async fn first_lines(seen: &mut tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>) {
    for i in 0..20 {
        assert_eq!(seen.recv().await.unwrap(), line(i));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repair_then_append_under_a_follower_is_an_error_not_a_joined_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = cut_log(dir.path());
    let (tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let follower = tokio::spawn(follow_to_failure(path.clone(), tx));
    first_lines(&mut seen).await;
    // The follower holds the cut record's FIRST fragment. Repair cuts it off, and a
    // writer appends a long line of `B` whose later fragments land past 32 KiB.
    repair_log(&path).await.unwrap();
    let writer = AsyncLogWriter::open(&path).await.unwrap();
    writer.append(vec![b'B'; 38_000]).await.unwrap();
    for i in 0..50 {
        writer.append(line(100 + i)).await.unwrap();
    }
    writer.close().await.unwrap();

    let error = follower.await.unwrap();
    assert!(
        matches!(
            error,
            Error::LogChanged(LogChange::Shrunk { .. } | LogChange::Rewritten { .. })
        ),
        "{error}"
    );
    // Nothing past the 20 lines: above all, no record of `A`s and `B`s joined.
    assert!(seen.try_recv().is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_truncated_to_nothing_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = cut_log(dir.path());
    let (tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let follower = tokio::spawn(follow_to_failure(path.clone(), tx));
    first_lines(&mut seen).await;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(0)
        .unwrap();
    let error = follower.await.unwrap();
    assert!(
        matches!(
            error,
            Error::LogChanged(LogChange::Shrunk {
                len: 0,
                read: 32_768
            })
        ),
        "{error}"
    );
    assert_eq!(
        error.to_string(),
        "followed log changed under the reader: the file shrank to 0 bytes, below the 32768 bytes already read"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_deleted_and_recreated_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = cut_log(dir.path());
    let (tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let follower = tokio::spawn(follow_to_failure(path.clone(), tx));
    first_lines(&mut seen).await;
    // Recreate it under another name first and rename it over the followed one, so
    // the path always names a file (and the follower cannot see it missing).
    let other = dir.path().join("new.log");
    let mut log = BytesMut::new();
    LogEncoder::new().encode_record(b"a new log", &mut log);
    std::fs::write(&other, &log).unwrap();
    std::fs::rename(&other, &path).unwrap();
    let error = follower.await.unwrap();
    assert!(
        matches!(error, Error::LogChanged(LogChange::Replaced)),
        "{error}"
    );
    assert!(seen.try_recv().is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_removed_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = cut_log(dir.path());
    let (tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let follower = tokio::spawn(follow_to_failure(path.clone(), tx));
    first_lines(&mut seen).await;
    std::fs::remove_file(&path).unwrap();
    let error = follower.await.unwrap();
    assert!(
        matches!(error, Error::LogChanged(LogChange::Removed)),
        "{error}"
    );
}

/// Appends alone never trip the guard: a follower of a log that only grows reads
/// every record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_alone_are_followed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let writer = AsyncLogWriter::create(&path).await.unwrap();
    let mut tail = LogTailer::open(&path)
        .await
        .unwrap()
        .with_poll_interval(Duration::from_millis(1));
    let records: Vec<Vec<u8>> = (0..300)
        .map(|i| vec![i as u8; (i * 997) % 70_000])
        .collect();
    let appender = {
        let records = records.clone();
        tokio::spawn(async move {
            for record in records {
                writer.append(record).await.unwrap();
            }
            writer.close().await.unwrap();
        })
    };
    for (i, want) in records.iter().enumerate() {
        let got = tokio::time::timeout(Duration::from_secs(20), tail.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(got.data.len(), want.len(), "record {i}");
        assert_eq!(&got.data[..], &want[..], "record {i}");
    }
    appender.await.unwrap();
}

/// Zeros ahead of a writer that preallocates are read as zero fill; once the writer
/// fills them in, the follower fails rather than skip the records written there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preallocated_file_filled_in_place_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let writer = walcodec::WriterOptions::new()
        .preallocate(1 << 20)
        .create(&path)
        .await
        .unwrap();
    writer.append(b"first").await.unwrap();
    let mut tail = LogTailer::open(&path)
        .await
        .unwrap()
        .with_poll_interval(Duration::from_millis(2));
    let first = tokio::time::timeout(Duration::from_secs(10), tail.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(&first.data[..], b"first");
    // Give the follower time to read the zeros ahead, then write over them.
    tokio::time::sleep(Duration::from_millis(50)).await;
    writer.append(b"second").await.unwrap();
    match tokio::time::timeout(Duration::from_secs(10), tail.next()).await {
        Ok(Some(Err(Error::LogChanged(LogChange::Rewritten { .. })))) => {}
        other => panic!("{other:?}"),
    }
    writer.close().await.unwrap();
}
