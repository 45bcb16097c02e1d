//! Followers and readers leave a log's access time alone. On a `relatime` file
//! system (the default) a read moves a file's access time whenever it is older than
//! its modification time, which a live log's always is again after the next append:
//! a follower polling it would write the inode, and start a journal transaction,
//! on every poll.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use walcodec::{AsyncLogWriter, DirReader, LogDir, LogPosition, LogReader, LogTailer};

/// Sets `path`'s access time an hour before its modification time (where
/// `relatime` would move it on any read), and returns it.
fn make_access_time_stale(path: &Path) -> SystemTime {
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    let modified = file.metadata().unwrap().modified().unwrap();
    let accessed = modified - Duration::from_secs(3600);
    file.set_times(std::fs::FileTimes::new().set_accessed(accessed))
        .unwrap();
    accessed
}

fn accessed(path: &Path) -> SystemTime {
    std::fs::metadata(path).unwrap().accessed().unwrap()
}

/// Whether the file system under `dir` updates access times on reads at all (one
/// mounted `noatime` does not, and then there is nothing to show).
fn reads_move_access_times(dir: &Path) -> bool {
    let probe = dir.join("probe");
    std::fs::write(&probe, b"probe").unwrap();
    let before = make_access_time_stale(&probe);
    std::fs::read(&probe).unwrap();
    let moved = accessed(&probe) != before;
    std::fs::remove_file(&probe).unwrap();
    if !moved {
        eprintln!("this file system does not update access times: nothing to show");
    }
    moved
}

async fn written_log(dir: &Path) -> PathBuf {
    let path = dir.join("000001.log");
    let writer = AsyncLogWriter::open(&path).await.unwrap();
    for i in 0..100u32 {
        writer.append(i.to_le_bytes().to_vec()).await.unwrap();
    }
    writer.close().await.unwrap();
    path
}

#[tokio::test]
async fn a_tailer_and_a_reader_leave_the_access_time_alone() {
    let dir = tempfile::tempdir().unwrap();
    if !reads_move_access_times(dir.path()) {
        return;
    }
    let path = written_log(dir.path()).await;
    let stale = make_access_time_stale(&path);

    let mut tail = LogTailer::open(&path).await.unwrap();
    for i in 0..100u32 {
        let record = tail.next().await.unwrap().unwrap();
        assert_eq!(record.data, i.to_le_bytes().to_vec());
    }
    assert!(tail.caught_up().await.unwrap());
    assert_eq!(accessed(&path), stale, "the tailer");

    let mut reader = LogReader::open(&path).await.unwrap();
    let mut read = 0;
    while let Some(record) = reader.next().await {
        record.unwrap();
        read += 1;
    }
    assert_eq!(read, 100);
    assert_eq!(accessed(&path), stale, "the reader");
}

/// A follower opened on the directory (as in another process), and the writer's
/// own follower: neither moves the access time of the segment they read.
#[tokio::test]
async fn directory_followers_leave_the_access_time_alone() {
    let dir = tempfile::tempdir().unwrap();
    if !reads_move_access_times(dir.path()) {
        return;
    }
    let log = LogDir::open(dir.path()).await.unwrap();
    for i in 0..50u32 {
        log.append(i.to_le_bytes().to_vec()).await.unwrap();
    }
    let segment = dir.path().join(format!("{:06}.log", 1));
    let stale = make_access_time_stale(&segment);

    let mut other = DirReader::open(dir.path(), LogPosition::START)
        .await
        .unwrap()
        .follow()
        .with_poll_interval(Duration::from_millis(1));
    let mut own = log.read_from(LogPosition::START).unwrap().follow();
    for i in 0..50u32 {
        let expected = i.to_le_bytes().to_vec();
        assert_eq!(other.next().await.unwrap().unwrap().data, expected);
        assert_eq!(own.next().await.unwrap().unwrap().data, expected);
    }
    // Waiting at the live end: each poll reads again.
    assert!(other.caught_up().await.unwrap());
    let waiting = tokio::time::timeout(Duration::from_millis(50), other.next()).await;
    assert!(waiting.is_err(), "nothing more to read");
    assert_eq!(accessed(&segment), stale);
    log.close().await.unwrap();
}
