//! Our writer in Pebble's WAL-sync format: every fragment's synced offset is the
//! writer's durable end when it was encoded (so never past what is on disk), `close`
//! ends the log with the EOF trailer, the output reads back in our decoder and in the
//! reference reader of `pebble_support`, and a real crash (SIGKILL of a child
//! appending) never leaves a log that Pebble's rule calls corrupt.

use crate::pebble_support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use bytes::BytesMut;
use pebble_support::{reference_read_pebble, PebbleEnd};
use tokio_util::codec::Decoder;
use walcodec::fragment::{FragmentRules, Parsed};
use walcodec::{Dialect, LogDecoder, LogFormat, LogInput, WriterOptions, BLOCK_SIZE};

const LOG_NUMBER: u64 = 42;

fn record(task: u32, seq: u32) -> Vec<u8> {
    let len = [10usize, 3000, 40_000][(seq % 3) as usize];
    let mut record = format!("{task} {seq} ").into_bytes();
    record.resize(len, b'a' + (seq % 26) as u8);
    record
}

/// Every record of `log` in Pebble's dialect, the decoder after, and its error.
fn read_pebble(log: &[u8]) -> (Vec<Vec<u8>>, LogDecoder, Option<walcodec::Error>) {
    let mut decoder = LogDecoder::builder()
        .dialect(Dialect::Pebble)
        .log_number(LOG_NUMBER)
        // A file: a record cut by a crash at its end is a torn tail, not a stream
        // that broke mid-record.
        .input(LogInput::File)
        .build();
    let mut src = BytesMut::from(log);
    let mut records = Vec::new();
    loop {
        match decoder.decode_eof(&mut src) {
            Ok(Some(record)) => records.push(record.to_vec()),
            Ok(None) => return (records, decoder, None),
            Err(e) => return (records, decoder, Some(e.into())),
        }
    }
}

