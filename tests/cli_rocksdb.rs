//! The `walcodec` binary on RocksDB WALs (the RocksDB 7.8.3 vectors of
//! `tests/data/rocksdb-wal`): `--dialect`, `--log-number` and the file name, `dump`
//! (records, `--format batch` against `ldb dump_wal`, `--physical`), `verify` and
//! `stat`, and the hint for a RocksDB WAL read as LevelDB's.
//!
//! Needs the `cli` feature; the compressed vectors also `zstd`:
//! `cargo test --release --features cli,zstd --test all -- cli_rocksdb::`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use walcodec::BLOCK_SIZE;

use crate::cli_support;

use cli_support::{code, path_str, run, run_with_stdin, stderr, stdout};

fn vector(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/rocksdb-wal")
        .join(name)
}

/// Every vector WAL, with whether it is compressed.
fn vectors() -> Vec<(PathBuf, bool)> {
    let mut logs = Vec::new();
    for case in [
        "default",
        "recycle",
        "recycle-torn",
        "zstd",
        "recycle-zstd",
        "recycle-zstd-torn",
    ] {
        for entry in fs::read_dir(vector(case)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "log") {
                logs.push((path, case.contains("zstd")));
            }
        }
    }
    logs.sort();
    assert_eq!(logs.len(), 10);
    logs
}

/// The vectors this build can read: the compressed ones need the `zstd` feature.
fn readable_vectors() -> Vec<PathBuf> {
    vectors()
        .into_iter()
        .filter(|(_, compressed)| cfg!(feature = "zstd") || !compressed)
        .map(|(path, _)| path)
        .collect()
}

fn sidecar(log: &Path, suffix: &str) -> String {
    fs::read_to_string(format!("{}.{suffix}", log.display())).unwrap()
}

/// A copy of a vector under another name, in a scratch directory.
fn copy_as(vector_log: &str, name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    fs::copy(vector(vector_log), &path).unwrap();
    (dir, path)
}

/// The payloads of `dump --format hex`, one hex line each.
fn dumped_hex(output: &Output) -> Vec<String> {
    stdout(output)
        .lines()
        .map(|line| line.splitn(3, ' ').nth(2).unwrap().to_string())
        .collect()
}

