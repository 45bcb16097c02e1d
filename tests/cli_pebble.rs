//! The `walcodec` binary on Pebble's WALs (`tests/data/pebble`, written by Pebble)
//! and on WAL-sync logs of our writer: `--dialect auto` and `pebble`, the log number
//! from `NNNNNN.log` and failover `NNNNNN-KKK.log` names, one verdict across `cat`,
//! `dump`, `verify` and `stat`, and Pebble's batch kinds in `dump --format batch`.

use std::fs;
use std::path::{Path, PathBuf};

use bytes::BytesMut;
use walcodec::{LogEncoder, BLOCK_SIZE};

use crate::cli_support;

use cli_support::{code, path_str, run, stderr, stdout};

fn vector(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/pebble")
        .join(name)
}

const VECTORS: [&str; 5] = [
    "db-stage-1/000002.log",
    "db-stage-2/000002.log",
    "broken-external-db/000004.log",
    "broken-external-db/000006.log",
    "mixed/000004.log",
];

/// Every vector reads clean under auto-detection in every reading command: the
/// EOF trailer is a clean end, and a recycled file's old bytes after it are not
/// damage.
#[test]
fn every_vector_is_clean_in_every_command() {
    for name in VECTORS {
        let path = vector(name);
        let file = path_str(&path);
        let expected = fs::read_to_string(format!("{file}.expected.hex")).unwrap();
        for dialect in ["auto", "pebble"] {
            let cat = run(&["cat", "--dialect", dialect, file]);
            assert_eq!(code(&cat), 0, "cat {name}: {}", stderr(&cat));
            let dump = run(&["dump", "--dialect", dialect, "--format", "hex", file]);
            assert_eq!(code(&dump), 0, "dump {name}: {}", stderr(&dump));
            let records: Vec<String> = stdout(&dump)
                .lines()
                .map(|line| line.rsplit(' ').next().unwrap().to_string())
                .collect();
            let want: Vec<String> = expected.lines().map(str::to_string).collect();
            assert_eq!(records, want, "dump {name} --dialect {dialect}");
            let verify = run(&["verify", "--dialect", dialect, file]);
            let text = stdout(&verify);
            assert_eq!(code(&verify), 0, "verify {name}: {text}{}", stderr(&verify));
            assert!(text.contains("result: clean"), "{name}: {text}");
            assert!(!text.contains("dropping"), "{name}: {text}");
            let stat = run(&["stat", "--dialect", dialect, file]);
            assert_eq!(code(&stat), 0, "stat {name}: {}", stderr(&stat));
        }
    }
    // The recycled file: its tail is the trailer, then the file's earlier use.
    let verify = run(&["verify", path_str(&vector("broken-external-db/000006.log"))]);
    let text = stdout(&verify);
    assert!(
        text.contains("tail: ended at offset 0 by the EOF trailer"),
        "{text}"
    );
}

fn wal_sync_log(number: u64, records: &[Vec<u8>]) -> Vec<u8> {
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::builder().pebble(number).build();
    for record in records {
        encoder.set_synced_offset(encoder.offset());
        encoder.encode_record(record, &mut log);
    }
    log.to_vec()
}

/// A WAL-sync log of ours under a failover name: auto-detected, log number from
/// the name; damage a later synced offset proves is corruption in every command,
/// with the bytes the damage covers.
#[test]
fn wal_sync_logs_and_proven_damage_give_one_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<Vec<u8>> = (0..6).map(|i| vec![b'a' + i as u8; 20_000]).collect();
    let log = wal_sync_log(12, &records);
    let path = dir.path().join("000012-001.log");
    fs::write(&path, &log).unwrap();
    let file = path_str(&path);
    let dump = run(&["dump", file]);
    assert_eq!(code(&dump), 0, "{}", stderr(&dump));
    assert_eq!(stdout(&dump).lines().count(), 6);
    let verify = run(&["verify", file]);
    assert!(stdout(&verify).contains("dialect: pebble, log 12 (from the file name)"));

    let mut damaged = log.clone();
    damaged[25_000] ^= 0x20;
    fs::write(&path, &damaged).unwrap();
    let cat = run(&["cat", file]);
    assert_ne!(code(&cat), 0);
    let cat_err = stderr(&cat);
    assert!(cat_err.contains("checksum mismatch"), "{cat_err}");
    assert!(!cat_err.contains("32768 bytes"), "{cat_err}");
    let verify = run(&["verify", file]);
    let text = stdout(&verify);
    assert_ne!(code(&verify), 0, "{text}");
    assert!(text.contains("result: corrupt"), "{text}");
    // The same damage in the last record is the torn end, in every command.
    let mut late = log.clone();
    let at = log.len() - 10;
    late[at] ^= 0x20;
    fs::write(&path, &late).unwrap();
    assert_eq!(code(&run(&["cat", file])), 0);
    let verify = run(&["verify", file]);
    assert_eq!(code(&verify), 0, "{}", stdout(&verify));
    assert!(stdout(&verify).contains("result: clean"));
}

