//! The `walcodec` binary, run as a user would: on the shared vectors (logs written by
//! golang/leveldb and LevelDB itself) and on damaged copies of them.
//!
//! Needs the `cli` feature: `cargo test --release --features cli`.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use bytes::BytesMut;
use walcodec::{LogEncoder, BLOCK_SIZE};

use crate::cli_support;

use cli_support::{code, path_str, run, run_with_stdin, stderr, stdout, BIN};

fn data(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(path)
}

fn writer_cases() -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = fs::read_dir(data("writers"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    cases.sort();
    assert_eq!(cases.len(), 21, "the shared vectors have 21 writer cases");
    cases
}

/// The records of an `expected.hex` file.
fn expected_records(case: &Path) -> Vec<Vec<u8>> {
    let text = fs::read_to_string(case.join("expected.hex")).unwrap();
    text.lines()
        .map(|line| {
            (0..line.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&line[i..i + 2], 16).unwrap())
                .collect()
        })
        .collect()
}

/// Where each record starts, from `chunks.txt`: its FULL or FIRST fragment.
fn record_offsets(case: &Path) -> Vec<u64> {
    fs::read_to_string(case.join("chunks.txt"))
        .unwrap()
        .lines()
        .filter(|line| line.contains("type=1(FULL)") || line.contains("type=2(FIRST)"))
        .map(|line| line.split(' ').next().unwrap().parse().unwrap())
        .collect()
}

fn encode(records: &[&[u8]]) -> Vec<u8> {
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    for record in records {
        encoder.encode_record(record, &mut log);
    }
    log.to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A scratch directory with a copy of a vector log in it.
fn scratch_copy(vector: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("copy.log");
    fs::copy(data(vector), &path).unwrap();
    (dir, path)
}

#[test]
fn dump_physical_is_chunks_txt_for_every_vector() {
    for case in writer_cases() {
        let output = run(&["dump", "--physical", path_str(&case.join("000001.log"))]);
        let expected = fs::read(case.join("chunks.txt")).unwrap();
        assert_eq!(
            stdout(&output),
            String::from_utf8(expected).unwrap(),
            "{}",
            case.display()
        );
        assert_eq!(code(&output), 0);
    }
}

#[test]
fn dump_of_a_known_log_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("golden.log");
    let write = run_with_stdin(&["write", path_str(&log)], b"foo\n\nbar\n");
    assert_eq!(code(&write), 0, "{}", stderr(&write));
    // The golden bytes of the format: "foo", "", "bar" from a fresh writer.
    assert_eq!(
        hex(&fs::read(&log).unwrap()),
        "dd5fb37a030001666f6f052b2843000001baeaec44030001626172"
    );
    let text = run(&["dump", path_str(&log)]);
    assert_eq!(stdout(&text), "0 3 foo\n10 0 \n17 3 bar\n");
    assert_eq!(code(&text), 0);
    let hex_dump = run(&["dump", "--format", "hex", path_str(&log)]);
    assert_eq!(stdout(&hex_dump), "0 3 666f6f\n10 0 \n17 3 626172\n");
    let json = run(&["dump", "--format", "json", path_str(&log)]);
    assert_eq!(
        stdout(&json),
        concat!(
            "{\"offset\":0,\"end\":10,\"len\":3,\"data\":\"666f6f\"}\n",
            "{\"offset\":10,\"end\":17,\"len\":0,\"data\":\"\"}\n",
            "{\"offset\":17,\"end\":27,\"len\":3,\"data\":\"626172\"}\n",
        )
    );
}

#[test]
fn dump_escapes_non_printable_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("bytes.log");
    fs::write(&log, encode(&[b"a\\b\x00\x7f\xff\t~"])).unwrap();
    let output = run(&["dump", path_str(&log)]);
    assert_eq!(stdout(&output), "0 8 a\\\\b\\x00\\x7f\\xff\\x09~\n");
}

#[test]
fn dump_lists_every_record_of_every_vector_with_its_offset() {
    for case in writer_cases() {
        let records = expected_records(&case);
        let offsets = record_offsets(&case);
        let expected: String = records
            .iter()
            .zip(&offsets)
            .map(|(record, offset)| format!("{offset} {} {}\n", record.len(), hex(record)))
            .collect();
        let output = run(&[
            "dump",
            "--format",
            "hex",
            path_str(&case.join("000001.log")),
        ]);
        assert_eq!(stdout(&output), expected, "{}", case.display());
        assert_eq!(code(&output), 0);
    }
}

#[test]
fn dump_start_resumes_at_a_checkpoint() {
    let log = data("leveldb-db/wal/000003.log");
    let all = stdout(&run(&["dump", "--format", "json", path_str(&log)]));
    let lines: Vec<&str> = all.lines().collect();
    assert_eq!(lines.len(), 219);
    // The checkpoint of record 100 is its end; --start there gives records 101...
    let end: u64 = lines[100]
        .split("\"end\":")
        .nth(1)
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let rest = stdout(&run(&[
        "dump",
        "--format",
        "json",
        "--start",
        &end.to_string(),
        path_str(&log),
    ]));
    assert_eq!(rest.lines().collect::<Vec<_>>(), lines[101..]);
}

#[test]
fn verify_a_clean_log() {
    let output = run(&["verify", path_str(&data("leveldb-db/wal/000003.log"))]);
    assert_eq!(
        stdout(&output),
        "records: 219 (1399127 bytes)\n\
         dropped: 0 bytes in 0 corruptions\n\
         zero fill: 0 bytes\n\
         tail: clean\n\
         result: clean\n"
    );
    assert_eq!(code(&output), 0);
    assert_eq!(stderr(&output), "");
}

