//! Small inputs (`-max_len=4096`), fed in arbitrary chunks, through `LogDecoder` in
//! every recovery mode. Invariants: no panic; records never exceed
//! `max_record_bytes`; a decoder waiting for input holds less than a block; and the
//! chunking changes nothing: the records, reports and final error are those of the
//! same bytes fed whole.
//!
//! Input: `[lead][chunk count][chunk sizes][log bytes]`. With `lead` > 0 the log bytes
//! start `lead` bytes before the end of the first block, behind one valid record that
//! fills the rest of it: a few hundred fuzzed bytes then reach block edges, trailers
//! and records across blocks, which would otherwise take inputs of 32 KiB and more
//! (those are `log_decoder_large`'s).
#![no_main]

use std::sync::OnceLock;

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use walcodec::{LogEncoder, Recovery, BLOCK_SIZE, HEADER_SIZE};

#[path = "common/pieces.rs"]
mod pieces;

use pieces::Run;

/// Decodes `log`, its first `whole` bytes as one piece and the rest in pieces sized
/// by `chunks` (all at once when `chunks` is empty).
fn run(log: &[u8], whole: usize, recovery: Recovery, chunks: &[u8]) -> Run {
    let mut turn = 0;
    pieces::run(log, recovery, |at| {
        if chunks.is_empty() {
            return log.len();
        }
        if at < whole {
            return whole;
        }
        let c = chunks[turn % chunks.len()] as usize;
        turn += 1;
        // Mostly small pieces, sometimes a block or more.
        if c >= 250 {
            (c - 249) * 9000
        } else {
            c + 1
        }
    })
}

/// One valid record that fills the first block up to `lead` bytes before its end,
/// encoded once per `lead`.
fn lead_in(lead: usize) -> (Vec<u8>, Bytes) {
    static LEAD_INS: [OnceLock<(Vec<u8>, Bytes)>; 256] = [const { OnceLock::new() }; 256];
    let (log, record) = LEAD_INS[lead].get_or_init(|| {
        let record = Bytes::from(vec![0x5a; BLOCK_SIZE - HEADER_SIZE - lead]);
        let mut log = BytesMut::new();
        LogEncoder::new().encode_record(&record, &mut log);
        (log.to_vec(), record)
    });
    (log.clone(), record.clone())
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let lead = data[0] as usize;
    let chunk_len = (data[1] as usize).min(data.len() - 2);
    let (chunks, fuzzed) = data[2..].split_at(chunk_len);
    if lead == 0 {
        for recovery in MODES {
            check(fuzzed, 0, recovery, chunks, None);
        }
    } else {
        // Behind the lead-in, one mode per input: each decode checksums the 32 KiB
        // record again, which would otherwise dominate the run.
        let (mut log, pad) = lead_in(lead);
        let pad_len = log.len();
        log.extend_from_slice(fuzzed);
        check(&log, pad_len, MODES[lead % 4], chunks, Some(&pad));
    }
});

const MODES: [Recovery; 4] = [
    Recovery::TolerateTail,
    Recovery::AbsoluteConsistency,
    Recovery::PointInTime,
    Recovery::SkipCorrupted,
];

/// Whole and chunked decodes agree; a lead-in record always comes back first.
fn check(log: &[u8], pad_len: usize, recovery: Recovery, chunks: &[u8], pad: Option<&Bytes>) {
    let whole = run(log, pad_len, recovery, &[]);
    let chunked = run(log, pad_len, recovery, chunks);
    assert_eq!(whole, chunked, "{recovery:?}");
    assert!(whole.valid_prefix <= log.len() as u64);
    if let Some(pad) = pad {
        // Nothing after a complete record can take it back.
        assert_eq!(whole.records.first(), Some(pad), "{recovery:?}");
    }
}