fn expected_hex(log: &Path) -> Vec<String> {
    sidecar(log, "expected.hex")
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn every_rocksdb_vector_dumps_its_expected_records() {
    for log in readable_vectors() {
        let dumped = run(&["dump", "--format", "hex", path_str(&log)]);
        assert_eq!(code(&dumped), 0, "{}: {}", log.display(), stderr(&dumped));
        assert_eq!(stderr(&dumped), "", "{}", log.display());
        assert_eq!(dumped_hex(&dumped), expected_hex(&log), "{}", log.display());
    }
}

#[test]
fn format_batch_agrees_with_ldb_dump_wal() {
    for log in readable_vectors() {
        let dumped = run(&["dump", "--format", "batch", path_str(&log)]);
        assert_eq!(code(&dumped), 0, "{}: {}", log.display(), stderr(&dumped));
        let ldb = sidecar(&log, "ldb.txt");
        let ldb: Vec<&str> = ldb
            .lines()
            .skip(1) // the --header line
            .filter(|line| !line.starts_with("Corruption detected"))
            .collect();
        let ours = stdout(&dumped);
        let ours: Vec<&str> = ours.lines().collect();
        assert_eq!(ours.len(), ldb.len(), "{}", log.display());
        for (ours, theirs) in ours.iter().zip(&ldb) {
            let ours: Vec<&str> = ours.splitn(5, ',').collect();
            let theirs: Vec<&str> = theirs.splitn(5, ',').collect();
            // Sequence, count, byte size and every operation, byte for byte.
            assert_eq!(
                [ours[0], ours[1], ours[2], ours[4]],
                [theirs[0], theirs[1], theirs[2], theirs[4]],
                "{}",
                log.display()
            );
            // The offset is the record's first header; ldb gives a 1-to-6-byte
            // trailer's offset instead when the record follows one.
            let (ours, theirs): (u64, u64) = (ours[3].parse().unwrap(), theirs[3].parse().unwrap());
            assert!(
                ours == theirs || (ours % BLOCK_SIZE as u64 == 0 && ours - theirs <= 6),
                "{}: offset {ours} vs ldb's {theirs}",
                log.display()
            );
        }
    }
}

#[test]
fn format_batch_json_holds_what_the_text_holds() {
    let log = vector("default/000004.log");
    let text = stdout(&run(&["dump", "--format", "batch", path_str(&log)]));
    let json = run(&["dump", "--format", "batch-json", path_str(&log)]);
    assert_eq!(code(&json), 0);
    let json = stdout(&json);
    assert_eq!(text.lines().count(), json.lines().count());
    let mut deletes = 0;
    for (text, json) in text.lines().zip(json.lines()) {
        let object: serde_json::Value = serde_json::from_str(json).unwrap();
        let fields: Vec<&str> = text.splitn(5, ',').collect();
        assert_eq!(object["sequence"].to_string(), fields[0]);
        assert_eq!(object["count"].to_string(), fields[1]);
        assert_eq!(object["byte_size"].to_string(), fields[2]);
        assert_eq!(object["offset"].to_string(), fields[3]);
        let operations = object["operations"].as_array().unwrap();
        assert_eq!(operations.len(), fields[4].matches("(0) : ").count());
        for operation in operations {
            let key = operation["key"].as_str().unwrap().to_uppercase();
            assert!(fields[4].contains(&format!("0x{key} ")), "{text}");
            assert_eq!(operation["cf"], 0);
            deletes += usize::from(operation["op"] == "delete");
        }
    }
    assert!(deletes > 0, "the vector holds deletes");
}

#[test]
fn format_batch_reports_a_record_that_is_not_a_write_batch() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("000001.log");
    let mut bytes = bytes::BytesMut::new();
    walcodec::LogEncoder::new().encode_record(b"not a batch", &mut bytes);
    fs::write(&log, &bytes).unwrap();
    let dumped = run(&["dump", "--format", "batch", path_str(&log)]);
    assert_eq!(code(&dumped), 1);
    assert_eq!(stdout(&dumped), "");
    assert!(
        stderr(&dumped).contains(
            "offset 0: record of 11 bytes is not a whole WriteBatch: write batch too small (11 < 12 bytes)"
        ),
        "{}",
        stderr(&dumped)
    );
    let refused = run(&[
        "dump",
        "--format",
        "batch",
        "--max-bytes",
        "4",
        path_str(&log),
    ]);
    assert_eq!(code(&refused), 2);
}

#[test]
fn dump_physical_shows_log_numbers_trailers_and_where_a_recycled_log_ends() {
    let log = vector("recycle/000014.log");
    let dumped = run(&["dump", "--physical", path_str(&log)]);
    assert_eq!(code(&dumped), 0, "{}", stderr(&dumped));
    let text = stdout(&dumped);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "dialect rocksdb log=14 (from the file name)");
    assert_eq!(
        lines[1],
        "0 blk=0/0 type=5(R-FULL) len=174 crc=ok log=14 hdr=11"
    );
    // Recyclable trailers of 9 and 10 bytes, and the empty R-FIRST with 11 left.
    assert!(lines.contains(&"pad 32759 9"));
    assert!(lines.contains(&"pad 65526 10"));
    assert!(lines.contains(&"98293 blk=2/32757 type=6(R-FIRST) len=0 crc=ok log=14 hdr=11"));
    let end = lines
        .iter()
        .position(|line| line.starts_with("end "))
        .unwrap();
    assert_eq!(
        lines[end..],
        [
            "end 101014 log 14 ends here: old log 10 follows",
            "101014 blk=3/2710 type=5(R-FULL) len=728 crc=ok log=10 hdr=11 old",
            "101753 blk=3/3449 type=5(R-FULL) len=828 crc=ok log=10 hdr=11 old",
            "102592 blk=3/4288 type=5(R-FULL) len=928 crc=ok log=10 hdr=11 old",
            "size 103531",
        ]
    );

    // Old bytes that are no header: the first bad length ends a recycled log.
    let torn = run(&[
        "dump",
        "--physical",
        path_str(&vector("recycle-torn/000010.log")),
    ]);
    assert_eq!(code(&torn), 0);
    assert!(stdout(&torn).contains(
        "end 2107 recycled log 10 ends here: bad record length (old bytes of the reused file, where RocksDB's tolerate-tail reader stops)\n\
         2107 blk=0/2107 type=217(UNKNOWN) len=34225 bad-length hdr=7\n"
    ));
}

