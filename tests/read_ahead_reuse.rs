//! The read-ahead pipeline uses a chunk's allocation again once nothing refers to
//! it: reading a long file does not take fresh memory (fresh pages, a page fault and
//! a zeroing each) for every chunk. Counted with a global allocator that counts the
//! allocations of one size, so this file holds one test.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use walcodec::{ReadAhead, BLOCK_SIZE};

/// An allocation size nothing else in the test makes.
const CHUNK_BYTES: usize = 3 * BLOCK_SIZE + 1;

struct Counting;

static CHUNKS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the counter is
// an atomic that never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() == CHUNK_BYTES {
            CHUNKS.fetch_add(1, Ordering::Relaxed);
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
