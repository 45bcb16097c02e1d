//! The RocksDB WALs of `tests/data/rocksdb-wal` (written by RocksDB 7.8.3), shared by
//! the tests that read them: where each is, its log number, its expected records.
#![allow(dead_code)] // Each test binary uses its own subset.

use std::fs;
use std::path::PathBuf;

/// `tests/data/rocksdb-wal/<name>`, `name` being `case/NNNNNN.log` (or a file beside
/// it).
pub fn data_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/rocksdb-wal")
        .join(name)
}

/// The log number of `case/NNNNNN.log`: the number in its name, as RocksDB has it.
pub fn log_number(name: &str) -> u64 {
    let file = name.rsplit('/').next().unwrap();
    file.trim_end_matches(".log").parse().unwrap()
}

/// The records a correct reader returns for the WAL (its `.expected.hex`: one
/// record a line, lowercase hex; decompressed for a compressed WAL).
pub fn expected_records(name: &str) -> Vec<Vec<u8>> {
    let text = fs::read_to_string(data_path(&format!("{name}.expected.hex"))).unwrap();
    text.lines()
        .map(|line| {
            (0..line.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&line[i..i + 2], 16).unwrap())
                .collect()
        })
        .collect()
}