#[test]
fn dump_physical_shows_the_compression_record_and_chunk_ends() {
    let recycled = run(&[
        "dump",
        "--physical",
        path_str(&vector("recycle-zstd/000010.log")),
    ]);
    assert_eq!(code(&recycled), 0);
    let text = stdout(&recycled);
    assert!(text.contains(
        "\n0 blk=0/0 type=9(SETCOMPRESSION) len=4 crc=ok hdr=7 compression=zstd(7)\n\
         11 blk=0/11 type=5(R-FULL) len=39 crc=ok log=10 hdr=11\n"
    ));
    assert!(text.contains("\nend 34815 log 10 ends here: old log 4 follows\n"));
    // A compressed record's fragments restart where the writer's output chunk ended,
    // mid-block: a MIDDLE that does not fill its block.
    let zstd = stdout(&run(&[
        "dump",
        "--physical",
        path_str(&vector("zstd/000008.log")),
    ]));
    assert!(
        zstd.contains("\n32768 blk=1/0 type=3(MIDDLE) len=4552 crc=ok hdr=7 chunk-end\n37327 "),
        "{zstd}"
    );
}

#[test]
fn dump_physical_of_the_live_log_is_its_chunks_txt() {
    for (log, _) in vectors() {
        let text = stdout(&run(&["dump", "--physical", path_str(&log)]));
        let chunks = sidecar(&log, "chunks.txt");
        let mut compared = 0;
        let ours = text.lines().filter(|line| !line.starts_with("dialect "));
        for (ours, theirs) in ours.zip(chunks.lines()) {
            if ours.starts_with("end ") {
                break;
            }
            // Our lines add fields; the recyclable trailer is "zeros" there.
            let theirs = theirs.replace("zeros ", "pad ");
            let strip_name = |line: &str| match (line.find('('), line.find(')')) {
                (Some(open), Some(close)) => format!("{}{}", &line[..open], &line[close + 1..]),
                _ => line.to_string(),
            };
            assert!(
                strip_name(ours).starts_with(&strip_name(&theirs)),
                "{}: {ours} vs {theirs}",
                log.display()
            );
            compared += 1;
        }
        assert!(compared >= 3, "{}", log.display());
    }
}