#[test]
fn verify_reports_corruption_like_leveldb_and_exits_1() {
    // spec-abc: A (1000) at 0, B (97270) FIRST at 1007 / MIDDLE 32768 / LAST 65536,
    // C (8000) at 98304. A flipped byte in B's FIRST loses B and nothing else.
    let (_dir, log) = scratch_copy("writers/spec-abc/000001.log");
    let mut bytes = fs::read(&log).unwrap();
    bytes[2000] ^= 0xff;
    fs::write(&log, &bytes).unwrap();
    let output = run(&["verify", path_str(&log)]);
    assert_eq!(
        stdout(&output),
        "offset 1007: dropping 31761 bytes; checksum mismatch\n\
         offset 32768: dropping 32761 bytes; missing start of fragmented record\n\
         offset 65536: dropping 32755 bytes; missing start of fragmented record\n\
         records: 2 (9000 bytes)\n\
         dropped: 97277 bytes in 3 corruptions\n\
         zero fill: 0 bytes\n\
         tail: clean\n\
         result: corrupt\n"
    );
    assert_eq!(code(&output), 1);
}

#[test]
fn verify_a_torn_tail_exits_3() {
    let (_dir, log) = scratch_copy("writers/spec-abc/000001.log");
    let bytes = fs::read(&log).unwrap();
    // Cut C (FULL at 98304) short: the tail is torn, everything before is intact.
    fs::write(&log, &bytes[..100_000]).unwrap();
    let output = run(&["verify", path_str(&log)]);
    assert_eq!(
        stdout(&output),
        "records: 2 (98270 bytes)\n\
         dropped: 0 bytes in 0 corruptions\n\
         zero fill: 0 bytes\n\
         tail: torn after offset 98298 (1702 bytes)\n\
         result: torn tail\n"
    );
    assert_eq!(code(&output), 3);
}

#[test]
fn verify_flags_zero_fill_that_hides_data() {
    // A zero header in the middle of a block: LevelDB's reader skips the rest of the
    // block without a word, losing the record written after it.
    let mut log = encode(&[b"first"]);
    log.extend_from_slice(&[0u8; 7]);
    let mut encoder = LogEncoder::with_offset(log.len() as u64);
    let mut tail = BytesMut::new();
    encoder.encode_record(b"lost", &mut tail);
    log.extend_from_slice(&tail);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zeros.log");
    fs::write(&path, &log).unwrap();

    let dump = run(&["dump", path_str(&path)]);
    assert_eq!(stdout(&dump), "0 5 first\n");
    let output = run(&["verify", path_str(&path)]);
    assert_eq!(
        stdout(&output),
        "offset 12: dropping 18 bytes; zero header skips non-zero bytes\n\
         records: 1 (5 bytes)\n\
         dropped: 18 bytes in 1 corruptions\n\
         zero fill: 18 bytes\n\
         tail: clean\n\
         result: corrupt\n"
    );
    assert_eq!(code(&output), 1);
    let physical = run(&["dump", "--physical", path_str(&path)]);
    assert_eq!(
        stdout(&physical),
        "0 blk=0/0 type=1(FULL) len=5 crc=ok\nzero 12 18 nonzero\nsize 30\n"
    );
    assert_eq!(code(&physical), 1);
}

#[test]
fn verify_accepts_preallocated_zeros_at_the_end() {
    let mut log = encode(&[b"one", b"two"]);
    log.resize(3 * BLOCK_SIZE, 0);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("prealloc.log");
    fs::write(&path, &log).unwrap();
    let output = run(&["verify", path_str(&path)]);
    assert_eq!(code(&output), 0, "{}", stdout(&output));
    assert!(stdout(&output).contains("zero fill: 98284 bytes\n"));
}

#[test]
fn errors_are_one_line_with_exit_2() {
    let output = run(&["verify", "/nonexistent/x.log"]);
    assert_eq!(code(&output), 2);
    assert_eq!(
        stderr(&output),
        "walcodec: /nonexistent/x.log: No such file or directory\n"
    );
    assert_eq!(stdout(&output), "");
    let usage = run(&["dump", "--format", "yaml", "x.log"]);
    assert_eq!(code(&usage), 2);
    let missing = run(&["verify"]);
    assert_eq!(code(&missing), 2);
}

#[test]
fn help_documents_the_exit_status() {
    let output = run(&["--help"]);
    assert_eq!(code(&output), 0);
    let help = stdout(&output);
    for line in [
        "0  success",
        "1  the log is corrupt",
        "2  usage or I/O error",
        "3  the log is intact but its tail is torn",
    ] {
        assert!(help.contains(line), "{line:?} missing from\n{help}");
    }
    assert!(stdout(&run(&["verify", "--help"])).contains("3  the log is intact"));
}

