//! Archiving and restoring against plain `object_store` transfers of the same
//! files, on local files and on an S3 server in this process (127.0.0.1), and
//! the archiver's cost to a writer taking appends from 64 tasks.
//!
//! `cargo bench -p walcodec-archive --bench archive`; `ARCHIVE_BENCH_MB` sets the
//! log's size (default 256), `ARCHIVE_BENCH_SECS` each append run's length
//! (default 3), `ARCHIVE_BENCH_ROUNDS` the rounds (default 5),
//! `ARCHIVE_BENCH_ONLY` which comparisons run (a comma-separated list of
//! `local`, `s3`, `appends`; default all). Each round runs
//! the archive's path and the plain transfer one after the other, in an order
//! that alternates from round to round; a ratio is the archive's throughput over
//! the plain transfer's in the same round, and the figure printed is the median
//! of the rounds' ratios (each round's is printed too). The machine's load
//! average is printed before and after: on a shared machine, read the figures
//! beside it.

#![allow(dead_code)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::Path as FsPath;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};
use walcodec::{Dialect, LogDir, WriterOptions};
use walcodec_archive::{restore, Archiver, DEFAULT_PARTS_IN_FLIGHT, DEFAULT_PART_BYTES};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Uploads each file as the archiver would, without reading its records.
async fn plain_upload(
    store: &Arc<dyn ObjectStore>,
    prefix: &str,
    files: &[(u64, std::path::PathBuf)],
) {
    for (number, path) in files {
        let location = Path::from(format!("{prefix}/{number:06}.log"));
        let bytes = tokio::fs::read(path).await.unwrap();
        if bytes.len() <= DEFAULT_PART_BYTES {
            store.put(&location, PutPayload::from(bytes)).await.unwrap();
        } else {
            let upload = store.put_multipart(&location).await.unwrap();
            let mut upload = WriteMultipart::new_with_chunk_size(upload, DEFAULT_PART_BYTES);
            let bytes = bytes::Bytes::from(bytes);
            for start in (0..bytes.len()).step_by(DEFAULT_PART_BYTES) {
                upload
                    .wait_for_capacity(DEFAULT_PARTS_IN_FLIGHT)
                    .await
                    .unwrap();
                upload.put(bytes.slice(start..(start + DEFAULT_PART_BYTES).min(bytes.len())));
            }
            upload.finish().await.unwrap();
        }
    }
}

/// Downloads each object into a file, synced, as a restore writes it.
async fn plain_download(store: &Arc<dyn ObjectStore>, prefix: &str, numbers: &[u64], dir: &FsPath) {
    use std::io::Write;
    for number in numbers {
        let location = Path::from(format!("{prefix}/{number:06}.log"));
        let mut stream = store.get(&location).await.unwrap().into_stream();
        let file = std::fs::File::create(dir.join(format!("{number:06}.log"))).unwrap();
        let mut file = std::io::BufWriter::with_capacity(1 << 20, file);
        while let Some(chunk) = stream.next().await {
            file.write_all(&chunk.unwrap()).unwrap();
        }
        file.into_inner().unwrap().sync_all().unwrap();
    }
}

fn mib_per_s(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / (1 << 20) as f64 / elapsed.as_secs_f64()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    }
}

/// CPU time this process has used so far, user and system, all threads (in
/// clock ticks of 10 ms, from `/proc/self/stat`); `None` where that is not read.
fn cpu_secs() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command's name (in parentheses, which may hold spaces).
    let fields: Vec<&str> = stat
        .get(stat.rfind(')')? + 2..)?
        .split_whitespace()
        .collect();
    let ticks = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Times `first` then `second`, or the other way round on odd rounds.
