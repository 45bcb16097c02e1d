//! The `walcodec` binary on inputs other than a quiet regular file: stdin and pipes,
//! endless character devices, a file that grows or is written in place while it is
//! read, and a file of zeros only.
//!
//! Needs the `cli` feature: `cargo test --release --features cli --test all -- cli_inputs::`.

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use walcodec::LogEncoder;

const BIN: &str = env!("CARGO_BIN_EXE_walcodec");

/// Longer than any of these commands takes on a loaded machine; far shorter than
/// "never ends".
const TIMEOUT: Duration = Duration::from_secs(60);

fn vector(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/writers")
        .join(name)
        .join("000001.log")
}

fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Runs the tool with `args` and `stdin`, feeding it `feed` (when stdin is a pipe),
/// reading its output as it comes; fails the test if it runs longer than `TIMEOUT`.
fn run_with(args: &[&str], stdin: Stdio, feed: Option<Vec<u8>>) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let feeder = feed.map(|bytes| {
        let mut input = child.stdin.take().unwrap();
        // The child may stop reading early (an error): a broken pipe is its business.
        thread::spawn(move || {
            let _ = input.write_all(&bytes);
        })
    });
    let collect = |mut pipe: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut bytes = Vec::new();
            pipe.read_to_end(&mut bytes).unwrap();
            bytes
        })
    };
    let out = collect(Box::new(child.stdout.take().unwrap()));
    let err = collect(Box::new(child.stderr.take().unwrap()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > TIMEOUT {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!(
                "`walcodec {}` still running after {TIMEOUT:?}",
                args.join(" ")
            );
        }
        thread::sleep(Duration::from_millis(10));
    };
    if let Some(feeder) = feeder {
        feeder.join().unwrap();
    }
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

fn run(args: &[&str]) -> Output {
    run_with(args, Stdio::null(), None)
}

/// Runs the tool with the bytes of `file` on stdin through a pipe (as `cat f | ...`).
fn run_piped(args: &[&str], file: &Path) -> Output {
    run_with(args, Stdio::piped(), Some(fs::read(file).unwrap()))
}

fn code(output: &Output) -> i32 {
    output.status.code().expect("exited, not killed")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

fn json(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(output)))
}

/// `stat`'s output without its first line, which names the input.
fn without_file_line(text: &str) -> String {
    text.split_once('\n').unwrap().1.to_string()
}

#[test]
fn dump_verify_stat_and_cat_read_a_pipe_as_dash_and_as_dev_stdin() {
    let log = vector("many-small-10000");
    let damaged_dir = tempfile::tempdir().unwrap();
    let damaged = damaged_dir.path().join("damaged.log");
    let mut bytes = fs::read(&log).unwrap();
    bytes[40_000] ^= 0x55;
    fs::write(&damaged, &bytes).unwrap();
    for file in [&log, &damaged] {
        for args in [
            &["dump"][..],
            &["dump", "--start", "70000"],
            &["dump", "--physical"],
            &["dump", "--physical", "--start", "70000"],
            &["verify"],
            &["verify", "--format", "json"],
            &["stat"],
            &["cat", "--to", "hex"],
            &["tail", "-n", "3"],
        ] {
            let direct = run(&[args, &[path_str(file)]].concat());
            for stdin in ["-", "/dev/stdin"] {
                let piped = run_piped(&[args, &[stdin]].concat(), file);
                let context = format!("{args:?} {stdin} {}: {}", file.display(), stderr(&piped));
                assert_eq!(code(&piped), code(&direct), "{context}");
                let (piped_out, direct_out) = match args[0] {
                    "stat" => (
                        without_file_line(&stdout(&piped)),
                        without_file_line(&stdout(&direct)),
                    ),
                    _ if args.contains(&"json") => {
                        let (mut piped, direct) = (json(&piped), json(&direct));
                        piped["file"] = direct["file"].clone();
                        (piped.to_string(), direct.to_string())
                    }
                    _ => (stdout(&piped), stdout(&direct)),
                };
                assert_eq!(piped_out, direct_out, "{context}");
                // Damage is reported the same way, only the name differs.
                let name = if stdin == "-" { "stdin" } else { stdin };
                assert_eq!(
                    stderr(&piped).replace(name, "FILE"),
                    stderr(&direct).replace(path_str(file), "FILE"),
                    "{context}"
                );
            }
        }
    }
    // A regular file redirected to stdin is a file: bounded by its length too.
    let redirected = run_with(
        &["verify", "-"],
        Stdio::from(File::open(&log).unwrap()),
        None,
    );
    assert_eq!(code(&redirected), 0, "{}", stderr(&redirected));
    assert_eq!(
        stdout(&redirected),
        stdout(&run(&["verify", path_str(&log)]))
    );
}