#[test]
fn stat_of_the_format_documents_example() {
    let output = run(&["stat", path_str(&data("writers/spec-abc/000001.log"))]);
    let bar = "#".repeat(40);
    let expected = format!(
        "file: {}\n\
         bytes: 106311\n\
         blocks: 4 (last block 8007 bytes)\n\
         records: 3 (106270 payload bytes)\n\
         fragments: 5 (FULL 2, FIRST 1, MIDDLE 1, LAST 1, other 0)\n\
         header bytes: 35\n\
         trailer bytes: 6\n\
         zero fill bytes: 0\n\
         damaged bytes: 0 (bad checksum 0, bad length 0, skipped 0)\n\
         torn tail bytes: 0\n\
         corruptions: 0 (0 bytes dropped)\n\
         tail: clean\n\
         result: clean\n\
         record sizes:\n",
        data("writers/spec-abc/000001.log").display()
    ) + &[
        "      512..=1023 1 BAR",
        "     1024..=2047 0",
        "     2048..=4095 0",
        "     4096..=8191 1 BAR",
        "    8192..=16383 0",
        "   16384..=32767 0",
        "   32768..=65535 0",
        "  65536..=131071 1 BAR",
    ]
    .map(|line| line.replace("BAR", &bar) + "\n")
    .concat();
    assert_eq!(stdout(&output), expected);
    assert_eq!(code(&output), 0);
}
#[test]
fn stat_counts_every_vector_consistently() {
    for case in writer_cases() {
        let output = stdout(&run(&["stat", path_str(&case.join("000001.log"))]));
        let field = |name: &str| -> String {
            output
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .unwrap_or_else(|| panic!("{name} missing"))
                .to_string()
        };
        let records = expected_records(&case);
        let payload: usize = records.iter().map(Vec::len).sum();
        assert_eq!(
            field("records: "),
            format!("{} ({payload} payload bytes)", records.len()),
            "{}",
            case.display()
        );
        let chunks = fs::read_to_string(case.join("chunks.txt")).unwrap();
        let fragments = chunks.lines().filter(|l| l.contains(" blk=")).count();
        let pad: u64 = chunks
            .lines()
            .filter_map(|l| l.strip_prefix("pad "))
            .map(|l| l.split(' ').nth(1).unwrap().parse::<u64>().unwrap())
            .sum();
        assert!(field("fragments: ").starts_with(&format!("{fragments} (")));
        assert_eq!(field("header bytes: "), (fragments * 7).to_string());
        assert_eq!(field("trailer bytes: "), pad.to_string());
    }
}

#[test]
fn repair_truncates_a_torn_tail_then_verify_is_clean() {
    let (_dir, log) = scratch_copy("leveldb-db/wal/000003.log");
    let bytes = fs::read(&log).unwrap();
    // Cut the log in the middle of its last block: the last record is torn.
    let cut = bytes.len() - 5000;
    fs::write(&log, &bytes[..cut]).unwrap();
    assert_eq!(code(&run(&["verify", path_str(&log)])), 3);

    let dry = run(&["repair", "--dry-run", path_str(&log)]);
    assert_eq!(code(&dry), 3);
    assert!(
        stdout(&dry).contains(": would truncate "),
        "{}",
        stdout(&dry)
    );
    assert_eq!(fs::metadata(&log).unwrap().len(), cut as u64);

    let before = stdout(&run(&["dump", "--format", "hex", path_str(&log)]));
    let last_end: u64 = {
        let json = stdout(&run(&["dump", "--format", "json", path_str(&log)]));
        let last = json.lines().last().unwrap().to_string();
        last.split("\"end\":")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let repair = run(&["repair", path_str(&log)]);
    assert_eq!(code(&repair), 0, "{}", stderr(&repair));
    assert_eq!(
        stdout(&repair),
        format!(
            "{}: truncated {} bytes after offset {last_end}, the end of its last complete record\n",
            log.display(),
            cut as u64 - last_end
        )
    );
    assert_eq!(fs::metadata(&log).unwrap().len(), last_end);
    let verify = run(&["verify", path_str(&log)]);
    assert_eq!(code(&verify), 0, "{}", stdout(&verify));
    // Nothing readable was lost.
    assert_eq!(
        stdout(&run(&["dump", "--format", "hex", path_str(&log)])),
        before
    );
    // A second repair has nothing to do.
    let again = run(&["repair", path_str(&log)]);
    assert_eq!(code(&again), 0);
    assert_eq!(
        stdout(&again),
        format!(
            "{}: clean ({last_end} bytes), nothing to truncate\n",
            log.display()
        )
    );
}

#[test]
fn repair_refuses_a_log_damaged_before_its_tail() {
    let (_dir, log) = scratch_copy("writers/spec-abc/000001.log");
    let mut bytes = fs::read(&log).unwrap();
    bytes[500] ^= 1;
    fs::write(&log, &bytes).unwrap();
    let output = run(&["repair", path_str(&log)]);
    assert_eq!(code(&output), 1);
    assert!(stderr(&output).contains("--salvage"), "{}", stderr(&output));
    assert_eq!(fs::read(&log).unwrap(), bytes, "the log is left as it was");
}

#[test]
fn salvage_copies_every_readable_record_into_a_clean_log() {
    let (dir, log) = scratch_copy("writers/many-small-10000/000001.log");
    let mut bytes = fs::read(&log).unwrap();
    bytes[40_000] ^= 0x55; // damage in block 1
    bytes.truncate(bytes.len() - 3); // and a torn tail
    fs::write(&log, &bytes).unwrap();
    let readable = stdout(&run(&["cat", "--to", "hex", path_str(&log)]));
    let kept = readable.lines().count();
    assert!(kept > 9000 && kept < 9999, "{kept}");

    let out = dir.path().join("salvaged.log");
    let output = run(&["repair", path_str(&log), "--salvage", path_str(&out)]);
    // Bytes were dropped: 1, as the README's exit status says.
    assert_eq!(code(&output), 1, "{}", stderr(&output));
    assert!(
        stdout(&output).starts_with(&format!("{}: salvaged {kept} records (", out.display())),
        "{}",
        stdout(&output)
    );
    assert!(stderr(&output).contains("checksum mismatch"));
    assert_eq!(code(&run(&["verify", path_str(&out)])), 0);
    assert_eq!(
        stdout(&run(&["cat", "--to", "hex", path_str(&out)])),
        readable
    );

    // OUT is never overwritten.
    let again = run(&["repair", path_str(&log), "--salvage", path_str(&out)]);
    assert_eq!(code(&again), 2);
    assert!(stderr(&again).contains("already exists"));
}

#[test]
fn cat_hex_is_expected_hex_and_write_hex_rebuilds_the_log_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let mut logs: Vec<PathBuf> = writer_cases()
        .iter()
        .map(|c| c.join("000001.log"))
        .collect();
    logs.push(data("leveldb-db/wal/000003.log"));
    logs.push(data("leveldb-db/manifest/MANIFEST-000002"));
    for (i, log) in logs.iter().enumerate() {
        let cat = run(&["cat", "--to", "hex", path_str(log)]);
        assert_eq!(code(&cat), 0);
        let expected = fs::read(log.parent().unwrap().join("expected.hex")).unwrap();
        assert_eq!(cat.stdout, expected, "{}", log.display());
        let rebuilt = dir.path().join(format!("{i}.log"));
        let write = run_with_stdin(&["write", "--from", "hex", path_str(&rebuilt)], &cat.stdout);
        assert_eq!(code(&write), 0, "{}", stderr(&write));
        assert_eq!(
            fs::read(&rebuilt).unwrap(),
            fs::read(log).unwrap(),
            "{}",
            log.display()
        );
    }
}

