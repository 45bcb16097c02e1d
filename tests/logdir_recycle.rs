//! `LogDirOptions::recycle_segments`: purged segment files reused for new segments,
//! written in RocksDB's recyclable format with their own number, so the bytes of a
//! file's earlier use are never read as records.
#![cfg(unix)]

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use walcodec::{DirReader, LogDir, LogDirOptions, LogPosition};

const SEGMENT_BYTES: u64 = 4096;

fn options(recycle: usize) -> LogDirOptions {
    let mut options = LogDir::builder();
    options
        .max_segment_bytes(SEGMENT_BYTES)
        .recycle_segments(recycle);
    options
}

fn record(i: u32) -> Vec<u8> {
    let mut record = format!("record {i:05} ").into_bytes();
    record.resize(300, b'a' + (i % 26) as u8);
    record
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn inode(path: impl AsRef<Path>) -> u64 {
    std::fs::metadata(path).unwrap().ino()
}

/// Appends `records[from..to]` and returns their ends.
async fn append(log: &LogDir, from: u32, to: u32) -> Vec<(LogPosition, Vec<u8>)> {
    let mut appended = Vec::new();
    for i in from..to {
        let data = record(i);
        appended.push((log.append(&data).await.unwrap(), data));
    }
    appended
}

async fn read_all(mut reader: DirReader) -> Vec<(LogPosition, Vec<u8>)> {
    let mut records = Vec::new();
    while let Some(record) = reader.next_record().await {
        let record = record.unwrap();
        records.push((record.end, record.data.to_vec()));
    }
    records
}

/// 30 records appended, then every sealed segment but the last purged (into the
/// pool): the records left, by their ends.
async fn append_and_purge(log: &LogDir) -> Vec<(LogPosition, Vec<u8>)> {
    let mut expected = append(log, 0, 30).await;
    let end = log.end();
    log.purge_before(LogPosition::new(end.segment - 1, 0))
        .await
        .unwrap();
    let first = log.start().segment;
    expected.retain(|(end, _)| end.segment >= first);
    expected
}

#[tokio::test]
async fn purged_segments_are_reused_and_their_old_bytes_never_read() {
    let dir = tempfile::tempdir().unwrap();
    let log = options(2).open(dir.path()).await.unwrap();
    let mut expected = append(&log, 0, 60).await;
    assert!(log.segments().len() >= 5, "{:?}", log.segments());
    // Purge the first four segments: two are kept for reuse, two deleted.
    let fourth_end = {
        let segments = log.segments();
        LogPosition::new(segments[3].0, segments[3].1)
    };
    let old_inodes = [
        inode(dir.path().join("000001.log")),
        inode(dir.path().join("000002.log")),
    ];
    let old_len = std::fs::metadata(dir.path().join("000002.log"))
        .unwrap()
        .len();
    assert_eq!(
        log.purge_before(fourth_end).await.unwrap(),
        vec![1, 2, 3, 4]
    );
    expected.retain(|(end, _)| end.segment > 4);
    let listed = names(dir.path());
    assert!(
        listed.contains(&"000001.log.recycle".to_string()),
        "{listed:?}"
    );
    assert!(
        listed.contains(&"000002.log.recycle".to_string()),
        "{listed:?}"
    );
    assert!(!listed
        .iter()
        .any(|n| n.starts_with("000003") || n.starts_with("000004")));

    // The next segment is a pooled file, renamed; while active it is longer than
    // its records (the rest is its earlier use).
    let next = log.rotate().await.unwrap();
    let path = dir.path().join(format!("{next:06}.log"));
    assert!(old_inodes.contains(&inode(&path)), "a new file was made");
    let small = append(&log, 1000, 1001).await;
    assert_eq!(small[0].0.segment, next);
    assert!(std::fs::metadata(&path).unwrap().len() >= old_len);
    expected.extend(small);
    // Readers in the writer's process stop at the durable end...
    assert_eq!(
        read_all(log.read_from(LogPosition::START).unwrap()).await,
        expected
    );
    // ... and one in another process stops where the old bytes begin.
    assert_eq!(
        read_all(
            DirReader::open(dir.path(), LogPosition::START)
                .await
                .unwrap()
        )
        .await,
        expected
    );

    // More appends fill and seal reused segments; sealed, a file is exactly its log.
    expected.extend(append(&log, 2000, 2060).await);
    let end = log.close().await.unwrap();
    assert_eq!(expected.last().unwrap().0, end);
    let log = options(2).open(dir.path()).await.unwrap();
    for (segment, len) in log.segments() {
        let path = dir.path().join(format!("{segment:06}.log"));
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            len,
            "segment {segment}"
        );
    }
    assert_eq!(
        read_all(log.read_from(LogPosition::START).unwrap()).await,
        expected
    );
    log.close().await.unwrap();
    assert_eq!(
        read_all(
            DirReader::open(dir.path(), LogPosition::START)
                .await
                .unwrap()
        )
        .await,
        expected
    );
}