#[test]
fn a_character_device_is_read_only_up_to_max_input_bytes() {
    // Endless: refused at once, saying why and what to do.
    for args in [
        &["verify"][..],
        &["stat"],
        &["dump"],
        &["dump", "--physical"],
        &["cat"],
    ] {
        for device in ["/dev/zero", "/dev/urandom"] {
            let output = run(&[args, &[device]].concat());
            assert_eq!(code(&output), 2, "{args:?} {device}");
            assert_eq!(
                stderr(&output),
                format!("walcodec: {device}: a character device, which may never end: give --max-input-bytes N to read its first N bytes\n")
            );
        }
    }
    let tail = run(&["tail", "/dev/zero"]);
    assert_eq!(code(&tail), 2);
    let follow = run(&["tail", "-f", "-"]);
    assert_eq!(code(&follow), 2);
    assert_eq!(
        stderr(&follow),
        "walcodec: stdin: only a regular file can be followed\n"
    );
    // Repair needs a regular file, dry run or not.
    for args in [&["repair", "--dry-run"][..], &["repair"]] {
        let output = run(&[args, &["/dev/zero"]].concat());
        assert_eq!(code(&output), 2, "{args:?}");
        assert!(
            stderr(&output).contains("/dev/zero: not a regular file"),
            "{}",
            stderr(&output)
        );
    }

    // Bounded: zeros are an empty log of preallocated space, as for a file of zeros.
    let limit = (4 << 20).to_string();
    let bound = ["--max-input-bytes", limit.as_str()];
    let verify = run(&[&bound[..], &["verify", "/dev/zero"]].concat());
    assert_eq!(code(&verify), 0, "{}", stderr(&verify));
    assert_eq!(
        stdout(&verify),
        "records: 0 (0 bytes)\n\
         dropped: 0 bytes in 0 corruptions\n\
         zero fill: 4194304 bytes\n\
         tail: zeros after offset 0 (4194304 bytes of preallocated space or block padding; no record lost)\n\
         note: stopped at --max-input-bytes 4194304: the input may go on, and a record cut there reads as a torn tail\n\
         result: clean\n"
    );
    let stat = run(&[&bound[..], &["stat", "--format", "json", "/dev/zero"]].concat());
    let stat = json(&stat);
    assert_eq!(stat["bytes"], 4194304);
    assert_eq!(stat["complete"], false);
    assert_eq!(stat["tail"], "zeros");
    for args in [&["dump"][..], &["dump", "--physical"], &["cat"]] {
        let output = run(&[&bound[..], args, &["/dev/zero"]].concat());
        assert_eq!(code(&output), 0, "{args:?}: {}", stderr(&output));
        assert!(stderr(&output).contains("stopped at --max-input-bytes 4194304"));
    }
}

#[test]
fn random_bytes_are_judged_with_findings_printed_as_found() {
    // Findings reach stdout while the read goes on: nothing is held to the end.
    let mut child = Command::new(BIN)
        // Random bytes are not a log: read as LevelDB's all the same, as damage.
        .args([
            "verify",
            "--dialect",
            "leveldb",
            "--max-input-bytes",
            "1000000000000",
            "/dev/urandom",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("offset 0: dropping "), "{first}");
    assert!(child.try_wait().unwrap().is_none(), "still reading");
    child.kill().unwrap();
    child.wait().unwrap();

    let limit = (16 << 20).to_string();
    let output = run(&[
        "verify",
        "--dialect",
        "leveldb",
        "--max-input-bytes",
        &limit,
        "/dev/urandom",
    ]);
    assert_eq!(code(&output), 1);
    let text = stdout(&output);
    assert!(text.lines().filter(|l| l.starts_with("offset ")).count() > 100);
    assert!(text.ends_with("result: corrupt\n"), "{text}");
    let json_output = run(&[
        "verify",
        "--dialect",
        "leveldb",
        "--format",
        "json",
        "--max-input-bytes",
        &limit,
        "/dev/urandom",
    ]);
    assert_eq!(code(&json_output), 1);
    let summary = json(&json_output);
    assert_eq!(summary["result"], "corrupt");
    assert_eq!(summary["exit_code"], 1);
    assert!(summary["corruptions"].as_u64().unwrap() > 100);
    // In JSON mode the findings go to stderr, one a line, after the note that
    // random bytes are no dialect's log.
    assert!(stderr(&json_output)
        .lines()
        .filter(|l| !l.contains("cannot tell the log's dialect"))
        .all(|l| l.starts_with("walcodec: /dev/urandom: offset ")));
}

fn encode_at(offset: u64, payload: &[u8]) -> Vec<u8> {
    let mut bytes = BytesMut::new();
    LogEncoder::with_offset(offset).encode_record(payload, &mut bytes);
    bytes.to_vec()
}

/// A log of `records` records of `size` bytes each, and its length.
fn write_log(path: &Path, records: usize, size: usize) -> u64 {
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::new();
    for i in 0..records {
        encoder.encode_record(&vec![(i % 251) as u8; size], &mut log);
    }
    fs::write(path, &log).unwrap();
    log.len() as u64
}

/// Bytes the process `pid` has read so far (`rchar` of `/proc/PID/io`), `None` once
/// it is gone.
fn bytes_read_by(pid: u32) -> Option<u64> {
    let io = fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    io.lines()
        .find_map(|line| line.strip_prefix("rchar: "))
        .map(|n| n.trim().parse().unwrap())
}

/// Whether the process `pid` is stopped (`T` in `/proc/PID/stat`).
fn is_stopped(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat.rsplit_once(") ")?.1.chars().next()?;
            Some(state == 'T')
        })
        .unwrap_or(false)
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name} {pid}");
}