#[test]
fn cat_lines_and_write_lines_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("lines.log");
    let mut input = String::new();
    for i in 0..200 {
        input.push_str(&"x".repeat(i * 7919 % 70_000));
        input.push_str(&format!(" line {i}\n"));
    }
    input.push('\n'); // an empty record
    let write = run_with_stdin(&["write", path_str(&log)], input.as_bytes());
    assert_eq!(code(&write), 0, "{}", stderr(&write));
    let cat = run(&["cat", "--to", "lines", path_str(&log)]);
    assert_eq!(code(&cat), 0);
    assert_eq!(stdout(&cat), input);
    // raw is the payloads back to back.
    let raw = run(&["cat", path_str(&log)]);
    assert_eq!(raw.stdout, input.replace('\n', "").into_bytes());
}

#[test]
fn cat_lines_refuses_a_record_with_a_newline() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("nl.log");
    fs::write(&log, encode(&[b"ok", b"two\nlines"])).unwrap();
    let output = run(&["cat", "--to", "lines", path_str(&log)]);
    assert_eq!(code(&output), 2);
    assert_eq!(stdout(&output), "ok\n");
    assert_eq!(
        stderr(&output),
        format!(
            "walcodec: {}: the record at offset 9 holds a newline: use --to hex\n",
            log.display()
        )
    );
}

#[test]
fn cat_reports_damage_on_stderr_and_exits_1() {
    let (_dir, log) = scratch_copy("writers/spec-abc/000001.log");
    let mut bytes = fs::read(&log).unwrap();
    bytes[40_000] ^= 1; // in B's MIDDLE
    fs::write(&log, &bytes).unwrap();
    let output = run(&["cat", "--to", "hex", path_str(&log)]);
    assert_eq!(code(&output), 1);
    let records = expected_records(&data("writers/spec-abc"));
    assert_eq!(
        stdout(&output),
        format!("{}\n{}\n", hex(&records[0]), hex(&records[2]))
    );
    let name = log.display();
    assert_eq!(
        stderr(&output),
        format!(
            "walcodec: {name}: offset 32768: dropping 32768 bytes; checksum mismatch\n\
             walcodec: {name}: offset 1007: dropping 31754 bytes; error in middle of record\n\
             walcodec: {name}: offset 65536: dropping 32755 bytes; missing start of fragmented record\n"
        )
    );
    // Stopping at the first damage instead: only A, and the error.
    let strict = run(&[
        "cat",
        "--recovery",
        "tolerate-tail",
        "--to",
        "hex",
        path_str(&log),
    ]);
    assert_eq!(code(&strict), 1);
    assert_eq!(stdout(&strict), format!("{}\n", hex(&records[0])));
    assert_eq!(
        stderr(&strict),
        format!("walcodec: {name}: corrupt log at offset 32768: checksum mismatch (32768 bytes)\n")
    );
}

#[test]
fn write_refuses_to_overwrite_and_appends_only_to_a_clean_tail() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("app.log");
    // A first record that leaves exactly 7 bytes in block 0, so the appended record
    // starts with a zero-length FIRST: the append must resume the block offset.
    let first = "a".repeat(BLOCK_SIZE - 14);
    let write = run_with_stdin(&["write", path_str(&log)], format!("{first}\n").as_bytes());
    assert_eq!(code(&write), 0);

    let refused = run_with_stdin(&["write", path_str(&log)], b"other\n");
    assert_eq!(code(&refused), 2);
    assert!(stderr(&refused).contains("already exists"));
    assert_eq!(fs::metadata(&log).unwrap().len(), (BLOCK_SIZE - 7) as u64);

    let append = run_with_stdin(&["write", "--append", path_str(&log)], b"second\nthird\n");
    assert_eq!(code(&append), 0, "{}", stderr(&append));
    let records: [&[u8]; 3] = [first.as_bytes(), b"second", b"third"];
    assert_eq!(fs::read(&log).unwrap(), encode(&records));

    // A torn tail must be repaired before appending.
    let bytes = fs::read(&log).unwrap();
    fs::write(&log, &bytes[..bytes.len() - 2]).unwrap();
    let torn = run_with_stdin(&["write", "--append", path_str(&log)], b"fourth\n");
    assert_eq!(code(&torn), 3);
    assert!(
        stderr(&torn).contains("walcodec repair"),
        "{}",
        stderr(&torn)
    );
    assert_eq!(fs::read(&log).unwrap(), &bytes[..bytes.len() - 2]);
}

#[test]
fn write_leaves_nothing_behind_on_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("bad.log");
    let output = run_with_stdin(&["write", "--from", "hex", path_str(&log)], b"00ff\nzz\n");
    assert_eq!(code(&output), 2);
    assert_eq!(
        stderr(&output),
        "walcodec: stdin line 2: not a line of hex\n"
    );
    assert!(!log.exists());

    fs::write(&log, encode(&[b"kept"])).unwrap();
    let output = run_with_stdin(
        &["write", "--append", "--from", "hex", path_str(&log)],
        b"6f6b\n123\n",
    );
    assert_eq!(code(&output), 2);
    assert_eq!(fs::read(&log).unwrap(), encode(&[b"kept"]));

    let too_big = run_with_stdin(
        &[
            "write",
            "--max-record-bytes",
            "4",
            path_str(&dir.path().join("big.log")),
        ],
        b"1234\n12345\n",
    );
    assert_eq!(code(&too_big), 2);
    assert_eq!(
        stderr(&too_big),
        "walcodec: stdin line 2: record larger than 4 bytes (see --max-record-bytes)\n"
    );
}