async fn alternate<A, B, FA, FB>(round: usize, a: A, b: B) -> (Duration, Duration)
where
    A: FnOnce() -> FA,
    B: FnOnce() -> FB,
    FA: std::future::Future<Output = ()>,
    FB: std::future::Future<Output = ()>,
{
    async fn timed<F: std::future::Future<Output = ()>>(f: F) -> Duration {
        let started = Instant::now();
        f.await;
        started.elapsed()
    }
    if round.is_multiple_of(2) {
        let a = timed(a()).await;
        (a, timed(b()).await)
    } else {
        let b = timed(b()).await;
        (timed(a()).await, b)
    }
}

/// Prints one comparison: median throughputs and the median of the rounds'
/// ratios (contender over baseline).
fn report(what: &str, bytes: u64, rounds: &[(Duration, Duration)]) {
    let ratios: Vec<f64> = rounds
        .iter()
        .map(|(plain, ours)| plain.as_secs_f64() / ours.as_secs_f64())
        .collect();
    let plain = median(rounds.iter().map(|r| mib_per_s(bytes, r.0)).collect());
    let ours = median(rounds.iter().map(|r| mib_per_s(bytes, r.1)).collect());
    let each: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
    println!(
        "{what}: plain {plain:.0} MiB/s, ours {ours:.0} MiB/s (medians): ratio {:.2} \
         (median of [{}]; goal >= 0.9)",
        median(ratios.clone()),
        each.join(", ")
    );
}

