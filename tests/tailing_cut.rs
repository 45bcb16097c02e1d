//! A follower over a file that is cut, replaced or rewritten under it: appends never
//! do that, so it fails with `Error::LogChanged` and never joins the start of an old
//! record to the end of a new one (or misses records after the change in silence).
//! Each case runs on a file that only grows, on one preallocated with zeros, and on
//! a recycled WAL holding an earlier log past the live one.
//!
//! A cut at or after the end of the last record the follower returned (a repair
//! that cuts a torn tail) is no change to it: it goes on with what is appended.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::BytesMut;
use futures::StreamExt;
use walcodec::{
    repair_log, AsyncLogWriter, Dialect, Error, LogChange, LogDecoder, LogEncoder, LogTailer,
};

fn line(i: usize) -> Vec<u8> {
    format!("line {i:02}").into_bytes()
}

/// How the followed file is laid out past its live log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flavor {
    /// The file ends where the log does.
    Grown,
    /// Zeros follow the log up to 128 KiB (preallocated space).
    Preallocated,
    /// A recycled WAL (log number 2): an earlier log's fragments (number 1) follow
    /// the log up to 128 KiB.
    Recycled,
}

const FLAVORS: [Flavor; 3] = [Flavor::Grown, Flavor::Preallocated, Flavor::Recycled];
const FILE_BYTES: usize = 128 * 1024;

fn encoder(flavor: Flavor) -> LogEncoder {
    match flavor {
        Flavor::Recycled => LogEncoder::builder().recyclable(2).build(),
        _ => LogEncoder::new(),
    }
}

/// 20 short lines, then one 40,000-byte line of `A`, cut at 32 KiB: what a crash in
/// the middle of the long line leaves. Returns the path and the end of line 19.
fn cut_log(dir: &Path, flavor: Flavor) -> (PathBuf, u64) {
    let path = dir.join("000002.log");
    let mut log = BytesMut::new();
    let mut encoder = encoder(flavor);
    let mut end = 0;
    for i in 0..20 {
        end = encoder.encode_record(&line(i), &mut log).end;
    }
    encoder.encode_record(&vec![b'A'; 40_000], &mut log);
    log.truncate(32_768);
    match flavor {
        Flavor::Grown => {}
        Flavor::Preallocated => log.resize(FILE_BYTES, 0),
        Flavor::Recycled => {
            let mut earlier = BytesMut::new();
            let mut old = LogEncoder::builder().recyclable(1).build();
            let mut i = 0;
            while earlier.len() < FILE_BYTES {
                old.encode_record(&vec![b'O'; 100 + i % 3000], &mut earlier);
                i += 1;
            }
            log.extend_from_slice(&earlier[32_768..FILE_BYTES]);
        }
    }
    std::fs::write(&path, &log).unwrap();
    (path, end)
}

async fn tailer(path: &Path, flavor: Flavor) -> LogTailer<tokio::fs::File> {
    let mut builder = LogDecoder::builder();
    if flavor == Flavor::Recycled {
        builder.dialect(Dialect::RocksDb).log_number(2);
    }
    LogTailer::open_at(path, 0, &builder)
        .await
        .unwrap()
        .with_poll_interval(Duration::from_millis(5))
}

/// Follows `path` until the follower fails, handing each record to `seen`.
async fn follow_to_failure(
    path: PathBuf,
    flavor: Flavor,
    seen: tokio::sync::mpsc::UnboundedSender<Vec<u8>>,
) -> Error {
    let mut tail = tailer(&path, flavor).await;
    loop {
        match tokio::time::timeout(Duration::from_secs(20), tail.next()).await {
            Ok(Some(Ok(record))) => seen.send(record.data.to_vec()).unwrap(),
            Ok(Some(Err(e))) => return e,
            Ok(None) => panic!("a follower does not end"),
            Err(_) => panic!("{flavor:?}: the follower never noticed the change"),
        }
    }
}

async fn first_lines(seen: &mut tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>) {
    for i in 0..20 {
        assert_eq!(seen.recv().await.unwrap(), line(i));
    }
}

/// A repair cuts the torn record the follower never returned, and a writer appends
/// a long line of `B` over the same bytes: the follower goes on with it, and never
/// joins `A`s and `B`s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repair_then_append_under_a_follower_goes_on_without_a_gap() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = cut_log(dir.path(), Flavor::Grown);
    let mut tail = tailer(&path, Flavor::Grown).await;
    for i in 0..20 {
        assert_eq!(tail.next().await.unwrap().unwrap().data, line(i));
    }
    assert!(tail.caught_up().await.unwrap());
    repair_log(&path).await.unwrap();
    let writer = AsyncLogWriter::open(&path).await.unwrap();
    writer.append(vec![b'B'; 38_000]).await.unwrap();
    for i in 0..50 {
        writer.append(line(100 + i)).await.unwrap();
    }
    writer.close().await.unwrap();
    assert_eq!(next_data(&mut tail).await, vec![b'B'; 38_000]);
    for i in 0..50 {
        assert_eq!(next_data(&mut tail).await, line(100 + i));
    }
    assert!(tail.caught_up().await.unwrap());
}