#[test]
fn tail_prints_the_last_records() {
    let log = data("writers/small-mixed/000001.log");
    let all = stdout(&run(&["dump", path_str(&log)]));
    let last: Vec<&str> = all
        .lines()
        .rev()
        .take(3)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let output = run(&["tail", "-n", "3", path_str(&log)]);
    assert_eq!(code(&output), 0);
    assert_eq!(stdout(&output).lines().collect::<Vec<_>>(), last);
    assert_eq!(stdout(&run(&["tail", "-n", "0", path_str(&log)])), "");
}

/// Reads lines from a child's stdout on a thread, so the test can wait with a deadline.
fn line_reader(stdout: std::process::ChildStdout) -> std::sync::mpsc::Receiver<String> {
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if send.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    receive
}

/// `walcodec tail -f -n N --format hex --poll-interval MS LOG`, its stdout read line by
/// line (stderr piped, for the test to read at the end).
fn tail_follow(
    log: &Path,
    records: &str,
    poll_ms: &str,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let mut child = Command::new(BIN)
        .args(["tail", "-f", "-n", records, "--format", "hex"])
        .args(["--poll-interval", poll_ms])
        .arg(log)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = line_reader(child.stdout.take().unwrap());
    (child, lines)
}

#[test]
fn tail_follow_prints_records_as_they_are_completed() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("live.log");
    let mut encoder = LogEncoder::new();
    let mut bytes = BytesMut::new();
    encoder.encode_record(b"old-1", &mut bytes);
    encoder.encode_record(b"old-2", &mut bytes);
    // Half of the next record is already there when tail starts.
    let mut next = BytesMut::new();
    let big = vec![b'z'; 40_000];
    encoder.encode_record(&big, &mut next);
    let half = next.len() / 2;
    bytes.extend_from_slice(&next[..half]);
    fs::write(&log, &bytes).unwrap();

    let (mut child, lines) = tail_follow(&log, "1", "5");
    let deadline = Duration::from_secs(20);
    assert_eq!(lines.recv_timeout(deadline).unwrap(), "12 5 6f6c642d32");

    let mut file = fs::OpenOptions::new().append(true).open(&log).unwrap();
    file.write_all(&next[half..]).unwrap();
    let expected_big = format!("24 40000 {}", hex(&big));
    assert_eq!(lines.recv_timeout(deadline).unwrap(), expected_big);
    // A record written one byte at a time.
    let mut last = BytesMut::new();
    encoder.encode_record(b"new", &mut last);
    for byte in last.iter() {
        file.write_all(&[*byte]).unwrap();
        file.flush().unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    // Printed at all: `recv_timeout` fails the test if it is not within the deadline.
    let line = lines.recv_timeout(deadline).unwrap();
    assert_eq!(line, format!("{} 3 6e6577", encoder.offset() - 10));
    child.kill().unwrap();
    child.wait().unwrap();
}

/// `tail -f` on a file that another process preallocates and fills in place: the
/// records written into the zeros are printed once each, where they were written.
#[test]
fn tail_follow_reads_a_preallocated_file_as_it_is_filled() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("000001.log");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let writer = runtime.block_on(async {
        let writer = walcodec::AsyncLogWriter::options()
            .preallocate(1 << 20)
            .create(&log)
            .await
            .unwrap();
        writer.append(b"before").await.unwrap();
        writer
    });
    let (mut child, lines) = tail_follow(&log, "5", "1");
    let deadline = Duration::from_secs(20);
    assert_eq!(
        lines.recv_timeout(deadline).unwrap(),
        format!("0 6 {}", hex(b"before"))
    );
    for i in 0..300u32 {
        let record = vec![i as u8; 10 + (i as usize * 331) % 50_000];
        let at = runtime.block_on(writer.append(&record)).unwrap();
        let line = lines.recv_timeout(deadline).unwrap();
        assert_eq!(
            line,
            format!("{} {} {}", at.start, record.len(), hex(&record))
        );
    }
    assert!(lines.recv_timeout(Duration::from_millis(100)).is_err());
    child.kill().unwrap();
    let output = child.wait_with_output().unwrap();
    // A record the follower met half-written is no damage to report.
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
    runtime.block_on(writer.close()).unwrap();
}

/// `tail -f` reads the records it prints first as the follower it then is: a page
/// the writer had not reached when it was read (zeros in the middle of a record,
/// data after them) is waited for, not reported as damage, and no record after it
/// is printed before the record it hides.
#[test]
fn tail_follow_reads_its_first_records_live() {
    use std::os::unix::fs::FileExt;
    const BLOCK: usize = 32_768;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let mut encoder = LogEncoder::new();
    let mut log = BytesMut::new();
    let records: Vec<Vec<u8>> = [100usize, 70_000, 10]
        .iter()
        .enumerate()
        .map(|(i, &size)| vec![i as u8; size])
        .collect();
    let positions: Vec<_> = records
        .iter()
        .map(|record| encoder.encode_record(record, &mut log))
        .collect();
    // Record 1 crosses block 1, whose first page the writer has not copied yet.
    let stale = BLOCK..BLOCK + 4096;
    let mut bytes = log.to_vec();
    bytes[stale.clone()].fill(0);
    bytes.resize(4 * BLOCK, 0);
    fs::write(&path, &bytes).unwrap();

    let (mut child, lines) = tail_follow(&path, "5", "1");
    let deadline = Duration::from_secs(20);
    let expect_record = |i: usize| {
        let line = lines.recv_timeout(deadline).unwrap();
        let (start, len) = (positions[i].start, records[i].len());
        // The offset and length first, so that a wrong record fails readably.
        let head: Vec<&str> = line.split(' ').take(2).collect();
        assert_eq!(head, [start.to_string(), len.to_string()]);
        let whole = format!("{start} {len} {}", hex(&records[i]));
        assert!(line == whole, "record {i}'s bytes");
    };
    // Printed once the follower has read to the zeros.
    expect_record(0);
    let out = fs::OpenOptions::new().write(true).open(&path).unwrap();
    out.write_all_at(&log[stale.clone()], stale.start as u64)
        .unwrap();
    expect_record(1);
    expect_record(2);
    child.kill().unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
}