#[test]
fn the_log_number_comes_from_the_name_the_flag_or_the_first_fragment() {
    let expected = expected_hex(&vector("recycle/000014.log"));
    // Any NNNNNN.log name.
    let (_dir, named) = copy_as("recycle/000014.log", "14.log");
    let dumped = run(&["dump", "--format", "hex", path_str(&named)]);
    assert_eq!(
        (dumped_hex(&dumped), stderr(&dumped)),
        (expected.clone(), String::new())
    );

    // No number in the name: the first fragment's, said on stderr.
    let (_dir, unnamed) = copy_as("recycle/000014.log", "wal-copy.log");
    let dumped = run(&["dump", "--format", "hex", path_str(&unnamed)]);
    assert_eq!(dumped_hex(&dumped), expected);
    assert!(
        stderr(&dumped).contains("RocksDB WAL read as log 14 (from its first fragment"),
        "{}",
        stderr(&dumped)
    );

    // A name with another number: as ldb, nothing is read, and stderr says why.
    let (_dir, misnamed) = copy_as("recycle/000014.log", "000010.log");
    let dumped = run(&["dump", "--format", "hex", path_str(&misnamed)]);
    assert_eq!(code(&dumped), 0);
    assert_eq!(stdout(&dumped), "");
    assert!(
        stderr(&dumped).contains(
            "its first fragment is of log 14, not 10 (from the file name): read as log 10, the whole file is left over from an older log and nothing is read (--log-number 14 reads it)"
        ),
        "{}",
        stderr(&dumped)
    );
    // --log-number overrides the name.
    let dumped = run(&[
        "dump",
        "--format",
        "hex",
        "--log-number",
        "14",
        path_str(&misnamed),
    ]);
    assert_eq!(
        (dumped_hex(&dumped), stderr(&dumped)),
        (expected.clone(), String::new())
    );
    let physical = stdout(&run(&[
        "dump",
        "--physical",
        "--log-number",
        "14",
        path_str(&misnamed),
    ]));
    assert!(physical.starts_with("dialect rocksdb log=14 (from --log-number)\n"));

    // On a pipe too: the first block is looked at, then read again.
    let bytes = fs::read(vector("recycle/000014.log")).unwrap();
    let piped = run_with_stdin(&["dump", "--format", "hex", "-"], &bytes);
    assert_eq!(dumped_hex(&piped), expected);
    let whole = stdout(&run(&["dump", "--format", "hex", path_str(&named)]));
    let later: Vec<&str> = whole
        .lines()
        .filter(|line| line.split(' ').next().unwrap().parse::<u64>().unwrap() >= 40_000)
        .collect();
    assert!(!later.is_empty() && later.len() < expected.len());
    let piped = run_with_stdin(
        &[
            "dump",
            "--format",
            "hex",
            "--log-number",
            "14",
            "--start",
            "40000",
            "-",
        ],
        &bytes,
    );
    assert_eq!(code(&piped), 0);
    assert!(stdout(&piped).lines().eq(later.iter().copied()));
}

#[test]
fn a_rocksdb_wal_read_as_leveldb_gets_a_hint() {
    for (log, number) in [
        (
            "recycle/000014.log",
            "--log-number 14 unless the file is named 000014.log",
        ),
        ("zstd/000008.log", ""),
    ] {
        let path = vector(log);
        let dumped = run(&["dump", "--dialect", "leveldb", path_str(&path)]);
        let hint = format!(
            "walcodec: {}: hint: this looks like a RocksDB WAL (it starts like one); read it with --dialect rocksdb",
            path_str(&path)
        );
        let errors = stderr(&dumped);
        assert!(errors.contains(&hint), "{errors}");
        assert!(errors.contains(number), "{errors}");
        assert_eq!(errors.matches("hint:").count(), 1, "{errors}");
        // As LevelDB's reader sees it: damage.
        assert_eq!(code(&dumped), 1);
        // verify and stat give it too; auto needs none.
        for command in ["verify", "stat"] {
            let output = run(&[command, "--dialect", "leveldb", path_str(&path)]);
            assert!(
                stderr(&output).contains(&hint),
                "{command}: {}",
                stderr(&output)
            );
            let output = run(&[command, path_str(&path)]);
            assert!(!stderr(&output).contains("hint:"), "{command}");
        }
    }
    // A LevelDB log gets none.
    let leveldb = vector("default/000004.log");
    let dumped = run(&["dump", "--dialect", "leveldb", path_str(&leveldb)]);
    assert_eq!((code(&dumped), stderr(&dumped)), (0, String::new()));
}

