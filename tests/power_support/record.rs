//! A failing cut's record, and its replay: what makes a power-cut run replayable
//! when a seed alone cannot bring back its interleaving.
//!
//! A run whose tasks race each other (and the writer's own flusher thread) on a
//! runtime meets a schedule the seed does not fix. So a cut whose check panics
//! writes down the whole run it was drawn from (every step of the storage trace,
//! and what each test needs to check a cut: acknowledgements, calls, purges) with
//! the cut and the seed of its image, then prints the command that checks exactly
//! that cut again from the record, step for step, whatever the machine does.
//!
//! One convention across the power-cut tests: the seed is `POWER_CUT_SEED` (it
//! replays a run's configuration and its draws), the cut count `<NAME>_CUTS`, and
//! the recorded run `<NAME>_REPLAY=file`, where `<NAME>` is the file's own
//! (`POWER_CUT`, `LOGDIR_POWER_CUT`, `REPLICA_POWER_CUT`, `RAFT_POWER_CUT`,
//! `RAFT_SHARED_POWER_CUT`). A record names the test it belongs to on its first
//! line, and a replay refuses a record of another test.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::dir::DirOp;
use super::{hex, scratch_dir, unhex, Op};

/// The cargo command that runs this test binary (the core crate's `all`, or the
/// raft crate's, which compiles this module too).
pub fn cargo_test() -> &'static str {
    if env!("CARGO_PKG_NAME") == "walcodec-raft" {
        "cargo test --release -p walcodec-raft --test all"
    } else {
        "cargo test --release --features cli --test all"
    }
}

/// The command that runs `test` (`module::name`) alone with `env` set to `value`.
pub fn command(env: &str, value: &str, test: &str) -> String {
    format!(
        "{env}={value} {} -- --exact {test} --nocapture",
        cargo_test()
    )
}

/// Writes, if the cut it guards panics, the run `save` gives into a file named
/// after the seed and the cut beside the scratch directories (`prefix-SEED-CUT.run`),
/// and prints the command that replays it (`replay_env=file`). Made before the
/// cut's check and dropped after it. `save` is given the record's path, to put
/// beside it what a line of text cannot hold (a directory).
pub struct RecordOnPanic<'a> {
    replay_env: &'static str,
    test: &'static str,
    path: PathBuf,
    save: Box<dyn Fn(&Path) -> String + 'a>,
}

impl<'a> RecordOnPanic<'a> {
    pub fn new(
        replay_env: &'static str,
        test: &'static str,
        prefix: &str,
        seed: u64,
        cut: usize,
        save: impl Fn(&Path) -> String + 'a,
    ) -> RecordOnPanic<'a> {
        RecordOnPanic {
            replay_env,
            test,
            path: recorded_run_path(prefix, seed, cut),
            save: Box::new(save),
        }
    }
}

impl Drop for RecordOnPanic<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let text = format!("test {}\n{}", self.test, (self.save)(&self.path));
        match std::fs::write(&self.path, text) {
            Ok(()) => eprintln!(
                "replay this cut exactly, from its recorded run, with:\n    {}",
                command(self.replay_env, &self.path.display().to_string(), self.test)
            ),
            Err(e) => eprintln!("could not record the run in {}: {e}", self.path.display()),
        }
    }
}

/// Where a failing cut's run is written: beside the scratch directories, which
/// are removed when the test ends.
pub fn recorded_run_path(prefix: &str, seed: u64, cut: usize) -> PathBuf {
    scratch_dir().join(format!("{prefix}-{seed}-{cut}.run"))
}

/// The recorded run `replay_env` names, if it is set: its text after the first
/// line, which must name `test` (a record of another test is refused, loudly).
pub fn replayed(replay_env: &str, test: &str) -> Option<(PathBuf, String)> {
    let path = PathBuf::from(std::env::var_os(replay_env)?);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{replay_env}={}: {e}", path.display()));
    let (first, rest) = text.split_once('\n').unwrap_or((&text, ""));
    assert_eq!(
        first.strip_prefix("test "),
        Some(test),
        "{replay_env}={}: not a run recorded by {test}",
        path.display()
    );
    Some((path, rest.to_string()))
}

/// Prints that a recorded cut is being replayed.
pub fn say_replaying(name: &str, cut: usize, steps: usize, path: &Path) {
    println!(
        "{name}: replaying the cut after {cut} of {steps} steps recorded in {}",
        path.display()
    );
}

/// A line of a file's step (`write OFFSET HEX`, `setlen LEN`, `sync`).
pub fn op_line(op: &Op) -> String {
    match op {
        Op::Write { offset, data } => format!("write {offset} {}", hex(data)),
        Op::SetLen(len) => format!("setlen {len}"),
        Op::Sync => "sync".to_string(),
    }
}