/// `walcodec dump ... | head`: every printing command, on one thread and split
/// across threads (which write from another place), ends with status 0 and says
/// nothing when its reader goes away.
#[test]
fn a_closed_stdout_ends_quietly() {
    let dumps: [&[&str]; 2] = [&["dump", "--format", "hex"], &["dump", "--physical"]];
    // On one thread, and split: two threads, each reading a range of 32 KiB.
    let jobs: [&[&str]; 2] = [&["--jobs", "1"], &["--jobs", "2", "--split-bytes", "32768"]];
    let commands = dumps
        .iter()
        .flat_map(|dump| jobs.iter().map(move |jobs| [*dump, *jobs].concat()))
        .chain([vec!["cat", "--to", "hex"]]);
    for args in commands {
        let mut child = Command::new(BIN)
            .args(&args)
            .arg(data("writers/many-small-10000/000001.log"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut first = [0u8; 16];
        stdout.read_exact(&mut first).unwrap();
        drop(stdout);
        let output = child.wait_with_output().unwrap();
        let ended = (code(&output), stderr(&output));
        assert_eq!(ended, (0, String::new()), "{args:?}");
    }
}

#[test]
fn record_size_is_bounded_and_the_bound_can_be_raised() {
    let log = data("writers/single-97270/000001.log");
    let bounded = run(&["verify", "--max-record-bytes", "65536", path_str(&log)]);
    assert_eq!(code(&bounded), 1);
    assert!(stdout(&bounded).starts_with("offset 0: dropping 97270 bytes; record too large\n"));
    let raised = run(&[
        "--max-record-bytes",
        "97270",
        "dump",
        "--format",
        "hex",
        path_str(&log),
    ]);
    assert_eq!(code(&raised), 0);
    assert!(stdout(&raised).starts_with("0 97270 "));
}

#[test]
fn cat_to_recordio_and_write_from_recordio_round_trip_every_vector() {
    let dir = tempfile::tempdir().unwrap();
    let golden = dir.path().join("golden.log");
    fs::write(&golden, encode(&[b"foo", b"", b"bar"])).unwrap();
    let framed = run(&["cat", "--to", "recordio", path_str(&golden)]);
    assert_eq!(code(&framed), 0);
    assert_eq!(framed.stdout, b"3\nfoo0\n3\nbar");

    let mut logs: Vec<PathBuf> = writer_cases()
        .iter()
        .map(|c| c.join("000001.log"))
        .collect();
    logs.push(data("leveldb-db/wal/000003.log"));
    for (i, log) in logs.iter().enumerate() {
        let framed = run(&["cat", "--to", "recordio", path_str(log)]);
        assert_eq!(code(&framed), 0);
        let rebuilt = dir.path().join(format!("{i}.log"));
        let write = run_with_stdin(
            &["write", "--from", "recordio", path_str(&rebuilt)],
            &framed.stdout,
        );
        assert_eq!(code(&write), 0, "{}", stderr(&write));
        assert_eq!(
            fs::read(&rebuilt).unwrap(),
            fs::read(log).unwrap(),
            "{}",
            log.display()
        );
    }
}

#[test]
fn write_from_recordio_rejects_a_cut_stream_and_takes_crlf_when_lenient() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cut.log");
    let cut = run_with_stdin(
        &["write", "--from", "recordio", path_str(&log)],
        b"3\nfoo5\nab",
    );
    assert_eq!(code(&cut), 2);
    assert!(
        stderr(&cut).starts_with("walcodec: stdin: unexpected eof in record at offset 5"),
        "{}",
        stderr(&cut)
    );
    assert!(!log.exists(), "nothing is left behind");

    let crlf = b"3\r\nfoo\r\n\r\n2\r\nhi";
    let strict = run_with_stdin(&["write", "--from", "recordio", path_str(&log)], crlf);
    assert_eq!(code(&strict), 2);
    let lenient = run_with_stdin(
        &["write", "--from", "recordio", "--lenient", path_str(&log)],
        crlf,
    );
    assert_eq!(code(&lenient), 0, "{}", stderr(&lenient));
    assert_eq!(fs::read(&log).unwrap(), encode(&[b"foo", b"hi"]));
}

#[test]
fn zeros_after_a_first_fragment_are_a_torn_tail_that_repair_cuts() {
    // A power cut in a preallocated file: the size reached the disk, the data of the
    // record's later blocks did not.
    let records: [&[u8]; 2] = [&[b'a'; 100], &[b'b'; BLOCK_SIZE + 10]];
    let mut log = encode(&records);
    log.truncate(BLOCK_SIZE);
    log.resize(BLOCK_SIZE + 100, 0);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("power-cut.log");
    fs::write(&path, &log).unwrap();

    let verify = run(&["verify", path_str(&path)]);
    assert_eq!(
        stdout(&verify),
        "records: 1 (100 bytes)\n\
         dropped: 0 bytes in 0 corruptions\n\
         zero fill: 100 bytes\n\
         tail: torn after offset 107 (32761 bytes)\n\
         result: torn tail\n"
    );
    assert_eq!(code(&verify), 3);
    let append = run_with_stdin(&["write", "--append", path_str(&path)], b"more\n");
    assert_eq!(code(&append), 3);
    let repair = run(&["repair", path_str(&path)]);
    assert_eq!(code(&repair), 0, "{}", stderr(&repair));
    assert_eq!(fs::read(&path).unwrap(), encode(&records[..1]));
    assert_eq!(code(&run(&["verify", path_str(&path)])), 0);
}

fn json(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(output)))
}

