//! The read-ahead pipeline uses a chunk's allocation again once nothing refers to
//! it: reading a long file does not take fresh memory (fresh pages, a page fault and
//! a zeroing each) for every chunk. Counted with a global allocator that counts the
//! allocations of one size (a chunk and its alignment slack), one size per test.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use walcodec::{ChunkReader, ReadAhead, BLOCK_SIZE, CHUNK_ALIGN};

/// Chunk sizes nothing else in the tests allocates (with the alignment slack).
const CHUNK_BYTES: usize = 3 * BLOCK_SIZE + 1;
const READER_CHUNK_BYTES: usize = 5 * BLOCK_SIZE + 3;

struct Counting;

static CHUNKS: AtomicUsize = AtomicUsize::new(0);
static READER_CHUNKS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the counter is
// an atomic that never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // A chunk is allocated with room to start it on an aligned address.
        if layout.size() == CHUNK_BYTES + CHUNK_ALIGN {
            CHUNKS.fetch_add(1, Ordering::Relaxed);
        }
        if layout.size() == READER_CHUNK_BYTES + CHUNK_ALIGN {
            READER_CHUNKS.fetch_add(1, Ordering::Relaxed);
        }
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_chunks_are_used_again() {
    let source = std::io::Cursor::new(vec![7u8; 200 * CHUNK_BYTES]);
    let mut chunks = ReadAhead::builder()
        .chunk_bytes(CHUNK_BYTES)
        .chunks_in_flight(2)
        .spawn(source);
    let mut total = 0;
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.unwrap();
        assert!(chunk.iter().all(|&b| b == 7));
        total += chunk.len();
    }
    assert_eq!(total, 200 * CHUNK_BYTES);
    let allocated = CHUNKS.load(Ordering::Relaxed);
    // The chunks queued, the one read, the one being looked at, and those given up
    // while a handle waited: a few, not one per chunk.
    assert!(allocated <= 20, "{allocated} allocations for 200 chunks");
}

#[test]
fn a_chunk_reader_reads_into_the_same_memory_while_chunks_are_dropped() {
    let source = std::io::Cursor::new(vec![9u8; 300 * READER_CHUNK_BYTES]);
    let mut total = 0;
    for chunk in ChunkReader::new(source, READER_CHUNK_BYTES) {
        let chunk = chunk.unwrap();
        assert!(chunk.iter().all(|&b| b == 9));
        total += chunk.len();
    }
    assert_eq!(total, 300 * READER_CHUNK_BYTES);
    // Each chunk is dropped before the next read: one allocation does.
    assert_eq!(READER_CHUNKS.load(Ordering::Relaxed), 1);
}

#[test]
fn a_chunk_reader_takes_fresh_memory_while_chunks_are_kept() {
    const KEPT_CHUNK_BYTES: usize = 7 * BLOCK_SIZE + 5;
    let source = std::io::Cursor::new(
        (0..20 * KEPT_CHUNK_BYTES)
            .map(|i| i as u8)
            .collect::<Vec<_>>(),
    );
    let kept: Vec<_> = ChunkReader::new(source, KEPT_CHUNK_BYTES)
        .map(Result::unwrap)
        .collect();
    // Memory in use is never read into: every kept chunk holds its own bytes.
    for (index, chunk) in kept.iter().enumerate() {
        let first = index * KEPT_CHUNK_BYTES;
        assert!(chunk
            .iter()
            .enumerate()
            .all(|(i, &b)| b == (first + i) as u8));
    }
}