/// The synced offsets of the log's WAL-sync fragments, with their offsets.
fn synced_offsets(log: &[u8]) -> Vec<(u64, u64)> {
    let rules = FragmentRules::new(Dialect::Pebble).log_number(LOG_NUMBER);
    let mut at = 0;
    let mut found = Vec::new();
    while at < log.len() {
        let block_left = BLOCK_SIZE - at % BLOCK_SIZE;
        match rules.parse(&log[at..], block_left) {
            Parsed::Fragment(fragment) => {
                if let Some(synced) = fragment.synced_offset() {
                    found.push((at as u64, synced));
                }
                at += fragment.len();
            }
            Parsed::Trailer { len } | Parsed::ZeroFill { len } => at += len,
            _ => break,
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wal_sync_writer_output_reads_back_and_ends_with_the_trailer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000042.log");
    let log = WriterOptions::new()
        .format(LogFormat::pebble(LOG_NUMBER))
        .create(&path)
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for task in 0..4u32 {
        let log = log.clone();
        tasks.push(tokio::spawn(async move {
            for seq in 0..30 {
                log.append(record(task, seq)).await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let len = log.close().await.unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len() as u64, len);
    // The EOF trailer last: crc 0, length 0, type 5, log number + 1.
    assert_eq!(
        &bytes[bytes.len() - 11..bytes.len() - 4],
        &[0, 0, 0, 0, 0, 0, 5]
    );
    assert_eq!(
        &bytes[bytes.len() - 4..],
        &((LOG_NUMBER + 1) as u32).to_le_bytes()
    );

    let (records, decoder, error) = read_pebble(&bytes);
    assert!(error.is_none());
    assert_eq!(records.len(), 120);
    assert!(decoder.has_eof_trailer());
    let reference = reference_read_pebble(&bytes, LOG_NUMBER);
    assert_eq!(reference.records, records);
    assert_eq!(reference.end, PebbleEnd::Eof);

    // Each fragment promises no more than what was before it, and the promises grow.
    let offsets = synced_offsets(&bytes);
    assert!(offsets.len() >= 120);
    assert!(offsets.iter().all(|&(at, synced)| synced <= at));
    assert!(offsets.windows(2).all(|w| w[0].1 <= w[1].1));
    assert!(offsets.last().unwrap().1 > 0, "the writer promised nothing");

    // Reopened for appending: the trailer is cut, appends go on, close adds one.
    let log = WriterOptions::new()
        .format(LogFormat::pebble(LOG_NUMBER))
        .open(&path)
        .await
        .unwrap();
    assert_eq!(log.stats().len, len - 11);
    log.append(b"after the reopen".to_vec()).await.unwrap();
    log.close().await.unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let (records, decoder, error) = read_pebble(&bytes);
    assert!(error.is_none());
    assert_eq!(records.len(), 121);
    assert_eq!(records.last().unwrap(), b"after the reopen");
    assert!(decoder.has_eof_trailer());
}

const CHILD_ENV: &str = "WALCODEC_PEBBLE_CRASH_CHILD";

/// The appender of `a_crash_never_reads_as_corruption`, run as its child.
#[test]
#[ignore = "the child process of a_crash_never_reads_as_corruption"]
fn pebble_crash_child() {
    // Run by hand (`--include-ignored`), it has nothing to check: say so by failing.
    let path = std::env::var_os(CHILD_ENV).unwrap_or_else(|| {
        panic!("{CHILD_ENV} is not set: only a_crash_never_reads_as_corruption runs this child")
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    runtime.block_on(async move {
        let log = WriterOptions::new()
            .format(LogFormat::pebble(LOG_NUMBER))
            .max_batch_bytes(16 * 1024)
            .open(PathBuf::from(path))
            .await
            .unwrap();
        let mut tasks = Vec::new();
        for task in 0..8u32 {
            let log = log.clone();
            tasks.push(tokio::spawn(async move {
                for seq in 0.. {
                    log.append(record(task, seq)).await.unwrap();
                    eprintln!("ack {task} {seq}");
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
    });
}

/// SIGKILL a child appending in the WAL-sync format, several times: the log always
/// reads as Pebble says a crashed log reads (a clean or torn end, never corruption
/// proven by a synced offset), with every acknowledged record.
#[test]
fn a_crash_never_reads_as_corruption() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..4u64 {
        let path = dir.path().join(format!("{:06}.log", 100 + round));
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                &child_test_name!("pebble_crash_child"),
                "--ignored",
                "--nocapture",
            ])
            .env(CHILD_ENV, &path)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (acks_tx, acks_rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut acked = Vec::new();
            let mut stderr = BufReader::new(stderr);
            let mut line = String::new();
            // A line cut by the kill has no newline: not counted as acknowledged.
            while stderr.read_line(&mut line).unwrap_or(0) > 0 {
                if let Some(ack) = line.strip_suffix('\n').and_then(|l| l.strip_prefix("ack ")) {
                    let mut fields = ack.split(' ').map(|f| f.parse::<u32>().unwrap());
                    acked.push((fields.next().unwrap(), fields.next().unwrap()));
                    let _ = acks_tx.send(acked.len());
                }
                line.clear();
            }
            acked
        });
        // Killed once it has acknowledged some records (more each round), while it
        // goes on appending: an event, not a sleep, so a loaded machine that runs the
        // child slowly still kills it with something acknowledged. The wait has a
        // generous hang guard, no more.
        let wanted = [1, 20, 100, 300][round as usize];
        loop {
            match acks_rx.recv_timeout(Duration::from_secs(120)) {
                Ok(n) if n >= wanted => break,
                Ok(_) => {}
                Err(e) => panic!("round {round}: {wanted} acknowledgements never came: {e}"),
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
        let acked = reader.join().unwrap();
        assert!(!acked.is_empty(), "round {round}: nothing acknowledged");
        check_crashed(&path, &acked);
    }
}

fn check_crashed(path: &Path, acked: &[(u32, u32)]) {
    let bytes = std::fs::read(path).unwrap();
    let (records, _, error) = read_pebble(&bytes);
    assert!(error.is_none(), "{error:?}");
    let reference = reference_read_pebble(&bytes, LOG_NUMBER);
    assert!(!matches!(reference.end, PebbleEnd::Corrupt { .. }));
    assert_eq!(reference.records, records);
    for &(task, seq) in acked {
        assert!(
            records.contains(&record(task, seq)),
            "acknowledged record {task} {seq} lost"
        );
    }
}
