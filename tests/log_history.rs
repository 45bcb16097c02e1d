//! A log's identity and history (`LogDir::log_id`, `LogDir::history`): made when
//! the log is created, kept across reopening, a new epoch at each truncation that
//! removes records and at each promotion, all durable before the call returns; a
//! power cut at any step of a truncation leaves the old log with the old history or
//! the new log with the new one, and a `HISTORY` file cut at any byte is never
//! misread nor refused.

use crate::power_support;

use std::path::Path;
use std::sync::Arc;

use walcodec::testing::DirStorage;
use walcodec::{Error, History, LogDir, LogId, LogPosition, Replica};

use power_support::dir::{dir_image, write_image, SimDir};
use power_support::{scratch_dir, seed, start_run};

fn record(i: usize) -> Vec<u8> {
    let len = [10, 3000, 40_000, 0, 700][i % 5];
    (0..len).map(|j| (i * 7 + j) as u8).collect()
}

async fn read_all(log: &LogDir) -> Vec<Vec<u8>> {
    let mut reader = log.read_from(LogPosition::START).unwrap();
    let mut out = Vec::new();
    while let Some(record) = reader.next_record().await {
        out.push(record.unwrap().data.to_vec());
    }
    out
}

fn on_disk(dir: &Path) -> (LogId, History) {
    LogDir::read_history(dir).unwrap().expect("a HISTORY file")
}

#[tokio::test]
async fn a_new_log_has_an_id_and_one_epoch_that_reopening_keeps() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = LogDir::open(a.path()).await.unwrap();
    let other = LogDir::open(b.path()).await.unwrap();
    assert_ne!(log.log_id(), other.log_id(), "two logs, two ids");
    let history = log.history();
    assert_eq!(history.epochs.len(), 1);
    assert_eq!(history.epochs[0].number, 1);
    assert_eq!(history.epochs[0].start, LogPosition::new(1, 0));
    assert_eq!(on_disk(a.path()), (log.log_id(), history.clone()));
    for i in 0..20 {
        log.append(record(i)).await.unwrap();
    }
    let (id, end) = (log.log_id(), log.close().await.unwrap());
    let log = LogDir::open(a.path()).await.unwrap();
    assert_eq!(log.log_id(), id);
    assert_eq!(
        log.history(),
        history,
        "appends and reopening start no epoch"
    );
    assert_eq!(log.end(), end);
    log.close().await.unwrap();
    other.close().await.unwrap();
}

#[tokio::test]
async fn a_truncation_that_removes_records_starts_an_epoch_at_the_cut() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .max_segment_bytes(64 * 1024)
        .open(dir.path())
        .await
        .unwrap();
    let mut ends = Vec::new();
    for i in 0..30 {
        ends.push(log.append(record(i)).await.unwrap());
    }
    assert!(log.segments().len() > 2);
    // At the end: nothing removed, no epoch.
    log.truncate_after(log.end()).await.unwrap();
    assert_eq!(log.history().epochs.len(), 1);
    // Within the active segment, then across segments.
    for (n, cut) in [ends[27], ends[4]].into_iter().enumerate() {
        log.truncate_after(cut).await.unwrap();
        let history = log.history();
        // The epoch of the first cut starts after the second: it is dropped, its
        // number never given again.
        assert_eq!(history.epochs.len(), 2);
        let epoch = history.current().unwrap();
        assert_eq!((epoch.number, epoch.start), (2 + n as u64, cut));
        assert_eq!(on_disk(dir.path()).1, history, "durable before it returns");
    }
    for i in 100..103 {
        log.append(record(i)).await.unwrap();
    }
    let history = log.history();
    let id = log.log_id();
    log.close().await.unwrap();
    let log = LogDir::open(dir.path()).await.unwrap();
    assert_eq!((log.log_id(), log.history()), (id, history));
    let expected: Vec<Vec<u8>> = (0..5).chain(100..103).map(record).collect();
    assert_eq!(read_all(&log).await, expected);
    log.close().await.unwrap();
}

