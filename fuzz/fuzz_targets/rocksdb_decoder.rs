//! RocksDB's dialect through `LogDecoder`: recyclable headers with a log number,
//! compressed records (zstd), metadata records, old fragments of another log. Small
//! inputs fed in arbitrary chunks in every recovery mode. Invariants: no panic;
//! records never exceed `max_record_bytes` (inflated ones included); a waiting
//! decoder holds less than a block; chunking changes nothing.
//!
//! Input: `[flags][chunk count][chunk sizes][log bytes]`. `flags` bit 0: behind a
//! valid start in the recyclable format of log 9 (a record of log 9, so old-number
//! and recycled-file rules are reached); bit 1: behind a compression-type record
//! (zstd) and one compressed record; bits 2–3: the recovery mode.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use walcodec::{Dialect, LogDecoder, LogEncoder, Recovery};

#[path = "common/pieces.rs"]
mod pieces;

use pieces::Run;

const LOG_NUMBER: u64 = 9;

fn run(log: &[u8], recovery: Recovery, chunks: &[u8]) -> Run {
    let mut turn = 0;
    let mut builder = LogDecoder::builder();
    builder
        .recovery(recovery)
        .dialect(Dialect::RocksDb)
        .log_number(LOG_NUMBER);
    pieces::run_with(log, &mut builder, |_| {
        if chunks.is_empty() {
            return usize::MAX;
        }
        let c = chunks[turn % chunks.len()] as usize;
        turn += 1;
        c + 1
    })
}

/// A valid start in the chosen format, for the fuzzed bytes to follow.
fn valid_start(recyclable: bool, compressed: bool) -> Vec<u8> {
    let mut builder = LogEncoder::builder();
    if recyclable {
        builder.recyclable(LOG_NUMBER);
    }
    if compressed {
        builder.zstd();
    }
    let mut log = BytesMut::new();
    builder.build().encode_record(b"a valid record to start with", &mut log);
    log.to_vec()
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let flags = data[0];
    let chunk_len = (data[1] as usize).min(data.len() - 2);
    let (chunks, fuzzed) = data[2..].split_at(chunk_len);
    let recovery = Recovery::ALL[usize::from(flags >> 2) % 4];
    let mut log = valid_start(flags & 1 != 0, flags & 2 != 0);
    log.extend_from_slice(fuzzed);
    let whole = run(&log, recovery, &[]);
    let chunked = run(&log, recovery, chunks);
    assert_eq!(whole, chunked, "{recovery:?}");
    assert!(whole.valid_prefix <= log.len() as u64);
});
