//! SIGKILL of the archiving process at random points, then a restart: it goes on
//! from the manifest; every segment is listed once, none is missing, each with
//! its exact bytes.
//!
//! The child is this test binary run again with `WALCODEC_ARCHIVE_CHILD` set: it
//! appends to the log (rotating as it fills) while an archiver uploads to a
//! directory store in parts, and prints a line after each batch of appends. The
//! kill comes a random time after the first such line, not after a fixed time
//! from the spawn: on a loaded machine a child can take longer than that to start.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use walcodec::Dialect;
use walcodec_archive::{Archive, ArchiveError, Archiver};

use crate::archiving::check_archive;
use crate::support::{self, fill, open_log, Rng};

const CHILD_ENV: &str = "WALCODEC_ARCHIVE_CHILD";
const STORE_ENV: &str = "WALCODEC_ARCHIVE_CHILD_STORE";
const SEED_ENV: &str = "WALCODEC_ARCHIVE_CHILD_SEED";
const SEGMENT_BYTES: u64 = 64 * 1024;
/// What the child prints after each batch of appends.
const APPENDED: &str = "appended up to";

#[test]
#[ignore = "the child process of the archiver crash test"]
fn archiver_child() {
    // Run by hand (`--include-ignored`), it has nothing to check: say so by failing.
    let log_dir = std::env::var_os(CHILD_ENV).unwrap_or_else(|| {
        panic!("{CHILD_ENV} is not set: only the archiver crash test runs this child")
    });
    let store_dir = std::env::var_os(STORE_ENV).unwrap();
    let seed: u64 = std::env::var(SEED_ENV).unwrap().parse().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let log = open_log(log_dir.as_ref(), Dialect::LevelDb, SEGMENT_BYTES).await;
        let store = support::local_store(store_dir.as_ref());
        let archiver = Arc::new(Archiver::new(store, "crash".into()).parts(16 * 1024, 2));
        archiver.hold(&log);
        let task = tokio::spawn({
            let (archiver, log) = (Arc::clone(&archiver), log.clone());
            async move { archiver.run(&log).await }
        });
        let mut rng = Rng(seed);
        // Appends until killed.
        let mut i = seed * 1_000_000;
        loop {
            fill(&log, &mut rng, i, 20, 12_000).await;
            i += 20;
            println!("{APPENDED} {i}");
            if task.is_finished() {
                panic!("the archiver stopped: {:?}", task.await);
            }
        }
    });
}

#[test]
fn a_killed_archiver_resumes_without_duplicates_or_gaps() {
    let log_dir = tempfile::tempdir().unwrap();
    let store_dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x5eed);
    let cycles = std::env::var("WALCODEC_ARCHIVE_CRASH_CYCLES").map_or(8, |v| v.parse().unwrap());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for cycle in 1..=cycles {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "crash::archiver_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, log_dir.path())
            .env(STORE_ENV, store_dir.path())
            .env(SEED_ENV, cycle.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        // Let it get somewhere (its first batch appended), then kill it (SIGKILL)
        // wherever it is. The reader drains the pipe until the kill closes it.
        let (first_tx, first_rx) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.starts_with(APPENDED) {
                    let _ = first_tx.send(());
                }
            }
        });
        // The bound only turns a child that never appends into a message.
        let first = first_rx.recv_timeout(Duration::from_secs(60));
        if first.is_ok() {
            std::thread::sleep(Duration::from_millis(rng.below(400)));
        }
        child.kill().unwrap();
        let status = child.wait().unwrap();
        reader.join().unwrap();
        assert!(
            first.is_ok(),
            "cycle {cycle}: the child appended nothing before the kill ({status})"
        );
        // What the crash left is a valid archive: consecutive, each object whole.
        runtime.block_on(async {
            let store = support::local_store(store_dir.path());
            match Archive::open(Arc::clone(&store), "crash".into()).await {
                Ok(archive) => {
                    let upto = archive.manifest().next_segment();
                    check_archive(&store, "crash", log_dir.path(), upto).await;
                }
                // Killed before its first manifest.
                Err(ArchiveError::NoArchive { .. }) => {}
                Err(e) => panic!("cycle {cycle}: {e}"),
            }
        });
    }
    // A last, clean run archives everything sealed.
    runtime.block_on(async {
        let store = support::local_store(store_dir.path());
        let log = open_log(log_dir.path(), Dialect::LevelDb, SEGMENT_BYTES).await;
        log.rotate().await.unwrap();
        let end = Archiver::new(Arc::clone(&store), "crash".into())
            .archive_sealed(&log)
            .await
            .unwrap();
        assert_eq!(end, log.end());
        assert!(end.segment > 3, "the children got somewhere");
        log.close().await.unwrap();
        check_archive(&store, "crash", log_dir.path(), end.segment).await;
    });
}