async fn next_data(tail: &mut LogTailer<tokio::fs::File>) -> Vec<u8> {
    let next = tokio::time::timeout(Duration::from_secs(20), tail.next());
    next.await.unwrap().unwrap().unwrap().data.to_vec()
}

/// Cut below the end of the last record returned, then appended to past it again:
/// an error naming where the follower had read to, never a record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_below_what_was_returned_then_appended_is_an_error() {
    for flavor in FLAVORS {
        let dir = tempfile::tempdir().unwrap();
        let (path, returned) = cut_log(dir.path(), flavor);
        // The follower has returned every line and looked past them (at the torn
        // record, the zeros or the earlier log): it waits at the end, as a follower
        // of a live log does, when the file changes under it.
        let mut tail = tailer(&path, flavor).await;
        for i in 0..20 {
            assert_eq!(next_data(&mut tail).await, line(i), "{flavor:?}");
        }
        assert!(tail.caught_up().await.unwrap(), "{flavor:?}");
        // Lines 10 to 19 cut, then other lines written from there, past where the
        // follower had read.
        let mut log = BytesMut::new();
        let mut encoder = encoder(flavor);
        let mut cut_at = 0;
        for i in 0..10 {
            cut_at = encoder.encode_record(&line(i), &mut log).end;
        }
        for i in 0..40 {
            encoder.encode_record(&line(200 + i), &mut log);
        }
        std::fs::write(&path, &log).unwrap();
        // No record, then the error.
        let next = tokio::time::timeout(Duration::from_secs(20), tail.next());
        let error = match next.await {
            Ok(Some(Err(error))) => error,
            Ok(Some(Ok(record))) => panic!(
                "{flavor:?}: a record of {} bytes after the cut",
                record.data.len()
            ),
            Ok(None) => panic!("a follower does not end"),
            Err(_) => panic!("{flavor:?}: the follower never noticed the change"),
        };
        match error {
            Error::LogChanged(LogChange::Shrunk { read, .. }) => {
                assert_eq!(read, returned, "{flavor:?}")
            }
            Error::LogChanged(LogChange::Rewritten { offset }) => {
                assert!(
                    offset >= cut_at && offset < returned,
                    "{flavor:?}: {offset}"
                )
            }
            other => panic!("{flavor:?}: {other}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_truncated_to_nothing_is_an_error() {
    for flavor in FLAVORS {
        let dir = tempfile::tempdir().unwrap();
        let (path, returned) = cut_log(dir.path(), flavor);
        let (tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
        let follower = tokio::spawn(follow_to_failure(path.clone(), flavor, tx));
        first_lines(&mut seen).await;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(0)
            .unwrap();
        let error = follower.await.unwrap();
        // The follower names the end of the last record it returned, not how far
        // it read into the torn record, the zeros or the earlier log.
        assert!(
            matches!(
                error,
                Error::LogChanged(LogChange::Shrunk { len: 0, read }) if read == returned
            ),
            "{flavor:?}: {error}"
        );
        assert_eq!(
            error.to_string(),
            format!(
                "followed log changed under the reader: the file shrank to 0 bytes, \
                 below the end of the last record returned at {returned}"
            )
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_deleted_and_recreated_is_an_error() {
    for flavor in FLAVORS {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = cut_log(dir.path(), flavor);
        let (tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
        let follower = tokio::spawn(follow_to_failure(path.clone(), flavor, tx));
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
            "{flavor:?}: {error}"
        );
        assert!(seen.try_recv().is_err());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_removed_is_an_error() {
    for flavor in FLAVORS {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = cut_log(dir.path(), flavor);
        let (tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
        let follower = tokio::spawn(follow_to_failure(path.clone(), flavor, tx));
        first_lines(&mut seen).await;
        std::fs::remove_file(&path).unwrap();
        let error = follower.await.unwrap();
        assert!(
            matches!(error, Error::LogChanged(LogChange::Removed)),
            "{flavor:?}: {error}"
        );
    }
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

/// Zeros ahead of a writer that preallocates are not written yet: once the writer
/// fills them in, the follower reads the record written there, where it was
/// written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preallocated_file_filled_in_place_is_followed() {
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
    // The follower reads the zeros ahead (`caught_up` reads what is there, without
    // waiting, and finds only space the writer has not reached), then they are
    // written over.
    assert!(tail.caught_up().await.unwrap());
    let at = writer.append(b"second").await.unwrap();
    let second = tokio::time::timeout(Duration::from_secs(10), tail.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!((&second.data[..], second.position), (&b"second"[..], at));
    assert!(tail.caught_up().await.unwrap());
    writer.close().await.unwrap();
}