/// What a crash leaves in a reused active segment: its records, then its earlier
/// use's bytes. Reopening cuts those and appends go on after the records.
#[tokio::test]
async fn a_reused_segment_left_by_a_crash_reopens_at_its_records_end() {
    let dir = tempfile::tempdir().unwrap();
    let crashed = tempfile::tempdir().unwrap();
    let log = options(1).open(dir.path()).await.unwrap();
    let mut expected = append_and_purge(&log).await;
    log.rotate().await.unwrap();
    expected.extend(append(&log, 100, 102).await);
    // The directory as a crash leaves it: everything durable, nothing cut.
    for name in names(dir.path()) {
        if name != "LOCK" {
            std::fs::copy(dir.path().join(&name), crashed.path().join(&name)).unwrap();
        }
    }
    log.close().await.unwrap();
    let active = expected.last().unwrap().0;
    let path = crashed.path().join(format!("{:06}.log", active.segment));
    assert!(std::fs::metadata(&path).unwrap().len() > active.offset);

    let log = options(1).open(crashed.path()).await.unwrap();
    assert_eq!(log.end(), active);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), active.offset);
    expected.extend(append(&log, 200, 203).await);
    assert_eq!(
        read_all(log.read_from(LogPosition::START).unwrap()).await,
        expected
    );
    log.close().await.unwrap();
}

/// A crash right after a pooled file became the next segment, before anything of
/// the new segment reached it: every header in it carries its old number, so the
/// segment is empty.
#[tokio::test]
async fn a_reused_file_nothing_reached_reopens_empty() {
    let dir = tempfile::tempdir().unwrap();
    let log = options(1).open(dir.path()).await.unwrap();
    let expected = append_and_purge(&log).await;
    let first = log.start().segment;
    let active = log.rotate().await.unwrap();
    log.close().await.unwrap();
    // Close cut the empty segment; put the reused file back as the crash left it.
    let pooled: Vec<String> = names(dir.path());
    assert!(
        !pooled.iter().any(|n| n.ends_with(".recycle")),
        "{pooled:?}"
    );
    let stale_source = dir.path().join(format!("{:06}.log", first));
    let stale = std::fs::read(&stale_source).unwrap();
    let path = dir.path().join(format!("{active:06}.log"));
    std::fs::write(&path, &stale).unwrap();

    let log = options(1).open(dir.path()).await.unwrap();
    assert_eq!(log.end(), LogPosition::new(active, 0));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    assert_eq!(
        read_all(log.read_from(LogPosition::START).unwrap()).await,
        expected
    );
    log.close().await.unwrap();
}

/// Only files written in the recyclable format with their own number are pooled: a
/// legacy segment's old bytes would read as records.
#[tokio::test]
async fn legacy_segments_are_deleted_not_pooled() {
    let dir = tempfile::tempdir().unwrap();
    let log = options(0).open(dir.path()).await.unwrap();
    let mut expected = append(&log, 0, 40).await;
    log.close().await.unwrap();
    let log = options(4).open(dir.path()).await.unwrap();
    let end = log.end();
    let purged = log
        .purge_before(LogPosition::new(end.segment, 0))
        .await
        .unwrap();
    let last_purged = *purged.last().expect("sealed segments to purge");
    assert!(
        !names(dir.path()).iter().any(|n| n.ends_with(".recycle")),
        "{:?}",
        names(dir.path())
    );
    expected.retain(|(end, _)| end.segment > last_purged);
    // The legacy active segment goes on in its own format; later ones are
    // recyclable, and read back with it.
    expected.extend(append(&log, 100, 140).await);
    log.close().await.unwrap();
    let log = options(4).open(dir.path()).await.unwrap();
    assert_eq!(
        read_all(log.read_from(LogPosition::START).unwrap()).await,
        expected
    );
    log.close().await.unwrap();
}

/// On open, pooled files beyond the option's count are deleted.
#[tokio::test]
async fn the_pool_is_trimmed_to_the_option_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let log = options(3).open(dir.path()).await.unwrap();
    append(&log, 0, 80).await;
    let end = log.end();
    log.purge_before(LogPosition::new(end.segment, 0))
        .await
        .unwrap();
    log.close().await.unwrap();
    let pooled = |dir: &Path| {
        names(dir)
            .iter()
            .filter(|n| n.ends_with(".recycle"))
            .count()
    };
    assert_eq!(pooled(dir.path()), 3);
    options(1)
        .open(dir.path())
        .await
        .unwrap()
        .close()
        .await
        .unwrap();
    assert_eq!(pooled(dir.path()), 1);
    options(0)
        .open(dir.path())
        .await
        .unwrap()
        .close()
        .await
        .unwrap();
    assert_eq!(pooled(dir.path()), 0);
}