/// Runs the tool with `args` on a file of `len` bytes and has `change` write to the
/// file in the middle of the read: once the command has read some of it (so it has
/// opened it and taken its size and time), it is stopped (SIGSTOP), and only if it
/// has not read all of it yet does `change` run before it goes on (SIGCONT).
///
/// Events, not timing: the kernel's count of bytes the process read says where the
/// read stands. A command too quick to be caught in the middle is run again; every
/// run that returns had the file change under its read.
fn run_changed_during_read(args: &[&str], len: u64, mut change: impl FnMut()) -> Output {
    // More than the tool reads before it opens its input (its own start-up).
    const READING: u64 = 1 << 20;
    for _attempt in 0..100 {
        let mut child = Command::new(BIN)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let collect = |mut pipe: Box<dyn Read + Send>| {
            thread::spawn(move || {
                let mut bytes = Vec::new();
                pipe.read_to_end(&mut bytes).unwrap();
                bytes
            })
        };
        let out = collect(Box::new(child.stdout.take().unwrap()));
        let err = collect(Box::new(child.stderr.take().unwrap()));
        let pid = child.id();
        let mut changed = false;
        let started = Instant::now();
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            let Some(read) = bytes_read_by(pid) else {
                break;
            };
            if read >= READING {
                signal(pid, "STOP");
                // A command that ended as it was stopped is reaped here, and is no
                // longer there to be sent on (nor was it caught mid-read).
                let mut ended = false;
                while !is_stopped(pid) {
                    if child.try_wait().unwrap().is_some() {
                        ended = true;
                        break;
                    }
                    thread::yield_now();
                }
                if !ended {
                    if bytes_read_by(pid).is_some_and(|read| read < len) {
                        change();
                        changed = true;
                    }
                    signal(pid, "CONT");
                }
                break;
            }
            // A hang guard, not a measure.
            assert!(
                started.elapsed() < TIMEOUT,
                "`walcodec {}` hangs",
                args.join(" ")
            );
            thread::yield_now();
        }
        let status = child.wait().unwrap();
        let output = Output {
            status,
            stdout: out.join().unwrap(),
            stderr: err.join().unwrap(),
        };
        if changed {
            return output;
        }
    }
    panic!(
        "`walcodec {}` never caught in the middle of reading {len} bytes",
        args.join(" ")
    );
}

/// Appends `count` records to the log at `path` (`len` bytes long); its new length.
fn append_records(path: &Path, len: u64, count: usize) -> u64 {
    let file = OpenOptions::new().write(true).open(path).unwrap();
    let mut offset = len;
    for _ in 0..count {
        let record = encode_at(offset, &[b'w'; 3000]);
        file.write_all_at(&record, offset).unwrap();
        offset += record.len() as u64;
    }
    offset
}

#[test]
fn a_growing_file_is_read_up_to_its_length_at_open_and_said_to_be_live() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("growing.log");
    let len = write_log(&path, 8_000, 4_000);
    let mut grown = len;
    let stat = run_changed_during_read(&["stat", "--format", "json", path_str(&path)], len, || {
        grown = append_records(&path, grown, 3);
    });
    let stat = json(&stat);
    // It read what was there at open, and said the file was changing.
    assert_eq!(stat["bytes"], len);
    assert_eq!(stat["live"], true);
    assert_eq!(stat["complete"], true);
    assert!(stat["notes"][0]
        .as_str()
        .unwrap()
        .starts_with("the file changed while it was read (a live log"));
    let at_verify = grown;
    let verify = run_changed_during_read(&["verify", path_str(&path)], at_verify, || {
        grown = append_records(&path, grown, 3);
    });
    let text = stdout(&verify);
    assert!(
        text.contains(&format!(
            "note: the file changed while it was read (a live log: {at_verify} bytes at the start, {grown} at the end)"
        )),
        "{text}"
    );
    // A quiet file is not live.
    let quiet = run(&["stat", "--format", "json", path_str(&path)]);
    let quiet = json(&quiet);
    assert_eq!(
        (quiet["live"].clone(), quiet["bytes"].clone()),
        (false.into(), grown.into())
    );
    assert_eq!(quiet["notes"], serde_json::json!([]));
}