#[tokio::test]
async fn promotion_starts_an_epoch_at_the_replicas_end() {
    let (p, r) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = LogDir::open(p.path()).await.unwrap();
    for i in 0..10 {
        log.append(record(i)).await.unwrap();
    }
    log.close().await.unwrap();
    let mut replica = Replica::open(r.path()).await.unwrap();
    let (a, b) = tokio::io::duplex(64 * 1024);
    let serving = tokio::spawn({
        let log = log.clone();
        async move { log.serve_replica(a).await }
    });
    let end = replica.sync_from(b).await.unwrap().end;
    serving.await.unwrap().unwrap();
    let promoted = replica.promote().await.unwrap();
    let history = promoted.history();
    assert_eq!(history.epochs.len(), 2);
    assert_eq!(
        (history.epochs[1].number, history.epochs[1].start),
        (2, end)
    );
    assert_eq!(on_disk(r.path()).1, history, "durable before it returns");
    promoted.close().await.unwrap();
}

#[tokio::test]
async fn a_directory_without_a_history_gets_one_from_its_writer() {
    let dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .max_segment_bytes(64 * 1024)
        .open(dir.path())
        .await
        .unwrap();
    for i in 0..20 {
        log.append(record(i)).await.unwrap();
    }
    log.purge_before(LogPosition::new(log.segments()[1].0, 0))
        .await
        .unwrap();
    log.close().await.unwrap();
    // As an older version left it.
    std::fs::remove_file(dir.path().join("HISTORY")).unwrap();
    assert_eq!(LogDir::read_history(dir.path()).unwrap(), None);
    let replica = Replica::open(dir.path()).await.unwrap();
    replica.close().await.unwrap();
    assert_eq!(
        LogDir::read_history(dir.path()).unwrap(),
        None,
        "a replica makes up no id"
    );
    let log = LogDir::open(dir.path()).await.unwrap();
    let first = log.start();
    assert_eq!(log.history().epochs.len(), 1);
    assert_eq!(log.history().epochs[0].start, first);
    assert_eq!(on_disk(dir.path()), (log.log_id(), log.history()));
    log.close().await.unwrap();
}

#[tokio::test]
async fn a_damaged_history_is_refused_never_misread() {
    let dir = tempfile::tempdir().unwrap();
    LogDir::open(dir.path())
        .await
        .unwrap()
        .close()
        .await
        .unwrap();
    let path = dir.path().join("HISTORY");
    let mut text = std::fs::read(&path).unwrap();
    let at = text.iter().position(|&b| b == b'\n').unwrap() + 6;
    text[at] ^= 1;
    std::fs::write(&path, &text).unwrap();
    assert!(matches!(
        LogDir::read_history(dir.path()),
        Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::InvalidData
    ));
    assert!(matches!(
        LogDir::open(dir.path()).await,
        Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::InvalidData
    ));
}

