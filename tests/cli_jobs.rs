//! `verify`, `stat`, `dump` and `dump --physical` with `--jobs N`: a log split into
//! ranges read at once prints exactly what one read of the whole log prints (stdout,
//! stderr, exit status), on the shared vectors and on logs damaged at random: flipped
//! bits, zeros from a sector boundary, zero headers, zeroed blocks, garbage, torn and
//! zero-padded tails, records past `--max-record-bytes`. Small logs are split with the
//! hidden `--split-bytes`, down to one block a range, so that records, damage and tails
//! straddle range boundaries.
//!
//! The same logs read from a pipe (one range, the strict reader fed beside the
//! decoder) print what a file read prints (the strict reader read again only from
//! the last record before the first report).
//!
//! Needs the `cli` feature: `cargo test --release --features cli`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use bytes::BytesMut;
use walcodec::{LogEncoder, BLOCK_SIZE};

use crate::cli_support;

use cli_support::{code, path_str, run, run_with_stdin, stderr, stdout};

/// The commands compared, without the file.
const COMMANDS: &[&[&str]] = &[
    &["verify"],
    &["verify", "--format", "json"],
    &["stat"],
    &["stat", "--format", "json"],
    &["dump", "--format", "hex"],
    &["dump", "--format", "json", "--recovery", "point-in-time"],
    &["dump", "--recovery", "tolerate-tail", "--max-bytes", "8"],
    &[
        "dump",
        "--recovery",
        "absolute-consistency",
        "--max-bytes",
        "8",
    ],
    &["dump", "--physical"],
];

/// Splits compared with one read of the whole log (`--jobs 1`).
const SPLITS: &[&[&str]] = &[
    &["--jobs", "1", "--split-bytes", "32768"],
    &["--jobs", "2", "--split-bytes", "32768"],
    &["--jobs", "3", "--split-bytes", "65536"],
    &["--jobs", "4", "--split-bytes", "98304"],
];

fn summary(output: &Output) -> (i32, String, String) {
    (code(output), stdout(output), stderr(output))
}

/// Runs `command` on `path` whole and split every way; all must print the same.
fn assert_splits_agree(path: &Path, global: &[&str], command: &[&str]) {
    let file = path_str(path);
    let whole = run(&[global, command, &["--jobs", "1", file]].concat());
    assert_ne!(code(&whole), 2, "{command:?} {file}: {}", stderr(&whole));
    for split in SPLITS {
        let parts = run(&[global, command, split, &[file]].concat());
        assert_eq!(
            summary(&parts),
            summary(&whole),
            "{global:?} {command:?} {split:?} on {file}"
        );
    }
}

fn assert_all_agree(path: &Path, global: &[&str]) {
    for command in COMMANDS {
        assert_splits_agree(path, global, command);
    }
}

/// A file read through a pipe: one range, the strict reader fed beside the
/// decoder. Its text output must be the file's (stat names its input: that line
/// differs).
fn assert_pipe_agrees(path: &Path, global: &[&str]) {
    let log = fs::read(path).unwrap();
    let commands = [
        &["verify"][..],
        &["stat"],
        &["dump", "--format", "hex"],
        &["dump", "--physical"],
    ];
    for command in commands {
        let file = run(&[global, command, &["--jobs", "1", path_str(path)]].concat());
        let pipe = run_with_stdin(&[global, command, &["-"]].concat(), &log);
        let without_name = |text: String| {
            text.lines()
                .filter(|line| !line.starts_with("file: "))
                .map(|line| format!("{line}\n"))
                .collect::<String>()
        };
        assert_eq!(
            code(&pipe),
            code(&file),
            "{command:?} on {}",
            path.display()
        );
        assert_eq!(
            without_name(stdout(&pipe)),
            without_name(stdout(&file)),
            "{command:?} on {}",
            path.display()
        );
        assert_eq!(
            stderr(&pipe).replace("stdin", "FILE"),
            stderr(&file).replace(path_str(path), "FILE"),
            "{command:?} on {}",
            path.display()
        );
    }
}

fn vectors() -> Vec<PathBuf> {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut logs: Vec<PathBuf> = fs::read_dir(data.join("writers"))
        .unwrap()
        .map(|entry| entry.unwrap().path().join("000001.log"))
        .collect();
    logs.sort();
    logs.push(data.join("leveldb-db/wal/000003.log"));
    logs
}

