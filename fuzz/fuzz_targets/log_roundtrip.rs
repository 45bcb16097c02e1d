//! Records derived from the input are encoded, optionally damaged, and decoded in
//! every recovery mode. Undamaged, every mode returns exactly what was written.
//! Damaged, every record any mode returns is one that was written: the decoder never
//! invents data.
#![no_main]

use std::sync::OnceLock;

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::Decoder;
use walcodec::{LogDecoder, LogEncoder, Recovery};

fn decode_all(log: &[u8], recovery: Recovery) -> Vec<bytes::Bytes> {
    let mut decoder = LogDecoder::builder().recovery(recovery).build();
    let mut buffer = BytesMut::from(log);
    let mut records = Vec::new();
    while let Ok(Some(record)) = decoder.decode_eof(&mut buffer) {
        records.push(record);
    }
    records
}

/// Bytes that differ from record to record: record `i` starts `131 * i` bytes in.
fn pattern() -> &'static [u8] {
    static PATTERN: OnceLock<Vec<u8>> = OnceLock::new();
    PATTERN.get_or_init(|| {
        (0..8 * 131 + (255 << 6))
            .map(|k| ((k * 7) ^ (k >> 8)) as u8)
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    // Byte pairs give record sizes, the rest damage. A size is a byte shifted left by
    // 0 to 6 bits: mostly small records, which keep each input fast, and up to
    // 16,320 bytes, so that records still cross blocks.
    let (sizes, damage) = data.split_at(data.len().min(16) & !1);
    let records: Vec<Vec<u8>> = sizes
        .chunks(2)
        .enumerate()
        .map(|(i, pair)| {
            let len = (pair[0] as usize) << (pair[1] % 7);
            // A copy of a fixed pattern, not a byte loop: instrumented for coverage,
            // a loop per byte would cost more than the encoding and decoding.
            pattern()[i * 131..i * 131 + len].to_vec()
        })
        .collect();
    let mut log = BytesMut::new();
    let mut encoder = LogEncoder::with_offset(0);
    for record in &records {
        encoder.encode_record(record, &mut log);
    }

    for recovery in [
        Recovery::TolerateTail,
        Recovery::AbsoluteConsistency,
        Recovery::PointInTime,
        Recovery::SkipCorrupted,
    ] {
        let clean = decode_all(&log, recovery);
        assert_eq!(clean.len(), records.len());
        assert!(clean.iter().zip(&records).all(|(a, b)| a[..] == b[..]));
    }

    if log.is_empty() {
        return;
    }
    // Damage: each triple is (offset hi, offset lo, xor); a lone byte truncates.
    let mut damaged = log.to_vec();
    for step in damage.chunks(3) {
        if let [hi, lo, xor] = *step {
            let at = ((hi as usize) << 8 | lo as usize) * 7 % damaged.len();
            damaged[at] ^= xor.max(1);
        } else {
            let keep = step[0] as usize * damaged.len() / 256;
            damaged.truncate(keep);
            if damaged.is_empty() {
                return;
            }
        }
    }
    for recovery in [
        Recovery::TolerateTail,
        Recovery::AbsoluteConsistency,
        Recovery::PointInTime,
        Recovery::SkipCorrupted,
    ] {
        for record in decode_all(&damaged, recovery) {
            assert!(
                records.iter().any(|r| r[..] == record[..]),
                "{recovery:?} returned a record that was never written ({} bytes)",
                record.len()
            );
        }
    }
});