/// `dump --format batch` prints Pebble's range-key kinds by their names.
#[test]
fn dump_decodes_pebbles_batch_kinds() {
    let file = vector("mixed/000004.log");
    for dialect in ["pebble", "auto"] {
        let args = [
            "dump",
            "--dialect",
            dialect,
            "--format",
            "batch",
            path_str(&file),
        ];
        let dump = run(&args);
        let text = stdout(&dump);
        if dialect == "pebble" {
            assert_eq!(code(&dump), 0, "{}", stderr(&dump));
            assert!(text.contains("RANGEKEYSET"), "{text}");
            assert!(text.contains("RANGEKEYUNSET"), "{text}");
            assert!(text.contains("RANGEKEYDEL : 0x61 0x62"), "{text}");
        }
    }
    let json = run(&[
        "dump",
        "--dialect",
        "pebble",
        "--format",
        "batch-json",
        path_str(&file),
    ]);
    assert!(
        stdout(&json).contains("\"op\":\"range_key_set\""),
        "{}",
        stdout(&json)
    );
}

/// A file whose first fragment no dialect's header makes valid: auto says it
/// cannot decide.
#[test]
fn auto_says_when_it_cannot_decide() {
    let dir = tempfile::tempdir().unwrap();
    // A log whose first fragment is damaged, with intact blocks after it.
    let path = dir.path().join("damaged-start.log");
    let mut log = bytes::BytesMut::new();
    let mut encoder = walcodec::LogEncoder::new();
    for _ in 0..40 {
        encoder.encode_record(&[7; 1000], &mut log);
    }
    log[0] ^= 0xff;
    fs::write(&path, &log).unwrap();
    let verify = run(&["verify", path_str(&path)]);
    assert!(
        stderr(&verify).contains("cannot tell the log's dialect"),
        "{}",
        stderr(&verify)
    );
    assert_eq!(code(&verify), 1, "{}", stderr(&verify));
    // Bytes in which nothing looks like a log are not one.
    let path = dir.path().join("garbage.log");
    fs::write(&path, vec![0x5a; BLOCK_SIZE / 2]).unwrap();
    let verify = run(&["verify", path_str(&path)]);
    assert_eq!(code(&verify), 2);
    assert!(
        stderr(&verify).starts_with(&format!("walcodec: {}: not a log", path_str(&path))),
        "{}",
        stderr(&verify)
    );
}

/// `dump --physical` shows WAL-sync headers with their synced offsets and names
/// the EOF trailer; `repair` refuses to truncate a Pebble WAL by LevelDB's rules.
#[test]
fn the_layout_names_wal_sync_headers_and_the_trailer() {
    let file = vector("db-stage-2/000002.log");
    let dump = run(&["dump", "--physical", path_str(&file)]);
    assert_eq!(code(&dump), 0);
    let text = stdout(&dump);
    assert!(
        text.starts_with("dialect pebble log=2 (from the file name)\n"),
        "{text}"
    );
    assert!(
        text.contains("end 159 log 2 ends here: its EOF trailer (a clean close)"),
        "{text}"
    );
    let repair = run(&["repair", "--dry-run", path_str(&file)]);
    assert_eq!(code(&repair), 2);
    assert!(stderr(&repair).contains("a Pebble WAL"));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000003.log");
    fs::write(&path, wal_sync_log(3, &[vec![7; 100], vec![8; 100]])).unwrap();
    let dump = run(&["dump", "--physical", path_str(&path)]);
    let text = stdout(&dump);
    assert!(
        text.contains("type=9(W-FULL) len=100 crc=ok log=3 synced=0 hdr=19"),
        "{text}"
    );
    assert!(text.contains("synced=119 hdr=19"), "{text}");
}