#[test]
fn a_type_9_report_in_a_leveldb_read_gets_the_hint() {
    // A type-9 record after the first block: the start looks like LevelDB's.
    let mut bytes = bytes::BytesMut::new();
    let mut encoder = walcodec::LogEncoder::new();
    encoder.encode_record(&vec![1; BLOCK_SIZE - 7], &mut bytes);
    let mut record = walcodec::fragment::legacy_header(9, &[7, 0, 0, 0]).to_vec();
    record.extend_from_slice(&[7, 0, 0, 0]);
    bytes.extend_from_slice(&record);
    let dumped = run_with_stdin(&["dump", "--dialect", "leveldb", "-"], &bytes);
    let errors = stderr(&dumped);
    assert!(errors.contains("unknown record type 9"), "{errors}");
    assert!(
        errors.contains("hint: this looks like a RocksDB WAL (it holds RocksDB's compression-type record (type 9)); read it with --dialect rocksdb"),
        "{errors}"
    );
}

#[test]
fn verify_and_stat_describe_a_rocksdb_wal() {
    let log = vector("recycle/000014.log");
    let verify = run(&["verify", path_str(&log)]);
    assert_eq!(code(&verify), 0, "{}", stdout(&verify));
    let text = stdout(&verify);
    assert!(text.contains("records: 16 ("), "{text}");
    assert!(text.contains("dialect: rocksdb, log 14 (from the file name)\n"));
    assert!(text.contains("headers: 0 of 7 bytes, 17 of 11 bytes (recyclable)\n"));
    assert!(text.contains(
        "old fragments: 3 (2517 bytes) from offset 101014: log 14 ends there, old log 10 follows\n"
    ));
    assert!(text.ends_with("result: clean\n"));

    let stat = run(&["stat", "--format", "json", path_str(&log)]);
    assert_eq!(code(&stat), 0);
    let stat: serde_json::Value = serde_json::from_slice(&stat.stdout).unwrap();
    assert_eq!(stat["records"], 16);
    assert_eq!(stat["fragments"]["full"], 15);
    assert_eq!(stat["fragments"]["first"], 1);
    assert_eq!(stat["fragments"]["last"], 1);
    assert_eq!(stat["header_bytes"], 17 * 11);
    let wal = &stat["wal"];
    assert_eq!(wal["dialect"], "rocksdb");
    assert_eq!(wal["log_number"], 14);
    assert_eq!(wal["recyclable_headers"], 17);
    assert_eq!(wal["compression"], "none");
    assert_eq!(wal["old_fragments"], 3);
    assert_eq!(wal["live_end"], 101014);
    assert_eq!(wal["old_log_number"], 10);

    let zstd = run(&["stat", path_str(&vector("recycle-zstd/000010.log"))]);
    let text = stdout(&zstd);
    assert!(
        text.contains("compression: zstd (type-9 record at offset 0)\n"),
        "{text}"
    );
    assert!(
        text.contains("headers: 1 of 7 bytes, 8 of 11 bytes (recyclable)\n"),
        "{text}"
    );
    // A LevelDB log's summary is unchanged: no RocksDB lines, no wal object.
    let leveldb = run(&[
        "verify",
        "--format",
        "json",
        path_str(&vector("default/000004.log")),
    ]);
    let leveldb: serde_json::Value = serde_json::from_slice(&leveldb.stdout).unwrap();
    assert!(leveldb.get("wal").is_none());
}

#[test]
fn read_as_leveldb_a_recycled_wal_is_damage() {
    let log = vector("recycle/000012.log");
    let verify = run(&["verify", "--dialect", "leveldb", path_str(&log)]);
    assert_eq!(code(&verify), 1);
    assert!(stdout(&verify).contains("records: 0 "));
    let verify = run(&["verify", "--dialect", "rocksdb", path_str(&log)]);
    assert_eq!(code(&verify), 0);
}

