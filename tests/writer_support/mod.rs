//! Shared by the writer tests: self-verifying records and a strict log reader.
#![allow(dead_code)]

use std::path::Path;

use bytes::{Bytes, BytesMut};
use futures::TryStreamExt;
use walcodec::{LogDecoder, LogEncoder, LogReader, Position, Recovery};

/// A record that says who wrote it and can be checked byte for byte: task id, sequence
/// number, then a pattern both determine. Its length is determined by them too, so a
/// record cut short or padded does not verify.
pub fn make_record(task: u32, seq: u32) -> Vec<u8> {
    make_record_sized(task, seq, record_len(task, seq))
}

/// Like [`make_record`] but of a given length (at least 8).
pub fn make_record_sized(task: u32, seq: u32, len: usize) -> Vec<u8> {
    assert!(len >= 8);
    let mut record = Vec::with_capacity(len);
    record.extend_from_slice(&task.to_le_bytes());
    record.extend_from_slice(&seq.to_le_bytes());
    let mut state = mix(task, seq) | 1;
    while record.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        record.push(state as u8);
    }
    record
}

/// Sizes from 8 to 300 bytes, with one record in 64 spanning two blocks or more.
pub fn record_len(task: u32, seq: u32) -> usize {
    let h = mix(task, seq);
    if h % 64 == 0 {
        40_000 + (h >> 8) as usize % 30_000
    } else {
        8 + (h >> 8) as usize % 293
    }
}

fn mix(task: u32, seq: u32) -> u64 {
    let mut x = (u64::from(task) << 32 | u64::from(seq)) ^ 0x9e37_79b9_7f4a_7c15;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The (task, seq) of an intact [`make_record`] record; `None` for anything else, a
/// record cut short or run together with another included.
pub fn verify(record: &[u8]) -> Option<(u32, u32)> {
    verify_sized(record).filter(|&(task, seq)| record.len() == record_len(task, seq))
}

/// The (task, seq) of an intact [`make_record_sized`] record of any length.
pub fn verify_sized(record: &[u8]) -> Option<(u32, u32)> {
    if record.len() < 8 {
        return None;
    }
    let task = u32::from_le_bytes(record[0..4].try_into().unwrap());
    let seq = u32::from_le_bytes(record[4..8].try_into().unwrap());
    (record == make_record_sized(task, seq, record.len()).as_slice()).then_some((task, seq))
}

/// Every record of the log at `path` with its position. With `strict`, any damage,
/// a torn tail included, fails the read.
pub async fn read_log(path: &Path, strict: bool) -> Vec<(Position, Bytes)> {
    let file = tokio::fs::File::open(path).await.unwrap();
    let recovery = if strict {
        Recovery::AbsoluteConsistency
    } else {
        Recovery::TolerateTail
    };
    let decoder = LogDecoder::builder().recovery(recovery).build();
    LogReader::new(file, decoder)
        .map_ok(|r| (r.position, r.data))
        .try_collect()
        .await
        .unwrap()
}

/// What [`LogEncoder`] makes of `records`, starting a log at offset 0.
pub fn encode_all<'a>(records: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut encoder = LogEncoder::new();
    let mut out = BytesMut::new();
    for record in records {
        encoder.encode_record(record, &mut out);
    }
    out.to_vec()
}

/// A small xorshift for test randomness without a dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    pub fn from_time() -> Rng {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        Rng::new(nanos ^ u64::from(std::process::id()) << 32)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in `lo..hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }
}