/// What [`op_line`] wrote, as words.
pub fn parse_op(words: &[&str]) -> Option<Op> {
    Some(match *words {
        ["write", offset, data] => Op::Write {
            offset: offset.parse().ok()?,
            data: unhex(data),
        },
        ["setlen", len] => Op::SetLen(len.parse().ok()?),
        ["sync"] => Op::Sync,
        _ => return None,
    })
}

/// A line of a directory's step (`file INODE <op>`, `entry NAME INODE|- GROUP`,
/// `dirsync`).
pub fn dir_op_line(op: &DirOp) -> String {
    match op {
        DirOp::File { inode, op } => format!("file {inode} {}", op_line(op)),
        DirOp::Entry { name, inode, group } => {
            let inode = inode.map_or("-".to_string(), |i| i.to_string());
            format!("entry {name} {inode} {group}")
        }
        DirOp::DirSync => "dirsync".to_string(),
    }
}

/// What [`dir_op_line`] wrote, as words.
pub fn parse_dir_op(words: &[&str]) -> Option<DirOp> {
    Some(match *words {
        ["file", inode, ref op @ ..] => DirOp::File {
            inode: inode.parse().ok()?,
            op: parse_op(op)?,
        },
        ["entry", name, inode, group] => DirOp::Entry {
            name: name.to_string(),
            inode: if inode == "-" {
                None
            } else {
                Some(inode.parse().ok()?)
            },
            group: group.parse().ok()?,
        },
        ["dirsync"] => DirOp::DirSync,
        _ => return None,
    })
}

/// Every step of a directory's trace, a line each.
pub fn write_dir_ops(out: &mut String, ops: &[DirOp]) {
    for op in ops {
        writeln!(out, "{}", dir_op_line(op)).unwrap();
    }
}

/// The cut line (`cut AT IMAGE_SEED`), as words.
pub fn parse_cut(words: &[&str]) -> Option<(usize, u64)> {
    match *words {
        ["cut", at, seed] => Some((at.parse().ok()?, seed.parse().ok()?)),
        _ => None,
    }
}

/// Asserts two runs made the same storage steps, naming the first that differs
/// (a whole trace is too long to print). A log's identity and each of its
/// epochs' are drawn at random when they are made (written in its history file,
/// as text): they are taken out of both traces first.
pub fn assert_same_steps(first: &[DirOp], second: &[DirOp]) {
    let (first, second) = (&without_log_id(first), &without_log_id(second));
    if let Some(at) = (0..first.len().min(second.len())).find(|&i| first[i] != second[i]) {
        panic!(
            "the runs part at step {at} of {} and {}: {} against {}",
            first.len(),
            second.len(),
            short(&first[at]),
            short(&second[at])
        );
    }
    assert_eq!(first.len(), second.len(), "one run made more steps");
}

/// A step in short: a write's bytes as text, lossy, up to 200 of them.
fn short(op: &DirOp) -> String {
    match op {
        DirOp::File {
            inode,
            op: Op::Write { offset, data },
        } => format!(
            "file {inode} write {offset} {:?}",
            String::from_utf8_lossy(&data[..data.len().min(200)])
        ),
        other => dir_op_line(other),
    }
}

/// `ops` with the random ids of the log's history file (the log's `log ID`, each
/// `epoch N ID START`, and the `crc` of its lines) written as `?` wherever they
/// are written.
fn without_log_id(ops: &[DirOp]) -> Vec<DirOp> {
    const HISTORY: &[u8] = b"walcodec history 1\n";
    let mut ids: Vec<Vec<u8>> = Vec::new();
    for op in ops {
        let DirOp::File {
            op: Op::Write { data, .. },
            ..
        } = op
        else {
            continue;
        };
        if !data.starts_with(HISTORY) {
            continue;
        }
        for line in String::from_utf8_lossy(data).lines() {
            let words: Vec<&str> = line.split(' ').collect();
            let id = match words[..] {
                // The checksum of the lines follows from the ids.
                ["log", id] | ["epoch", _, id, ..] | ["crc", id] => id,
                _ => continue,
            };
            if !id.is_empty() && !ids.iter().any(|known| known == id.as_bytes()) {
                ids.push(id.as_bytes().to_vec());
            }
        }
    }
    ops.iter()
        .map(|op| match op {
            DirOp::File {
                inode,
                op: Op::Write { offset, data },
            } => DirOp::File {
                inode: *inode,
                op: Op::Write {
                    offset: *offset,
                    data: ids
                        .iter()
                        .fold(data.clone(), |data, id| replace(&data, id, b"?")),
                },
            },
            other => other.clone(),
        })
        .collect()
}

/// `data` with every `from` replaced by `to`.
fn replace(data: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    let mut i = 0;
    while i < data.len() {
        if data[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(data[i]);
            i += 1;
        }
    }
    out
}