#[test]
fn verify_format_json_is_one_object_that_agrees_with_the_text() {
    let (_dir, log) = scratch_copy("writers/spec-abc/000001.log");
    let name = path_str(&log);
    let clean = run(&["verify", "--format", "json", name]);
    assert_eq!(code(&clean), 0);
    assert_eq!(
        stdout(&clean),
        format!(
            "{{\"file\":{},\"bytes\":106311,\"records\":3,\"record_bytes\":106270,\
             \"corruptions\":0,\"dropped_bytes\":0,\"zero_fill_bytes\":0,\"tail\":\"clean\",\
             \"valid_len\":106311,\"tail_bytes\":0,\"complete\":true,\"live\":false,\
             \"notes\":[],\"result\":\"clean\",\"exit_code\":0}}\n",
            serde_json::Value::from(name)
        )
    );

    // Damage: findings on stderr, as LevelDB logs them; the counts on stdout.
    let mut bytes = fs::read(&log).unwrap();
    bytes[2000] ^= 0xff;
    fs::write(&log, &bytes).unwrap();
    let corrupt = run(&["verify", "--format", "json", name]);
    assert_eq!(code(&corrupt), 1);
    let summary = json(&corrupt);
    assert_eq!(summary["records"], 2);
    assert_eq!(summary["corruptions"], 3);
    assert_eq!(summary["dropped_bytes"], 97277);
    assert_eq!(summary["result"], "corrupt");
    assert_eq!(summary["exit_code"], 1);
    assert_eq!(
        stderr(&corrupt),
        format!(
            "walcodec: {name}: offset 1007: dropping 31761 bytes; checksum mismatch\n\
             walcodec: {name}: offset 32768: dropping 32761 bytes; missing start of fragmented record\n\
             walcodec: {name}: offset 65536: dropping 32755 bytes; missing start of fragmented record\n"
        )
    );

    fs::write(
        &log,
        &fs::read(data("writers/spec-abc/000001.log")).unwrap()[..100_000],
    )
    .unwrap();
    let torn = run(&["verify", "--format", "json", name]);
    assert_eq!(code(&torn), 3);
    let summary = json(&torn);
    assert_eq!(summary["tail"], "torn");
    assert_eq!(summary["valid_len"], 98298);
    assert_eq!(summary["tail_bytes"], 1702);
    assert_eq!(summary["result"], "torn_tail");
    assert_eq!(summary["exit_code"], 3);

    // A name that needs escaping stays valid JSON.
    let dir = tempfile::tempdir().unwrap();
    let odd = dir.path().join("a \"quoted\"\\name\t.log");
    fs::copy(data("writers/spec-abc/000001.log"), &odd).unwrap();
    assert_eq!(
        json(&run(&["verify", "--format", "json", path_str(&odd)]))["file"],
        path_str(&odd)
    );
}

#[test]
fn stat_format_json_holds_every_count_of_the_text() {
    for case in writer_cases() {
        let log = case.join("000001.log");
        let text = run(&["stat", path_str(&log)]);
        let object = run(&["stat", "--format", "json", path_str(&log)]);
        assert_eq!(code(&object), code(&text), "{}", case.display());
        let summary = json(&object);
        let text = stdout(&text);
        let field = |name: &str| -> String {
            text.lines()
                .find_map(|line| line.strip_prefix(name))
                .unwrap_or_else(|| panic!("{name} missing"))
                .to_string()
        };
        let context = case.display().to_string();
        assert_eq!(field("bytes: "), summary["bytes"].to_string(), "{context}");
        assert_eq!(
            field("records: "),
            format!(
                "{} ({} payload bytes)",
                summary["records"], summary["record_bytes"]
            ),
            "{context}"
        );
        let fragments = &summary["fragments"];
        assert_eq!(
            field("fragments: "),
            format!(
                "{} (FULL {}, FIRST {}, MIDDLE {}, LAST {}, other {})",
                fragments["total"],
                fragments["full"],
                fragments["first"],
                fragments["middle"],
                fragments["last"],
                fragments["other"]
            ),
            "{context}"
        );
        assert_eq!(field("header bytes: "), summary["header_bytes"].to_string());
        assert_eq!(
            field("trailer bytes: "),
            summary["trailer_bytes"].to_string()
        );
        assert_eq!(
            field("zero fill bytes: "),
            summary["zero_fill_bytes"].to_string()
        );
        assert_eq!(
            field("torn tail bytes: "),
            summary["torn_tail_bytes"].to_string()
        );
        let sizes = summary["record_sizes"].as_array().unwrap();
        let counted: u64 = sizes.iter().map(|row| row["count"].as_u64().unwrap()).sum();
        assert_eq!(counted, summary["records"].as_u64().unwrap(), "{context}");
        let result = field("result: ").replace(' ', "_");
        assert_eq!(summary["result"], result.as_str(), "{context}");
    }
}

#[test]
fn help_lists_the_json_fields() {
    let verify = stdout(&run(&["verify", "--help"]));
    for field in [
        "records",
        "dropped_bytes",
        "tail",
        "valid_len",
        "live",
        "exit_code",
    ] {
        assert!(
            verify.contains(&format!("  {field} ")),
            "{field} missing from\n{verify}"
        );
    }
    let stat = stdout(&run(&["stat", "--help"]));
    assert!(stat.contains("record_sizes [{min, max, count}]"), "{stat}");
}