#[test]
fn split_reads_of_every_vector_print_what_one_read_prints() {
    for log in vectors() {
        assert_all_agree(&log, &[]);
    }
}

/// xorshift64*: damage that is random but the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A log of records from empty to three blocks long, about `bytes` bytes.
fn random_log(rng: &mut Rng, bytes: usize) -> Vec<u8> {
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    let mut i = 0u8;
    while log.len() < bytes {
        let len = match rng.below(10) {
            0 => 0,
            1..=5 => rng.below(300),
            6..=8 => rng.below(8000),
            _ => rng.below(3 * BLOCK_SIZE as u64),
        } as usize;
        i = i.wrapping_add(1);
        encoder.encode_record(&vec![i; len], &mut log);
    }
    log.to_vec()
}

/// One piece of damage, of a kind a disk, a crash or a bug leaves.
fn damage(rng: &mut Rng, log: &mut Vec<u8>) -> String {
    if log.is_empty() {
        return "empty".into();
    }
    let len = log.len() as u64;
    let at = rng.below(len) as usize;
    match rng.below(8) {
        0 => {
            let bit = rng.below(8);
            log[at] ^= 1 << bit;
            format!("flip {at}.{bit}")
        }
        1 => {
            // Zeros from a sector boundary: a write cut short in preallocated space.
            let from = at / 512 * 512;
            let to = (from + 512 * (1 + rng.below(80) as usize)).min(log.len());
            log[from..to].fill(0);
            format!("zeros {from}..{to}")
        }
        2 => {
            log.truncate(at);
            format!("torn at {at}")
        }
        3 => {
            let n = rng.below(3 * BLOCK_SIZE as u64) as usize;
            log.resize(log.len() + n, 0);
            format!("{n} zeros appended")
        }
        4 => {
            let from = at / BLOCK_SIZE * BLOCK_SIZE;
            let to = (from + BLOCK_SIZE).min(log.len());
            log[from..to].fill(0);
            format!("zeroed block {from}")
        }
        5 => {
            let to = (at + 7).min(log.len());
            log[at..to].fill(0);
            format!("zero header at {at}")
        }
        6 => {
            let to = (at + 1 + rng.below(2000) as usize).min(log.len());
            for byte in &mut log[at..to] {
                *byte = rng.next() as u8;
            }
            format!("garbage {at}..{to}")
        }
        _ => {
            // A length that runs past the block.
            let to = (at + 2).min(log.len());
            log[at..to].fill(0xff);
            format!("bad length at {at}")
        }
    }
}

#[test]
fn split_reads_of_randomly_damaged_logs_print_what_one_read_prints() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for case in 0..24 {
        let size = 20_000 + rng.below(300_000) as usize;
        let mut log = random_log(&mut rng, size);
        let damages: Vec<String> = (0..1 + rng.below(3))
            .map(|_| damage(&mut rng, &mut log))
            .collect();
        let path = dir.path().join(format!("case-{case}.log"));
        fs::write(&path, &log).unwrap();
        eprintln!("case {case}: {} bytes, {damages:?}", log.len());
        // Every third case with a record bound that some records pass, every fourth
        // read only up to an offset (which cuts the log there).
        let cap = (rng.below(log.len() as u64 + 1)).to_string();
        let global: Vec<&str> = match case % 12 {
            2 | 5 | 8 | 11 => vec!["--max-record-bytes", "20000"],
            1 | 9 => vec!["--max-input-bytes", &cap],
            _ => vec![],
        };
        let global = &global[..];
        assert_all_agree(&path, global);
        assert_pipe_agrees(&path, global);
    }
}

#[test]
fn a_pipe_prints_what_a_file_prints_on_every_vector() {
    for log in vectors() {
        assert_pipe_agrees(&log, &[]);
    }
}

#[test]
fn jobs_must_be_at_least_one() {
    let log = vectors().remove(0);
    let output = run(&["verify", "--jobs", "0", path_str(&log)]);
    assert_eq!(code(&output), 2);
    assert!(stderr(&output).contains("--jobs"), "{}", stderr(&output));
}
