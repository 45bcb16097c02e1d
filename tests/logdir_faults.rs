//! Fault injection at every file-system step of a LogDir rotation and purge (file
//! create, file sync, directory sync, delete): the error reaches the appends that
//! wait on the rotation, nothing acknowledged is lost, and reopening recovers.

use crate::writer_support;

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use walcodec::testing::DirStorage;
use walcodec::{Error, LogDir, LogPosition};
use writer_support::{make_record_sized, verify_sized};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Step {
    None = 0,
    Create = 1,
    SyncFile = 2,
    SyncDir = 3,
    Remove = 4,
}

/// Fails the next call of the armed step, once.
#[derive(Debug, Default)]
struct Faulty {
    armed: AtomicU8,
}

impl Faulty {
    fn arm(&self, step: Step) {
        self.armed.store(step as u8, Ordering::SeqCst);
    }

    fn fail(&self, step: Step) -> io::Result<()> {
        if self
            .armed
            .compare_exchange(
                step as u8,
                Step::None as u8,
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_ok()
        {
            return Err(io::Error::other(format!("injected failure of {step:?}")));
        }
        Ok(())
    }

    fn fired(&self) -> bool {
        self.armed.load(Ordering::SeqCst) == Step::None as u8
    }
}

impl DirStorage for Faulty {
    fn create(&self, path: &Path) -> io::Result<File> {
        self.fail(Step::Create)?;
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
    }

