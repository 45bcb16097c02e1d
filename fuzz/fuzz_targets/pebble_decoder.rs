//! Pebble's dialect through `LogDecoder`: legacy, recyclable and WAL-sync headers,
//! the EOF trailer, and the read-ahead that tells a torn tail from corruption by a
//! later synced offset. Small inputs fed in arbitrary chunks in every recovery mode.
//! Invariants: no panic; records never exceed `max_record_bytes`; a waiting decoder
//! holds less than a block; chunking changes nothing; auto-detection never panics.
//!
//! Input: `[flags][chunk count][chunk sizes][log bytes]`. `flags` bit 0: behind a
//! valid start in the WAL-sync format of log 9, promising a synced offset (so the
//! read-ahead can prove damage); bit 1: the fuzzed bytes are laid over a longer
//! valid WAL-sync log instead of appended (damage before later promises); bits 2–3:
//! the recovery mode.
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
        .dialect(Dialect::Pebble)
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

/// A valid WAL-sync log of `records` records, each promising the one before it.
fn wal_sync_log(records: usize) -> Vec<u8> {
    let mut encoder = LogEncoder::builder().pebble(LOG_NUMBER).build();
    let mut log = BytesMut::new();
    for i in 0..records {
        encoder.set_synced_offset(encoder.offset());
        encoder.encode_record(&vec![i as u8; 1000 + 9000 * (i % 3)], &mut log);
    }
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
    let mut log = if flags & 1 != 0 {
        wal_sync_log(1)
    } else {
        Vec::new()
    };
    if flags & 2 != 0 {
        let base = wal_sync_log(12);
        let at = log.len().min(base.len());
        log = base.clone();
        let end = (at + fuzzed.len()).min(log.len());
        log[at..end].copy_from_slice(&fuzzed[..end - at]);
    } else {
        log.extend_from_slice(fuzzed);
    }
    let _ = walcodec::detect::detect(&log);
    let whole = run(&log, recovery, &[]);
    let chunked = run(&log, recovery, chunks);
    assert_eq!(whole, chunked, "{recovery:?}");
    assert!(whole.valid_prefix <= log.len() as u64);
});
