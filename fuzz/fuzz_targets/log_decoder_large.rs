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

use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::Decoder;
use walcodec::{LogDecoder, Recovery, BLOCK_SIZE};

const MAX_RECORD: usize = 80_000;

#[derive(Debug, PartialEq)]
struct Run {
    records: Vec<Bytes>,
    reports: Vec<String>,
    error: Option<String>,
    valid_prefix: u64,
    torn: bool,
}

fn run(log: &[u8], recovery: Recovery, chunks: &[u8]) -> Run {
    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink = reports.clone();
    let mut decoder = LogDecoder::builder()
        .recovery(recovery)
        .max_record_bytes(MAX_RECORD)
        .on_corruption(move |c| sink.lock().unwrap().push(c.to_string()))
        .build();
    let mut buffer = BytesMut::new();
    let mut records = Vec::new();
    let mut error = None;
    let mut at = 0;
    let mut turn = 0;
    'feed: while at < log.len() {
        let size = if chunks.is_empty() {
            log.len()
        } else {
            let c = chunks[turn % chunks.len()] as usize;
            turn += 1;
            // Pieces of 37 bytes to 9 KiB, sometimes a block or more: odd sizes put
            // the cuts anywhere in a block. Pieces of a few bytes are `log_decoder`'s
            // job; here they would multiply the calls for each large log.
            if c >= 250 {
                (c - 249) * 9000
            } else {
                (c + 1) * 37
            }
        };
        let end = (at + size).min(log.len());
        buffer.extend_from_slice(&log[at..end]);
        at = end;
        loop {
            match decoder.decode(&mut buffer) {
                Ok(Some(record)) => {
                    assert!(record.len() <= MAX_RECORD);
                    records.push(record);
                }
                Ok(None) => {
                    assert!(buffer.len() < BLOCK_SIZE, "holds {} bytes", buffer.len());
                    break;
                }
                Err(e) => {
                    error = Some(e.to_string());
                    break 'feed;
                }
            }
        }
    }
    if error.is_none() {
        loop {
            match decoder.decode_eof(&mut buffer) {
                Ok(Some(record)) => {
                    assert!(record.len() <= MAX_RECORD);
                    records.push(record);
                }
                Ok(None) => break,
                Err(e) => {
                    error = Some(e.to_string());
                    break;
                }
            }
        }
    }
    let reports = reports.lock().unwrap().clone();
    Run {
        records,
        reports,
        error,
        valid_prefix: decoder.valid_prefix_len(),
        torn: decoder.has_incomplete_tail(),
    }
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