#[test]
fn write_and_repair_refuse_a_rocksdb_wal() {
    let (_dir, log) = copy_as("recycle/000012.log", "000012.log");
    let before = fs::read(&log).unwrap();
    let repair = run(&["repair", path_str(&log)]);
    assert_eq!(code(&repair), 2);
    assert!(stderr(&repair).contains("a RocksDB WAL (rocksdb, log 12 (from the file name)): repair truncates LevelDB-format logs only"), "{}", stderr(&repair));
    let write = run_with_stdin(&["write", "--append", path_str(&log)], b"x\n");
    assert_eq!(code(&write), 2, "{}", stderr(&write));
    assert_eq!(fs::read(&log).unwrap(), before);
    // --salvage copies its records into a LevelDB-format log.
    let out = log.with_file_name("salvaged.log");
    let salvage = run(&["repair", "--salvage", path_str(&out), path_str(&log)]);
    assert_eq!(code(&salvage), 0, "{}", stderr(&salvage));
    let copied = run(&["cat", "--to", "hex", path_str(&out)]);
    assert_eq!(
        stdout(&copied)
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>(),
        expected_hex(&vector("recycle/000012.log"))
    );
}

#[cfg(feature = "zstd")]
#[test]
fn a_compressed_wal_read_from_a_later_block_is_inflated() {
    let log = vector("zstd/000008.log");
    let whole = stdout(&run(&["dump", "--format", "hex", path_str(&log)]));
    let from = run(&[
        "dump",
        "--format",
        "hex",
        "--start",
        "32768",
        path_str(&log),
    ]);
    assert_eq!(code(&from), 0, "{}", stderr(&from));
    let later: Vec<&str> = whole
        .lines()
        .filter(|line| line.split(' ').next().unwrap().parse::<u64>().unwrap() >= 32768)
        .collect();
    assert!(!later.is_empty());
    assert_eq!(stdout(&from).lines().collect::<Vec<_>>(), later);
}

/// A recycled WAL a crash left: its own records, then what is left of the file's
/// earlier use from the middle of a fragment. `verify` names those bytes for what
/// they are (clean: no record lost); a write of its own cut short stays a torn tail.
#[test]
fn verify_names_a_recycled_files_earlier_use_after_its_last_record() {
    use bytes::BytesMut;
    use walcodec::LogEncoder;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000002.log");
    let mut earlier = BytesMut::new();
    let mut old = LogEncoder::builder().recyclable(1).build();
    for i in 0..40 {
        old.encode_record(&vec![b'o'; 300 + i], &mut earlier);
    }
    let mut log = BytesMut::new();
    let mut new = LogEncoder::builder().recyclable(2).build();
    for i in 0..7 {
        new.encode_record(&vec![b'n'; 250 + i], &mut log);
    }
    let live = log.len();
    // The new log's end falls inside one of the earlier log's fragments.
    let mut file = log.clone();
    file.extend_from_slice(&earlier[live..]);
    fs::write(&path, &file).unwrap();
    let verify = run(&["verify", "--dialect", "auto", path_str(&path)]);
    assert_eq!(code(&verify), 0, "{}", stdout(&verify));
    assert!(
        stdout(&verify).contains(&format!(
            "tail: earlier use after offset {live} ({} bytes left from the recycled file's earlier use",
            file.len() - live
        )),
        "{}",
        stdout(&verify)
    );
    let json = run(&[
        "verify",
        "--dialect",
        "auto",
        "--format",
        "json",
        path_str(&path),
    ]);
    assert!(
        stdout(&json).contains(r#""tail":"earlier_use""#),
        "{}",
        stdout(&json)
    );

    // A record of log 2 cut short over the same bytes: RocksDB's reader ends the
    // log at its bad checksum; verify says so rather than call the bytes zeros.
    let mut torn = log.clone();
    new.encode_record(&[b'n'; 900], &mut torn);
    let mut file = torn[..live + 400].to_vec();
    file.extend_from_slice(&earlier[live + 400..]);
    fs::write(&path, &file).unwrap();
    let verify = run(&["verify", "--dialect", "auto", path_str(&path)]);
    assert_eq!(code(&verify), 0, "{}", stdout(&verify));
    assert!(
        stdout(&verify).contains(&format!("tail: recycled end after offset {live}")),
        "{}",
        stdout(&verify)
    );
}
