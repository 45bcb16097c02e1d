//! Whole logs (seeded with the test vectors, up to `-max_len=140000` bytes), fed in
//! arbitrary chunks, through `LogDecoder` in one recovery mode the input picks.
//! Invariants: no panic; records never exceed `max_record_bytes`; a decoder waiting
//! for input holds less than a block; and the chunking changes nothing: the records,
//! reports and final error are those of the same bytes fed whole.
//!
//! Input: `[mode][chunk count][chunk sizes][log]`. The large-log cases (many blocks,
//! records of tens of kilobytes) live here so that `log_decoder`, on small inputs in
//! every mode, stays fast.
#![no_main]

use libfuzzer_sys::fuzz_target;
use walcodec::Recovery;

#[path = "common/pieces.rs"]
mod pieces;

use pieces::Run;

fn run(log: &[u8], recovery: Recovery, chunks: &[u8]) -> Run {
    let mut turn = 0;
    pieces::run(log, recovery, |_| {
        if chunks.is_empty() {
            return log.len();
        }
        let c = chunks[turn % chunks.len()] as usize;
        turn += 1;
        // Pieces of 37 bytes to 9 KiB, sometimes a block or more: odd sizes put the
        // cuts anywhere in a block. Pieces of a few bytes are `log_decoder`'s job;
        // here they would multiply the calls for each large log.
        if c >= 250 {
            (c - 249) * 9000
        } else {
            (c + 1) * 37
        }
    })
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    // One mode per input: each of the four costs a whole decode of a large log twice.
    let recovery = [
        Recovery::TolerateTail,
        Recovery::AbsoluteConsistency,
        Recovery::PointInTime,
        Recovery::SkipCorrupted,
    ][data[0] as usize % 4];
    let chunk_len = (data[1] as usize).min(data.len() - 2);
    let (chunks, log) = data[2..].split_at(chunk_len);
    let whole = run(log, recovery, &[]);
    let chunked = run(log, recovery, chunks);
    assert_eq!(whole, chunked, "{recovery:?}");
    assert!(whole.valid_prefix <= log.len() as u64);
});