#[test]
fn verify_of_a_log_written_in_preallocated_space_says_it_is_live() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("live.log");
    let len = write_log(&path, 4_000, 4_000);
    // Preallocated: the writer fills zeros in place, so the size never changes.
    File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len + (64 << 20))
        .unwrap();
    let size = fs::metadata(&path).unwrap().len();
    let mut written = len;
    for _ in 0..3 {
        // Only the time tells of a write in place: each read starts from a time long
        // past, so the write shows even on a file system with coarse timestamps.
        File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(std::time::UNIX_EPOCH + Duration::from_secs(1 << 30))
            .unwrap();
        let output = run_changed_during_read(
            &["verify", "--format", "json", path_str(&path)],
            size,
            || {
                written = append_records(&path, written, 1);
            },
        );
        let summary = json(&output);
        assert_eq!(summary["live"], true, "{summary}");
        assert_eq!(summary["bytes"], size);
        let note = summary["notes"][0].as_str().unwrap();
        assert!(
            note.contains(&format!("{size} bytes at the start, {size} at the end")),
            "{note}"
        );
    }
    assert_eq!(fs::metadata(&path).unwrap().len(), size);
    let settled = run(&["verify", "--format", "json", path_str(&path)]);
    assert_eq!(code(&settled), 0, "{}", stdout(&settled));
    let settled = json(&settled);
    assert_eq!(settled["live"], false);
    assert_eq!(settled["tail"], "zeros");
}

#[test]
fn a_sparse_file_of_zeros_is_an_empty_preallocated_log_to_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zeros.log");
    let size: u64 = 64 << 20;
    File::create(&path).unwrap().set_len(size).unwrap();
    let name = path_str(&path);
    let tail = format!(
        "tail: zeros after offset 0 ({size} bytes of preallocated space or block padding; no record lost)\n"
    );

    let verify = run(&["verify", name]);
    assert_eq!(code(&verify), 0);
    assert_eq!(
        stdout(&verify),
        format!(
            "records: 0 (0 bytes)\n\
             dropped: 0 bytes in 0 corruptions\n\
             zero fill: {size} bytes\n\
             {tail}\
             result: clean\n"
        )
    );
    let stat = run(&["stat", name]);
    assert_eq!(code(&stat), 0);
    let text = stdout(&stat);
    for line in [
        "records: 0 (0 payload bytes)\n".to_string(),
        format!("zero fill bytes: {size}\n"),
        "corruptions: 0 (0 bytes dropped)\n".to_string(),
        tail.clone(),
        "result: clean\n".to_string(),
    ] {
        assert!(text.contains(&line), "{line:?} missing from\n{text}");
    }
    for command in ["verify", "stat"] {
        let summary = json(&run(&[command, "--format", "json", name]));
        assert_eq!(summary["records"], 0);
        assert_eq!(summary["zero_fill_bytes"], size);
        assert_eq!(summary["tail"], "zeros");
        assert_eq!(summary["valid_len"], 0);
        assert_eq!(summary["tail_bytes"], size);
        assert_eq!(summary["result"], "clean");
        assert_eq!(summary["exit_code"], 0);
    }

    // Repair trims the zeros, so appends start at 0, without calling them damage.
    let dry_run = run(&["repair", "--dry-run", name]);
    assert_eq!(code(&dry_run), 0, "{}", stderr(&dry_run));
    assert_eq!(
        stdout(&dry_run),
        format!("{name}: would trim {size} bytes of zeros after offset 0, the end of its last complete record (preallocated space or block padding; no record lost)\n")
    );
    assert_eq!(fs::metadata(&path).unwrap().len(), size);
    // Appending after the zeros would hide the new records: refused, saying why.
    let append = run_with(&["write", "--append", name], Stdio::null(), None);
    assert_eq!(code(&append), 2);
    assert_eq!(
        stderr(&append),
        format!("walcodec: {name}: refusing to append: {size} bytes of zeros (preallocated space or block padding) follow the last complete record (offset 0); run `walcodec repair` to trim them first\n")
    );
    let repair = run(&["repair", name]);
    assert_eq!(code(&repair), 0);
    assert!(stdout(&repair).starts_with(&format!("{name}: trimmed {size} bytes of zeros")));
    assert_eq!(fs::metadata(&path).unwrap().len(), 0);
    let after = run(&["verify", name]);
    assert_eq!(code(&after), 0);
    assert!(stdout(&after).contains("tail: clean\n"));
}
