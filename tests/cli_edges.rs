//! Every command on every kind of input at the edges: a log, a truncated log,
//! random bytes, an empty file, an empty directory, a directory that is no log
//! directory, and a missing path. Whatever is not a log is said to be not a log,
//! on stderr, with exit 2, for files and directories alike; a non-zero exit always
//! comes with a message.

use std::path::Path;

use crate::cli_support::{code, run, run_with_stdin, stderr, stdout};

/// The inputs, by name, made under `dir`; returns the path to give.
fn make(dir: &Path, input: &str) -> String {
    let path = dir.join(input);
    let mut log = bytes::BytesMut::new();
    let mut encoder = walcodec::LogEncoder::new();
    for record in [&b"one"[..], b"two", b"three"] {
        encoder.encode_record(record, &mut log);
    }
    match input {
        "log" => std::fs::write(&path, &log).unwrap(),
        "truncated" => std::fs::write(&path, &log[..log.len() - 2]).unwrap(),
        "garbage" => {
            // Random bytes (xorshift), over two blocks.
            let mut x = 0x2545_f491u32;
            let bytes: Vec<u8> = (0..40_000)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    (x >> 24) as u8
                })
                .collect();
            std::fs::write(&path, bytes).unwrap();
        }
        "empty-file" => std::fs::write(&path, b"").unwrap(),
        "empty-dir" => std::fs::create_dir(&path).unwrap(),
        "non-log-dir" => {
            std::fs::create_dir(&path).unwrap();
            std::fs::write(path.join("notes.txt"), b"not a segment\n").unwrap();
        }
        "missing" => {}
        other => unreachable!("{other}"),
    }
    path.to_str().unwrap().to_string()
}

const INPUTS: [&str; 7] = [
    "log",
    "truncated",
    "garbage",
    "empty-file",
    "empty-dir",
    "non-log-dir",
    "missing",
];