#[test]
fn dump_max_bytes_shortens_payloads_and_says_what_was_left_out() {
    let log = data("writers/spec-abc/000001.log");
    let output = run(&[
        "dump",
        "--max-bytes",
        "3",
        "--format",
        "hex",
        path_str(&log),
    ]);
    assert_eq!(code(&output), 0);
    let full = stdout(&run(&["dump", "--format", "hex", path_str(&log)]));
    let expected: String = full
        .lines()
        .map(|line| {
            let mut fields = line.split(' ');
            let (offset, len, payload) = (
                fields.next().unwrap(),
                fields.next().unwrap(),
                fields.next().unwrap(),
            );
            let left_out = len.parse::<usize>().unwrap() - 3;
            format!("{offset} {len} {}…(+{left_out} bytes)\n", &payload[..6])
        })
        .collect();
    assert_eq!(stdout(&output), expected);
    let json_lines = stdout(&run(&[
        "dump",
        "--max-bytes",
        "2",
        "--format",
        "json",
        path_str(&log),
    ]));
    let first: serde_json::Value =
        serde_json::from_str(json_lines.lines().next().unwrap()).unwrap();
    assert_eq!(first["len"], 1000);
    assert_eq!(first["data"].as_str().unwrap().len(), 4);
    assert_eq!(first["omitted"], 998);
    assert_eq!(
        code(&run(&[
            "dump",
            "--max-bytes",
            "2",
            "--physical",
            path_str(&log)
        ])),
        2
    );
    let tail = run(&[
        "tail",
        "-n",
        "1",
        "--max-bytes",
        "3",
        "--format",
        "hex",
        path_str(&log),
    ]);
    assert_eq!(
        stdout(&tail),
        expected.lines().last().unwrap().to_string() + "\n"
    );
}

#[test]
fn salvage_exits_0_for_a_full_copy_and_3_without_a_torn_last_record() {
    let dir = tempfile::tempdir().unwrap();
    let clean = data("writers/spec-abc/000001.log");
    let out = dir.path().join("clean-copy.log");
    let output = run(&["repair", path_str(&clean), "--salvage", path_str(&out)]);
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert_eq!(fs::read(&out).unwrap(), fs::read(&clean).unwrap());

    let torn = dir.path().join("torn.log");
    fs::write(&torn, &fs::read(&clean).unwrap()[..100_000]).unwrap();
    let out = dir.path().join("torn-copy.log");
    let output = run(&["repair", path_str(&torn), "--salvage", path_str(&out)]);
    assert_eq!(code(&output), code(&run(&["verify", path_str(&torn)])));
    assert_eq!(code(&output), 3);

    // Salvage reads a pipe too.
    let out = dir.path().join("piped-copy.log");
    let output = run_with_stdin(
        &["repair", "-", "--salvage", path_str(&out)],
        &fs::read(&clean).unwrap(),
    );
    assert_eq!(code(&output), 0, "{}", stderr(&output));
    assert_eq!(fs::read(&out).unwrap(), fs::read(&clean).unwrap());
}

/// A log of 128 records, 16 to a block, so no record crosses a block edge.
fn block_aligned_log() -> Vec<u8> {
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    for i in 0..128u32 {
        let mut record = i.to_le_bytes().to_vec();
        record.resize(BLOCK_SIZE / 16 - 7, b'r');
        encoder.encode_record(&record, &mut log);
    }
    assert_eq!(log.len(), 8 * BLOCK_SIZE);
    log.to_vec()
}

/// A zeroed block with data after it is lost data, though LevelDB's reader skips it
/// silently: `verify` says so and exits 1; zeroed blocks up to the end are clean.
#[test]
fn verify_reports_a_zeroed_block_followed_by_data() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = block_aligned_log();
    log[3 * BLOCK_SIZE..4 * BLOCK_SIZE].fill(0);
    let path = dir.path().join("000001.log");
    fs::write(&path, &log).unwrap();
    let verify = run(&["verify", path_str(&path)]);
    assert_eq!(code(&verify), 1, "{}", stdout(&verify));
    assert!(
        stdout(&verify).contains("1 zeroed block(s) followed by data"),
        "{}",
        stdout(&verify)
    );
    assert!(stdout(&verify).contains("result: corrupt"));

    // The same zeros at the end: preallocated space, nothing lost.
    let mut log = block_aligned_log();
    log[7 * BLOCK_SIZE..].fill(0);
    fs::write(&path, &log).unwrap();
    let verify = run(&["verify", path_str(&path)]);
    assert_eq!(code(&verify), 0, "{}", stdout(&verify));
}

/// A corrupt last record whose final byte is 0x00 is corruption (exit 1), not a torn
/// tail, and `repair` leaves it alone.
#[test]
fn a_corrupt_last_record_ending_in_zero_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    let mut last = walcodec::Position { start: 0, end: 0 };
    for i in 0..11u8 {
        last = encoder.encode_record(&vec![i + 1; 100 + i as usize], &mut log);
    }
    let mut log = log.to_vec();
    log[last.end as usize - 1] = 0;
    log[(last.start + last.end) as usize / 2] ^= 0x08;
    let path = dir.path().join("000001.log");
    fs::write(&path, &log).unwrap();
    let verify = run(&["verify", path_str(&path)]);
    assert_eq!(code(&verify), 1, "{}", stdout(&verify));
    assert!(
        stdout(&verify).contains("checksum mismatch"),
        "{}",
        stdout(&verify)
    );
    let repair = run(&["repair", path_str(&path)]);
    assert_ne!(code(&repair), 0, "{}", stdout(&repair));
    assert_eq!(
        fs::read(&path).unwrap(),
        log,
        "repair refused, the file is as it was"
    );
}