/// A WAL written with failover as several files, `000012-000.log` then
/// `000012-001.log` (each a log of number 12 from its own offset 0, the second
/// recyclable as an older Pebble writes): each reads as Pebble's, log 12 from its
/// name, and together they give the WAL's records in order.
#[test]
fn a_failover_wal_in_several_files_reads_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let first: Vec<Vec<u8>> = (0..3)
        .map(|i| format!("first segment {i}").into_bytes())
        .collect();
    let second: Vec<Vec<u8>> = (0..2)
        .map(|i| format!("second segment {i}").into_bytes())
        .collect();
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::builder().pebble(12).build();
    for record in &first {
        encoder.encode_record(record, &mut log);
    }
    encoder.encode_eof_trailer(&mut log);
    fs::write(dir.path().join("000012-000.log"), &log).unwrap();
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::builder().recyclable(12).build();
    for record in &second {
        encoder.encode_record(record, &mut log);
    }
    fs::write(dir.path().join("000012-001.log"), &log).unwrap();

    let mut records = Vec::new();
    for segment in ["000012-000.log", "000012-001.log"] {
        let path = dir.path().join(segment);
        let cat = run(&["cat", "--to", "lines", path_str(&path)]);
        assert_eq!(code(&cat), 0, "{segment}: {}", stderr(&cat));
        records.extend(stdout(&cat).lines().map(str::to_string));
        let verify = run(&["verify", path_str(&path)]);
        let text = stdout(&verify);
        assert!(
            text.contains("dialect: pebble, log 12 (from the file name)"),
            "{text}"
        );
        assert!(text.contains("result: clean"), "{text}");
    }
    let want: Vec<String> = first
        .iter()
        .chain(&second)
        .map(|r| String::from_utf8(r.clone()).unwrap())
        .collect();
    assert_eq!(records, want);
}

/// A `LogDir` of Pebble's segments (`LogDirOptions::dialect(Dialect::Pebble)`):
/// `verify`, `stat`, `dump` and `cat` on the directory read every segment in
/// Pebble's dialect, each sealed one ending at its EOF trailer, the active one
/// after a clean close too, and a reused segment's earlier use as its end.
#[test]
fn a_pebble_log_directory_is_clean_in_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<Vec<u8>> = (0..40u32)
        .map(|i| {
            let mut record = format!("record {i} ").into_bytes();
            record.resize([20usize, 5000, 40_000][(i % 3) as usize], b'p');
            record
        })
        .collect();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut options = walcodec::LogDir::builder();
    options
        .dialect(walcodec::Dialect::Pebble)
        .max_segment_bytes(64 * 1024)
        .recycle_segments(2);
    let open = || options.open(dir.path());
    runtime.block_on(async {
        let log = open().await.unwrap();
        for record in &records {
            log.append(record).await.unwrap();
        }
        log.close().await.unwrap();
    });
    let path = path_str(dir.path());
    let check = |expected: &[Vec<u8>]| {
        for command in ["verify", "stat"] {
            let out = run(&[command, path]);
            let text = stdout(&out);
            assert_eq!(code(&out), 0, "{command}: {text}{}", stderr(&out));
            assert!(text.contains("result: clean"), "{command}: {text}");
            assert!(!text.contains("badly sealed: 0"), "{command}: {text}");
        }
        let dump = run(&["dump", path]);
        assert_eq!(code(&dump), 0, "{}", stderr(&dump));
        assert_eq!(stdout(&dump).lines().count(), expected.len());
        let cat = run(&["cat", path]);
        assert_eq!(code(&cat), 0, "{}", stderr(&cat));
        assert_eq!(cat.stdout, expected.concat());
    };
    check(&records);
    let verify = stdout(&run(&["verify", path]));
    assert!(verify.contains("dialect: pebble, log 1"), "{verify}");

    // Purged segments reused: the active one holds its earlier use's bytes past
    // its records while it is written, the end of the segment in every command.
    let log = runtime.block_on(async {
        let log = open().await.unwrap();
        let end = log.end();
        log.rotate().await.unwrap();
        log.purge_before(end).await.unwrap();
        log.rotate().await.unwrap();
        log.append(b"on a reused file").await.unwrap();
        log
    });
    let active = log.end();
    let file = std::fs::metadata(dir.path().join(format!("{:06}.log", active.segment))).unwrap();
    assert!(file.len() > active.offset + 1000, "not a reused file");
    check(&[b"on a reused file".to_vec()]);
    runtime.block_on(log.close()).unwrap();
    check(&[b"on a reused file".to_vec()]);
}