/// What a command gives on each input, in `INPUTS` order: the exit status and a
/// piece of what it says (stderr, or for `verify` and `stat` stdout's summary);
/// `""` for a clean exit 0 that needs to say nothing.
type Row = [(i32, &'static str); 7];

const NOT_A_LOG: (i32, &str) = (2, "not a log");
const MISSING: (i32, &str) = (2, "No such file or directory");

/// The commands that read records: the same row.
const READING: Row = [
    (0, ""),
    (3, "torn tail"),
    NOT_A_LOG,
    (0, ""),
    NOT_A_LOG,
    NOT_A_LOG,
    MISSING,
];

/// `verify` and `stat`: their summary says it.
const JUDGING: Row = [
    (0, "result: clean"),
    (3, "result: torn tail"),
    NOT_A_LOG,
    (0, "result: clean"),
    NOT_A_LOG,
    NOT_A_LOG,
    MISSING,
];

fn table() -> Vec<(&'static str, Vec<&'static str>, Row)> {
    vec![
        ("dump", vec!["dump"], READING),
        ("cat", vec!["cat"], READING),
        ("tail", vec!["tail", "-n", "2"], READING),
        ("verify", vec!["verify"], JUDGING),
        ("stat", vec!["stat"], JUDGING),
        (
            "repair",
            vec!["repair"],
            [
                (0, "clean"),
                (0, "truncated 10 bytes after offset 20"),
                NOT_A_LOG,
                (0, "clean"),
                NOT_A_LOG,
                NOT_A_LOG,
                MISSING,
            ],
        ),
        (
            "write",
            vec!["write", "--append"],
            [
                (0, ""),
                (3, "refusing to append"),
                NOT_A_LOG,
                (0, ""),
                NOT_A_LOG,
                NOT_A_LOG,
                (0, ""),
            ],
        ),
    ]
}

#[test]
fn every_command_on_every_kind_of_input() {
    let mut failures = Vec::new();
    for (command, args, row) in table() {
        for (input, (want_code, want_text)) in INPUTS.into_iter().zip(row) {
            let dir = tempfile::tempdir().unwrap();
            let path = make(dir.path(), input);
            let mut argv = args.clone();
            argv.push(&path);
            let output = if command == "write" {
                run_with_stdin(&argv, b"appended\n")
            } else {
                run(&argv)
            };
            let (got, out, err) = (code(&output), stdout(&output), stderr(&output));
            let said = if matches!(command, "verify" | "stat" | "repair") {
                format!("{err}{out}")
            } else {
                err.clone()
            };
            let mut wrong = Vec::new();
            if got != want_code {
                wrong.push(format!("exit {got}, want {want_code}"));
            }
            if !said.contains(want_text) {
                wrong.push(format!("does not say {want_text:?}"));
            }
            if got != 0 && err.trim().is_empty() && !matches!(command, "verify" | "stat") {
                wrong.push("a non-zero exit with nothing on stderr".to_string());
            }
            if want_text == NOT_A_LOG.1 {
                // The first thing said is that it is not a log, nothing about
                // dialects or records before it.
                let first = err.lines().next().unwrap_or("");
                if !first.contains("not a log") || first.contains("cannot tell the log's dialect") {
                    wrong.push(format!("first says {first:?}"));
                }
                if !out.is_empty() {
                    wrong.push(format!("prints {out:?} on stdout"));
                }
            }
            if !wrong.is_empty() {
                failures.push(format!(
                    "{command} {input}: {}\n  stdout: {out:?}\n  stderr: {err:?}",
                    wrong.join("; ")
                ));
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// `stat` never reports a torn tail's bytes beside a clean tail, in text or JSON:
/// a log damaged at its start whose last block ends in a torn fragment.
#[test]
fn stat_tail_agrees_with_its_torn_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = bytes::BytesMut::new();
    let mut encoder = walcodec::LogEncoder::new();
    encoder.encode_record(&[1; 100], &mut log);
    encoder.encode_record(&[2; 40_000], &mut log);
    encoder.encode_record(&[3; 100], &mut log);
    log.truncate(log.len() - 30);
    log[0] ^= 0xff; // the first record's checksum
    let path = dir.path().join("000001.log");
    std::fs::write(&path, &log).unwrap();
    let path = path.to_str().unwrap();

    let text = stdout(&run(&["stat", "--dialect", "leveldb", path]));
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .unwrap_or_else(|| panic!("{name} missing in {text}"))
            .to_string()
    };
    let torn: u64 = field("torn tail bytes: ").parse().unwrap();
    let tail = field("tail: ");
    assert!(torn > 0, "{text}");
    assert!(
        tail.starts_with("torn") && tail.contains(&format!("({torn} bytes)")),
        "{text}"
    );

    let json = stdout(&run(&[
        "stat",
        "--dialect",
        "leveldb",
        "--format",
        "json",
        path,
    ]));
    let summary: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(summary["tail"], "torn", "{json}");
    assert_eq!(summary["tail_bytes"], summary["torn_tail_bytes"], "{json}");
    assert_eq!(summary["torn_tail_bytes"], torn, "{json}");
}

/// A log whose writer died in its first record is a torn log, not "not a log",
/// though no dialect reads its first fragment.
#[test]
fn a_log_cut_in_its_first_record_is_still_a_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = bytes::BytesMut::new();
    walcodec::LogEncoder::new().encode_record(&[5; 300], &mut log);
    for cut in [3, 100] {
        let path = dir.path().join(format!("cut-{cut}.log"));
        std::fs::write(&path, &log[..cut]).unwrap();
        let verify = run(&["verify", path.to_str().unwrap()]);
        assert_eq!(code(&verify), 3, "{}", stderr(&verify));
        assert!(
            // Said to be undecided, not refused as no log.
            !stderr(&verify).contains(": not a log"),
            "{}",
            stderr(&verify)
        );
    }
}
