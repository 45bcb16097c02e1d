//! Inputs shared by the codec benches here and the peer benches in `benches/peers`
//! (which include this file by path), so both measure the same records.
#![allow(dead_code)] // each bench uses its own subset

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, ReadBuf};
use walcodec::LogEncoder;

/// Record bytes handled per iteration.
pub const BYTES_PER_ITERATION: usize = 4 << 20;

pub const RECORD_SIZES: [(&str, usize); 4] = [
    ("100B", 100),
    ("1KiB", 1 << 10),
    ("32KiB", 32 << 10),
    ("1MiB", 1 << 20),
];

/// Records of `size` bytes of pseudo-random content (so nothing compresses or
/// short-circuits), about `BYTES_PER_ITERATION` in all.
pub fn records(size: usize) -> Vec<Vec<u8>> {
    pseudo_random_records(size, BYTES_PER_ITERATION / size, 0x9e37_79b9_7f4a_7c15)
}

/// `count` records of `size` pseudo-random bytes (xorshift from `seed`).
pub fn pseudo_random_records(size: usize, count: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut state = seed ^ size as u64;
    (0..count)
        .map(|_| {
            (0..size)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect()
        })
        .collect()
}

pub fn encode_log(records: &[Vec<u8>]) -> Bytes {
    let mut encoder = LogEncoder::new();
    let mut log = BytesMut::new();
    for record in records {
        encoder.encode_record(record, &mut log);
    }
    log.freeze()
}

/// An in-memory source that returns at most `read_size` bytes per read.
pub struct MemoryReader {
    pub data: Bytes,
    pub read_size: usize,
}

impl AsyncRead for MemoryReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let n = self.read_size.min(self.data.len()).min(buf.remaining());
        let chunk = self.data.split_to(n);
        buf.put_slice(&chunk);
        Poll::Ready(Ok(()))
    }
}
