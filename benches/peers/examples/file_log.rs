//! The file bench's log and LevelDB's C++ reader as commands, for
//! `scripts/cli-speed.sh`, which times them beside `walcodec verify` and `cat`:
//!
//! ```text
//! cargo run --release --example file_log -- write PATH MIB   # the bench's log
//! cargo run --release --example file_log -- leveldb-read PATH
//! ```
//!
//! `leveldb-read` reads every record with LevelDB 1.23's `log::Reader` (built when
//! libleveldb-dev 1.23 is installed, see build.rs) and prints the record count,
//! payload bytes and seconds taken.

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use walcodec_peer_benches::file_log::{write_log, Records};

#[cfg(leveldb_cpp)]
fn leveldb_read(path: &Path) -> Option<(i64, u64)> {
    use std::ffi::{c_char, CString};
    use std::os::unix::ffi::OsStrExt;
    extern "C" {
        fn walcodec_peer_leveldb_read(path: *const c_char, bytes: *mut u64) -> i64;
    }
    let path = CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut bytes = 0;
    // SAFETY: a NUL-terminated path and a valid out pointer.
    let records = unsafe { walcodec_peer_leveldb_read(path.as_ptr(), &mut bytes) };
    Some((records, bytes))
}

#[cfg(not(leveldb_cpp))]
fn leveldb_read(_path: &Path) -> Option<(i64, u64)> {
    eprintln!("file_log: no LevelDB C++ peer (apt-get install libleveldb-dev, then rebuild)");
    None
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["write", path, mib] => {
            let Ok(mib) = mib.parse::<usize>() else {
                eprintln!("file_log: MIB is a number");
                return ExitCode::from(2);
            };
            let records = Records::new(mib << 20);
            let len = write_log(&records, Path::new(path));
            println!("{path}: {len} bytes, {} records", records.spans.len());
            ExitCode::SUCCESS
        }
        ["leveldb-read", path] => {
            let started = Instant::now();
            let Some((records, bytes)) = leveldb_read(Path::new(path)) else {
                return ExitCode::from(2);
            };
            let seconds = started.elapsed().as_secs_f64();
            if records < 0 {
                eprintln!("file_log: LevelDB's reader failed or dropped bytes");
                return ExitCode::from(1);
            }
            println!("records: {records} ({bytes} bytes) in {seconds:.3} s");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("usage: file_log write PATH MIB | file_log leveldb-read PATH");
            ExitCode::from(2)
        }
    }
}
