//! Arbitrary bytes through `RecordIoCodec`, strict and lenient, whole and in chunks.
//! Invariants: no panic; no record above the limit; the buffer held while waiting
//! stays within a header plus the limit; and chunking changes nothing.
#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::Decoder;
use walcodec::RecordIoCodec;

const MAX_RECORD: usize = 4096;

fn run(input: &[u8], lenient: bool, chunks: &[u8]) -> (Vec<Bytes>, Option<String>) {
    let mut codec = RecordIoCodec::builder()
        .max_record_bytes(MAX_RECORD)
        .lenient(lenient)
        .new_codec();
    let mut buffer = BytesMut::new();
    let mut records = Vec::new();
    let mut at = 0;
    let mut turn = 0;
    while at < input.len() {
        let size = if chunks.is_empty() {
            input.len()
        } else {
            turn += 1;
            chunks[turn % chunks.len()] as usize + 1
        };
        let end = (at + size).min(input.len());
        buffer.extend_from_slice(&input[at..end]);
        at = end;
        loop {
            match codec.decode(&mut buffer) {
                Ok(Some(record)) => {
                    assert!(record.len() <= MAX_RECORD);
                    records.push(record);
                }
                Ok(None) => {
                    assert!(buffer.len() <= MAX_RECORD + 64, "holds {}", buffer.len());
                    break;
                }
                Err(e) => return (records, Some(e.to_string())),
            }
        }
    }
    loop {
        match codec.decode_eof(&mut buffer) {
            Ok(Some(record)) => records.push(record),
            Ok(None) => return (records, None),
            Err(e) => return (records, Some(e.to_string())),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let chunk_len = (data[0] as usize).min(data.len() - 1);
    let (chunks, input) = data[1..].split_at(chunk_len);
    for lenient in [false, true] {
        assert_eq!(run(input, lenient, &[]), run(input, lenient, chunks));
    }
});
