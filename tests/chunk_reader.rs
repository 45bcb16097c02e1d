//! `ChunkReader` and the read-ahead pipeline built on it: chunks of the asked size in
//! order, the last one short, every chunk starting on a `CHUNK_ALIGN` boundary of
//! memory (the kernel's copy into memory just past the source's alignment is 4 to 5
//! times slower on some CPUs), read errors ending the chunks.

use std::io::{self, Cursor, Read};

use futures::StreamExt;
use walcodec::{ChunkReader, ReadAhead, BLOCK_SIZE, CHUNK_ALIGN};

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

fn is_aligned(chunk: &[u8]) -> bool {
    (chunk.as_ptr() as usize) % CHUNK_ALIGN == 0
}

#[test]
fn chunks_are_the_source_in_order_each_aligned() {
    for chunk_bytes in [1, 7, 4096, BLOCK_SIZE, 3 * BLOCK_SIZE + 11] {
        for len in [0, 1, chunk_bytes, 5 * chunk_bytes, 5 * chunk_bytes + 3] {
            let source = pattern(len);
            let mut joined = Vec::new();
            let mut sizes = Vec::new();
            let mut kept = Vec::new();
            for chunk in ChunkReader::new(Cursor::new(source.clone()), chunk_bytes) {
                let chunk = chunk.unwrap();
                assert!(is_aligned(&chunk), "{chunk_bytes}-byte chunks of {len}");
                joined.extend_from_slice(&chunk);
                sizes.push(chunk.len());
                // Every other chunk is kept, so that memory is both reused and fresh.
                if sizes.len() % 2 == 0 {
                    kept.push(chunk);
                }
            }
            assert_eq!(joined, source, "{chunk_bytes}-byte chunks of {len}");
            let full = len / chunk_bytes;
            let mut expected = vec![chunk_bytes; full];
            if len % chunk_bytes != 0 {
                expected.push(len % chunk_bytes);
            }
            assert_eq!(sizes, expected);
        }
    }
}

/// Gives out a few bytes a read, as a pipe does: chunks are still full.
struct Trickle(Cursor<Vec<u8>>);

impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(13);
        self.0.read(&mut buf[..n])
    }
}

#[test]
fn short_reads_still_fill_whole_chunks() {
    let source = pattern(10 * 1000 + 1);
    let sizes: Vec<usize> = ChunkReader::new(Trickle(Cursor::new(source)), 1000)
        .map(|chunk| chunk.unwrap().len())
        .collect();
    assert_eq!(sizes, [vec![1000; 10], vec![1]].concat());
}

/// Fails after `good` bytes.
struct FailsAfter {
    good: usize,
}

impl Read for FailsAfter {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.good == 0 {
            return Err(io::Error::other("disk on fire"));
        }
        let n = buf.len().min(self.good);
        buf[..n].fill(1);
        self.good -= n;
        Ok(n)
    }
}

#[test]
fn a_read_error_ends_the_chunks() {
    let mut chunks = ChunkReader::new(FailsAfter { good: 2500 }, 1000);
    assert_eq!(chunks.next().unwrap().unwrap().len(), 1000);
    assert_eq!(chunks.next().unwrap().unwrap().len(), 1000);
    let error = chunks.next().unwrap().unwrap_err();
    assert_eq!(error.to_string(), "disk on fire");
    assert!(chunks.next().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_ahead_chunks_are_aligned() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.log");
    let source = pattern(40 * BLOCK_SIZE + 17);
    std::fs::write(&path, &source).unwrap();
    let mut chunks = ReadAhead::builder()
        .chunk_bytes(4 * BLOCK_SIZE)
        .open(&path, 0)
        .await
        .unwrap();
    let mut joined = Vec::new();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.unwrap();
        assert!(is_aligned(&chunk));
        joined.extend_from_slice(&chunk);
    }
    assert_eq!(joined, source);
}
