//! The memory a `Replica` holds while it copies, measured with a counting
//! allocator: a record of the largest size a replica takes (64 MiB), shipped in
//! 1 MiB data messages, and a hostile primary's stream that never ends a record.
//! The bound the replica's docs give (four times the largest record, plus a few
//! MiB of messages and buffers; measured: 257 MiB copying a 64 MiB record, 194 MiB
//! refusing an endless one) is what these tests hold it to.
//!
//! The allocator counts every thread (tokio's blocking pool writes), so the tests
//! of this file run one at a time, in a binary of their own.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Mutex;

use bytes::BytesMut;
use walcodec::{Error, LogEncoder, Replica, REPLICATION_PROTOCOL_VERSION};

const MIB: isize = 1 << 20;

/// The largest record a replica takes.
const LARGEST_RECORD: isize = 64 * MIB;

/// The documented bound: four times the largest record (the bytes received that
/// end no record yet, grown by doubling, and the record the decoder assembles to
/// check it, grown likewise), and 16 MiB of messages, buffers and the runtime.
const BOUND: isize = 4 * LARGEST_RECORD + 16 * MIB;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the counters
// are atomics that never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = System.alloc(layout);
        if !ptr.is_null() {
            grew(layout.size() as isize);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let ptr = System.alloc_zeroed(layout);
        if !ptr.is_null() {
            grew(layout.size() as isize);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = System.realloc(ptr, layout, new_size);
        if !new.is_null() {
            grew(new_size as isize - layout.size() as isize);
        }
        new
    }
}

fn grew(bytes: isize) {
    let now = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// One test at a time: the counters are global.
static SERIAL: Mutex<()> = Mutex::new(());

/// A primary's hello, then `body`.
fn stream(body: &[u8]) -> Vec<u8> {
    let mut m = b"WALCREPL".to_vec();
    m.extend_from_slice(&REPLICATION_PROTOCOL_VERSION.to_le_bytes());
    m.extend_from_slice(&0u32.to_le_bytes());
    m.extend_from_slice(&1u64.to_le_bytes());
    m.extend_from_slice(&0u64.to_le_bytes());
    // Its identity: a log id, one epoch at segment 1's start.
    m.push(b'I');
    m.extend_from_slice(&7u128.to_le_bytes());
    m.push(0);
    m.extend_from_slice(&[0; 20]);
    m.extend_from_slice(&1u32.to_le_bytes());
    for field in [1u64, 1, 1, 0] {
        m.extend_from_slice(&field.to_le_bytes());
    }
    m.push(b'S');
    m.extend_from_slice(&1u64.to_le_bytes());
    m.extend_from_slice(&0u64.to_le_bytes());
    for piece in body.chunks(1 << 20) {
        m.push(b'D');
        m.extend_from_slice(&(piece.len() as u32).to_le_bytes());
        m.extend_from_slice(piece);
    }
    m
}

/// Syncs a new replica from `stream` (built before the measurement starts);
/// returns the result and the peak heap above what was live before.
fn measure(stream: &[u8]) -> (Result<walcodec::SyncEnd, Error>, isize) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    runtime.block_on(async {
        let mut replica = Replica::open(dir.path()).await.unwrap();
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        let result = replica
            .sync_from(tokio::io::join(stream, tokio::io::sink()))
            .await;
        let peak = PEAK.load(Ordering::Relaxed) - base;
        replica.close().await.unwrap();
        (result, peak)
    })
}

#[test]
fn the_largest_record_is_copied_within_the_documented_bound() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let payload: Vec<u8> = (0..LARGEST_RECORD as usize - 4096)
        .map(|i| ((i * 7) ^ (i >> 11)) as u8)
        .collect();
    let mut log = BytesMut::new();
    let end = LogEncoder::with_offset(0)
        .encode_record(&payload, &mut log)
        .end;
    drop(payload);
    let stream = stream(&log);
    drop(log);
    let (result, peak) = measure(&stream);
    assert_eq!(result.unwrap().end, walcodec::LogPosition::new(1, end));
    eprintln!(
        "peak heap copying a {} MiB record: {:.1} MiB",
        LARGEST_RECORD / MIB,
        peak as f64 / MIB as f64
    );
    assert!(peak <= BOUND, "{peak} bytes");
}

#[test]
fn a_stream_that_never_ends_a_record_is_refused_within_the_documented_bound() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // A record larger than any the replica takes: its first fragments verify,
    // and the replica refuses it once it holds more than a record's worth.
    let payload: Vec<u8> = (0..LARGEST_RECORD as usize + 8 * MIB as usize)
        .map(|i| ((i * 13) ^ (i >> 9)) as u8)
        .collect();
    let mut log = BytesMut::new();
    LogEncoder::with_offset(0).encode_record(&payload, &mut log);
    drop(payload);
    let stream = stream(&log);
    drop(log);
    let (result, peak) = measure(&stream);
    assert!(result.is_err(), "{result:?}");
    eprintln!(
        "peak heap refusing an endless record: {:.1} MiB",
        peak as f64 / MIB as f64
    );
    assert!(peak <= BOUND, "{peak} bytes");
}