async fn transfers(
    name: &str,
    store: Arc<dyn ObjectStore>,
    log_dir: &FsPath,
    bytes: u64,
    rounds: usize,
) {
    let listed = LogDir::list(log_dir).unwrap();
    let mut files: Vec<(u64, std::path::PathBuf)> = listed
        .segments
        .iter()
        .map(|s| (s.number, s.path.clone()))
        .collect();
    files.pop(); // the active segment
    let numbers: Vec<u64> = files.iter().map(|f| f.0).collect();
    let log = LogDir::open(log_dir).await.unwrap();
    let (mut up, mut down) = (Vec::new(), Vec::new());
    println!("{name}: load average before {}", load());
    for round in 0..rounds {
        let (plain, archive) = (format!("plain{round}"), format!("archive{round}"));
        up.push(
            alternate(
                round,
                || plain_upload(&store, &plain, &files),
                || async {
                    Archiver::new(Arc::clone(&store), archive.as_str().into())
                        .archive_sealed(&log)
                        .await
                        .unwrap();
                },
            )
            .await,
        );
        let (plain_target, restore_target) =
            (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        down.push(
            alternate(
                round,
                || plain_download(&store, &plain, &numbers, plain_target.path()),
                || async {
                    restore(
                        Arc::clone(&store),
                        archive.as_str().into(),
                        restore_target.path(),
                        None,
                    )
                    .await
                    .unwrap();
                },
            )
            .await,
        );
    }
    log.close().await.unwrap();
    report(&format!("{name}: archive / plain upload"), bytes, &up);
    report(&format!("{name}: restore / plain download"), bytes, &down);
    println!("{name}: load average after {}", load());
}

/// Appends/s of 64 tasks appending 1 KiB records for `secs`, with or without an
/// archiver running on the log, and the process's CPU seconds per append.
async fn appends_per_sec(secs: u64, archive: bool) -> (f64, Option<f64>) {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = tempfile::tempdir().unwrap();
    let log = LogDir::builder()
        .max_segment_bytes(4 << 20)
        .writer(WriterOptions::new())
        .open(dir.path())
        .await
        .unwrap();
    let archiver = Arc::new(Archiver::new(
        support::local_store(store_dir.path()),
        "cpu".into(),
    ));
    let task = archive.then(|| {
        archiver.hold(&log);
        let (archiver, log) = (Arc::clone(&archiver), log.clone());
        tokio::spawn(async move { archiver.run(&log).await })
    });
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    for t in 0..64u64 {
        let (log, stop, count) = (log.clone(), Arc::clone(&stop), Arc::clone(&count));
        writers.push(tokio::spawn(async move {
            let record = vec![t as u8; 1024];
            while !stop.load(Ordering::Relaxed) {
                log.append(&record).await.unwrap();
                count.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let (started, cpu_before) = (Instant::now(), cpu_secs());
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.await.unwrap();
    }
    let appends = count.load(Ordering::Relaxed) as f64;
    let rate = appends / started.elapsed().as_secs_f64();
    let cpu = cpu_before
        .zip(cpu_secs())
        .map(|(before, after)| (after - before) / appends);
    if let Some(task) = task {
        task.abort();
    }
    log.close().await.unwrap();
    (rate, cpu)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mb = env("ARCHIVE_BENCH_MB", 256);
        let secs = env("ARCHIVE_BENCH_SECS", 3);
        let rounds = env("ARCHIVE_BENCH_ROUNDS", 5).max(1) as usize;
        let log_dir = tempfile::tempdir().unwrap();
        {
            let log = LogDir::builder()
                .dialect(Dialect::LevelDb)
                .max_segment_bytes(16 << 20)
                .open(log_dir.path())
                .await
                .unwrap();
            let record = vec![7u8; 4000];
            let mut handles = Vec::new();
            for _ in 0..16 {
                let log = log.clone();
                let record = record.clone();
                handles.push(tokio::spawn(async move {
                    for _ in 0..(mb << 20) / 4000 / 16 {
                        log.append(&record).await.unwrap();
                    }
                }));
            }
            for handle in handles {
                handle.await.unwrap();
            }
            log.rotate().await.unwrap();
            log.close().await.unwrap();
        }
        let listed = LogDir::list(log_dir.path()).unwrap();
        let bytes: u64 = listed.segments.iter().map(|s| s.len).sum();
        println!(
            "log: {} segments, {} MiB",
            listed.segments.len() - 1,
            bytes >> 20
        );
        let only = std::env::var("ARCHIVE_BENCH_ONLY").unwrap_or_default();
        let runs = |part: &str| only.is_empty() || only.split(',').any(|o| o == part);
        if runs("local") {
            let store_dir = tempfile::tempdir().unwrap();
            let local = support::local_store(store_dir.path());
            transfers("local files", local, log_dir.path(), bytes, rounds).await;
        }
        if runs("s3") {
            let server = support::S3Server::start().await;
            let s3 = server.store();
            transfers("S3 (s3s-fs, 127.0.0.1)", s3, log_dir.path(), bytes, rounds).await;
        }
        if !runs("appends") {
            return;
        }
        println!("appends: load average before {}", load());
        let mut ratios = Vec::new();
        let (mut alone, mut archiving) = (Vec::new(), Vec::new());
        let (mut cpu_alone, mut cpu_archiving) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            let (without, with) = if round.is_multiple_of(2) {
                let without = appends_per_sec(secs, false).await;
                (without, appends_per_sec(secs, true).await)
            } else {
                let with = appends_per_sec(secs, true).await;
                (appends_per_sec(secs, false).await, with)
            };
            alone.push(without.0);
            archiving.push(with.0);
            ratios.push(with.0 / without.0);
            cpu_alone.extend(without.1);
            cpu_archiving.extend(with.1);
        }
        let each: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
        println!(
            "64-task appends of 1 KiB: {:.0}/s alone, {:.0}/s while archiving (medians): \
             ratio {:.2} (median of [{}]; goal >= 0.95)",
            median(alone),
            median(archiving),
            median(ratios.clone()),
            each.join(", ")
        );
        if !cpu_alone.is_empty() && !cpu_archiving.is_empty() {
            println!(
                "64-task appends: CPU per append {:.1} us alone, {:.1} us while archiving \
                 (medians; the whole process, the archiver and its store included)",
                median(cpu_alone) * 1e6,
                median(cpu_archiving) * 1e6
            );
        }
        println!("appends: load average after {}", load());
    });
}