    fn sync_file(&self, file: &File) -> io::Result<()> {
        self.fail(Step::SyncFile)?;
        file.sync_all()
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.fail(Step::SyncDir)?;
        File::open(dir)?.sync_all()
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.fail(Step::Remove)?;
        std::fs::remove_file(path)
    }
}

async fn open_faulty(dir: &Path, faulty: &Arc<Faulty>) -> LogDir {
    LogDir::builder()
        .max_segment_bytes(4096)
        .dir_storage(Arc::clone(faulty) as Arc<dyn DirStorage>)
        .open(dir)
        .await
        .unwrap()
}

/// Every record in the directory, after a reopen with the real file system.
async fn reopen_and_read(dir: &Path) -> Vec<((u32, u32), LogPosition)> {
    let log = LogDir::open(dir).await.expect("reopen recovers");
    let mut reader = log.read_from(LogPosition::START).unwrap();
    let mut records = Vec::new();
    while let Some(record) = reader.next_record().await {
        let record = record.unwrap();
        records.push((verify_sized(&record.data).unwrap(), record.end));
    }
    drop(reader);
    // And it takes appends again.
    log.append(make_record_sized(999, 0, 50)).await.unwrap();
    log.close().await.unwrap();
    records
}

async fn rotation_fault(step: Step) {
    let dir = tempfile::tempdir().unwrap();
    let faulty = Arc::new(Faulty::default());
    let log = open_faulty(dir.path(), &faulty).await;
    // A few rotations go fine first.
    for seq in 0..60 {
        log.append(make_record_sized(0, seq, 200)).await.unwrap();
    }
    faulty.arm(step);
    let mut tasks = Vec::new();
    for task in 1..=8u32 {
        let log = log.clone();
        tasks.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut errors = Vec::new();
            for seq in 0..40 {
                match log.append(make_record_sized(task, seq, 200)).await {
                    Ok(end) => acked.push(((task, seq), end)),
                    Err(e) => errors.push(e),
                }
            }
            (acked, errors)
        }));
    }
    let mut acked = Vec::new();
    let mut errors = Vec::new();
    for task in tasks {
        let (a, e) = task.await.unwrap();
        acked.extend(a);
        errors.extend(e);
    }
    assert!(faulty.fired(), "{step:?} was never reached");
    assert!(!errors.is_empty(), "{step:?}: no append saw the failure");
    for error in &errors {
        assert!(
            matches!(error, Error::DirPoisoned { .. }),
            "{step:?}: {error}"
        );
    }
    assert!(
        errors.iter().any(|e| e.to_string().contains("reopen")),
        "the error says what to do"
    );
    // The rotation that failed stopped everything after it.
    assert!(matches!(
        log.append(b"after").await,
        Err(Error::DirPoisoned { .. })
    ));
    let _ = log.close().await;
    drop(log);

    let records = reopen_and_read(dir.path()).await;
    let found: std::collections::HashMap<_, _> = records.iter().copied().collect();
    assert_eq!(found.len(), records.len(), "a record read twice");
    for (id, end) in acked {
        assert_eq!(
            found.get(&id),
            Some(&end),
            "{step:?}: acknowledged {id:?} lost"
        );
    }
    for seq in 0..60 {
        assert!(found.contains_key(&(0, seq)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_fails_at_file_create() {
    rotation_fault(Step::Create).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_fails_at_file_sync() {
    rotation_fault(Step::SyncFile).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_fails_at_directory_sync() {
    rotation_fault(Step::SyncDir).await;
}

async fn purge_fault(step: Step) {
    let dir = tempfile::tempdir().unwrap();
    let faulty = Arc::new(Faulty::default());
    let log = open_faulty(dir.path(), &faulty).await;
    let mut acked = Vec::new();
    for seq in 0..100 {
        acked.push((
            (0, seq),
            log.append(make_record_sized(0, seq, 200)).await.unwrap(),
        ));
    }
    let checkpoint = acked[70].1;
    faulty.arm(step);
    let err = log.purge_before(checkpoint).await.unwrap_err();
    assert!(err.to_string().contains("injected"), "{step:?}: {err}");
    assert!(faulty.fired());
    // Appends go on: a purge failure puts no record at risk.
    for seq in 100..110 {
        acked.push((
            (0, seq),
            log.append(make_record_sized(0, seq, 200)).await.unwrap(),
        ));
    }
    // Reading from the start fails clearly, or reads what is left without a hole.
    let mut reader = log.read_from(LogPosition::START).unwrap();
    let mut read = Vec::new();
    while let Some(record) = reader.next_record().await {
        read.push(verify_sized(&record.unwrap().data).unwrap());
    }
    assert_eq!(read.last(), Some(&(0, 109)));
    for pair in read.windows(2) {
        assert_eq!(pair[0].1 + 1, pair[1].1, "a hole after a failed purge");
    }
    drop(reader);
    // A retry purges what is left to purge.
    log.purge_before(checkpoint).await.unwrap();
    log.close().await.unwrap();
    drop(log);

    let records = reopen_and_read(dir.path()).await;
    let first = records[0].0 .1;
    assert!(first <= 71, "{step:?}: purged past the checkpoint");
    for (i, (id, end)) in acked.iter().enumerate().skip(first as usize) {
        assert_eq!(records[i - first as usize], (*id, *end), "{step:?}");
    }
}

#[tokio::test]
async fn purge_fails_at_marker_create() {
    purge_fault(Step::Create).await;
}

#[tokio::test]
async fn purge_fails_at_marker_sync() {
    purge_fault(Step::SyncFile).await;
}

#[tokio::test]
async fn purge_fails_at_delete() {
    purge_fault(Step::Remove).await;
}

#[tokio::test]
async fn purge_fails_at_directory_sync() {
    purge_fault(Step::SyncDir).await;
}

#[tokio::test]
async fn truncation_fails_midway_and_reopen_finishes_it() {
    for step in [Step::Create, Step::SyncFile, Step::SyncDir, Step::Remove] {
        let dir = tempfile::tempdir().unwrap();
        let faulty = Arc::new(Faulty::default());
        let log = open_faulty(dir.path(), &faulty).await;
        let mut ends = Vec::new();
        for seq in 0..60 {
            ends.push(log.append(make_record_sized(0, seq, 200)).await.unwrap());
        }
        let cut = ends[20];
        assert!(log.end().segment > cut.segment);
        faulty.arm(step);
        let result = log.truncate_after(cut).await;
        assert!(faulty.fired());
        assert!(result.is_err(), "{step:?}");
        assert!(matches!(
            log.append(b"x").await,
            Err(Error::DirPoisoned { .. })
        ));
        let _ = log.close().await;
        drop(log);
        // Before or after the truncation, never a mix.
        let records = reopen_and_read(dir.path()).await;
        let ids: Vec<u32> = records
            .iter()
            .map(|r| r.0 .1)
            .filter(|&s| s < 999)
            .collect();
        let n = records.iter().filter(|r| r.0 .0 == 0).count();
        assert!(
            n == 21 || n == 60,
            "{step:?}: {n} records after a failed truncation"
        );
        assert_eq!(&ids[..n], &(0..n as u32).collect::<Vec<_>>()[..]);
    }
}