/// A truncation (within a segment, and across segments) recorded on the directory
/// power-cut simulator, and the directory a power cut could leave after each of
/// its steps, several draws each: it reopens (never refused), and holds either the
/// old log with the old history or the cut log with the new epoch, never the epoch
/// without the cut nor the cut without the epoch.
#[tokio::test]
async fn a_power_cut_in_a_truncation_leaves_the_old_or_the_new_history() {
    let seed = seed();
    let (scratch, mut rng) = start_run("history power cut", "POWER_CUT_SEED", seed, "every step");
    let mut images = 0;
    for (n, across) in [false, true].into_iter().enumerate() {
        let dir = scratch.path().join(format!("run{n}"));
        std::fs::create_dir(&dir).unwrap();
        let (sim, trace) = SimDir::new();
        let options = LogDir::builder()
            .max_segment_bytes(64 * 1024)
            .dir_storage(Arc::new(sim) as Arc<dyn DirStorage>)
            .clone();
        let log = options.open(&dir).await.unwrap();
        let mut ends = Vec::new();
        for i in 0..30 {
            ends.push(log.append(record(i)).await.unwrap());
        }
        let cut = if across { ends[3] } else { ends[28] };
        assert_eq!(across, cut.segment < log.end().segment);
        let old = (log.log_id(), log.history());
        let old_records: Vec<Vec<u8>> = (0..30).map(record).collect();
        let before = trace.lock().unwrap().len();
        log.truncate_after(cut).await.unwrap();
        let after = trace.lock().unwrap().len();
        let new = (log.log_id(), log.history());
        let new_records: Vec<Vec<u8>> = old_records[..=if across { 3 } else { 28 }].to_vec();
        log.close().await.unwrap();
        let ops = trace.lock().unwrap().ops().to_vec();
        for step in before..=after {
            for draw in 0..8 {
                let image = dir_image(&ops, step, &mut rng);
                let context = format!(
                    "seed {seed}, across {across}, step {step} of {before}..{after}, draw {draw}, {}",
                    image.describe()
                );
                let copy = scratch.path().join(format!("image{images}"));
                images += 1;
                write_image(&image, &copy);
                let log = LogDir::open(&copy)
                    .await
                    .unwrap_or_else(|e| panic!("{context}: refused: {e}"));
                let got = (log.log_id(), log.history());
                let records = read_all(&log).await;
                if got == old {
                    assert_eq!(records, old_records, "{context}: old history, cut log");
                } else {
                    assert_eq!(got, new, "{context}: neither history");
                    assert_eq!(records, new_records, "{context}: new epoch, log not cut");
                }
                log.close().await.unwrap();
                std::fs::remove_dir_all(&copy).unwrap();
            }
        }
    }
    println!("{images} images");
}

/// The `HISTORY` file replaced by a new one, cut by a power cut at every byte of
/// the new file's write: what is left under its temporary name is any prefix of
/// the new bytes, the name itself still the old file's (the new file is synced
/// before it is renamed), or the new file whole. Every such directory opens with
/// the old history or the new one, and a later truncation still works.
#[tokio::test]
async fn a_history_file_cut_at_every_byte_reads_as_old_or_new() {
    let base = tempfile::tempdir_in(scratch_dir()).unwrap();
    let dir = base.path().join("log");
    let log = LogDir::open(&dir).await.unwrap();
    let ends: Vec<LogPosition> = {
        let mut ends = Vec::new();
        for i in 0..5 {
            ends.push(log.append(record(i)).await.unwrap());
        }
        ends
    };
    let old_bytes = std::fs::read(dir.join("HISTORY")).unwrap();
    let old = (log.log_id(), log.history());
    log.truncate_after(ends[3]).await.unwrap();
    let new_bytes = std::fs::read(dir.join("HISTORY")).unwrap();
    let new = (log.log_id(), log.history());
    log.close().await.unwrap();
    assert_ne!(old_bytes, new_bytes);
    for cut in 0..=new_bytes.len() {
        for renamed in [false, true] {
            if renamed && cut < new_bytes.len() {
                continue;
            }
            let copy = base.path().join(format!("cut{cut}-{renamed}"));
            std::fs::create_dir(&copy).unwrap();
            for entry in std::fs::read_dir(&dir).unwrap() {
                let entry = entry.unwrap();
                std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
            }
            if renamed {
                std::fs::write(copy.join("HISTORY"), &new_bytes).unwrap();
            } else {
                std::fs::write(copy.join("HISTORY"), &old_bytes).unwrap();
                std::fs::write(copy.join("HISTORY.tmp"), &new_bytes[..cut]).unwrap();
            }
            let read = LogDir::read_history(&copy)
                .unwrap_or_else(|e| panic!("cut at {cut}: {e}"))
                .unwrap();
            assert_eq!(read, if renamed { new.clone() } else { old.clone() });
            let log = LogDir::open(&copy)
                .await
                .unwrap_or_else(|e| panic!("cut at {cut}: refused: {e}"));
            assert_eq!((log.log_id(), log.history()), read);
            log.truncate_after(ends[1]).await.unwrap();
            assert!(!copy.join("HISTORY.tmp").exists());
            log.close().await.unwrap();
            std::fs::remove_dir_all(&copy).unwrap();
        }
    }
}
