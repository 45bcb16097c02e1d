//! Reading a blocking source in large chunks of memory of their own, the blocking
//! side of [`ReadAhead`](crate::ReadAhead) and of the `walcodec` tool's split reads.

use std::collections::VecDeque;
use std::io::{self, Read};

use bytes::{Buf, Bytes, BytesMut};

/// Where each chunk starts in memory: on a 4096-byte boundary.
///
/// Why: the kernel copies a read out of the page cache with `rep movsb`, which on
/// some x86 CPUs (the AMD EPYC this was measured on) runs 4 to 5 times slower when
/// the destination sits 1 to 32 bytes past the source's place in its page: 0.43 to
/// 0.61 s instead of 0.10 to 0.12 s for 1 GiB in 1 MiB reads. The allocator's large
/// blocks start 16 bytes past a page boundary, and log files are read from block
/// boundaries, so an unaligned chunk lands in that case on every read.
pub const CHUNK_ALIGN: usize = 4096;

/// Chunks handed out whose memory may come back: at most this many are watched (the
/// oldest is let go), so the memory held stays bounded.
const CHUNKS_WATCHED: usize = 4;

/// Reads a blocking source in chunks of a fixed size, each one a [`BytesMut`] of its
/// own that the caller may keep, split and hand to a [`LogDecoder`](crate::LogDecoder)
/// without a copy.
///
/// Every chunk is full (`chunk_bytes`) but the last, starts on a [`CHUNK_ALIGN`]
/// boundary of memory, and a chunk's memory is read into again once nothing refers
/// to it any more (every record and buffer cut from it dropped): a fresh allocation
/// of this size is often fresh pages, which cost a page fault and a zeroing each,
/// more than the read itself.
///
/// ```
/// use std::io::Cursor;
/// use walcodec::ChunkReader;
///
/// let mut chunks = ChunkReader::new(Cursor::new(vec![1u8; 10_000]), 4096);
/// let sizes: Vec<usize> = chunks.by_ref().map(|chunk| chunk.unwrap().len()).collect();
/// assert_eq!(sizes, [4096, 4096, 1808]);
/// ```
#[derive(Debug)]
pub struct ChunkReader<R> {
    source: R,
    chunk_bytes: usize,
    /// An empty handle on each chunk handed out (the newest last), to take its
    /// memory back (`BytesMut::try_reclaim`).
    spent: VecDeque<BytesMut>,
    done: bool,
}

impl<R: Read> ChunkReader<R> {
    /// Reads `source` from where it stands, `chunk_bytes` (at least 1) at a time.
    pub fn new(source: R, chunk_bytes: usize) -> Self {
        ChunkReader {
            source,
            chunk_bytes: chunk_bytes.max(1),
            spent: VecDeque::new(),
            done: false,
        }
    }

    /// The source, given back; chunks already handed out stay valid.
    pub fn into_inner(self) -> R {
        self.source
    }

    /// The size of each chunk but the last.
    pub fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }

    /// A vector to read the next chunk into: the oldest chunk's memory when nothing
    /// refers to it any more, fresh memory otherwise.
    fn memory(&mut self) -> Vec<u8> {
        let capacity = self.chunk_bytes.saturating_add(CHUNK_ALIGN);
        let reclaimed = self
            .spent
            .front_mut()
            .is_some_and(|handle| handle.try_reclaim(capacity));
        if reclaimed {
            if let Some(handle) = self.spent.pop_front() {
                let mut memory = Vec::from(handle);
                memory.clear();
                return memory;
            }
        }
        if self.spent.len() >= CHUNKS_WATCHED {
            self.spent.pop_front();
        }
        Vec::with_capacity(capacity)
    }
}

impl<R: Read> Iterator for ChunkReader<R> {
    type Item = io::Result<BytesMut>;

    /// The next chunk; `None` at the source's end. A read error ends the chunks.
    fn next(&mut self) -> Option<io::Result<BytesMut>> {
        if self.done {
            return None;
        }
        let mut memory = self.memory();
        // Zeros up to the first aligned byte (at most `CHUNK_ALIGN - 1`), where the
        // chunk starts.
        let pad = (memory.as_ptr() as usize).wrapping_neg() % CHUNK_ALIGN;
        memory.resize(pad, 0);
        // `read_to_end` fills the spare capacity without zeroing it first, and goes
        // on after a short read (a pipe's): a chunk is only short at the end.
        let read = self
            .source
            .by_ref()
            .take(self.chunk_bytes as u64)
            .read_to_end(&mut memory);
        match read {
            Ok(0) => {
                self.done = true;
                None
            }
            Ok(n) => {
                if n < self.chunk_bytes {
                    self.done = true;
                }
                // Zero-copy conversions (the vector is not shared): its allocation
                // becomes the chunk's.
                let mut chunk = BytesMut::from(Bytes::from(memory));
                chunk.advance(pad);
                self.spent.push_back(chunk.split_off(n));
                Some(Ok(chunk))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
