//! `walcodec write --stream` and `walcodec cat --record N`: a record larger than
//! `--max-record-bytes` round-trips through the command line.

use crate::cli_support;
use crate::common;

use common::patterned;

use cli_support::{run, run_with_stdin};

#[test]
fn write_stream_and_cat_record_round_trip_a_record_over_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("000001.log");
    let log = log.to_str().unwrap();
    let big = patterned(1_000_000, 5);

    let small = run_with_stdin(&["write", log], b"small\n");
    assert_eq!(small.status.code(), Some(0), "{small:?}");
    // 1 MB through a 64 KiB limit, as one record.
    let written = run_with_stdin(
        &[
            "--max-record-bytes",
            "65536",
            "write",
            "--append",
            "--stream",
            log,
        ],
        &big,
    );
    assert_eq!(written.status.code(), Some(0), "{written:?}");
    // Appending checks the log's tail by reading its records whole: within the
    // default limit, 1 MB is fine.
    let second = run_with_stdin(&["write", "--append", "--stream", log], &big[..300_000]);
    assert_eq!(second.status.code(), Some(0), "{second:?}");

    let cat = |n: &str| run(&["--max-record-bytes", "65536", "cat", "--record", n, log]);
    assert_eq!(cat("0").stdout, b"small");
    let first = cat("1");
    assert_eq!(first.status.code(), Some(0), "{:?}", first.stderr);
    assert!(first.stdout == big, "record 1 differs");
    let third = cat("2");
    assert_eq!(third.status.code(), Some(0));
    assert!(third.stdout == big[..300_000], "record 2 differs");

    let missing = cat("3");
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no record 3"));

    // Whole-record reading still holds to the limit.
    let whole = run(&["--max-record-bytes", "65536", "cat", log]);
    assert_eq!(whole.status.code(), Some(1));
}

#[test]
fn cat_record_of_a_torn_record_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let log = path.to_str().unwrap();
    let big = patterned(200_000, 6);
    let written = run_with_stdin(&["write", "--stream", log], &big);
    assert_eq!(written.status.code(), Some(0));
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..100_000]).unwrap();
    let cat = run(&["cat", "--record", "0", log]);
    assert_eq!(cat.status.code(), Some(3), "{cat:?}");
    assert!(String::from_utf8_lossy(&cat.stderr).contains("incomplete"));
    assert!(cat.stdout == big[..cat.stdout.len()]);
}

#[test]
fn write_stream_of_empty_stdin_is_an_empty_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let log = path.to_str().unwrap();
    let written = run_with_stdin(&["write", "--stream", log], b"");
    assert_eq!(written.status.code(), Some(0));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"\x05\x2b\x28\x43\x00\x00\x01"
    );
    let cat = run(&["cat", "--record", "0", log]);
    assert_eq!(cat.status.code(), Some(0));
    assert!(cat.stdout.is_empty());
}
