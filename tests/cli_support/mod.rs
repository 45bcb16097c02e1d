//! Running the `walcodec` binary from the CLI tests.
#![allow(dead_code)] // each test crate uses a part

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

pub const BIN: &str = env!("CARGO_BIN_EXE_walcodec");

pub fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

pub fn run_with_stdin(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    // Write from another thread: the child may fill its stdout pipe before reading all
    // of stdin.
    let feeder = std::thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    let output = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    output
}

pub fn code(output: &Output) -> i32 {
    output.status.code().expect("exited, not killed")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

pub fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}