/// A writer format with a recyclable log number of its own is refused with a clear
/// error: a LogDir's segments are each their own log, numbered as their files.
#[tokio::test]
async fn a_recyclable_writer_format_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = walcodec::WriterOptions::new();
    writer.format(walcodec::LogFormat::leveldb().recyclable(7));
    let err = LogDir::builder()
        .writer(writer)
        .open(dir.path())
        .await
        .unwrap_err();
    match err {
        walcodec::Error::Io(e) => {
            assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
            assert!(e.to_string().contains("log number 7"), "{e}");
            assert!(e.to_string().contains("recycle_segments"), "{e}");
        }
        other => panic!("{other}"),
    }
    // Nothing was created.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// `dialect(Dialect::RocksDb)` writes every segment in RocksDB's recyclable format
/// with its own number, recycling or not; the directory reopens with the default
/// options (LevelDB's and RocksDB's segments read alike) and goes on in it.
#[tokio::test]
async fn the_rocksdb_dialect_writes_recyclable_segments() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .dialect(walcodec::Dialect::RocksDb)
        .max_segment_bytes(4096)
        .open(dir.path())
        .await
        .unwrap();
    let appended = append(&log, 0, 20).await;
    log.close().await.unwrap();
    let segments = LogDir::list(dir.path()).unwrap().segments;
    assert!(segments.len() > 1);
    for segment in &segments {
        let bytes = std::fs::read(&segment.path).unwrap();
        let sniffed = walcodec::fragment::sniff(&bytes);
        assert_eq!(
            sniffed.log_number,
            Some(segment.number as u32),
            "{segment:?}"
        );
    }
    assert!(!dir.path().join("DIALECT").exists());
    let log = LogDir::open(dir.path()).await.unwrap();
    let more = append(&log, 20, 21).await;
    let mut all = appended;
    all.extend(more);
    assert_eq!(
        read_all(log.read_from(LogPosition::START).unwrap()).await,
        all
    );
    log.close().await.unwrap();
}

/// A compressed writer format keeps its compression in recyclable segments (RocksDB's
/// dialect, recycling): each segment starts with the compression-type record, then
/// recyclable fragments with its own number, reused files included; everything
/// reads back after a reopen.
#[cfg(feature = "zstd")]
#[tokio::test]
async fn a_compressed_writer_format_stays_compressed_in_recyclable_segments() {
    // Both dialects at once: each appends 1,500 records, a sync each, and the
    // syncs overlap.
    futures::future::join_all([true, false].map(stays_compressed_in_recyclable_segments)).await;
}

async fn stays_compressed_in_recyclable_segments(rocksdb_dialect: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = walcodec::WriterOptions::new();
    writer.format(walcodec::LogFormat::leveldb().zstd());
    let mut options = options(2);
    options.writer(writer);
    if rocksdb_dialect {
        options.dialect(walcodec::Dialect::RocksDb);
    }
    let log = options.open(dir.path()).await.unwrap();
    let mut all = Vec::new();
    let mut inodes = std::collections::HashSet::new();
    for round in 0..3 {
        all.extend(append(&log, round * 500, round * 500 + 500).await);
        for (number, _) in log.segments() {
            inodes.insert(inode(dir.path().join(format!("{number:06}.log"))));
        }
        if round < 2 {
            let active = log.end().segment;
            log.purge_before(LogPosition::new(active, 0)).await.unwrap();
        }
    }
    log.close().await.unwrap();
    let segments = LogDir::list(dir.path()).unwrap().segments;
    let mut raw = 0;
    for segment in &segments {
        let bytes = std::fs::read(&segment.path).unwrap();
        let sniffed = walcodec::fragment::sniff(&bytes);
        assert!(sniffed.compressed, "{segment:?}");
        assert_eq!(sniffed.log_number, Some(segment.number as u32));
        raw += bytes.len();
    }
    let log = options.open(dir.path()).await.unwrap();
    let first = log.segments()[0].0;
    let read = read_all(log.read_from(LogPosition::new(first, 0)).unwrap()).await;
    assert!(read.len() >= 500, "{} records kept", read.len());
    assert_eq!(read, all[all.len() - read.len()..]);
    // 300-byte records of one letter compress to a small part of their size.
    let raw_records: usize = read.iter().map(|(_, data)| data.len()).sum();
    assert!(
        raw * 4 < raw_records,
        "{raw} bytes on disk for {raw_records}"
    );
    // Files were reused: fewer files than segments were ever written.
    let written = log.end().segment as usize;
    assert!(
        inodes.len() < written,
        "{} files for {written} segments",
        inodes.len()
    );
    log.close().await.unwrap();
}
